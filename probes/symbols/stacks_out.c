// SPDX-License-Identifier: MIT
/* Symbolized stacks into stacks.jsonl (stacks_out.h). */
#include "symbols/stacks_out.h"

#include <limits.h>
#include <string.h>
#include <json_out.h>

/* The tracing machinery that ran our program sits on top of every kernel
 * stack taken at a tracepoint (bpf_prog_*, bpf_trace_run4, __traceiter_*...):
 * the stack proper starts below it. */
static bool tracing_frame(const char *f)
{
	static const char *const prefixes[] = { "bpf_prog_", "bpf_trace_run", "__traceiter_",
						"__bpf_trace_", "perf_trace_", "trace_call_bpf",
						"bpf_get_stack", "trace_event_raw_event_" };

	for (unsigned i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		if (!strncmp(f, prefixes[i], strlen(prefixes[i])))
			return true;
	return false;
}

static int trim_tracing(char frames[][STACKS_FRAME_LEN], int n)
{
	int skip = 0;

	for (int i = 0; i < n && i < 8; i++)
		if (tracing_frame(frames[i]))
			skip = i + 1;
	if (skip)
		memmove(frames, frames + skip, (size_t)(n - skip) * sizeof(frames[0]));
	return n - skip;
}

size_t stacks_frame_func_len(const char *frame)
{
	const char *mod = NULL, *off = NULL;

	/* the module is the last " (...)", the offset the last "+0x" before it: a
	 * demangled name holds spaces and parentheses of its own */
	for (const char *p = strstr(frame, " ("); p; p = strstr(p + 1, " ("))
		mod = p;
	if (!mod || mod[strlen(mod) - 1] != ')')
		mod = frame + strlen(frame);
	for (const char *p = strstr(frame, "+0x"); p && p < mod; p = strstr(p + 1, "+0x"))
		off = p;
	return (size_t)((off ? off : mod) - frame);
}

/* The functions inlined at a user frame's address, as frames of their own
 * before it: how many. */
static int inlined_frames(struct tt_syms *syms, uint64_t addr, char frames[][STACKS_FRAME_LEN],
			  const char **mangled, int room)
{
	int n = syms_inlined(syms, addr, frames[0], STACKS_FRAME_LEN, room);

	for (int i = 0; mangled && i < n; i++)
		mangled[i] = NULL;
	return n;
}

int stacks_resolve(const __u64 *ips, int depth, bool user, struct tt_syms *syms,
		   struct tt_ksyms *ksyms, char frames[][STACKS_FRAME_LEN], const char **mangled)
{
	int n = 0;

	for (int i = 0; i < depth && ips[i] && n < STACKS_MAX_FRAMES; i++) {
		/* a caller's frame is at its call, the byte before the return address;
		 * the first frame's IP, at a blocking switch, follows its syscall alike */
		if (user && syms)
			n += inlined_frames(syms, ips[i] - 1, frames + n, mangled ? mangled + n : NULL,
					    STACKS_MAX_FRAMES - n - 1);
		if (mangled)
			mangled[n] = NULL;
		if (user && syms)
			syms_resolve_mangled(syms, ips[i], frames[n], STACKS_FRAME_LEN,
					     mangled ? &mangled[n] : NULL);
		else if (!user && ksyms)
			ksyms_resolve(ksyms, ips[i], frames[n], STACKS_FRAME_LEN);
		else
			snprintf(frames[n], STACKS_FRAME_LEN, "[unknown] (0x%llx)",
				 (unsigned long long)ips[i]);
		n++;
	}
	return user ? n : trim_tracing(frames, n);
}

void stacks_json_write(FILE *f, const char *stream, int64_t id, bool user,
		       char frames[][STACKS_FRAME_LEN], const char *const *mangled, int n)
{
	bool any = false;

	fprintf(f, "{\"stream\":\"%s\",\"id\":%lld,\"kind\":\"%s\",\"frames\":[", stream,
		(long long)id, user ? "user" : "kernel");
	for (int i = 0; i < n; i++) {
		if (i)
			fputc(',', f);
		json_write_string(f, frames[i]);
	}
	/* the demangled frames' symbols as the file names them: {"index": "_ZN..."} */
	for (int i = 0; mangled && i < n; i++) {
		if (!mangled[i])
			continue;
		fprintf(f, any ? ",\"%d\":" : "],\"mangled\":{\"%d\":", i);
		json_write_string(f, mangled[i]);
		any = true;
	}
	fputs(any ? "}}\n" : "]}\n", f);
}

FILE *stacks_json_open(const char *dir)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/stacks.jsonl", dir);
	return fopen(path, "ae");
}
