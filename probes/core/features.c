// SPDX-License-Identifier: MIT
#include "core/features.h"
#include "sched/throttle.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/bpf.h>
#include <linux/capability.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_BPF
#define CAP_BPF 39
#endif

#define TRACEFS_SWITCH "/sys/kernel/tracing/events/sched/sched_switch/id"
#define DEBUGFS_SWITCH "/sys/kernel/debug/tracing/events/sched/sched_switch/id"

static enum tt_hook chosen = TT_HOOK_TP_BTF;

static unsigned without; /* --debug without=FEATURE */

static const char *const without_names[] = { "bpf-loop", "uprobe-cookie", "atomics",
					     "task-regs", "switch-state", "ringbuf",
					     "fair-group-sched", "throttle-self" };

unsigned features_without_parse(const char *name)
{
	for (size_t i = 0; i < sizeof(without_names) / sizeof(without_names[0]); i++)
		if (!strcmp(name, without_names[i]))
			return 1u << i;
	return 0;
}

void features_set_without(unsigned mask)
{
	without = mask;
}

static struct features_note notes[FEATURES_MAX_NOTES];
static int nnotes;

static void note_add(bool refused, const char *what, const char *needs, const char *since,
		     const char *instead, const char *loses)
{
	struct features_note *n;

	for (int i = 0; i < nnotes; i++)
		if (!strcmp(notes[i].what, what) && !strcmp(notes[i].needs, needs))
			return; /* said once */
	if (nnotes == FEATURES_MAX_NOTES)
		return;
	n = &notes[nnotes++];
	/* kept for meta.json, written at the end: copies (a --span's text is not a literal) */
	*n = (struct features_note){ .refused = refused, .what = strdup(what), .needs = needs,
				     .since = since, .instead = instead ? strdup(instead) : NULL,
				     .loses = loses ? strdup(loses) : NULL };
	if (!n->what) {
		nnotes--;
		return;
	}
	/* since NULL: a build option of the kernel, in no version by default */
	if (refused)
		fprintf(stderr, "tailtrace: %s needs %s (%s%s%s); recording without it%s%s\n",
			what, needs, since ? "Linux " : "a kernel built with it", since ? since : "",
			since ? "+" : "", loses ? ": " : "", loses ? loses : "");
	else
		fprintf(stderr, "tailtrace: %s need %s (%s%s%s): %s%s%s\n", what, needs,
			since ? "Linux " : "a kernel built with it", since ? since : "",
			since ? "+" : "", instead, loses ? "; " : "", loses ? loses : "");
}

void features_fallback(const char *what, const char *needs, const char *since,
		       const char *instead, const char *loses)
{
	note_add(false, what, needs, since, instead, loses);
}

void features_refuse(const char *what, const char *needs, const char *since, const char *loses)
{
	note_add(true, what, needs, since, NULL, loses);
}

const struct features_note *features_notes(int *n)
{
	*n = nnotes;
	return notes;
}

static const char *const hook_names[] = { "tp_btf", "raw_tp", "tracepoint" };

const char *features_hook_name(enum tt_hook h)
{
	return hook_names[h];
}

enum tt_hook features_hook(void)
{
	return chosen;
}

bool features_privileged(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2] = {};
	__u64 eff;

	if (geteuid() == 0)
		return true;
	if (syscall(SYS_capget, &hdr, data))
		return false;
	eff = ((__u64)data[1].effective << 32) | data[0].effective;
	if (eff & (1ull << CAP_SYS_ADMIN))
		return true;
	return (eff & (1ull << CAP_BPF)) && (eff & (1ull << CAP_PERFMON));
}

#define SYS_BTF "/sys/kernel/btf/vmlinux"
static const char *btf_path = SYS_BTF;

const struct bpf_object_open_opts *features_open_opts(void)
{
	static struct bpf_object_open_opts opts;

	opts.sz = sizeof(opts);
	opts.btf_custom_path = strcmp(btf_path, SYS_BTF) ? btf_path : NULL;
	return &opts;
}

void features_set_btf_path(const char *path)
{
	if (path && *path)
		btf_path = path;
}

