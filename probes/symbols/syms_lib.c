// SPDX-License-Identifier: MIT
/*
 * syms_find_library: which file a --span / libc name means for a target.
 * Order: a path as given; the target's own mapping (what it really runs);
 * the dynamic loader's cache (/etc/ld.so.cache, read here); the standard directories; and
 * for a bare program name, $PATH (so "--span myprog:fn -- myprog" works
 * while the target is still held before exec).
 */
#include "symbols/syms.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool is_file(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int copy_real(const char *path, char *out, size_t len)
{
	char real[PATH_MAX];

	if (!is_file(path))
		return -ENOENT;
	if (!realpath(path, real))
		return -errno;
	if (strlen(real) >= len)
		return -ENAMETOOLONG;
	strcpy(out, real);
	return 0;
}

/* "libcurl.so.4" names the file libcurl.so.4.8.0 that the kernel shows in
 * maps (symlinks resolved); "libcurl" or "libcurl.so" name it too. */
static bool lib_name_matches(const char *base, const char *name)
{
	size_t n = strlen(name);

	if (!strcmp(base, name))
		return true;
	if (strncmp(base, name, n))
		return false;
	if (base[n] == '.')
		return strstr(name, ".so") || !strncmp(base + n, ".so", 3);
	return base[n] == '-' && !strstr(name, ".so"); /* libfoo -> libfoo-2.0.so */
}

static int find_in_maps(int pid, const char *name, char *out, size_t len)
{
	char fn[64], line[4096 + 128];
	int err = -ENOENT;
	FILE *f;

	if (pid <= 0)
		return -ENOENT;
	snprintf(fn, sizeof(fn), "/proc/%d/maps", pid);
	f = fopen(fn, "re");
	if (!f)
		return -ENOENT;
	while (err && fgets(line, sizeof(line), f)) {
		char *path = strchr(line, '/'), *base;

		if (!path)
			continue;
		path[strcspn(path, "\n")] = 0;
		base = strrchr(path, '/') + 1;
		if (lib_name_matches(base, name) && strlen(path) < len) {
			strcpy(out, path);
			err = 0;
		}
	}
	fclose(f);
	return err;
}

/* ldconfig -p lines: "\tlibcurl.so.4 (libc6,x86-64) => /lib/x86_64-linux-gnu/libcurl.so.4".
 * Only when the cache file cannot be read: a child of ours, even for a moment,
 * looks to run.sh like the target it waits for. */
static int find_by_ldconfig(const char *name, char *out, size_t len)
{
	static const char *const cmds[] = { "/sbin/ldconfig -p 2>/dev/null",
					    "ldconfig -p 2>/dev/null" };
	char line[1024];
	int err = -ENOENT;

	for (int c = 0; c < 2 && err; c++) {
		FILE *p = popen(cmds[c], "re");

		if (!p)
			continue;
		while (fgets(line, sizeof(line), p)) {
			char lib[256], flags[128], path[768];

			if (err == 0 || sscanf(line, " %255s (%127[^)]) => %767s", lib, flags, path) != 3)
				continue;
			if (!lib_name_matches(lib, name))
				continue;
#if defined(__x86_64__)
			if (!strstr(flags, "x86-64"))
				continue;
#endif
			err = copy_real(path, out, len);
		}
		pclose(p);
	}
	return err;
}

/* glibc's ld.so.cache: a "glibc-ld.so.cache1.1" header, alone or after the old
 * "ld.so-1.7.0" table, then entries whose name and path are offsets from that
 * header. Read as bytes (memcpy), every offset checked against the file. */
#define LDCACHE_OLD "ld.so-1.7.0"
#define LDCACHE_NEW "glibc-ld.so.cache1.1"
#define LDCACHE_HEAD_BYTES 48   /* magic[20] nlibs len_strings flags pad[3] ext unused[3] */
#define LDCACHE_NLIBS_AT 20
#define LDCACHE_ENTRY_BYTES 24  /* flags key value osversion hwcap */
#define LDCACHE_OLD_HEAD_BYTES 16 /* magic[11] pad nlibs */
#define LDCACHE_OLD_NLIBS_AT 12
#define LDCACHE_OLD_ENTRY_BYTES 12
#define LDCACHE_MAX_BYTES (64u << 20)
#define LDCACHE_X8664_LIBC6 0x0303 /* FLAG_ELF_LIBC6 | FLAG_X8664_LIB64 */

