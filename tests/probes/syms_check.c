// SPDX-License-Identifier: MIT
/*
 * Drives probes/symbols/syms.c for tests/probes/test_syms.py.
 *   syms_check self              resolve addresses of this process (PIE or
 *                                not) and of libc, print "want got" pairs
 *   syms_check exited            resolve in a child after it exited
 *   syms_check offset PATH SYM   uprobe file offset, or the suggestions
 *   syms_check findlib PID NAME  path of a library for pid
 *   syms_check ksym ADDR         kernel symbol of a hex address
 *   syms_check ldcache FILE NAME...  each name in a loader cache file: its
 *                                path, or error=N, one line per name
 *   syms_check jitdump DIR       writes its own DIR/jit-PID.dump in steps (half a
 *                                record, a code move)
 *   syms_check data              name the global variables holding addresses of
 *                                its own .data and .bss, and of libc's: "want got"
 *   syms_check dataof PID ADDR... name each hex address of pid's data
 *   syms_check perfmap           writes its own /tmp/perf-PID.map in steps (an
 *                                overlapping later entry, a line half written)
 *                                and resolves JIT addresses after each: "want got"
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include "symbols/jitdump.h"
#include "symbols/syms.h"

int main(int argc, char **argv);

__attribute__((noinline, used)) int syms_check_target(int x)
{
	volatile int acc = 0; /* keeps the body longer than 16 bytes */

	for (int i = 0; i < x; i++)
		acc += i * 3 + 1;
	return acc;
}

static void show(struct tt_syms *s, const char *want, uint64_t addr)
{
	char buf[256];

	printf("%s\t%s\n", want, syms_resolve(s, addr, buf, sizeof(buf)));
}

static int cmd_self(void)
{
	struct tt_syms *s = syms_new(getpid());
	void *lock = dlsym(RTLD_DEFAULT, "pthread_mutex_lock");
	uint64_t fn = (uint64_t)(uintptr_t)&syms_check_target;

	if (!s || !lock)
		return 1;
	show(s, "syms_check_target+0x0", fn);
	show(s, "syms_check_target+0x5", fn + 5);
	show(s, "main+0x0", (uint64_t)(uintptr_t)&main);
	show(s, "pthread_mutex_lock+0x0", (uint64_t)(uintptr_t)lock);
	show(s, "pthread_mutex_lock+0x10", (uint64_t)(uintptr_t)lock + 0x10);
	show(s, "[unknown]", 0x10);
	syms_free(s);
	return 0;
}

/* Two variables of this program, one in .data and one in .bss (a lock, as a
 * server keeps one), and one of libc's (stdout's FILE). */
__attribute__((used)) int syms_check_data[8] = { 1 };
__attribute__((used)) char syms_check_bss[96];

static void show_data(struct tt_syms *s, const char *want, uint64_t addr)
{
	struct syms_data d;

	if (syms_resolve_data(s, addr, &d))
		printf("%s\t-\n", want);
	else
		printf("%s\t%s+0x%llx (%s) size %llu\n", want, d.name, (unsigned long long)d.offset,
		       d.object, (unsigned long long)d.size);
}

static int cmd_data(void)
{
	struct tt_syms *s = syms_new(getpid());
	void *out = dlsym(RTLD_DEFAULT, "_IO_2_1_stdout_");
	int on_stack = 0;

	if (!s || !out)
		return 1;
	show_data(s, "syms_check_data+0x8 (syms_check) size 32", (uint64_t)(uintptr_t)&syms_check_data[2]);
	show_data(s, "syms_check_bss+0x28 (syms_check) size 96", (uint64_t)(uintptr_t)&syms_check_bss[40]);
	show_data(s, "_IO_2_1_stdout_+0x0 (libc.so.6) size 224", (uint64_t)(uintptr_t)out);
	show_data(s, "-", (uint64_t)(uintptr_t)&on_stack);
	syms_free(s);
	return 0;
}

