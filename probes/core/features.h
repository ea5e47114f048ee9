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

/* What the running kernel lacks, and what tailtrace did instead: each said once on
 * stderr and kept for meta.json "kernel_fallbacks" (docs/kernels.md).
 *   fallback: "tailtrace: WHAT need NEEDS (Linux SINCE+): INSTEAD[; LOSES]"
 *   refused:  "tailtrace: WHAT needs NEEDS (Linux SINCE+); recording without it[: LOSES]"
 * what, instead and loses are copied; needs and since are literals. */
struct features_note {
	bool refused;          /* the feature is off; else done another way */
	const char *what;      /* "--events irq", "tp_btf scheduler programs" */
	const char *needs;     /* the kernel feature missing */
	const char *since;     /* the Linux version that has it: "5.11" */
	const char *instead;   /* fallbacks: what is done instead */
	const char *loses;     /* what the run lacks for it, NULL: nothing */
};
#define FEATURES_MAX_NOTES 16
/* since: the Linux version that has `needs`, or NULL for a build option of the kernel. */
void features_fallback(const char *what, const char *needs, const char *since,
		       const char *instead, const char *loses);
void features_refuse(const char *what, const char *needs, const char *since, const char *loses);
const struct features_note *features_notes(int *n);

/* --debug without=FEATURE: take a kernel feature as missing, so an older kernel's
 * code path runs here (tests): bpf-loop, uprobe-cookie, atomics, task-regs,
 * switch-state, ringbuf, fair-group-sched, throttle-self. */
enum {
	TT_WITHOUT_BPF_LOOP = 1u << 0,
	TT_WITHOUT_UPROBE_COOKIE = 1u << 1,
	TT_WITHOUT_ATOMICS = 1u << 2,
	TT_WITHOUT_TASK_REGS = 1u << 3,
	TT_WITHOUT_SWITCH_STATE = 1u << 4,
	TT_WITHOUT_RINGBUF = 1u << 5,
	TT_WITHOUT_FAIR_GROUP_SCHED = 1u << 6,
	TT_WITHOUT_THROTTLE_SELF = 1u << 7,
};
/* "bpf-loop" ... -> its bit, 0 if unknown. */
unsigned features_without_parse(const char *name);
void features_set_without(unsigned mask);

/* The BPF ring buffer (5.8): every stream needs it; the oldest kernel tailtrace runs on. */
bool features_ringbuf(void);

/* Root, or CAP_BPF + CAP_PERFMON (or CAP_SYS_ADMIN)? */
bool features_privileged(void);
/* The kernel BTF path: /sys/kernel/btf/vmlinux, or path (--debug btf=PATH, for tests). */
void features_set_btf_path(const char *path);
const char *features_btf_path(void);
/* Options every BPF object is opened with: the kernel BTF of --debug btf=PATH. */
const struct bpf_object_open_opts *features_open_opts(void);
/* "tp_btf", "raw_tp" or "tracepoint" -> *h: 0, or -EINVAL. */
int features_hook_parse(const char *s, enum tt_hook *h);
/* Pick the best hook type from want on (want < 0: from tp_btf) that loads and
 * attaches here; 0 or -errno with err. */
int features_probe(int want, char *err, size_t len);
enum tt_hook features_hook(void);
const char *features_hook_name(enum tt_hook h);
/* A program named for a hook (NAME_btf, NAME_raw, NAME_tp): 1 if it is hook h's,
 * 0 if another's; -1 if its name ends in none of these. */
int features_prog_variant(const char *name, enum tt_hook h);
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
/* Can the chosen hook's programs read the current task typed
 * (bpf_get_current_task_btf, 5.11)? Wakeup contexts need it (waker_ctx.bpf.h). */
bool features_typed_task(void);
/* How the programs read a sleeping task's user registers (user_regs.bpf.h,
 * user_regs_how): bpf_task_pt_regs, else the top of its kernel stack (x86-64),
 * else not at all (the wait-reason split refused). kernel_thread_size: THREAD_SIZE. */
enum { FEATURES_REGS_NONE = 0, FEATURES_REGS_HELPER = 1, FEATURES_REGS_STACK = 2 };
int features_user_regs(unsigned *kernel_thread_size);
/* Do uprobes take BPF cookies (5.15)? Without, each --span gets programs of its
 * own (spans.bpf.c span_enter_ncN) and exits on return instructions are refused. */
bool features_uprobe_cookie(void);
/* Does the verifier load atomic compare-and-swap (5.12: a load attempt decides)?
 * Without, USDT spans are paired through a hash map only (span_mark_*_hash). */
bool features_atomics(void);
/* Does sched_switch pass prev_state (5.18: its prototype in the kernel's BTF has
 * it)? Without it the programs read the state from prev (sched.bpf.c). */
bool features_switch_state_arg(void);
/* Does the kernel have bpf_loop (5.17)? Without it the scheduler programs come
 * from the object built with bounded loops (sched.c, occupancy.bpf.h). */
bool features_bpf_loop(void);
/* Does the kernel keep its own run-queue wait accounting per task
 * (CONFIG_SCHED_INFO: task->sched_info.run_delay, last_queued, pcount, the
 * figures of /proc/PID/schedstat), with the run-queue clock reachable from a
 * task (se.cfs_rq->rq->clock: CONFIG_FAIR_GROUP_SCHED)? --aggregate reads its
 * waits there. */
bool features_sched_info(void);
/* Is a task's run queue reachable from the task (se.cfs_rq->rq: only in a
 * kernel built with CONFIG_FAIR_GROUP_SCHED)? The wakeup contexts
 * (waker_ctx.bpf.h) and --aggregate's waits (features_sched_info) read it. */
bool features_task_rq(void);
/* Which throttle total of the CFS bandwidth control the switch program reads
 * (enum tt_throttle_clock, sched/throttle.h): cfs_rq.throttled_clock_self_time
 * (6.6+), else cfs_rq.throttled_clock_pelt_time; none without
 * CONFIG_CFS_BANDWIDTH. */
int features_throttle_clock(void);
/* Its name in meta.json: "throttled_clock_self_time", ..., or "none". */
const char *features_throttle_clock_name(int clock);

#endif
