/* SPDX-License-Identifier: MIT */
/*
 * Kernel feature probes: which hook type the scheduler probes use
 * (tp_btf, else raw_tp, else classic tracepoints), BTF, privileges.
 * TAILTRACE_HOOK=raw_tp|tracepoint forces a fallback (tests, old kernels).
 */
#ifndef TT_FEATURES_H
#define TT_FEATURES_H
#include <stdbool.h>
#include <stddef.h>
#include <bpf/libbpf.h>

enum tt_hook {
	TT_HOOK_TP_BTF = 0,
	TT_HOOK_RAW_TP = 1,
	TT_HOOK_TRACEPOINT = 2,
};

/* Root, or CAP_BPF + CAP_PERFMON (or CAP_SYS_ADMIN)? */
bool features_privileged(void);
/* The kernel BTF path ($TAILTRACE_BTF overrides /sys/kernel/btf/vmlinux, for tests). */
const char *features_btf_path(void);
/* Pick the best hook type that loads and attaches here; 0 or -errno with err. */
int features_probe(char *err, size_t len);
enum tt_hook features_hook(void);
const char *features_hook_name(enum tt_hook h);
/* Autoload exactly the programs of the chosen hook: names end in _btf, _raw, _tp.
 * Programs without one of these suffixes are left alone. */
void features_select_progs(struct bpf_object *obj, enum tt_hook h);

#endif
