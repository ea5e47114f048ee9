/* SPDX-License-Identifier: MIT */
/* httpload command line: every option, its default, one-line errors. */
#include "options.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
	fprintf(f,
		"usage: httpload --model naive|pool|async --conns N [options]\n"
		"  --model M         naive: a thread per connection; pool: connections' requests are\n"
		"                    tasks for a worker pool; async: libcurl multi on one event loop\n"
		"                    (required)\n"
		"  --conns N         connections (closed loop: each sends back to back) (required)\n"
		"  --workers W       pool workers, model pool only (default %d)\n"
		"  --loops L         async event loops, connections spread over them\n"
		"                    (default: one per usable CPU, at most --conns)\n"
		"  --requests N      total requests (default %d)\n"
		"  --duration S      run S seconds instead of a request count (default: off)\n"
		"  --rate R          open loop: request i is due at t0 + i/R, latency counts from\n"
		"                    the due time (default: off = closed loop)\n"
		"  --url URL         POST target (default %s)\n"
		"  --cpus LIST       pool: pin workers round robin over LIST (e.g. 0-3,6);\n"
		"                    async: loop k runs on the k-th CPU of LIST, round robin\n"
		"                    (default: pool round robin over the allowed CPUs, async\n"
		"                    unpinned; naive never pins and ignores it with a note)\n"
		"  --numa on|off     pool: spread workers over NUMA nodes (default off)\n"
		"  --out DIR         write DIR/requests.bin, schema.json, workload.json (default: none)\n"
		"  --json            print one JSON summary object on stdout (default: human summary)\n"
		"  --progress        live progress on stderr (default off)\n"
		"  --timeout-ms T    per-request timeout (default %d)\n"
		"  -h, --help        this help\n",
		HL_DEFAULT_WORKERS, HL_DEFAULT_REQUESTS, HL_DEFAULT_URL, HL_DEFAULT_TIMEOUT_MS);
}

static int bad(const char *fmt, const char *a)
{
	fprintf(stderr, "httpload: ");
	fprintf(stderr, fmt, a);
	fprintf(stderr, " (see --help)\n");
	return 2;
}

static int parse_u64(const char *opt, const char *arg, uint64_t lo, uint64_t hi, uint64_t *v)
{
	char *end;

	errno = 0;
	*v = strtoull(arg, &end, 10);
	if (errno || end == arg || *end || arg[0] == '-' || *v < lo || *v > hi) {
		fprintf(stderr, "httpload: %s: expected an integer in %llu..%llu, got '%s' (see --help)\n",
			opt, (unsigned long long)lo, (unsigned long long)hi, arg);
		return 2;
	}
	return 0;
}

static int parse_pos_double(const char *opt, const char *arg, double *v)
{
	char *end;

	errno = 0;
	*v = strtod(arg, &end);
	if (errno || end == arg || *end || !isfinite(*v) || *v <= 0) {
		fprintf(stderr, "httpload: %s: expected a positive number, got '%s' (see --help)\n",
			opt, arg);
		return 2;
	}
	return 0;
}

static int parse_model(const char *arg, enum hl_model *m)
{
	if (!strcmp(arg, "naive"))
		*m = HL_NAIVE;
	else if (!strcmp(arg, "pool"))
		*m = HL_POOL;
	else if (!strcmp(arg, "async"))
		*m = HL_ASYNC;
	else
		return bad("--model: '%s' is not one of naive, pool, async", arg);
	return 0;
}

static int parse_cpus(const char *arg, struct hl_opts *o)
{
	int n = tp_cpulist_parse(arg, o->cpus, TP_MAX_CPUS);

	if (n <= 0)
		return bad("--cpus: '%s' is not a CPU list like 0-3,6", arg);
	o->ncpus = (size_t)n;
	o->cpus_arg = arg;
	return 0;
}

