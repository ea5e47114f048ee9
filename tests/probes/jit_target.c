// SPDX-License-Identifier: MIT
/*
 * Ground truth for JIT frames named from a perf map or a jitdump.
 *   jit_target N   copies a tiny function into anonymous executable memory (as a
 *                  JIT does), names it "JS:*handleRequest /srv/app.js:7" in
 *                  /tmp/perf-PID.map, and calls it N times; each call sleeps 2 ms
 *                  in nap(). Prints the code's address. The map stays for the
 *                  tracer to read (runtimes leave theirs too).
 *   jit_target N DIR   the same code named in DIR/jit-PID.dump instead (perf's
 *                  jitdump format, the file mapped executable as the marker perf
 *                  looks for): loaded at one address, then moved to another (a
 *                  code-move record), where it is called. No perf map.
 * The code keeps a frame pointer (push rbp; mov rbp, rsp), as V8's and HotSpot's
 * compiled frames do, so a frame-pointer walk passes through it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include "symbols/jitdump.h"

#define JIT_NAME "JS:*handleRequest /srv/app.js:7"

__attribute__((noinline)) void nap(void)
{
	struct timespec ts = { 0, 2000000 };

	nanosleep(&ts, NULL);
	asm volatile("" ::: "memory");
}

/* push rbp; mov rbp,rsp; movabs rax,nap; call rax; pop rbp; ret */
static size_t emit(uint8_t *code, void (*fn)(void))
{
	static const uint8_t head[] = { 0x55, 0x48, 0x89, 0xe5, 0x48, 0xb8 };
	static const uint8_t tail[] = { 0xff, 0xd0, 0x5d, 0xc3 };
	uint64_t target = (uint64_t)(uintptr_t)fn;
	size_t n = 0;

	memcpy(code + n, head, sizeof(head)), n += sizeof(head);
	memcpy(code + n, &target, sizeof(target)), n += sizeof(target);
	memcpy(code + n, tail, sizeof(tail)), n += sizeof(tail);
	return n;
}

/* DIR/jit-PID.dump: the code loaded at from (index 7), then moved to to. */
static int write_dump(const char *dir, uint8_t *from, uint8_t *to, size_t len, char *path,
		      size_t plen)
{
	struct jitdump_header h = { .magic = JITDUMP_MAGIC, .version = 1, .total_size = sizeof(h),
			       .elf_mach = 62 /* EM_X86_64 */, .pid = (uint32_t)getpid() };
	struct jitdump_load l = { { JIT_CODE_LOAD, (uint32_t)(sizeof(l) + sizeof(JIT_NAME) + len), 0 },
			     (uint32_t)getpid(), (uint32_t)getpid(), (uintptr_t)from,
			     (uintptr_t)from, len, 7 };
	struct jitdump_move m = { { JIT_CODE_MOVE, sizeof(m), 0 }, (uint32_t)getpid(), (uint32_t)getpid(),
			     (uintptr_t)to, (uintptr_t)from, (uintptr_t)to, len, 7 };
	FILE *f;

	snprintf(path, plen, "%s/jit-%d.dump", dir, getpid());
	f = fopen(path, "w+");
	if (!f)
		return -1;
	fwrite(&h, sizeof(h), 1, f);
	/* the marker: the file mapped executable, where perf (and tailtrace) find it */
	if (mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fileno(f), 0) == MAP_FAILED)
		return -1;
	fwrite(&l, sizeof(l), 1, f);
	fwrite(JIT_NAME, sizeof(JIT_NAME), 1, f);
	fwrite(from, len, 1, f);
	fwrite(&m, sizeof(m), 1, f);
	return fclose(f);
}

static uint8_t *exec_copy(void)
{
	uint8_t *code = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (code == MAP_FAILED)
		return NULL;
	emit(code, nap);
	return mprotect(code, 4096, PROT_READ | PROT_EXEC) ? NULL : code;
}

int main(int argc, char **argv)
{
	long n = argc == 2 || argc == 3 ? atol(argv[1]) : 0;
	uint8_t *code = exec_copy(), *moved;
	size_t len = emit((uint8_t[64]){ 0 }, nap);
	char path[4096];
	FILE *map;

	if (n <= 0) {
		fprintf(stderr, "usage: jit_target N [DIR]\n");
		return 2;
	}
	if (!code)
		return 1;
	if (argc == 3) {
		if (!(moved = exec_copy()) || write_dump(argv[2], code, moved, len, path, sizeof(path)))
			return 1;
		code = moved;
	} else {
		snprintf(path, sizeof(path), "/tmp/perf-%d.map", getpid());
		map = fopen(path, "w");
		if (!map)
			return 1;
		fprintf(map, "%lx %zx %s\n", (unsigned long)(uintptr_t)code, len, JIT_NAME);
		fclose(map);
	}
	for (long i = 0; i < n; i++)
		((void (*)(void))code)();
	printf("jit=%p calls=%ld map=%s\n", (void *)code, n, path);
	return 0;
}
