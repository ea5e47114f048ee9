/* SPDX-License-Identifier: MIT */
/*
 * The three client models. Each runs the whole load (blocking), records one
 * struct tt_request per request into per-thread buffers (run->bufs), and
 * returns 0, 2 on a usage problem found at start-up (bad CPU list), or 1 on
 * another start-up failure -- after printing one line.
 */
#ifndef HL_MODELS_H
#define HL_MODELS_H
#include "run.h"

int model_naive_run(struct hl_run *r);
int model_pool_run(struct hl_run *r);
int model_async_run(struct hl_run *r);

#endif
