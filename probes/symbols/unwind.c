// SPDX-License-Identifier: MIT
/* User stacks from copies of their top, through libdwfl (unwind.h). */
#include "symbols/unwind.h"
#include "symbols/syms.h"
#include "core/target.h"

#include <dwarf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <grow.h>
#include <tt_clock.h>

const char *const unwind_end_names[UNWIND_END_NR] = {
	"outermost", "copy_ended", "no_cfi", "no_object", "depth", "error", "process_gone",
};

/* A process's maps are read again when an address falls outside its modules:
 * at once the first time (an exec, a dlopen), then, while reading them again
 * explained nothing (JIT code), at most this often. */
#define REPORT_EVERY_NS 200000000ull
/* The processes are checked this often for an exit (a process that exited sends
 * no copy to say so); one seen gone is forgotten, its files closed, this long
 * after, when copies still in the rings have been unwound by them. */
#define SWEEP_EVERY_NS 1000000000ull
#define GONE_KEEP_NS 5000000000ull

/* Where a module's file is found (module_find_elf): the module's userdata. */
struct module_file {
	int pid;
	bool deleted;       /* "(deleted)" in the maps, or replaced on disk since */
	bool host_root;     /* the process sees the same / as tailtrace */
	uint64_t start, end; /* one mapping of it: its /proc/PID/map_files name */
	struct module_file *next;
};

struct process {
	int pid;
	Dwfl *dwfl;
	bool attached;
	bool host_root;
	bool gone;             /* it exited: its maps held no executable file, or it was
				* seen a zombie or reaped */
	bool miss_unexplained; /* the maps read for an address outside them lacked it too */
	uint64_t start_ticks;  /* its start time (target_start_time): a pid reused is
				* another process */
	uint64_t reported_ns, gone_ns;
	struct module_file *files;
};

struct unwinder {
	struct process *procs;
	size_t nprocs, cap;
	/* the unwind under way (one at a time: the callbacks find it here) */
	const struct unwind_copy *copy;
	struct unwind_stack *out;
	bool read_beyond; /* the unwind wanted a word above the copied bytes */
	uint64_t swept_ns;
	struct unwinder_counts counts;
};

/* ---- a process's modules ------------------------------------------------- */

