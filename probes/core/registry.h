/* SPDX-License-Identifier: MIT */
/* The probe modules linked into tailtrace, and helpers every module uses. */
#ifndef TT_REGISTRY_H
#define TT_REGISTRY_H
#include "core/probe.h"

/* Modules present in this build, in setup order. Returns the count. */
int registry_modules(const struct tt_probe **out, int max);
/* Is a module serving this event linked in? */
bool registry_has_event(unsigned event);
/* Events served by a linked module that cannot be detached and attached
 * again (no tt_probe.toggle): --toggle-ms refuses them. */
unsigned registry_untoggled_events(void);
/* Ring buffer size for opts->ringbuf_mb: MiB rounded up to a power of two,
 * 0 = one page (tests of loss reporting). */
unsigned long probe_ringbuf_bytes(const struct tt_opts *opts);
/* Set a ring buffer map's size before load; 0 or -errno. */
int probe_size_ringbuf(struct bpf_map *map, const struct tt_opts *opts);

#endif