const char *features_btf_path(void)
{
	return btf_path;
}

/* r0 = 0; exit */
static const struct bpf_insn ret0[] = {
	{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
	{ .code = BPF_JMP | BPF_EXIT },
};

static int load_trivial(enum bpf_prog_type type, const struct bpf_prog_load_opts *opts)
{
	return bpf_prog_load(type, NULL, "GPL", ret0, 2, opts);
}

/* The running kernel's BTF, parsed once (a few MB: ~20 ms each time). */
static const struct btf *vmlinux_btf(void)
{
	static struct btf *btf;
	static bool tried;

	if (!tried) {
		tried = true;
		btf = strcmp(btf_path, SYS_BTF) ? btf__parse(btf_path, NULL)
						 : btf__load_vmlinux_btf();
	}
	return btf;
}

/* tp_btf programs keep per-thread state in task storage (5.11) and read typed
 * task pointers (bpf_get_current_task_btf, 5.11); without them, raw_tp. */
static bool probe_tp_btf(void)
{
	LIBBPF_OPTS(bpf_prog_load_opts, opts, .expected_attach_type = BPF_TRACE_RAW_TP);
	const struct btf *btf = vmlinux_btf();
	int id, fd, link;

	if (!btf)
		return false;
	if (libbpf_probe_bpf_map_type(BPF_MAP_TYPE_TASK_STORAGE, NULL) <= 0) {
		features_fallback("tp_btf scheduler programs", "task storage", "5.11",
				  "raw_tp programs, per-thread state in tid-keyed hashes", NULL);
		return false;
	}
	id = btf__find_by_name_kind(btf, "btf_trace_sched_switch", BTF_KIND_TYPEDEF);
	if (id <= 0)
		return false;
	opts.attach_btf_id = id;
	fd = load_trivial(BPF_PROG_TYPE_TRACING, &opts);
	if (fd < 0)
		return false;
	link = bpf_raw_tracepoint_open(NULL, fd);
	close(fd);
	if (link < 0)
		return false;
	close(link);
	return true;
}

static bool probe_raw_tp(void)
{
	int fd = load_trivial(BPF_PROG_TYPE_RAW_TRACEPOINT, NULL), link;

	if (fd < 0)
		return false;
	link = bpf_raw_tracepoint_open("sched_switch", fd);
	close(fd);
	if (link < 0)
		return false;
	close(link);
	return true;
}

static bool probe_tracepoint(void)
{
	if (access(TRACEFS_SWITCH, R_OK) == 0 || access(DEBUGFS_SWITCH, R_OK) == 0)
		return true;
	/* tracefs is often not mounted on minimal systems: mount it. */
	if (mount("nodev", "/sys/kernel/tracing", "tracefs", 0, NULL) && errno != EBUSY)
		return false;
	return access(TRACEFS_SWITCH, R_OK) == 0;
}

int features_hook_parse(const char *s, enum tt_hook *h)
{
	for (int i = 0; i <= TT_HOOK_TRACEPOINT; i++)
		if (!strcmp(s, hook_names[i])) {
			*h = (enum tt_hook)i;
			return 0;
		}
	return -EINVAL;
}

int features_probe(int want, char *err, size_t len)
{
	bool ok;

	for (int h = want < 0 ? TT_HOOK_TP_BTF : want; h <= TT_HOOK_TRACEPOINT; h++) {
		ok = h == TT_HOOK_TP_BTF ? probe_tp_btf() :
		     h == TT_HOOK_RAW_TP ? probe_raw_tp() : probe_tracepoint();
		if (ok) {
			chosen = (enum tt_hook)h;
			return 0;
		}
		if (want >= 0) {
			snprintf(err, len, "--debug hook=%s: this kernel cannot attach %s programs",
				 hook_names[h], hook_names[h]);
			return -EOPNOTSUPP;
		}
	}
	snprintf(err, len, "no usable scheduler hook (tp_btf, raw_tp, tracepoint): "
		 "mount tracefs (mount -t tracefs nodev /sys/kernel/tracing)");
	return -EOPNOTSUPP;
}

static bool has_suffix(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);

	return a >= b && !strcmp(s + a - b, suf);
}

