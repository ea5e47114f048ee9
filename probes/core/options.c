// SPDX-License-Identifier: MIT
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/cost.h"
#include "export/exporter.h"
#include "core/features.h"
#include "flight/flight.h"
#include "core/options.h"
#include "sched/user_stack.h"
#include "core/registry.h"
#include "sched/sched.h"
#include "spans/span_plan.h"

static const struct {
	const char *name;
	unsigned bit;
} event_names[] = {
	{ "runq", TT_EV_RUNQ },   { "switch", TT_EV_SWITCH }, { "offcpu", TT_EV_OFFCPU },
	{ "locks", TT_EV_LOCKS }, { "spans", TT_EV_SPANS }, { "cpu", TT_EV_CPU },
	{ "irq", TT_EV_IRQ },
};
#define N_EVENTS (sizeof(event_names) / sizeof(event_names[0]))

enum { OPT_FLIGHT = 256, OPT_TRIGGER, OPT_WARMUP, OPT_FLIGHT_MB, OPT_MARGIN, OPT_MAX_CAPTURES,
       OPT_MAX_DISK, OPT_OTLP, OPT_DEBUG, OPT_USER_STACKS };

/*
 * Every option once: its getopt entry and its help. An entry without a name is
 * a help line only (a heading, or -- CMD). help is a printf format whose
 * conversions take args[] in order; its lines after the first are indented to
 * the help column.
 */
