/* SPDX-License-Identifier: MIT */
/*
 * tailtrace record layouts: the one source of truth.
 *
 * Every record that crosses the run directory (docs/architecture.md) is declared
 * here exactly once, as an X-macro field list. From that list we generate:
 *   - the C struct (used by BPF programs, the tailtrace loader, the workloads),
 *   - the JSON schema (`tt-schema`, and `schema.json` in every run directory)
 *     that the Python analysis turns into a numpy dtype.
 * So the layout is never written twice by hand.
 *
 * Rules: fixed-size little-endian fields, naturally aligned, explicit padding,
 * struct size a multiple of 8. All timestamps are CLOCK_MONOTONIC ns
 * (bpf_ktime_get_ns() is that clock).
 *
 * Include either vmlinux.h (BPF side) or nothing (user side: <linux/types.h>
 * is pulled in below).
 */
#ifndef TAILTRACE_RECORDS_H
#define TAILTRACE_RECORDS_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define TT_T_u8  __u8
#define TT_T_u16 __u16
#define TT_T_u32 __u32
#define TT_T_u64 __u64
#define TT_T_s32 __s32
#define TT_T_s64 __s64
#define TT_T_char char

/* F(type, name)          scalar field
 * A(type, name, count)   fixed array (char arrays are NUL-padded strings) */

/* requests.bin: one per HTTP request issued by httpload. */
#define TT_REQUEST_FIELDS(F, A)                                              \
	F(u64, id)           /* request index, 0..N-1 */                     \
	F(u64, t_enqueue_ns) /* created / queued; open loop: its due time */ \
	F(u64, t_start_ns)   /* a worker began it (curl perform start) */    \
	F(u64, t_end_ns)     /* response complete or error */                \
	F(u64, bytes)        /* response body bytes */                       \
	F(u32, conn)         /* logical connection id */                     \
	F(u32, tid)          /* thread that executed it (gettid) */          \
	F(u32, pid)                                                          \
	F(s32, status)       /* HTTP code, or -CURLcode on transport error */

/* runq.bin: one per runnable interval of a traced thread. */
#define TT_RUNQ_FIELDS(F, A)                                                 \
	F(u64, t_runnable_ns) /* wakeup, or switch-out while still running */\
	F(u64, t_run_ns)      /* switched in */                              \
	F(u32, pid)                                                          \
	F(u32, tid)                                                          \
	F(u32, cpu)           /* CPU it finally ran on */                    \
	F(u32, waker_tid)     /* task that woke it (sched_waking); 0: none   \
	                       * (preemption) or unknown (see waker_ctx) */  \
	F(u32, waker_pid)     /* the waker's process (tgid) */               \
	F(u8, kind)           /* enum tt_runq_kind */                        \
	F(u8, waker_ctx)      /* enum tt_waker_ctx */                        \
	A(u8, pad, 2)                                                        \
	F(u64, throttled_ns)  /* of the wait, its first throttled_ns: its    \
	                       * cgroup or an ancestor was throttled by its  \
	                       * CPU quota (probes/sched/throttle.bpf.h) */

enum tt_runq_kind {
	TT_RUNQ_WAKEUP = 0,     /* R: woken by another task */
	TT_RUNQ_PREEMPT = 1,    /* R+: preempted while runnable */
	TT_RUNQ_WAKEUP_NEW = 2, /* new task's first run */
};

/* In what context the wakeup ran (sched_waking fires in the waker's context).
 * Only TT_WAKER_TASK and TT_WAKER_SOFTIRQ_TASK name a task that ended the
 * wait; an interrupt is never blamed on the task it interrupted. */
enum tt_waker_ctx {
	TT_WAKER_NONE = 0,         /* preemption: nobody woke it */
	TT_WAKER_TASK = 1,         /* a task, in process context */
	TT_WAKER_HARDIRQ = 2,      /* hard IRQ or NMI (timers, device interrupts) */
	TT_WAKER_SOFTIRQ = 3,      /* softirq at IRQ exit or in ksoftirqd */
	TT_WAKER_SOFTIRQ_TASK = 4, /* softirq run inside the waker's own syscall
				    * (e.g. a loopback send): the task caused it */
	TT_WAKER_UNKNOWN = 5,      /* sched_waking not seen for this wakeup */
	TT_WAKER_TASK_GUESS = 6,   /* a task, unless an interrupt borrowed it:
				    * preempt_count could not be read */
};

/* switches.bin: one per off-CPU interval of a traced thread. */
#define TT_SWITCH_FIELDS(F, A)                                               \
	F(u64, t_off_ns)                                                     \
	F(u64, t_on_ns)                                                      \
	F(u64, wait_addr)     /* blocked in a syscall: its first argument    \
	                       * (futex address, fd, pollfd array) */        \
	F(u32, pid)                                                          \
	F(u32, tid)                                                          \
	F(u32, cpu_off)       /* CPU it left */                              \
	F(u32, cpu_on)        /* CPU it came back on */                      \
	F(s32, kstack_id)     /* -1: none / below threshold */               \
	F(s32, ustack_id)                                                    \
	F(u32, prev_state)    /* task state at switch-out (0 = runnable) */  \
	F(s32, syscall)       /* syscall it blocked in (arch number); -1:    \
	                       * not in a syscall / preempted / unknown */   \
	F(s32, wait_aux)      /* its second argument (futex op, poll nfds)   \
	                       */                                            \
	F(u8, voluntary)      /* 1: blocked, 0: preempted */                 \
	F(u8, unmatched)      /* 1: a gap, not an interval: the kernel never \
	                       * reported one edge (switch-in or switch-out) \
	                       * between t_off_ns and t_on_ns, so the        \
	                       * thread's state there is unknown */          \
	A(u8, pad, 2)

