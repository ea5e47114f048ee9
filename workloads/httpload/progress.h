/* SPDX-License-Identifier: MIT */
/* --progress: "done/total, elapsed" on stderr; every ~0.5 s on a terminal
 * (one live line), every ~2 s as plain lines otherwise; a last line at the end. */
#ifndef HL_PROGRESS_H
#define HL_PROGRESS_H
#include "run.h"

struct hl_progress;

struct hl_progress *progress_start(const struct hl_run *r);
void progress_stop(struct hl_progress *p); /* safe on NULL */

#endif