static const struct opt_spec {
	const char *name, *arg; /* long name, value's name (NULL: takes none) */
	int val;                /* short option, or OPT_* */
	const char *help;
	long args[4];
} opt_table[] = {
	{ .help = "Target (exactly one of):" },
	{ .help = "  -- CMD ARGS         run CMD (and the processes it starts), traced from its first\n"
	  "                      instruction; exit with its status" },
	{ .name = "pid", .arg = "PID[,PID]", .val = 'p', .help =
	  "running processes, each with all its threads and descendant processes\n"
	  "(a pre-fork server's workers: give the master), present and future; max %ld",
	  .args = { TT_MAX_PIDS } },
	{ .name = "comm", .arg = "NAME", .val = 'c', .help =
	  "processes whose name (comm) is NAME" },
	{ .name = "cgroup", .arg = "PATH", .val = 'g', .help =
	  "tasks in this cgroup v2 (path, absolute or under the cgroup2 mount)" },
	{ .name = "all", .arg = NULL, .val = 'a', .help = "system-wide" },
	{ .name = "also-pid", .arg = "PID", .val = 'P', .help =
	  "also trace the scheduler events of PID (with -- CMD or --pid; e.g. the\n"
	  "server the target talks to); repeatable, max %ld. Uprobes stay on the target",
	  .args = { TT_MAX_ALSO_PIDS } },
	{ .help = "Options:" },
	{ .name = "duration", .arg = "S", .val = 'd', .help =
	  "stop after S seconds (default: 0 = when the target exits or on SIGINT)" },
	{ .name = "out", .arg = "DIR", .val = 'o', .help =
	  "run directory (default: results/<UTC time>-tailtrace)" },
	{ .name = "events", .arg = "LIST", .val = 'e', .help =
	  "runq,switch,offcpu,cpu,irq,locks,spans (default: runq,switch,offcpu,cpu;\n"
	  "cpu: who held the CPU while traced threads waited, any task; irq adds\n"
	  "the interrupts among them (hard IRQs, local timer, softirqs; ~0.3 us for\n"
	  "the interrupts of every CPU); spans is added by --span; locks adds pthread\n"
	  "mutex uprobes for exact hold times, ~0.5 us a hit, three a lock/unlock\n"
	  "pair: lock waits are in the default)" },
	{ .name = "span", .arg = "BIN:SYMBOL", .val = 's', .help =
	  "record calls of SYMBOL in BIN (path or library name) as spans; repeatable, max %ld;\n"
	  "SYMBOL as the file spells it or, for C++ and Rust, demangled ('ns::C::f',\n"
	  "'ns::C::f(int)' among overloads)\n"
	  "--span usdt:BIN:PROVIDER:NAME: one USDT probe NAME__span(id, t_start_ns[, ret])\n"
	  "at the request's end if BIN has it, else a span from NAME__start to\n"
	  "NAME__done (or _start/_begin to _end/_done; NAME may be START,END), paired\n"
	  "by their first argument (a request id) if both have one, else by thread;\n"
	  "the end probe's second argument is the span's return value;\n"
	  "NAME,traceparent=argN[,tracestate=argM]: the end probe's arguments N and M\n"
	  "point to the request's W3C trace-context values (NUL-, CR- or LF-ended,\n"
	  "NULL without): its span goes in the caller's trace\n"
	  "--span tcp[:PORT]: requests on the target's TCP port (default: each port\n"
	  "it listens on), from a request's first byte in to its answer's last byte\n"
	  "out, seen by the kernel (no function to name: Node, Java, any runtime);\n"
	  "an HTTP/1.x request's traceparent header (with its tracestate) and its\n"
	  "answer's traceresponse put its span in the caller's trace, under the\n"
	  "service's span",
	  .args = { TT_MAX_SPANS } },
	{ .name = "span-exit", .arg = "MODE", .val = 'X', .help =
	  "how spans end: auto (default: a uretprobe, unless the function's file\n"
	  "has exception machinery or is Go: then ret), uretprobe, or ret\n"
	  "(uprobes on every return instruction: nothing on the stack is\n"
	  "touched, ~15 us a return on a VM). tailtrace prints each span's\n"
	  "sites and cost" },
	{ .name = "ringbuf-mb", .arg = "N", .val = 'r', .help =
	  "ring buffer per stream in MiB, rounded up to a power of two\n"
	  "(default: %ld, at most %ld; 0 = one page, to test loss reporting)",
	  .args = { TT_DEFAULT_RINGBUF_MB, TT_MAX_RINGBUF_MB } },
	{ .name = "min-offcpu-us", .arg = "N", .val = 'm', .help =
	  "keep off-CPU stacks only for intervals >= N us\n"
	  "(default: 0 for a filtered target, %ld with --all)",
	  .args = { TT_DEFAULT_MIN_OFFCPU_ALL_US } },
	{ .name = "user-stacks", .arg = "HOW", .val = OPT_USER_STACKS, .help =
	  "how off-CPU user stacks are walked: fp (frame pointers, in the\n"
	  "kernel) or dwarf[,BYTES] (the top BYTES of the stack copied, default\n"
	  "%ld, max %ld, and unwound by each object's call-frame information\n"
	  "with libdwfl, as perf --call-graph dwarf: through Debian's libc and\n"
	  "python3, built without frame pointers; only a call site's first\n"
	  "blocking switch copies it) (default: dwarf)",
	  .args = { TT_USTACK_DEFAULT_BYTES, TT_USTACK_MAX_BYTES } },
	{ .name = "aggregate", .arg = NULL, .val = 'A', .help =
	  "in-kernel histograms only (aggregate.json), no per-event records;\n"
	  "run-queue waits from the kernel's own accounting (schedstat), from\n"
	  "the enqueue as runqlat (--debug runq-waking: from sched_waking)" },
	{ .name = "listen", .arg = "ADDR:PORT", .val = 'l', .help =
	  "serve them as Prometheus metrics at http://ADDR:PORT/metrics\n"
	  "(implies --aggregate; e.g. 127.0.0.1:9431, :9431 for every interface;\n"
	  "runs until SIGINT/SIGTERM unless --duration or the target ends it)" },
	{ .name = "top", .arg = "N", .val = 't', .help =
	  "with --listen: the N most active processes get their own series,\n"
	  "the rest are counted in comm=\"other\" (default %ld, max %ld); with\n"
	  "--events runq,switch,offcpu,cpu also their run-queue wait by what\n"
	  "held the CPU, N antagonists each (opt-in: ~0.5%% of the machine more)",
	  .args = { EXPORTER_DEFAULT_TOP, EXPORTER_MAX_TOP } },
	{ .help = "Flight recorder (docs/flight-recorder.md):" },
	{ .name = "flight-recorder", .arg = "SECONDS", .val = OPT_FLIGHT, .help =
	  "keep the last SECONDS of records in memory and write\n"
	  "nothing until a span ends above --trigger; then a capture: a run\n"
	  "directory OUT/captures/NNNN of [start - margin, end + margin],\n"
	  "widened to the whole of every span it holds" },
	{ .name = "trigger", .arg = "EXPR", .val = OPT_TRIGGER, .help =
	  "latency>5ms (ns, us, ms, s), or p99, p99.9: above the live percentile\n"
	  "of the spans that ended in the last minute, once it holds\n"
	  "--trigger-warmup N of them (default 10/(1-p): p99.9 10,000)\n"
	  "(default " TT_DEFAULT_TRIGGER ")" },
	{ .name = "trigger-warmup", .arg = "N", .val = OPT_WARMUP, .help =
	  "spans seen before a percentile trigger fires" },
	{ .name = "flight-mb", .arg = "N", .val = OPT_FLIGHT_MB, .help =
	  "memory for records; past it they go early, counted (default: twice\n"
	  "what SECONDS of the highest record rate seen take, 64 MB to %ld MB)",
	  .args = { TT_DEFAULT_FLIGHT_MB } },
	{ .name = "flight-margin-ms", .arg = "MS", .val = OPT_MARGIN, .help =
	  "kept before and after a triggering span (default %ld)",
	  .args = { TT_DEFAULT_MARGIN_MS } },
	{ .name = "max-captures-per-min", .arg = "N", .val = OPT_MAX_CAPTURES, .help =
	  "captures a minute at most; what it skips is counted (default %ld)",
	  .args = { TT_DEFAULT_CAPTURES_PER_MIN } },
	{ .name = "max-disk-mb", .arg = "N", .val = OPT_MAX_DISK, .help =
	  "disk for captures at most; what it skips is counted (default %ld)",
	  .args = { TT_DEFAULT_MAX_DISK_MB } },
	{ .name = "otlp", .arg = "URL", .val = OPT_OTLP, .help =
	  "send each capture's slow requests, explained, as OTLP spans to URL\n"
	  "(http://HOST:4318/v1/traces) as soon as it is written: python3 -m\n"
	  "analyze captures OUT --follow, niced, beside the recorder, which never\n"
	  "waits on it; counts and drops in OUT/otlp.json" },
	{ .help = "Measuring tailtrace itself:" },
	{ .name = "bpf-stats", .arg = "MODE", .val = 'B', .help =
	  "the kernel's BPF run-time statistics behind the cost line: sampled\n"
	  "(default: on %ld ms of every %ld ms for %ld s, then of every %ld ms (--listen:\n"
	  "from the start), scaled; while on, every BPF program on the machine pays\n"
	  "~50 ns a run), always (exact counts) or off",
	  .args = { COST_SAMPLE_ON_MS, COST_SAMPLE_PERIOD_MS, COST_SAMPLE_DENSE_S, COST_SAMPLE_SPARSE_MS } },
	{ .name = "toggle-ms", .arg = "MS", .val = 'T', .help =
	  "for overhead benchmarks (bench/overhead_interleave.sh): detach every\n"
	  "program after MS ms, attach them again MS ms later, and so on (times in\n"
	  "OUT/toggles.txt); the run's records and histograms then have holes" },
	{ .name = "debug", .arg = "FEAT[,FEAT]", .val = OPT_DEBUG, .help =
	  "alternative code paths, for tests and old kernels: hook=raw_tp or\n"
	  "hook=tracepoint (force a fallback hook type), btf=PATH (kernel BTF\n"
	  "file), split-switch (one sched_switch program per event), runq-waking\n"
	  "(--aggregate: waits from sched_waking), exact-stacks (unwind at every\n"
	  "switch-out; no stack cache), stack-epoch-ms=N (--flight-recorder: empty\n"
	  "and switch the off-CPU stack maps every N ms), flight-tee\n"
	  "(--flight-recorder: also write every record to OUT, the whole run a\n"
	  "capture is checked against), without=FEATURE (take a kernel feature as\n"
	  "missing, to run an older kernel's path here: bpf-loop, uprobe-cookie,\n"
	  "atomics, task-regs, switch-state, ringbuf), skip=STEP (benchmarks:\n"
	  "leave a step of the switch program out, records incomplete; steps:\n"
	  "body, after-slots, occ-note, occ-emit, switch-rb, runq-rb, reason,\n"
	  "stacks, runq, occ-send, throttle; first-run, for tests: a thread's first\n"
	  "switch-in goes unseen, as the kernel sometimes lets it)" },
	{ .name = "verbose", .arg = NULL, .val = 'v', .help =
	  "more messages (repeat for libbpf debug output)" },
	{ .name = "help", .arg = NULL, .val = 'h', .help = "this help" },
};
#define N_OPTS (sizeof(opt_table) / sizeof(opt_table[0]))
#define HELP_COL 22