/* locks.bin: one per pthread mutex acquisition (released or not). */
#define TT_LOCK_FIELDS(F, A)                                                 \
	F(u64, mutex)         /* mutex address in the target */              \
	F(u64, t_request_ns)  /* lock() entered */                           \
	F(u64, t_acquired_ns) /* lock() returned 0 */                        \
	F(u64, t_released_ns) /* unlock() entered; 0 if never seen */        \
	F(u32, pid)                                                          \
	F(u32, tid)                                                          \
	F(s32, ustack_id)     /* acquirer's user stack, -1 if not taken */   \
	F(u32, flags)         /* TT_LOCK_* */

#define TT_LOCK_TRYLOCK   0x1 /* acquired through pthread_mutex_trylock */
#define TT_LOCK_CONTENDED 0x2 /* acquisition had to wait (futex path) */
#define TT_LOCK_CONDVAR   0x4 /* re-acquired on return from pthread_cond_*wait */

/* spans.bin: one per call of a --span function (entry to return or unwind). */
#define TT_SPAN_FIELDS(F, A)                                                 \
	F(u64, t_start_ns)                                                   \
	F(u64, t_end_ns)                                                     \
	F(s64, ret)           /* function's return value (0 if it did not    \
	                       * return: see end) */                         \
	F(u64, goroutine)     /* Go: the goroutine's runtime.g address (the  \
	                       * span's key); 0: keyed by thread */          \
	F(u32, pid)                                                          \
	F(u32, tid)           /* thread that entered the function */         \
	F(u32, end_tid)       /* thread it ended on (differs for goroutines) \
	                       */                                            \
	F(u32, span_id)       /* index of the --span option */               \
	F(u32, depth)         /* nesting depth on this thread, 0 = outer */  \
	F(u32, end)           /* enum tt_span_end */

/* span_contexts.bin: the W3C trace context a tcp:PORT request carried (its
 * traceparent header, probes/spans/spans.bpf.c tcp_read) and its answer's
 * (traceresponse, tcp_answer_read), with the request's tracestate header when
 * it carried a traceparent, for the span at span_row of spans.bin,
 * which tid, t_start_ns and t_end_ns name too (a flight-recorder capture keeps
 * some of the spans: its rows are not the recorder's). The values are as they
 * came, up to their line's end: the analysis parses and checks them (a
 * malformed one is counted, not trusted). */
#define TT_SPAN_CONTEXT_FIELDS(F, A)                                         \
	F(u64, span_row)      /* the span's row in spans.bin, from 0 */      \
	F(u64, t_start_ns)    /* the span's start and end (CLOCK_MONOTONIC) */ \
	F(u64, t_end_ns)                                                     \
	F(u32, tid)           /* the span's thread */                        \
	F(u32, pad)                                                          \
	A(char, traceparent, 64) /* the request's header, NUL-padded */      \
	A(char, traceresponse, 64) /* the answer's header, NUL-padded */      \
	A(char, tracestate, 512) /* the request's tracestate header, NUL-padded */

/* How a span ended. Only TT_SPAN_RETURN has a return value. */
enum tt_span_end {
	TT_SPAN_RETURN = 0,    /* it returned (ret instruction or uretprobe) */
	TT_SPAN_EXCEPTION = 1, /* a C++ exception left it: ends at the catch */
	TT_SPAN_LONGJMP = 2,   /* longjmp left it: ends at the longjmp */
	TT_SPAN_TAILCALL = 3,  /* it tail-called a function that was not followed
				* (through the GOT, another file): ends at the jump */
};

/* tasks.bin: one per traced thread, written when tracing ends. */
#define TT_TASK_FIELDS(F, A)                                                 \
	F(u64, migrations)    /* sched_migrate_task count */                 \
	F(u32, pid)                                                          \
	F(u32, tid)                                                          \
	A(char, comm, 16)                                                    \
	F(u32, ns_pid)        /* pid and tid in the thread's own PID         \
	                       * namespace (a container's): equal to pid,    \
	                       * tid in the host's; 0: not read */           \
	F(u32, ns_tid)

/* occupancy.bin: who held a CPU while a traced thread waited for it
 * (probes/sched/occupancy.h). Each record: from t_ns, tid ran on cpu, until that
 * cpu's next record. Written only around traced threads' runnable intervals. */