static int cmd_dataof(int pid, char **addrs, int n)
{
	struct tt_syms *s = syms_new(pid);

	for (int i = 0; s && i < n; i++)
		show_data(s, addrs[i], strtoull(addrs[i], NULL, 16));
	syms_free(s);
	return s ? 0 : 1;
}

static int cmd_exited(void)
{
	int pfd[2];
	pid_t pid;
	char c;

	if (pipe(pfd))
		return 1;
	pid = fork();
	if (pid == 0) {
		close(pfd[1]);
		read(pfd[0], &c, 1); /* until the parent snapshotted our maps */
		_exit(0);
	}
	close(pfd[0]);
	struct tt_syms *s = syms_new(pid);

	write(pfd[1], "x", 1);
	close(pfd[1]);
	waitpid(pid, NULL, 0);
	printf("refresh_after_exit=%d\n", syms_refresh(s)); /* fails, keeps the snapshot */
	show(s, "syms_check_target+0x0", (uint64_t)(uintptr_t)&syms_check_target);
	syms_free(s);
	return 0;
}

static int cmd_offset(const char *path, const char *sym)
{
	uint64_t off;
	char near[512];
	int err = syms_elf_offset(path, sym, &off);

	if (!err) {
		printf("0x%llx\n", (unsigned long long)off);
		return 0;
	}
	int n = syms_suggest(path, sym, near, sizeof(near), 5);

	printf("error=%d suggestions=%d: %s\n", err, n, near);
	return 1;
}

static int cmd_findlib(int pid, const char *name)
{
	char path[4096];
	int err = syms_find_library(pid, name, path, sizeof(path));

	if (err) {
		printf("error=%d\n", err);
		return 1;
	}
	printf("%s\n", path);
	return 0;
}

static int cmd_ksym(const char *hex)
{
	struct tt_ksyms *k = ksyms_load();
	char buf[256];

	if (!k)
		return 1;
	printf("%s\n", ksyms_resolve(k, strtoull(hex, NULL, 16), buf, sizeof(buf)));
	ksyms_free(k);
	return 0;
}

static int cmd_ldcache(const char *cache, char **names, int n)
{
	char path[4096];

	for (int i = 0; i < n; i++) {
		int err = syms_ldcache_find(cache, names[i], path, sizeof(path));

		if (err)
			printf("error=%d\n", err);
		else
			printf("%s\n", path);
	}
	return 0;
}