static void usage_entry(FILE *out, const struct opt_spec *o)
{
	char head[64], text[1024];
	const char *line = text, *nl;

	if (!o->name) {
		fprintf(out, "%s\n", o->help);
		return;
	}
	if (o->val < 256)
		snprintf(head, sizeof(head), "  -%c, --%s%s%s", o->val, o->name, o->arg ? " " : "",
			 o->arg ? o->arg : "");
	else
		snprintf(head, sizeof(head), "      --%s%s%s", o->name, o->arg ? " " : "",
			 o->arg ? o->arg : "");
	snprintf(text, sizeof(text), o->help, o->args[0], o->args[1], o->args[2], o->args[3]);
	fprintf(out, "%-*s  ", HELP_COL - 2, head);
	for (; (nl = strchr(line, '\n')); line = nl + 1)
		fprintf(out, "%.*s\n%*s", (int)(nl - line), line, HELP_COL, "");
	fprintf(out, "%s\n", line);
}

void options_usage(FILE *out)
{
	fprintf(out,
		"Usage: tailtrace [--pid PID | --comm NAME | --cgroup PATH | --all] [options] [-- CMD ARGS]\n"
		"Record what the scheduler did to a workload's threads (run-queue waits, context\n"
		"switches, off-CPU stacks, mutex hold/wait, spans) into a run directory.\n\n");
	for (size_t i = 0; i < N_OPTS; i++)
		usage_entry(out, &opt_table[i]);
}

/* getopt_long's tables, from opt_table. */
static void opts_getopt(struct option *longs, char *shorts)
{
	size_t n = 0, k = 0;

	/* '+': options end at the first operand (the command); ':': a missing value is
	 * reported as ':', not as an unknown option */
	shorts[k++] = '+';
	shorts[k++] = ':';
	for (size_t i = 0; i < N_OPTS; i++) {
		const struct opt_spec *o = &opt_table[i];

		if (!o->name)
			continue;
		longs[n++] = (struct option){ o->name, o->arg ? required_argument : no_argument, NULL,
					      o->val };
		if (o->val < 256) {
			shorts[k++] = (char)o->val;
			if (o->arg)
				shorts[k++] = ':';
		}
	}
	longs[n] = (struct option){ 0 };
	shorts[k] = '\0';
}