static int module_find_elf(Dwfl_Module *mod, void **userdata, const char *name,
			   Dwarf_Addr base, char **file_name, Elf **elfp)
{
	const struct module_file *m = *userdata;
	char path[PATH_MAX];
	int fd = -1;

	(void)mod;
	(void)base;
	*elfp = NULL;
	if (!m)
		return -1;
	if (!m->deleted) {
		if (m->host_root)
			snprintf(path, sizeof(path), "%s", name);
		else
			snprintf(path, sizeof(path), "/proc/%d/root%s", m->pid, name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
	}
	if (fd < 0) { /* gone from its path: the file the process still maps */
		snprintf(path, sizeof(path), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, m->pid,
			 m->start, m->end);
		fd = open(path, O_RDONLY | O_CLOEXEC);
	}
	if (fd >= 0)
		*file_name = strdup(path);
	return fd;
}

static char *debuginfo_path; /* NULL: libdwfl's default, ":.debug:/usr/lib/debug" */

/* Local debug files only (by build id): the unwind runs in the recording's poll
 * loop, which a debuginfod download must not stall. */
static const Dwfl_Callbacks process_callbacks = {
	.find_elf = module_find_elf,
	.find_debuginfo = dwfl_build_id_find_debuginfo,
	.debuginfo_path = &debuginfo_path,
};

/* One file's mappings as read so far from the maps. */
struct maps_group {
	char path[PATH_MAX];
	unsigned long ino;
	uint64_t start, end, first_end;
	bool exec, usable, deleted;
};

/* A file whose mapped inode is not the one at its path now: replaced (an
 * upgrade), so the mapping is read through map_files. */
static bool replaced(const struct process *p, const struct maps_group *g)
{
	char path[PATH_MAX];
	struct stat st;

	if ((p->host_root ? snprintf(path, sizeof(path), "%s", g->path)
			  : snprintf(path, sizeof(path), "/proc/%d/root%s", p->pid, g->path)) >=
	    (int)sizeof(path))
		return true;
	return stat(path, &st) || st.st_ino != g->ino;
}

/* Reports one file's mappings as a module; 1 if it is one (new or known). */
static int group_report(struct process *p, struct maps_group *g)
{
	Dwfl_Module *mod;
	void **userdata;
	struct module_file *m;

	if (!g->usable || !g->exec)
		return 0;
	mod = dwfl_report_module(p->dwfl, g->path, g->start, g->end);
	if (!mod || !dwfl_module_info(mod, &userdata, NULL, NULL, NULL, NULL, NULL, NULL))
		return 0;
	if (*userdata)
		return 1;
	m = calloc(1, sizeof(*m));
	if (!m)
		return 0;
	*m = (struct module_file){ .pid = p->pid, .host_root = p->host_root, .start = g->start,
				   .end = g->first_end, .next = p->files };
	m->deleted = g->deleted || replaced(p, g);
	p->files = m;
	*userdata = m;
	return 1;
}

/* Report the process's executable file mappings as modules (one a file, from
 * its first mapping, which maps the file's start, to its last): the set as the
 * maps hold it now, so an exec's new image replaces the old one's modules. */
static int process_report(struct process *p)
{
	char line[PATH_MAX + 128], path[PATH_MAX];
	struct maps_group g = { .usable = false };
	unsigned long long start, end, pgoff;
	unsigned long ino;
	char perms[8];
	FILE *f;
	int n, files = 0;

	snprintf(line, sizeof(line), "/proc/%d/maps", p->pid);
	f = fopen(line, "re");
	if (!f) {
		p->gone = errno == ENOENT || errno == ESRCH; /* reaped already */
		return -errno;
	}
	if (!fgets(line, sizeof(line), f)) { /* a zombie's maps are empty: keep what was read */
		fclose(f);
		p->gone = true;
		return -ESRCH;
	}
	dwfl_report_begin(p->dwfl);
	do {
		path[0] = 0;
		if (sscanf(line, "%llx-%llx %7s %llx %*x:%*x %lu %n", &start, &end, perms, &pgoff,
			   &ino, &n) < 5)
			continue;
		snprintf(path, sizeof(path), "%s", line + n);
		path[strcspn(path, "\n")] = 0;
		if (path[0] != '/') {
			files += group_report(p, &g);
			g.usable = false;
			continue;
		}
		bool deleted = false;
		size_t len = strlen(path);

		if (len > 10 && !strcmp(path + len - 10, " (deleted)")) {
			path[len - 10] = 0;
			deleted = true;
		}
		if (g.usable && ino == g.ino && !strcmp(path, g.path) && start >= g.end) {
			g.end = end;
			g.exec |= perms[2] == 'x';
			continue;
		}
		files += group_report(p, &g);
		g = (struct maps_group){ .ino = ino, .start = start, .end = end, .first_end = end,
					 .exec = perms[2] == 'x', .usable = pgoff == 0,
					 .deleted = deleted };
		snprintf(g.path, sizeof(g.path), "%s", path);
	} while (fgets(line, sizeof(line), f));
	files += group_report(p, &g);
	fclose(f);
	p->reported_ns = tt_now_ns();
	p->gone = files == 0;
	return dwfl_report_end(p->dwfl, NULL, NULL) ? -EINVAL : 0;
}

/* ---- the copy, as libdwfl's thread ---------------------------------------- */

static pid_t copy_next_thread(Dwfl *dwfl, void *arg, void **thread_arg)
{
	struct unwinder *u = arg;

	(void)dwfl;
	if (*thread_arg)
		return 0;
	*thread_arg = u;
	return u->copy->tid;
}

static bool copy_get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_arg)
{
	(void)dwfl;
	(void)tid;
	*thread_arg = arg;
	return true;
}

static void note_read(struct unwind_stack *o, uint64_t off)
{
	for (int i = o->nreads - 1; i >= 0 && i >= o->nreads - 4; i--)
		if (o->reads[i] == off)
			return;
	if (o->nreads < UNWIND_MAX_READS)
		o->reads[o->nreads++] = (uint16_t)off;
}

static bool copy_memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
	struct unwinder *u = arg;
	const struct unwind_copy *c = u->copy;
	uint64_t sp = c->regs[UNWIND_SP];

	(void)dwfl;
	if (addr < sp || addr - sp > c->size - sizeof(*result) || c->size < sizeof(*result)) {
		/* just above the copy: the stack goes on, deeper than was copied */
		if (addr >= sp && addr - sp < c->size + (1u << 20))
			u->read_beyond = true;
		return false;
	}
	memcpy(result, c->stack + (addr - sp), sizeof(*result));
	for (int i = 0; i < c->nreturns; i++)
		if (c->returns[i].slot == addr) /* a uretprobe's trampoline: the caller it replaced */
			*result = c->returns[i].ip;
	note_read(u->out, addr - sp);
	return true;
}