int features_prog_variant(const char *name, enum tt_hook h)
{
	static const char *const suffix[] = { "_btf", "_raw", "_tp" };

	for (int i = 0; i < 3; i++)
		if (has_suffix(name, suffix[i]))
			return i == (int)h;
	return -1;
}

void features_select_progs(struct bpf_object *obj, enum tt_hook h)
{
	struct bpf_program *p;
	struct bpf_map *m;

	/* per-thread state: task storage (maps named *_btf) under tp_btf, whose
	 * task pointers are BTF-typed; tid-keyed hashes (*_ids) under the others */
	bpf_object__for_each_map(m, obj) {
		const char *name = bpf_map__name(m);

		if (has_suffix(name, "_btf"))
			bpf_map__set_autocreate(m, h == TT_HOOK_TP_BTF);
		else if (has_suffix(name, "_ids"))
			bpf_map__set_autocreate(m, h != TT_HOOK_TP_BTF);
	}

	bpf_object__for_each_program(p, obj) {
		int mine = features_prog_variant(bpf_program__name(p), h);

		if (mine >= 0)
			bpf_program__set_autoload(p, mine);
	}
}

/* The per-CPU variable `name`'s offset in .data..percpu; its BTF type id in *type_id. */
static int percpu_var(const char *name, long *off, __u32 *type_id)
{
	const struct btf *btf = vmlinux_btf();
	const struct btf_var_secinfo *v;
	const struct btf_type *t, *var;
	int sec;

	if (!btf)
		return -ENOENT;
	sec = btf__find_by_name_kind(btf, ".data..percpu", BTF_KIND_DATASEC);
	if (sec <= 0)
		return -ENOENT;
	t = btf__type_by_id(btf, sec);
	v = btf_var_secinfos(t);
	for (int i = 0; i < btf_vlen(t); i++, v++) {
		var = btf__type_by_id(btf, v->type);
		if (!strcmp(btf__name_by_offset(btf, var->name_off), name)) {
			*off = (long)v->offset;
			*type_id = var->type;
			return 0;
		}
	}
	return -ENOENT;
}

int features_percpu_offset(const char *name, long *off)
{
	__u32 type_id;

	return percpu_var(name, off, &type_id);
}

/* The byte offset of member `name` in struct or union `id`, looking into its anonymous
 * members too. */
static int member_offset(const struct btf *btf, __u32 id, const char *name, long *off)
{
	const struct btf_type *t = btf__type_by_id(btf, btf__resolve_type(btf, id));
	const struct btf_member *m;

	if (!t || (!btf_is_struct(t) && !btf_is_union(t)))
		return -ENOENT;
	m = btf_members(t);
	for (int i = 0; i < btf_vlen(t); i++, m++) {
		long inner;
		const char *mname = btf__name_by_offset(btf, m->name_off);

		if (mname && *mname ? !strcmp(mname, name)
				    : !member_offset(btf, m->type, name, &inner)) {
			*off = (long)(btf_member_bit_offset(t, i) / 8) + (mname && *mname ? 0 : inner);
			return 0;
		}
	}
	return -ENOENT;
}

/* A per-CPU variable of its own, or (Linux 6.2 to 6.14) a member of x86's
 * struct pcpu_hot, which held current_task and preempt_count together. */
static int percpu_hot(const char *var, const char *member, long *off)
{
	long hot;
	__u32 type_id;

	if (!features_percpu_offset(var, off))
		return 0;
	if (percpu_var("pcpu_hot", &hot, &type_id) ||
	    member_offset(vmlinux_btf(), type_id, member, off))
		return -ENOENT;
	*off += hot;
	return 0;
}

int features_percpu_layout(long *runqueues, long *preempt_count, long *current_task)
{
	return features_percpu_offset("runqueues", runqueues) ?:
	       percpu_hot("__preempt_count", "preempt_count", preempt_count) ?:
	       percpu_hot("current_task", "current_task", current_task);
}

/* The program type the chosen hook loads as (tp_btf programs get the helpers
 * of raw tracepoints plus their own). */