const char *options_events_str(unsigned events, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < N_EVENTS; i++)
		if (events & event_names[i].bit)
			used += snprintf(buf + used, used < len ? len - used : 0, "%s%s",
					 used ? "," : "", event_names[i].name);
	return buf;
}

static int parse_events(const char *s, unsigned *mask, char *err, size_t len)
{
	char *dup = strdup(s), *save = NULL, *tok;
	int ret = 0;

	if (!dup)
		return -ENOMEM;
	*mask = 0;
	for (tok = strtok_r(dup, ",", &save); tok && !ret; tok = strtok_r(NULL, ",", &save)) {
		size_t i;

		for (i = 0; i < N_EVENTS && strcmp(tok, event_names[i].name); i++)
			;
		if (i == N_EVENTS) {
			char all[128];

			options_events_str((TT_EV_LAST << 1) - 1, all, sizeof(all));
			snprintf(err, len, "unknown event '%s' in --events: choose from %s", tok, all);
			ret = -EINVAL;
		} else {
			*mask |= event_names[i].bit;
		}
	}
	free(dup);
	if (!ret && !*mask) {
		snprintf(err, len, "--events is empty: give e.g. --events runq,switch");
		ret = -EINVAL;
	}
	return ret;
}

/* skip=STEP: its bit in enum sched_skip, 0 if unknown. */
static unsigned skip_step_parse(const char *name)
{
	static const char *const names[] = SCHED_SKIP_NAMES;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(name, names[i]))
			return 1u << i;
	return 0;
}

/* --debug FEAT[,FEAT]: struct tt_debug. */
static int parse_debug(struct tt_debug *d, const char *s, char *err, size_t len)
{
	char *dup = strdup(s), *save = NULL, *tok;
	int ret = 0;

	if (!dup)
		return -ENOMEM;
	for (tok = strtok_r(dup, ",", &save); tok && !ret; tok = strtok_r(NULL, ",", &save)) {
		enum tt_hook h;

		if (!strcmp(tok, "split-switch"))
			d->split_switch = true;
		else if (!strcmp(tok, "runq-waking"))
			d->runq_waking = true;
		else if (!strcmp(tok, "exact-stacks"))
			d->exact_stacks = true;
		else if (!strcmp(tok, "flight-tee"))
			d->flight_tee = true;
		else if (!strncmp(tok, "without=", 8) && features_without_parse(tok + 8))
			d->without |= features_without_parse(tok + 8);
		else if (!strncmp(tok, "skip=", 5) && skip_step_parse(tok + 5))
			d->skip_steps |= skip_step_parse(tok + 5);
		else if (!strncmp(tok, "stack-epoch-ms=", 15) && atoi(tok + 15) > 0)
			d->stack_epoch_ms = (unsigned)atoi(tok + 15);
		else if (!strncmp(tok, "hook=", 5) && !features_hook_parse(tok + 5, &h))
			d->hook = (int)h;
		else if (!strncmp(tok, "btf=", 4) && tok[4])
			d->btf = strdup(tok + 4); /* kept for the whole run */
		else {
			snprintf(err, len, "--debug '%s': give hook=tp_btf|raw_tp|tracepoint, btf=PATH, "
				 "split-switch, runq-waking, exact-stacks, stack-epoch-ms=N, flight-tee, "
				 "skip=STEP (body, occ-note, occ-emit, switch-rb, runq-rb, reason, "
				 "stacks, runq, after-slots, occ-send, throttle, first-run) "
				 "or without=bpf-loop|uprobe-cookie|atomics|task-regs|switch-state|ringbuf",
				 tok);
			ret = -EINVAL;
		}
	}
	free(dup);
	return ret;
}

static int parse_num(const char *opt, const char *s, double lo, double hi, double *out,
		     char *err, size_t len)
{
	char *end;

	errno = 0;
	*out = strtod(s, &end);
	if (errno || end == s || *end || *out < lo || *out > hi) {
		snprintf(err, len, "%s '%s': expected a number between %g and %g", opt, s, lo, hi);
		return -EINVAL;
	}
	return 0;
}

/* --user-stacks fp | dwarf[,BYTES]: the bytes of stack copied, 0 for fp. */
static int parse_user_stacks(const char *arg, unsigned *bytes, char *err, size_t len)
{
	double v = TT_USTACK_DEFAULT_BYTES;

	if (!strcmp(arg, "fp")) {
		*bytes = 0;
		return 0;
	}
	if (strcmp(arg, "dwarf") && strncmp(arg, "dwarf,", 6)) {
		snprintf(err, len, "--user-stacks '%s': give fp, dwarf or dwarf,BYTES", arg);
		return -EINVAL;
	}
	if (arg[5] && parse_num("--user-stacks dwarf,BYTES", arg + 6, 512, TT_USTACK_MAX_BYTES,
				&v, err, len))
		return -EINVAL;
	*bytes = ((unsigned)v + 7) & ~7u;
	return 0;
}

/* A process id: a decimal integer in 1..4194304 (the kernel's PID_MAX_LIMIT). */
static int parse_pid(const char *opt, const char *s, int *out, char *err, size_t len)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 1 || v > 4194304) {
		snprintf(err, len, "%s '%s': expected a process id (a whole number between 1 and "
			 "4194304)", opt, s);
		return -EINVAL;
	}
	*out = (int)v;
	return 0;
}

