// SPDX-License-Identifier: MIT
/*
 * Ground truth for JIT frames named from a perf map.
 *   jit_target N   copies a tiny function into anonymous executable memory (as a
 *                  JIT does), names it "JS:*handleRequest /srv/app.js:7" in
 *                  /tmp/perf-PID.map, and calls it N times; each call sleeps 2 ms
 *                  in nap(). Prints the code's address. The map stays for the
 *                  tracer to read (runtimes leave theirs too).
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

int main(int argc, char **argv)
{
	long n = argc == 2 ? atol(argv[1]) : 0;
	uint8_t *code;
	size_t len;
	char path[64];
	FILE *map;

	if (n <= 0) {
		fprintf(stderr, "usage: jit_target N\n");
		return 2;
	}
	code = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (code == MAP_FAILED)
		return 1;
	len = emit(code, nap);
	if (mprotect(code, 4096, PROT_READ | PROT_EXEC))
		return 1;
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", getpid());
	map = fopen(path, "w");
	if (!map)
		return 1;
	fprintf(map, "%lx %zx %s\n", (unsigned long)(uintptr_t)code, len, JIT_NAME);
	fclose(map);
	for (long i = 0; i < n; i++)
		((void (*)(void))code)();
	printf("jit=%p calls=%ld map=%s\n", (void *)code, n, path);
	return 0;
}