static enum bpf_prog_type hook_prog_type(enum tt_hook h)
{
	return h == TT_HOOK_TRACEPOINT ? BPF_PROG_TYPE_TRACEPOINT : BPF_PROG_TYPE_RAW_TRACEPOINT;
}

bool features_typed_task(void)
{
	static int cached = -1;

	if (cached < 0)
		cached = libbpf_probe_bpf_helper(hook_prog_type(chosen),
						 BPF_FUNC_get_current_task_btf, NULL) > 0;
	return cached;
}

bool features_task_regs(void)
{
	static int cached = -1;
	enum bpf_prog_type t = hook_prog_type(chosen);

	if (cached < 0)
		cached = !(without & TT_WITHOUT_TASK_REGS) &&
			 libbpf_probe_bpf_helper(t, BPF_FUNC_task_pt_regs, NULL) > 0 &&
			 features_typed_task();
	return cached;
}

static bool btf_has_members(const struct btf *btf, const char *name, const char *const *want,
			    size_t n);

/* THREAD_SIZE on x86-64: 16 KiB, twice that with KASAN (its functions are in BTF). */
static unsigned thread_size(void)
{
	const struct btf *btf = vmlinux_btf();

	return btf && btf__find_by_name_kind(btf, "kasan_report", BTF_KIND_FUNC) > 0 ? 32768
										    : 16384;
}

int features_user_regs(unsigned *kernel_thread_size)
{
	static int cached = -1;
	const struct btf *btf;
	static const char *const stack[] = { "stack" };

	*kernel_thread_size = thread_size();
	if (cached >= 0)
		return cached;
	if (features_task_regs())
		return cached = FEATURES_REGS_HELPER;
#if defined(__x86_64__)
	btf = vmlinux_btf();
	if (btf && btf_has_members(btf, "task_struct", stack, 1)) {
		if (chosen == TT_HOOK_TP_BTF)
			features_fallback("wait reasons", "bpf_task_pt_regs", "5.15",
					  "the user registers read at the top of the task's kernel "
					  "stack (x86-64's task_pt_regs)", NULL);
		return cached = FEATURES_REGS_STACK;
	}
#endif
	features_refuse("the wait-reason split", "bpf_task_pt_regs", "5.15",
			"blocked time is not split into lock, I/O and sleep");
	return cached = FEATURES_REGS_NONE;
}

bool features_ringbuf(void)
{
	return !(without & TT_WITHOUT_RINGBUF) &&
	       libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, NULL) > 0;
}

bool features_uprobe_cookie(void)
{
	static int cached = -1;

	if (cached < 0)
		cached = !(without & TT_WITHOUT_UPROBE_COOKIE) &&
			 libbpf_probe_bpf_helper(BPF_PROG_TYPE_KPROBE, BPF_FUNC_get_attach_cookie,
						 NULL) > 0;
	return cached;
}