/* --pid PID[,PID...]: the targets, each with its descendants; the first is o->pid. */
static int parse_pids(struct tt_opts *o, char *arg, char *err, size_t len)
{
	char *save = NULL;

	for (char *tok = strtok_r(arg, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int pid;

		if (parse_pid("--pid", tok, &pid, err, len))
			return -EINVAL;
		for (int i = 0; i < o->npids; i++)
			if (o->pids[i] == pid) {
				snprintf(err, len, "--pid: %d is given twice", pid);
				return -EINVAL;
			}
		if (o->npids >= TT_MAX_PIDS) {
			snprintf(err, len, "--pid: at most %d processes (each is traced with its "
				 "descendants: give their parent)", TT_MAX_PIDS);
			return -EINVAL;
		}
		o->pids[o->npids++] = pid;
	}
	if (!o->npids) {
		snprintf(err, len, "--pid '%s': expected PID or PID,PID,...", arg);
		return -EINVAL;
	}
	o->pid = o->pids[0];
	return 0;
}

/* usdt:BIN:PROVIDER:NAME -> binary, provider, symbol = NAME (in place). */
/* opt up to eq is key. */
static bool key_is(const char *opt, const char *eq, const char *key)
{
	return (size_t)(eq - opt) == strlen(key) && !strncmp(opt, key, strlen(key));
}

/* One ",traceparent=argN" or ",tracestate=argN" of a USDT span: the argument,
 * kept as N + 1 in sp. */
static int parse_span_context_arg(struct tt_span_spec *sp, const char *opt, const char *given,
				  char *err, size_t len)
{
	const char *eq = strchr(opt, '=');
	unsigned char *which = NULL;
	unsigned long n = 0;
	char *end = NULL;

	if (eq && key_is(opt, eq, "traceparent"))
		which = &sp->traceparent_arg;
	else if (eq && key_is(opt, eq, "tracestate"))
		which = &sp->tracestate_arg;
	if (which && !strncmp(eq + 1, "arg", 3) && eq[4] >= '0' && eq[4] <= '9') {
		errno = 0;
		n = strtoul(eq + 4, &end, 10);
	}
	if (!which || !end || *end || errno || n > TT_USDT_MAX_ARG) {
		snprintf(err, len, "--span '%s': '%s': expected traceparent=argN or tracestate=argN "
			 "with N 0..%d (the probe argument pointing to the header's value)", given,
			 opt, TT_USDT_MAX_ARG);
		return -EINVAL;
	}
	*which = (unsigned char)(n + 1);
	return 0;
}

/* NAME[,traceparent=argN][,tracestate=argM]: the options after NAME (those with an
 * '='; NAME itself may be START,END) cut off it and parsed. */
static int parse_span_context_args(struct tt_span_spec *sp, char *name, const char *given,
				   char *err, size_t len)
{
	char *opt;
	int e;

	while ((opt = strrchr(name, ',')) && strchr(opt, '=')) {
		*opt++ = '\0';
		if ((e = parse_span_context_arg(sp, opt, given, err, len)))
			return e;
	}
	if (sp->tracestate_arg && !sp->traceparent_arg) {
		snprintf(err, len, "--span '%s': tracestate=argN needs traceparent=argM beside it "
			 "(a tracestate is read only with a traceparent)", given);
		return -EINVAL;
	}
	if (sp->tracestate_arg && sp->tracestate_arg == sp->traceparent_arg) {
		snprintf(err, len, "--span '%s': traceparent and tracestate name the same argument",
			 given);
		return -EINVAL;
	}
	return 0;
}

static int parse_span_usdt(struct tt_span_spec *sp, char *arg, const char *given, char *err,
			   size_t len)
{
	char *f[3], *s = arg + strlen("usdt:");

	for (int i = 0; i < 3; i++) {
		f[i] = s;
		s = i < 2 ? strchr(s, ':') : NULL;
		if (i < 2 && s)
			*s++ = '\0';
		if (!f[i][0] || (i < 2 && !s) || (i == 2 && strchr(f[i], ':'))) {
			snprintf(err, len, "--span '%s': expected usdt:BIN:PROVIDER:NAME[,traceparent="
				 "argN[,tracestate=argM]] (e.g. usdt:httpload:httpload:request)", given);
			return -EINVAL;
		}
	}
	*sp = (struct tt_span_spec){ .binary = f[0], .provider = f[1], .symbol = f[2] };
	return parse_span_context_args(sp, f[2], given, err, len);
}

/* tcp or tcp:PORT -> a TCP span: 1 if arg is one, 0 if not (tcp:SYMBOL: a file
 * named tcp), -EINVAL if its port is bad. */
static int parse_span_tcp(struct tt_span_spec *sp, const char *arg, char *err, size_t len)
{
	unsigned long port = 0;
	char *end;

	if (strcmp(arg, "tcp") && (strncmp(arg, "tcp:", 4) || arg[4] < '0' || arg[4] > '9'))
		return 0;
	if (arg[3] == ':') {
		errno = 0;
		port = strtoul(arg + 4, &end, 10);
		if (*end || errno || !port || port > 65535) {
			snprintf(err, len, "--span '%s': expected tcp:PORT with PORT 1..65535 (or tcp: "
				 "each port the target listens on)", arg);
			return -EINVAL;
		}
	}
	*sp = (struct tt_span_spec){ .tcp = true, .tcp_port = (unsigned)port };
	return 1;
}

/* The ':' between BIN and SYMBOL: the first that is not half of a C++ or Rust
 * path's "::" (BIN:ns::Class::method). */
static char *span_colon(char *arg)
{
	for (char *c = strchr(arg, ':'); c; c = strchr(c + 2, ':')) {
		if (c[1] != ':')
			return c;
		if (!c[2])
			break;
	}
	return NULL;
}

static int parse_span(struct tt_cli *cli, const char *given, char *err, size_t len)
{
	struct tt_opts *o = &cli->opts;
	char *arg, *colon;
	int e;

	if (o->nspans == TT_MAX_SPANS) {
		snprintf(err, len, "--span: at most %d spans", TT_MAX_SPANS);
		return -EINVAL;
	}
	/* split a copy: argv stays whole for meta.json's command line */
	arg = cli->span_buf[o->nspans];
	if ((size_t)snprintf(arg, sizeof(cli->span_buf[0]), "%s", given) >= sizeof(cli->span_buf[0])) {
		snprintf(err, len, "--span: longer than %zu characters", sizeof(cli->span_buf[0]) - 1);
		return -EINVAL;
	}
	colon = span_colon(arg);
	if ((e = parse_span_tcp(&o->spans[o->nspans], arg, err, len))) {
		o->nspans += e > 0;
		return e < 0 ? e : 0;
	}
	if (!strncmp(arg, "usdt:", 5)) {
		e = parse_span_usdt(&o->spans[o->nspans], arg, given, err, len);
		o->nspans += !e;
		return e;
	}
	if (!colon || colon == arg || !colon[1]) {
		snprintf(err, len, "--span '%s': expected BIN:SYMBOL (e.g. libcurl.so.4:curl_easy_perform, "
			 "app:'ns::Class::method'), usdt:BIN:PROVIDER:NAME or tcp:PORT", arg);
		return -EINVAL;
	}
	*colon = '\0';
	o->spans[o->nspans].binary = arg;
	o->spans[o->nspans++].symbol = colon + 1;
	return 0;
}

static int parse_span_exit(const char *arg)
{
	static const int modes[] = { SPAN_EXIT_AUTO, SPAN_EXIT_URET, SPAN_EXIT_RET };

	for (unsigned i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
		if (!strcmp(arg, span_exit_mode_name(modes[i])))
			return modes[i];
	return -1;
}

static void default_out(struct tt_cli *cli)
{
	time_t now = time(NULL);
	struct tm tm;

	gmtime_r(&now, &tm);
	strftime(cli->out_buf, sizeof(cli->out_buf), "results/%Y%m%dT%H%M%SZ-tailtrace", &tm);
	cli->opts.out_dir = cli->out_buf;
}

static int parse_flight_num(struct tt_opts *o, int c, const char *arg, char *err, size_t len);

static int parse_one(struct tt_cli *cli, int c, char *arg, char *err, size_t len)
{
	struct tt_opts *o = &cli->opts;
	double v;

	switch (c) {
	case 'p':
		if (o->npids) {
			snprintf(err, len, "--pid is given twice: give one list, --pid PID,PID");
			return -EINVAL;
		}
		return parse_pids(o, arg, err, len);
	case 'P': {
		int pid;

		if (parse_pid("--also-pid", arg, &pid, err, len))
			return -EINVAL;
		if (o->nalso >= TT_MAX_ALSO_PIDS) {
			snprintf(err, len, "--also-pid: at most %d processes", TT_MAX_ALSO_PIDS);
			return -EINVAL;
		}
		if (kill((pid_t)pid, 0) && errno == ESRCH) {
			snprintf(err, len, "--also-pid %d: no such process (check the PID with ps)", pid);
			return -ESRCH;
		}
		o->also_pids[o->nalso++] = pid;
		return 0;
	}
	case 'c':
		if (!*arg || strlen(arg) > 15) {
			snprintf(err, len, "--comm '%s': give a process name of 1 to 15 characters", arg);
			return -EINVAL;
		}
		o->comm = arg;
		return 0;
	case 'g': o->cgroup = arg; return 0;
	case 'a': o->all = true; return 0;
	case 'd': return parse_num("--duration", arg, 0, 1e7, &o->duration_s, err, len);
	case 'o': o->out_dir = arg; return 0;
	case 'e': cli->events_given = true; return parse_events(arg, &o->events, err, len);
	case 's': return parse_span(cli, arg, err, len);
	case 'X':
		if ((o->span_exit = parse_span_exit(arg)) < 0) {
			snprintf(err, len, "--span-exit '%s': give auto, uretprobe or ret", arg);
			return -EINVAL;
		}
		return 0;
	case 'r':
		if (parse_num("--ringbuf-mb", arg, 0, TT_MAX_RINGBUF_MB, &v, err, len))
			return -EINVAL;
		o->ringbuf_mb = (unsigned)v;
		return 0;
	case 'm':
		if (parse_num("--min-offcpu-us", arg, 0, 1e12, &v, err, len))
			return -EINVAL;
		o->min_offcpu_us = (uint64_t)v;
		cli->min_offcpu_given = true;
		return 0;
	case 'A': o->aggregate = true; return 0;
	case 'l':
		o->listen = arg;
		o->aggregate = true;
		return 0;
	case 't':
		if (parse_num("--top", arg, 1, EXPORTER_MAX_TOP, &v, err, len))
			return -EINVAL;
		o->top_n = (int)v;
		cli->top_given = true;
		return 0;
	case 'B':
		if ((o->bpf_stats = cost_mode_parse(arg)) < 0) {
			snprintf(err, len, "--bpf-stats '%s': give sampled, always or off", arg);
			return -EINVAL;
		}
		return 0;
	case 'T':
		if (parse_num("--toggle-ms", arg, 50, 60000, &v, err, len))
			return -EINVAL;
		o->toggle_ms = (unsigned)v;
		return 0;
	case 'v': o->verbose++; return 0;
	case OPT_DEBUG: return parse_debug(&o->debug, arg, err, len);
	case OPT_USER_STACKS:
		o->user_stacks_given = true;
		return parse_user_stacks(arg, &o->user_stack_bytes, err, len);
	case OPT_FLIGHT: return parse_num("--flight-recorder", arg, 1, 86400, &o->flight_s, err, len);
	case OPT_TRIGGER: o->trigger = arg; return 0;
	case OPT_OTLP: o->otlp_url = arg; return 0;
	default:
		return parse_flight_num(o, c, arg, err, len);
	}
}

/* The numeric --flight-* settings. */
static int parse_flight_num(struct tt_opts *o, int c, const char *arg, char *err, size_t len)
{
	double v;

	switch (c) {
	case OPT_WARMUP:
		if (parse_num("--trigger-warmup", arg, 1, 1e9, &v, err, len))
			return -EINVAL;
		o->trigger_warmup = (uint64_t)v;
		return 0;
	case OPT_FLIGHT_MB:
		if (parse_num("--flight-mb", arg, 2, 1 << 20, &v, err, len))
			return -EINVAL;
		o->flight_mb = (unsigned)v;
		return 0;
	case OPT_MARGIN:
		if (parse_num("--flight-margin-ms", arg, 0, 10000, &v, err, len))
			return -EINVAL;
		o->flight_margin_ms = (unsigned)v;
		return 0;
	case OPT_MAX_CAPTURES:
		if (parse_num("--max-captures-per-min", arg, 1, 6000, &v, err, len))
			return -EINVAL;
		o->max_captures_per_min = (unsigned)v;
		return 0;
	case OPT_MAX_DISK:
		if (parse_num("--max-disk-mb", arg, 1, 1 << 24, &v, err, len))
			return -EINVAL;
		o->max_disk_mb = (unsigned)v;
		return 0;
	default:
		snprintf(err, len, "bad option: see tailtrace --help");
		return -EINVAL;
	}
}

static int check_target(struct tt_cli *cli, char *err, size_t len)
{
	struct tt_opts *o = &cli->opts;
	int modes = (o->pid > 0) + !!o->comm + !!o->cgroup + o->all + !!cli->cmd;

	if (modes == 0) {
		snprintf(err, len, "no target: give -- CMD, --pid PID, --comm NAME, --cgroup PATH or --all");
		return -EINVAL;
	}
	if (modes > 1) {
		snprintf(err, len, "give only one target of -- CMD, --pid, --comm, --cgroup, --all");
		return -EINVAL;
	}
	if (o->nalso && !(o->pid > 0 || cli->cmd)) {
		snprintf(err, len, "--also-pid goes with -- CMD or --pid PID (it adds processes to that target)");
		return -EINVAL;
	}
	return 0;
}

/* --flight-recorder: its settings' defaults; the others alone are an error. */
static int check_flight(struct tt_cli *cli, char *err, size_t len)
{
	struct tt_opts *o = &cli->opts;
	struct flight_opts fo;

	if (!o->flight_s) {
		if (o->trigger || o->trigger_warmup || o->flight_mb || o->flight_margin_ms != UINT_MAX ||
		    o->max_captures_per_min || o->max_disk_mb || o->otlp_url) {
			snprintf(err, len, "--trigger, --trigger-warmup, --flight-mb, --flight-margin-ms, "
				 "--max-captures-per-min, --max-disk-mb and --otlp go with "
				 "--flight-recorder SECONDS (a whole run: python3 -m analyze export otlp "
				 "OUT)");
			return -EINVAL;
		}
		return 0;
	}
	if (!o->nspans) {
		snprintf(err, len, "--flight-recorder triggers on slow requests: give --span BIN:SYMBOL, "
			 "--span usdt:BIN:PROVIDER:NAME or --span tcp:PORT (run.sh --flight adds "
			 "httpload's own)");
		return -EINVAL;
	}
	if (o->aggregate && !o->listen) {
		snprintf(err, len, "--flight-recorder keeps records: it does not go with --aggregate");
		return -EINVAL;
	}
	if (o->otlp_url && strncmp(o->otlp_url, "http://", 7) && strncmp(o->otlp_url, "https://", 8)) {
		snprintf(err, len, "--otlp %s: give an OTLP/HTTP traces URL, e.g. "
			 "http://127.0.0.1:4318/v1/traces", o->otlp_url);
		return -EINVAL;
	}
	o->aggregate = false; /* --listen serves the recorder's own metrics */
	o->trigger = o->trigger ? o->trigger : TT_DEFAULT_TRIGGER;
	o->flight_mb_auto = !o->flight_mb;
	o->flight_mb = o->flight_mb ? o->flight_mb : TT_DEFAULT_FLIGHT_MB;
	if (o->flight_margin_ms == UINT_MAX)
		o->flight_margin_ms = TT_DEFAULT_MARGIN_MS;
	o->max_captures_per_min = o->max_captures_per_min ?: TT_DEFAULT_CAPTURES_PER_MIN;
	o->max_disk_mb = o->max_disk_mb ? o->max_disk_mb : TT_DEFAULT_MAX_DISK_MB;
	return flight_opts_from(o, &fo, err, len); /* the trigger, and SECONDS against the budget */
}

int options_parse(int argc, char **argv, struct tt_cli *cli, char *err, size_t len)
{
	struct tt_opts *o = &cli->opts;
	struct option longs[N_OPTS + 1];
	char shorts[2 * N_OPTS + 3];
	int c;

	memset(cli, 0, sizeof(*cli));
	cli->argc = argc;
	cli->argv = argv;
	o->events = TT_DEFAULT_EVENTS;
	o->ringbuf_mb = TT_DEFAULT_RINGBUF_MB;
	o->user_stack_bytes = TT_USTACK_DEFAULT_BYTES;
	o->flight_margin_ms = UINT_MAX; /* not given */
	o->debug.hook = -1;
	opts_getopt(longs, shorts);
	opterr = 0;
	while ((c = getopt_long(argc, argv, shorts, longs, NULL)) != -1) {
		if (c == 'h') {
			options_usage(stdout);
			return 1;
		}
		if (c == '?' || c == ':') {
			snprintf(err, len, "%s '%s': see tailtrace --help",
				 c == ':' ? "missing value for" : "unknown option",
				 argv[optind - 1]);
			return -EINVAL;
		}
		if (parse_one(cli, c, optarg, err, len))
			return -EINVAL;
	}
	if (optind < argc)
		cli->cmd = &argv[optind];
	if (check_target(cli, err, len))
		return -EINVAL;
	if (check_flight(cli, err, len))
		return -EINVAL;
	if (o->nspans)
		o->events |= TT_EV_SPANS;
	else if (o->events & TT_EV_SPANS) {
		snprintf(err, len, "event 'spans' needs at least one --span BIN:SYMBOL");
		return -EINVAL;
	}
	if ((o->events & TT_EV_CPU) && o->aggregate && (!o->listen || !cli->events_given)) {
		if (cli->events_given) { /* --listen serves it when asked for */
			snprintf(err, len, "event 'cpu' writes records: it does not go with --aggregate "
				 "(with --listen, --events runq,switch,offcpu,cpu serves it as metrics)");
			return -EINVAL;
		}
		o->events &= ~TT_EV_CPU;
	}
	if ((o->events & TT_EV_IRQ) && !(o->events & TT_EV_CPU)) {
		snprintf(err, len, "event 'irq' (interrupts among what held the CPU) needs 'cpu' and "
			 "'runq': use e.g. --events runq,switch,offcpu,cpu,irq");
		return -EINVAL;
	}
	if ((o->events & TT_EV_CPU) && !(o->events & TT_EV_RUNQ)) {
		if (cli->events_given) {
			snprintf(err, len, "event 'cpu' (who held the CPU while traced threads waited) "
				 "needs 'runq': add it to --events");
			return -EINVAL;
		}
		o->events &= ~TT_EV_CPU;
	}
	if (cli->top_given && !o->listen) {
		snprintf(err, len, "--top goes with --listen (it caps the exporter's series)");
		return -EINVAL;
	}
	if (o->toggle_ms && (o->events & registry_untoggled_events())) {
		unsigned all = (TT_EV_LAST << 1) - 1;
		char fixed[128], ok[128];

		options_events_str(o->events & registry_untoggled_events(), fixed, sizeof(fixed));
		options_events_str(all & ~registry_untoggled_events(), ok, sizeof(ok));
		snprintf(err, len, "--toggle-ms cannot detach %s: use --events within %s", fixed, ok);
		return -EINVAL;
	}
	if (!cli->top_given)
		o->top_n = EXPORTER_DEFAULT_TOP;
	if (!cli->min_offcpu_given && o->all)
		o->min_offcpu_us = TT_DEFAULT_MIN_OFFCPU_ALL_US;
	if (!o->out_dir)
		default_out(cli);
	return 0;
}