/* x86-64 DWARF register numbers: rbx 3, rbp 6, rsp 7, r12-r15 12-15. */
static bool copy_set_registers(Dwfl_Thread *thread, void *arg)
{
	struct unwinder *u = arg;
	const uint64_t *r = u->copy->regs;
	Dwarf_Word bx = r[UNWIND_BX], bp_sp[2] = { r[UNWIND_BP], r[UNWIND_SP] };
	Dwarf_Word r12_15[4] = { r[UNWIND_R12], r[UNWIND_R13], r[UNWIND_R14], r[UNWIND_R15] };

	if (!dwfl_thread_state_registers(thread, 3, 1, &bx) ||
	    !dwfl_thread_state_registers(thread, 6, 2, bp_sp) ||
	    !dwfl_thread_state_registers(thread, 12, 4, r12_15))
		return false;
	dwfl_thread_state_register_pc(thread, r[UNWIND_IP]);
	return true;
}

static const Dwfl_Thread_Callbacks copy_callbacks = {
	.next_thread = copy_next_thread,
	.get_thread = copy_get_thread,
	.memory_read = copy_memory_read,
	.set_initial_registers = copy_set_registers,
};

/* ---- unwinding ------------------------------------------------------------- */

static void process_free(struct process *p)
{
	struct module_file *m = p->files, *next;

	dwfl_end(p->dwfl);
	for (; m; m = next) {
		next = m->next;
		free(m);
	}
}

/* Processes that exited are marked so, and forgotten GONE_KEEP_NS later; a pid
 * another process now holds is forgotten at once. */
static void unwinder_sweep(struct unwinder *u)
{
	uint64_t now = tt_now_ns();

	if (now - u->swept_ns < SWEEP_EVERY_NS)
		return;
	u->swept_ns = now;
	for (size_t i = 0; i < u->nprocs;) {
		struct process *p = &u->procs[i];
		bool reused = false;

		if (!p->gone && target_pid_exited(p->pid, -1))
			p->gone = true;
		else if (!p->gone)
			reused = target_start_time(p->pid) != p->start_ticks;
		if (p->gone && !p->gone_ns)
			p->gone_ns = now;
		if (reused || (p->gone && now - p->gone_ns > GONE_KEEP_NS)) {
			process_free(p);
			u->procs[i] = u->procs[--u->nprocs];
			u->counts.forgotten++;
			continue;
		}
		i++;
	}
}

static struct process *process_find(struct unwinder *u, int pid)
{
	for (size_t i = 0; i < u->nprocs; i++)
		if (u->procs[i].pid == pid)
			return &u->procs[i];
	return NULL;
}

/* Its maps read again, and libdwfl attached to its copies once they held files. */
static void process_attach(struct unwinder *u, struct process *p)
{
	if (process_report(p) == 0 && !p->attached)
		p->attached = dwfl_attach_state(p->dwfl, NULL, p->pid, &copy_callbacks, u);
}

static struct process *process_get(struct unwinder *u, int pid)
{
	struct process *p = process_find(u, pid);

	if (p)
		return p;
	if (TT_GROW(u->procs, u->nprocs, u->cap, 16))
		return NULL;
	p = &u->procs[u->nprocs];
	*p = (struct process){ .pid = pid, .host_root = syms_shares_root(pid),
			       .start_ticks = target_start_time(pid) };
	p->dwfl = dwfl_begin(&process_callbacks);
	if (!p->dwfl)
		return NULL;
	u->nprocs++;
	u->counts.processes++;
	if (u->nprocs > u->counts.peak)
		u->counts.peak = u->nprocs;
	process_attach(u, p);
	return p;
}

static int frame_note(Dwfl_Frame *state, void *arg)
{
	struct unwinder *u = arg;
	struct unwind_stack *o = u->out;
	Dwarf_Addr pc;
	bool activation;

	if (!dwfl_frame_pc(state, &pc, &activation))
		return DWARF_CB_ABORT;
	if (o->n >= UNWIND_MAX_FRAMES) {
		o->end = UNWIND_END_DEPTH;
		return DWARF_CB_ABORT;
	}
	o->ips[o->n++] = pc;
	return DWARF_CB_OK;
}