static uint32_t ld_u32(const char *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static char *ldcache_read(const char *path, size_t *size)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	struct stat st;

	if (!f)
		return NULL;
	if (fstat(fileno(f), &st) == 0 && st.st_size > 0 && (uint64_t)st.st_size <= LDCACHE_MAX_BYTES &&
	    (buf = malloc((size_t)st.st_size)) && fread(buf, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
		free(buf);
		buf = NULL;
	}
	*size = buf ? (size_t)st.st_size : 0;
	fclose(f);
	return buf;
}

/* Offset of the new-format header, or -1. */
static long ldcache_head(const char *buf, size_t size)
{
	size_t off = 0;

	if (size >= LDCACHE_OLD_HEAD_BYTES && !memcmp(buf, LDCACHE_OLD, strlen(LDCACHE_OLD))) {
		uint64_t n = ld_u32(buf + LDCACHE_OLD_NLIBS_AT);

		off = (LDCACHE_OLD_HEAD_BYTES + n * LDCACHE_OLD_ENTRY_BYTES + 7) & ~(uint64_t)7;
	}
	if (off > size || size - off < LDCACHE_HEAD_BYTES ||
	    memcmp(buf + off, LDCACHE_NEW, strlen(LDCACHE_NEW)))
		return -1;
	return (long)off;
}

/* A NUL-terminated string at head + rel inside the file, or NULL. */
static const char *ldcache_str(const char *buf, size_t size, size_t head, uint32_t rel)
{
	size_t at = head + rel;

	if (at >= size || !memchr(buf + at, 0, size - at))
		return NULL;
	return buf + at;
}

int syms_ldcache_find(const char *cache, const char *name, char *out, size_t len)
{
	size_t size, head;
	char *buf = ldcache_read(cache, &size);
	long h = buf ? ldcache_head(buf, size) : -1;
	int err = -ENOENT;

	if (h < 0) {
		free(buf);
		return -EINVAL;
	}
	head = (size_t)h;
	uint64_t n = ld_u32(buf + head + LDCACHE_NLIBS_AT);

	if (n > (size - head - LDCACHE_HEAD_BYTES) / LDCACHE_ENTRY_BYTES)
		n = 0; /* a count the file cannot hold: nothing trusted */
	for (uint64_t i = 0; i < n && err; i++) {
		const char *e = buf + head + LDCACHE_HEAD_BYTES + i * LDCACHE_ENTRY_BYTES;
		const char *lib = ldcache_str(buf, size, head, ld_u32(e + 4));
		const char *path = ldcache_str(buf, size, head, ld_u32(e + 8));

		if (!lib || !path || !lib_name_matches(lib, name))
			continue;
#if defined(__x86_64__)
		if ((ld_u32(e) & 0xffff) != LDCACHE_X8664_LIBC6)
			continue;
#endif
		err = copy_real(path, out, len);
	}
	free(buf);
	return err;
}

static int find_in_ldcache(const char *name, char *out, size_t len)
{
	int err = syms_ldcache_find("/etc/ld.so.cache", name, out, len);

	return err == -EINVAL ? find_by_ldconfig(name, out, len) : err;
}

static int find_in_dirs(const char *name, char *out, size_t len)
{
	static const char *const dirs[] = {
		"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64",
		"/lib", "/usr/lib", "/usr/local/lib",
	};
	char path[PATH_MAX];

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dirs[i], name);
		if (copy_real(path, out, len) == 0)
			return 0;
	}
	return -ENOENT;
}

static int find_in_path(const char *name, char *out, size_t len)
{
	const char *env = getenv("PATH");
	char dirs[4096], path[PATH_MAX], *save = NULL;

	snprintf(dirs, sizeof(dirs), "%s", env ? env : "/usr/local/bin:/usr/bin:/bin");
	for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		snprintf(path, sizeof(path), "%s/%s", d, name);
		if (access(path, X_OK) == 0 && copy_real(path, out, len) == 0)
			return 0;
	}
	return -ENOENT;
}

int syms_is_mapped(int pid, const char *path)
{
	char fn[64], line[4096 + 128];
	struct stat want, st;
	int found = 0;
	FILE *f;

	if (pid <= 0 || stat(path, &want))
		return 0;
	snprintf(fn, sizeof(fn), "/proc/%d/maps", pid);
	f = fopen(fn, "re");
	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f)) {
		char *p = strchr(line, '/');

		if (!p)
			continue;
		p[strcspn(p, "\n")] = 0;
		found = stat(p, &st) == 0 && st.st_dev == want.st_dev && st.st_ino == want.st_ino;
	}
	fclose(f);
	return found;
}

int syms_find_library(int pid, const char *name, char *path, size_t len)
{
	if (!name || !*name)
		return -EINVAL;
	if (strchr(name, '/'))
		return copy_real(name, path, len);
	if (find_in_maps(pid, name, path, len) == 0 ||
	    find_in_ldcache(name, path, len) == 0 ||
	    find_in_dirs(name, path, len) == 0)
		return 0;
	return find_in_path(name, path, len);
}
