/* SPDX-License-Identifier: MIT */
/*
 * User stacks unwound from a copy of their top and the registers at the
 * kernel entry, as perf --call-graph dwarf does: each object's call-frame
 * information (.eh_frame, or .debug_frame from its debug file) through libdwfl
 * (elfutils), which walks the frame pointer where an object has none. One Dwfl
 * per process, its modules from /proc/PID/maps, their files through
 * /proc/PID/root (a container's own) or, deleted or replaced since,
 * /proc/PID/map_files.
 */
#ifndef TT_UNWIND_H
#define TT_UNWIND_H
#include <stddef.h>
#include <stdint.h>

#define UNWIND_MAX_FRAMES 64   /* SCHED_STACK_DEPTH: frames kept per stack */
#define UNWIND_MAX_READS 64    /* stack words whose offsets are kept */

/* The registers a copy starts from, in this order. */
enum unwind_reg { UNWIND_IP, UNWIND_SP, UNWIND_BP, UNWIND_BX, UNWIND_R12, UNWIND_R13,
		  UNWIND_R14, UNWIND_R15, UNWIND_NREGS };

/* A return address a pending uretprobe replaced with its trampoline: the stack
 * address that holds the trampoline now, and the address it stands for. */
struct unwind_return {
	uint64_t slot, ip;
};

struct unwind_copy {
	int pid, tid;
	const uint64_t *regs;  /* UNWIND_NREGS of them */
	const uint8_t *stack;  /* the stack from regs[UNWIND_SP] up */
	size_t size;
	const struct unwind_return *returns; /* read in place of the stack's words */
	int nreturns;
};

/* How an unwind ended. */
enum unwind_end {
	UNWIND_END_OUTERMOST, /* the outermost frame (the thread's start, main's caller) */
	UNWIND_END_COPY,      /* the next frame is above the copied bytes: a deep stack */
	UNWIND_END_NO_CFI,    /* an object without call-frame information, its frame pointer
			       * not kept either */
	UNWIND_END_NO_OBJECT, /* an address no file mapping covers (JIT code, or not an
			       * address: a frame unwound wrong) */
	UNWIND_END_DEPTH,     /* UNWIND_MAX_FRAMES frames */
	UNWIND_END_ERROR,     /* the process's modules could not be read */
	UNWIND_END_GONE,      /* the process had exited (a loader behind its rings): no file
			       * mapping left to unwind by; the frame-pointer walk stands */
	UNWIND_END_NR,
};
extern const char *const unwind_end_names[UNWIND_END_NR];

struct unwind_stack {
	uint64_t ips[UNWIND_MAX_FRAMES]; /* the copy's IP, then return addresses */
	int n;
	enum unwind_end end;
	char end_object[64];  /* the object of the last frame when it ended early ("" if none) */
	uint16_t reads[UNWIND_MAX_READS]; /* offsets above SP of the stack words read, in order */
	int nreads;
};

/* The processes unwound for: how many, the most held at once, and how many were
 * forgotten (exited, their files closed; or their pid reused). */
struct unwinder_counts {
	unsigned long long processes, forgotten;
	size_t peak;
};

struct unwinder;

struct unwinder *unwinder_new(void);
const struct unwinder_counts *unwinder_counts(const struct unwinder *u);
/* Unwind one copy into out: the frame count (0 when not even the first frame
 * could be placed). */
int unwinder_unwind(struct unwinder *u, const struct unwind_copy *c, struct unwind_stack *out);
/* Read a living process's maps now, and open its files: copies of it that arrive
 * after it exited (a loader behind its rings) unwind by them, where a process first
 * seen in a copy after its exit keeps only the frame-pointer walk. Called for the
 * targets as the loop runs (their exec, then dlopens). */
void unwinder_watch(struct unwinder *u, int pid);
void unwinder_free(struct unwinder *u);

#endif