/* Why an unwind that returned an error stopped where it did. */
static void note_end(struct unwinder *u, Dwfl *dwfl, struct unwind_stack *o)
{
	Dwfl_Module *mod;
	const char *name, *slash;

	if (o->end == UNWIND_END_DEPTH)
		return;
	if (u->read_beyond) {
		o->end = UNWIND_END_COPY;
		return;
	}
	mod = o->n ? dwfl_addrmodule(dwfl, o->ips[o->n - 1] - (o->n > 1)) : NULL;
	o->end = mod ? UNWIND_END_NO_CFI : UNWIND_END_NO_OBJECT;
	name = mod ? dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL, NULL, NULL) : NULL;
	if (name) {
		slash = strrchr(name, '/');
		snprintf(o->end_object, sizeof(o->end_object), "%s", slash ? slash + 1 : name);
	}
}

/* The maps are read again for an address outside every module read so far,
 * unless reading them again lately explained nothing; whether it is known now. */
static bool process_explain(struct process *p, uint64_t addr)
{
	if (dwfl_addrmodule(p->dwfl, addr))
		return true;
	if (p->gone || (p->miss_unexplained && tt_now_ns() - p->reported_ns <= REPORT_EVERY_NS))
		return false;
	process_report(p);
	p->miss_unexplained = !dwfl_addrmodule(p->dwfl, addr);
	return !p->miss_unexplained;
}

static void unwind_walk(struct unwinder *u, struct process *p, const struct unwind_copy *c,
			struct unwind_stack *out)
{
	int r;

	memset(out, 0, offsetof(struct unwind_stack, reads));
	out->nreads = 0;
	u->copy = c;
	u->out = out;
	u->read_beyond = false;
	r = dwfl_getthread_frames(p->dwfl, c->tid, frame_note, u);
	/* a word above the copy was wanted: the stack goes on, whatever the walk's
	 * last step made of the failed read (the frame-pointer step ends quietly) */
	if (r == 0 && !u->read_beyond)
		out->end = UNWIND_END_OUTERMOST;
	else
		note_end(u, p->dwfl, out);
	u->copy = NULL;
	u->out = NULL;
}

int unwinder_unwind(struct unwinder *u, const struct unwind_copy *c, struct unwind_stack *out)
{
	struct process *p;
	bool known;

	memset(out, 0, offsetof(struct unwind_stack, reads));
	out->nreads = 0;
	out->end = UNWIND_END_ERROR;
	unwinder_sweep(u);
	p = process_get(u, c->pid);
	if (!p)
		return 0;
	known = process_explain(p, c->regs[UNWIND_IP]);
	/* The copy came after its process exited, from code whose maps were never
	 * read (an image it exec'd): the modules read before cannot unwind it. */
	if (p->gone && !known) {
		out->end = UNWIND_END_GONE;
		return 0;
	}
	if (!p->attached)
		return 0;
	unwind_walk(u, p, c, out);
	/* a caller's frame in code mapped since the maps were read (a dlopen'd
	 * library): once more, if reading them again found it */
	if (out->end == UNWIND_END_NO_OBJECT && out->n > 1 &&
	    process_explain(p, out->ips[out->n - 1] - 1))
		unwind_walk(u, p, c, out);
	return out->n;
}

static int module_open(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr start,
		       void *arg)
{
	Dwarf_Addr bias;

	(void)userdata;
	(void)name;
	(void)start;
	(void)arg;
	dwfl_module_getelf(mod, &bias); /* its file opened while /proc/PID/root holds it */
	return DWARF_CB_OK;
}

void unwinder_watch(struct unwinder *u, int pid)
{
	struct process *p;

	unwinder_sweep(u);
	p = process_find(u, pid);
	if (p && p->gone)
		return;
	if (p)
		process_attach(u, p);
	else if (!(p = process_get(u, pid)))
		return;
	/* an exec under way maps no file yet: that is not an exit */
	if (p->gone && !target_pid_exited(pid, -1))
		p->gone = false;
	dwfl_getmodules(p->dwfl, module_open, NULL, 0);
}

const struct unwinder_counts *unwinder_counts(const struct unwinder *u)
{
	return &u->counts;
}

struct unwinder *unwinder_new(void)
{
	return calloc(1, sizeof(struct unwinder));
}

void unwinder_free(struct unwinder *u)
{
	if (!u)
		return;
	for (size_t i = 0; i < u->nprocs; i++)
		process_free(&u->procs[i]);
	free(u->procs);
	free(u);
}
