/* SPDX-License-Identifier: MIT */
/* Reporting: the human summary, the --json object, DIR/workload.json. */
#ifndef HL_SUMMARY_H
#define HL_SUMMARY_H
#include <stdio.h>

#include "run.h"
#include "stats.h"

void summary_print(FILE *f, const struct hl_run *r, const struct hl_stats *s);
/* One JSON object: model, conns, workers, requests, errors, throughput_rps,
 * latency_ms{avg,p50,p90,p99,p999,max}, e2e_ms{avg,p50,p99,max},
 * queue_wait_ms{p50,p99,max}, and schedule_lag_ms in open loop. With
 * params, also the run parameters (workload.json). */
void summary_json(FILE *f, const struct hl_run *r, const struct hl_stats *s, bool params);
/* DIR/workload.json, atomically (tmp + rename). 0 or -errno. */
int summary_write_workload(const char *dir, const struct hl_run *r, const struct hl_stats *s);

#endif
