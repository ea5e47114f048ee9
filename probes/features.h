/* SPDX-License-Identifier: MIT */
/*
 * Kernel feature probes: which hook type the scheduler probes use
 * (tp_btf, else raw_tp, else classic tracepoints), BTF, privileges.
 * tailtrace --debug hook=raw_tp|tracepoint forces a fallback (tests, old kernels).
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
/* The kernel BTF path: /sys/kernel/btf/vmlinux, or path (--debug btf=PATH, for tests). */
void features_set_btf_path(const char *path);
const char *features_btf_path(void);
/* "tp_btf", "raw_tp" or "tracepoint" -> *h: 0, or -EINVAL. */
int features_hook_parse(const char *s, enum tt_hook *h);
/* Pick the best hook type from want on (want < 0: from tp_btf) that loads and
 * attaches here; 0 or -errno with err. */
int features_probe(int want, char *err, size_t len);
enum tt_hook features_hook(void);
const char *features_hook_name(enum tt_hook h);
/* Autoload exactly the programs of the chosen hook: names end in _btf, _raw, _tp.
 * Programs without one of these suffixes are left alone. Maps named *_btf (task
 * storage) are created only for tp_btf, maps named *_ids (tid-keyed) only for
 * the others; other maps always. */
void features_select_progs(struct bpf_object *obj, enum tt_hook h);
/* Offset of a per-CPU variable in the kernel's per-CPU area (BTF DATASEC
 * .data..percpu): 0 or -ENOENT. Differences of two such offsets are the same
 * on every CPU, so one per-CPU variable is reached from another's address. */
int features_percpu_offset(const char *name, long *off);
/* The per-CPU variables waker_ctx.bpf.h reads preempt_count through: 0 when the
 * BTF has all three (wakeup contexts can be told apart), else -ENOENT. */
int features_percpu_layout(long *runqueues, long *preempt_count, long *current_task);
/* Can the chosen hook's programs read a task's user registers
 * (bpf_get_current_task_btf + bpf_task_pt_regs)? Wait reasons need them. */
bool features_task_regs(void);
/* Does the kernel keep its own run-queue wait accounting per task
 * (CONFIG_SCHED_INFO: task->sched_info.run_delay, last_queued, pcount, the
 * figures of /proc/PID/schedstat), with the run-queue clock reachable from a
 * task (se.cfs_rq->rq->clock: CONFIG_FAIR_GROUP_SCHED)? --aggregate reads its
 * waits there. */
bool features_sched_info(void);

#endif