#define TT_OCC_FIELDS(F, A)                                                  \
	F(u64, t_ns)          /* tid switched in on cpu */                   \
	F(u32, cpu)                                                          \
	F(u32, tid)           /* 0: idle */                                  \
	F(u32, pid)           /* its process (tgid); 0: idle */              \
	F(u32, flags)         /* TT_OCC_* */

#define TT_OCC_KTHREAD 0x1 /* a kernel thread */
#define TT_OCC_TRUNC 0x2   /* what ran on the CPU between the wait's start and this
			    * switch is unknown (too many switches to remember) */
#define TT_OCC_TRACED 0x4  /* a traced thread */
#define TT_OCC_HARDIRQ 0x8  /* the irq event: a hard IRQ handler ran (tid, pid 0); its irq
			     * number in flags >> TT_OCC_IRQ_SHIFT (meta.json "irqs" names it),
			     * TT_OCC_IRQ_TIMER for the local timer interrupt */
#define TT_OCC_SOFTIRQ 0x10 /* the irq event: a softirq ran (tid, pid 0); its vector
			     * (0 HI, 1 TIMER, 2 NET_TX, 3 NET_RX, ...) in flags >> 16 */
#define TT_OCC_IRQ_SHIFT 16
#define TT_OCC_IRQ_TIMER 0xffff

/* occupants.bin: one per task named in occupancy.bin (traced or not), written
 * when tracing ends. */
#define TT_OCCUPANT_FIELDS(F, A)                                             \
	F(u64, cgroup_id)     /* cgroup v2 id (meta.json cgroups: its path) */ \
	F(u32, pid)                                                          \
	F(u32, tid)                                                          \
	F(u32, flags)         /* TT_OCC_KTHREAD, TT_OCC_TRACED */            \
	F(u32, reused)        /* the tid named other tasks too (pid reuse):  \
	                       * this row is the last one seen */            \
	A(char, comm, 16)

/* ---- generated structs ------------------------------------------------ */
#define TT_DECL_F(t, n) TT_T_##t n;
#define TT_DECL_A(t, n, c) TT_T_##t n[c];

struct tt_request { TT_REQUEST_FIELDS(TT_DECL_F, TT_DECL_A) };
struct tt_runq    { TT_RUNQ_FIELDS(TT_DECL_F, TT_DECL_A) };
struct tt_switch  { TT_SWITCH_FIELDS(TT_DECL_F, TT_DECL_A) };
struct tt_lock    { TT_LOCK_FIELDS(TT_DECL_F, TT_DECL_A) };
struct tt_span    { TT_SPAN_FIELDS(TT_DECL_F, TT_DECL_A) };
struct tt_span_context { TT_SPAN_CONTEXT_FIELDS(TT_DECL_F, TT_DECL_A) };
struct tt_task    { TT_TASK_FIELDS(TT_DECL_F, TT_DECL_A) };
struct tt_occ     { TT_OCC_FIELDS(TT_DECL_F, TT_DECL_A) };
struct tt_occupant { TT_OCCUPANT_FIELDS(TT_DECL_F, TT_DECL_A) };

/* Record type ids, stored in each file's header. */
enum tt_rec_type {
	TT_REC_REQUEST = 1,
	TT_REC_RUNQ = 2,
	TT_REC_SWITCH = 3,
	TT_REC_LOCK = 4,
	TT_REC_SPAN = 5,
	TT_REC_TASK = 6,
	TT_REC_OCC = 7,
	TT_REC_OCCUPANT = 8,
	TT_REC_SPAN_CONTEXT = 9,
};
#define TT_REC_TYPES 10 /* enum tt_rec_type values are below this */

/* Every .bin file starts with this 16-byte header, then records back to back. */
#define TT_FILE_MAGIC "TTREC01" /* 7 chars + NUL = 8 bytes */
struct tt_file_header {
	char magic[8];
	__u32 rec_type;
	__u32 rec_size;
};

/* X-list of record kinds: X(kind, STRUCT, TYPE_ID, FIELDS, file name) */
#define TT_RECORD_KINDS(X)                                                       \
	X(request, tt_request, TT_REC_REQUEST, TT_REQUEST_FIELDS, "requests.bin")  \
	X(runq, tt_runq, TT_REC_RUNQ, TT_RUNQ_FIELDS, "runq.bin")                  \
	X(switch, tt_switch, TT_REC_SWITCH, TT_SWITCH_FIELDS, "switches.bin")      \
	X(lock, tt_lock, TT_REC_LOCK, TT_LOCK_FIELDS, "locks.bin")                 \
	X(span, tt_span, TT_REC_SPAN, TT_SPAN_FIELDS, "spans.bin")                 \
	X(task, tt_task, TT_REC_TASK, TT_TASK_FIELDS, "tasks.bin")                 \
	X(occ, tt_occ, TT_REC_OCC, TT_OCC_FIELDS, "occupancy.bin")                 \
	X(occupant, tt_occupant, TT_REC_OCCUPANT, TT_OCCUPANT_FIELDS, "occupants.bin") \
	X(span_context, tt_span_context, TT_REC_SPAN_CONTEXT, TT_SPAN_CONTEXT_FIELDS,     \
	  "span_contexts.bin")

#endif /* TAILTRACE_RECORDS_H */