/* r1 = 0; *(u64 *)(fp - 8) = r1; r0 = 0; r0 = cmpxchg(fp - 8, r0, r1); r0 = 0; exit */
static const struct bpf_insn cmpxchg_prog[] = {
	{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_1, .imm = 0 },
	{ .code = BPF_STX | BPF_MEM | BPF_DW, .dst_reg = BPF_REG_10, .src_reg = BPF_REG_1, .off = -8 },
	{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
	{ .code = BPF_STX | BPF_ATOMIC | BPF_DW, .dst_reg = BPF_REG_10, .src_reg = BPF_REG_1,
	  .off = -8, .imm = BPF_CMPXCHG },
	{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
	{ .code = BPF_JMP | BPF_EXIT },
};

bool features_atomics(void)
{
	static int cached = -1;
	int fd;

	if (cached < 0 && (without & TT_WITHOUT_ATOMICS))
		cached = 0;
	if (cached < 0) {
		fd = bpf_prog_load(BPF_PROG_TYPE_KPROBE, NULL, "GPL", cmpxchg_prog,
				   sizeof(cmpxchg_prog) / sizeof(cmpxchg_prog[0]), NULL);
		cached = fd >= 0;
		if (fd >= 0)
			close(fd);
	}
	return cached;
}

bool features_switch_state_arg(void)
{
	const struct btf *btf = vmlinux_btf();
	const struct btf_type *t;
	int id;

	if (without & TT_WITHOUT_SWITCH_STATE)
		return false;
	if (!btf || (id = btf__find_by_name_kind(btf, "btf_trace_sched_switch",
						 BTF_KIND_TYPEDEF)) <= 0)
		return true;
	t = btf__type_by_id(btf, id);                /* typedef -> pointer -> prototype */
	t = btf__type_by_id(btf, t->type);
	t = btf_is_ptr(t) ? btf__type_by_id(btf, t->type) : t;
	return !btf_is_func_proto(t) || btf_vlen(t) >= 5; /* void *, preempt, prev, next, state */
}

bool features_bpf_loop(void)
{
	static int cached = -1;

	if (cached < 0)
		cached = !(without & TT_WITHOUT_BPF_LOOP) &&
			 libbpf_probe_bpf_helper(hook_prog_type(chosen), BPF_FUNC_loop, NULL) > 0;
	return cached;
}

/* Does struct `name` have every member in want[n]? */
static bool btf_has_members(const struct btf *btf, const char *name, const char *const *want,
			    size_t n)
{
	const struct btf_member *m;
	const struct btf_type *t;
	int id = btf__find_by_name_kind(btf, name, BTF_KIND_STRUCT);
	size_t found = 0;

	if (id <= 0)
		return false;
	t = btf__type_by_id(btf, id);
	m = btf_members(t);
	for (int i = 0; i < btf_vlen(t); i++, m++)
		for (size_t k = 0; k < n; k++)
			found += !strcmp(btf__name_by_offset(btf, m->name_off), want[k]);
	return found == n;
}

bool features_task_rq(void)
{
	static const char *const se[] = { "cfs_rq" };
	static const char *const cfs_rq[] = { "rq" };
	const struct btf *btf = vmlinux_btf();

	return !(without & TT_WITHOUT_FAIR_GROUP_SCHED) && btf &&
	       btf_has_members(btf, "sched_entity", se, 1) &&
	       btf_has_members(btf, "cfs_rq", cfs_rq, 1);
}

/* Every field runq_kacct_*() reads (runq_switch.bpf.h), the run queue's clock
 * reached from the task (features_task_rq). */
static bool sched_info_fields(const struct btf *btf)
{
	static const char *const info[] = { "pcount", "run_delay", "last_queued" };
	static const char *const se[] = { "nr_migrations" };
	static const char *const rq[] = { "clock" };

	return btf_has_members(btf, "sched_info", info, 3) &&
	       btf_has_members(btf, "sched_entity", se, 1) && features_task_rq() &&
	       btf_has_members(btf, "rq", rq, 1);
}

bool features_sched_info(void)
{
	static int cached = -1;
	const struct btf *btf;

	if (cached < 0) {
		btf = vmlinux_btf();
		cached = btf && sched_info_fields(btf);
	}
	return cached;
}

int features_throttle_clock(void)
{
	static const char *const self[] = { "throttled_clock_self", "throttled_clock_self_time",
					    "rq" };
	static const char *const pelt[] = { "throttled_clock_pelt", "throttled_clock_pelt_time",
					    "throttle_count", "rq" };
	static const char *const rq[] = { "clock", "clock_pelt", "lost_idle_time" };
	const struct btf *btf = vmlinux_btf();

	if (!btf || !features_task_rq())
		return TT_THROTTLE_NONE;
	if (!(without & TT_WITHOUT_THROTTLE_SELF) && btf_has_members(btf, "cfs_rq", self, 3))
		return TT_THROTTLE_SELF;
	if (btf_has_members(btf, "cfs_rq", pelt, 4) && btf_has_members(btf, "rq", rq, 3))
		return TT_THROTTLE_PELT;
	return TT_THROTTLE_NONE;
}

const char *features_throttle_clock_name(int clock)
{
	return clock == TT_THROTTLE_SELF ? "throttled_clock_self_time" :
	       clock == TT_THROTTLE_PELT ? "throttled_clock_pelt_time" : "none";
}
