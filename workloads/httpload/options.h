/* SPDX-License-Identifier: MIT */
/* httpload command line. */
#ifndef HL_OPTIONS_H
#define HL_OPTIONS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tp_topology.h"

enum hl_model { HL_NAIVE, HL_POOL, HL_ASYNC };

struct hl_opts {
	enum hl_model model;
	unsigned conns;
	unsigned workers;        /* pool only */
	unsigned loops;          /* async only: event loops; 0 = one per usable CPU */
	uint64_t requests;       /* 0 with --duration */
	double duration_s;       /* 0 with --requests */
	double rate;             /* open loop when > 0 */
	const char *url;
	const char *cpus_arg;    /* as given, for workload.json */
	int cpus[TP_MAX_CPUS];
	size_t ncpus;
	bool numa;
	const char *out_dir;
	bool json;
	bool progress;
	long timeout_ms;
};

#define HL_DEFAULT_URL "http://127.0.0.1:8080/orders"
#define HL_DEFAULT_WORKERS 20
#define HL_DEFAULT_REQUESTS 5000
#define HL_DEFAULT_TIMEOUT_MS 10000

/* Parse argv. Returns 0, or prints one line naming the fix and returns 2
 * (usage error); -h/--help prints the usage and returns -1 (exit 0). */
int opts_parse(int argc, char **argv, struct hl_opts *o);
const char *opts_model_name(enum hl_model m);

#endif
