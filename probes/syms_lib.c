// SPDX-License-Identifier: MIT
/*
 * syms_find_library: which file a --span / libc name means for a target.
 * Order: a path as given; the target's own mapping (what it really runs);
 * the dynamic loader's cache (ldconfig -p); the standard directories; and
 * for a bare program name, $PATH (so "--span myprog:fn -- myprog" works
 * while the target is still held before exec).
 */
#include "syms.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
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

/* ldconfig -p lines: "\tlibcurl.so.4 (libc6,x86-64) => /lib/x86_64-linux-gnu/libcurl.so.4" */
static int find_in_ldcache(const char *name, char *out, size_t len)
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