static int parse_one(int c, const char *arg, struct hl_opts *o, int *seen_model, int *seen_conns)
{
	uint64_t v;
	int err = 0;

	switch (c) {
	case 'm': *seen_model = 1; return parse_model(arg, &o->model);
	case 'c': *seen_conns = 1; err = parse_u64("--conns", arg, 1, 10000, &v); o->conns = (unsigned)v; break;
	case 'w': err = parse_u64("--workers", arg, 1, 4096, &v); o->workers = (unsigned)v; break;
	case 'L': err = parse_u64("--loops", arg, 1, 256, &v); o->loops = (unsigned)v; break;
	case 'n': err = parse_u64("--requests", arg, 1, 100000000, &o->requests); break;
	case 'd': return parse_pos_double("--duration", arg, &o->duration_s);
	case 'r': return parse_pos_double("--rate", arg, &o->rate);
	case 'u': o->url = arg; break;
	case 'C': return parse_cpus(arg, o);
	case 'N':
		if (strcmp(arg, "on") && strcmp(arg, "off"))
			return bad("--numa: expected on or off, got '%s'", arg);
		o->numa = !strcmp(arg, "on");
		break;
	case 'o': o->out_dir = arg; break;
	case 'j': o->json = true; break;
	case 'p': o->progress = true; break;
	case 't': err = parse_u64("--timeout-ms", arg, 1, 3600000, &v); o->timeout_ms = (long)v; break;
	default: return 2;
	}
	return err;
}

static int opts_check(struct hl_opts *o, int seen_model, int seen_conns, int seen_requests)
{
	if (!seen_model)
		return bad("%schoose a model: --model naive|pool|async", "");
	if (!seen_conns)
		return bad("%sgive the number of connections: --conns N", "");
	if (seen_requests && o->duration_s > 0)
		return bad("%s--requests and --duration exclude each other: give one", "");
	if (o->duration_s > 0)
		o->requests = 0;
	if (o->ncpus && o->model == HL_NAIVE) { /* not fatal: sweeps pass one CPU list to all */
		fprintf(stderr, "httpload: note: --cpus ignored: the naive model never pins "
				"(the seed's behaviour)\n");
		o->ncpus = 0;
		o->cpus_arg = NULL;
	}
	if (o->loops && o->model != HL_ASYNC) {
		fprintf(stderr, "httpload: note: --loops ignored: it applies to --model async only\n");
		o->loops = 0;
	}
	if (o->numa && o->model != HL_POOL) {
		fprintf(stderr, "httpload: note: --numa on ignored: it applies to --model pool only\n");
		o->numa = false;
	}
	if (!o->url[0])
		return bad("%s--url is empty", "");
	return 0;
}

int opts_parse(int argc, char **argv, struct hl_opts *o)
{
	static const struct option lo[] = {
		{ "model", required_argument, 0, 'm' }, { "conns", required_argument, 0, 'c' },
		{ "workers", required_argument, 0, 'w' }, { "requests", required_argument, 0, 'n' },
		{ "loops", required_argument, 0, 'L' },
		{ "duration", required_argument, 0, 'd' }, { "rate", required_argument, 0, 'r' },
		{ "url", required_argument, 0, 'u' }, { "cpus", required_argument, 0, 'C' },
		{ "numa", required_argument, 0, 'N' }, { "out", required_argument, 0, 'o' },
		{ "json", no_argument, 0, 'j' }, { "progress", no_argument, 0, 'p' },
		{ "timeout-ms", required_argument, 0, 't' }, { "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	int c, err, seen_model = 0, seen_conns = 0, seen_requests = 0;

	*o = (struct hl_opts){ .workers = HL_DEFAULT_WORKERS, .requests = HL_DEFAULT_REQUESTS,
			       .url = HL_DEFAULT_URL, .timeout_ms = HL_DEFAULT_TIMEOUT_MS };
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
		if (c == 'h') {
			usage(stdout);
			return -1;
		}
		if (c == '?')
			return bad("unknown option '%s'", argv[optind - 1]);
		if (c == ':')
			return bad("option '%s' needs a value", argv[optind - 1]);
		seen_requests |= c == 'n';
		err = parse_one(c, optarg, o, &seen_model, &seen_conns);
		if (err)
			return err;
	}
	if (optind < argc)
		return bad("unexpected argument '%s'", argv[optind]);
	return opts_check(o, seen_model, seen_conns, seen_requests);
}

const char *opts_model_name(enum hl_model m)
{
	return m == HL_NAIVE ? "naive" : m == HL_POOL ? "pool" : "async";
}