static void map_append(const char *path, const char *text)
{
	FILE *f = fopen(path, "a");

	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

/* Addresses below mmap_min_addr: no file mapping covers them. */
static int cmd_perfmap(void)
{
	struct tt_syms *s = syms_new(getpid());
	char path[64];

	snprintf(path, sizeof(path), "/tmp/perf-%d.map", getpid());
	unlink(path);
	show(s, "[unknown] (0x1010)", 0x1010); /* no map yet */
	map_append(path, "1000 100 LazyCompile:*first /srv/app.js:3\n");
	show(s, "LazyCompile:*first /srv/app.js:3+0x10 (perf-PID.map)", 0x1010);
	/* the JIT moved code: a later entry over the same range wins, once read (the
	 * loader's periodic refresh) */
	map_append(path, "1000 80 JS:*second\n2000 10 third\n4000 10 fourth");
	syms_refresh(s);
	show(s, "JS:*second+0x10 (perf-PID.map)", 0x1010);
	show(s, "LazyCompile:*first /srv/app.js:3+0x90 (perf-PID.map)", 0x1090);
	show(s, "third+0x5 (perf-PID.map)", 0x2005);
	show(s, "[unknown] (0x4000)", 0x4000); /* its line is not finished */
	map_append(path, "\n");
	show(s, "fourth+0x0 (perf-PID.map)", 0x4000);
	syms_free(s);
	unlink(path);
	return 0;
}

static void dump_load(FILE *f, uint64_t addr, uint64_t size, uint64_t index, const char *name,
		      size_t keep)
{
	struct jitdump_load l = { { JIT_CODE_LOAD, (uint32_t)(sizeof(l) + strlen(name) + 1), 0 }, 1, 1, addr, addr,
			     size, index };
	char rec[256];

	memcpy(rec, &l, sizeof(l));
	memcpy(rec + sizeof(l), name, strlen(name) + 1);
	fwrite(rec, 1, keep < l.p.total_size ? keep : l.p.total_size, f);
	fflush(f);
}

/* DIR/jit-PID.dump, mapped executable as perf's marker, written in steps. */
static int cmd_jitdump(const char *dir)
{
	struct jitdump_header h = { JITDUMP_MAGIC, 1, sizeof(h), 62, 0, (uint32_t)getpid(), 0, 0 };
	struct jitdump_move mv = { { JIT_CODE_MOVE, sizeof(mv), 0 }, 1, 1, 0x3000, 0x1000, 0x3000, 0x40, 5 };
	struct jitdump_prefix other = { JIT_CODE_DEBUG_INFO, sizeof(other) + 8, 0 }; /* debug info: not a name */
	struct tt_syms *s = syms_new(getpid());
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/jit-%d.dump", dir, getpid());
	f = fopen(path, "w+");
	if (!f || fwrite(&h, sizeof(h), 1, f) != 1 || fflush(f) ||
	    mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fileno(f), 0) == MAP_FAILED)
		return 1;
	syms_refresh(s); /* the loader's refresh: finds the dump in /proc/PID/maps */
	show(s, "[unknown] (0x1010)", 0x1010); /* no record yet */
	dump_load(f, 0x1000, 0x40, 5, "Interpreted:handle", 20); /* half a record */
	show(s, "[unknown] (0x1010)", 0x1010);
	fseek(f, (long)sizeof(h), SEEK_SET);
	dump_load(f, 0x1000, 0x40, 5, "Interpreted:handle", 256);
	fwrite(&other, sizeof(other), 1, f);
	fwrite("\0\0\0\0\0\0\0\0", 8, 1, f);
	dump_load(f, 0x2000, 0x10, 6, "Compiled:*parse", 256);
	show(s, "Interpreted:handle+0x10 (jit-PID.dump)", 0x1010);
	show(s, "Compiled:*parse+0x4 (jit-PID.dump)", 0x2004);
	fwrite(&mv, sizeof(mv), 1, f); /* index 5 moved to 0x3000 */
	fflush(f);
	show(s, "Interpreted:handle+0x8 (jit-PID.dump)", 0x3008);
	syms_free(s);
	fclose(f);
	unlink(path);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "jitdump"))
		return cmd_jitdump(argv[2]);
	if (argc == 2 && !strcmp(argv[1], "self"))
		return cmd_self();
	if (argc == 2 && !strcmp(argv[1], "perfmap"))
		return cmd_perfmap();
	if (argc == 2 && !strcmp(argv[1], "exited"))
		return cmd_exited();
	if (argc == 2 && !strcmp(argv[1], "data"))
		return cmd_data();
	if (argc >= 4 && !strcmp(argv[1], "dataof"))
		return cmd_dataof(atoi(argv[2]), argv + 3, argc - 3);
	if (argc == 4 && !strcmp(argv[1], "offset"))
		return cmd_offset(argv[2], argv[3]);
	if (argc == 4 && !strcmp(argv[1], "findlib"))
		return cmd_findlib(atoi(argv[2]), argv[3]);
	if (argc == 3 && !strcmp(argv[1], "ksym"))
		return cmd_ksym(argv[2]);
	if (argc >= 4 && !strcmp(argv[1], "ldcache"))
		return cmd_ldcache(argv[2], argv + 3, argc - 3);
	fprintf(stderr, "usage: syms_check self|exited|offset PATH SYM|findlib PID NAME|ksym ADDR|"
		"ldcache FILE NAME...\n");
	return 2;
}
