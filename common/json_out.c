/* SPDX-License-Identifier: MIT */
#include "json_out.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <unistd.h>

void json_write_string(FILE *f, const char *s)
{
	if (!s) {
		fputs("null", f);
		return;
	}
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

int json_write_file(const char *dir, const char *name, json_body_fn body, const void *arg)
{
	char tmp[PATH_MAX], path[PATH_MAX];
	FILE *f;
	int err;

	if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path) ||
	    snprintf(tmp, sizeof(tmp), "%s/.%s.%d", dir, name, (int)getpid()) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	f = fopen(tmp, "w");
	if (!f)
		return -errno;
	err = body(f, arg);
	if (!err && ferror(f))
		err = -EIO;
	if (fclose(f) && !err)
		err = -errno;
	if (!err && rename(tmp, path))
		err = -errno;
	if (err)
		remove(tmp);
	return err;
}
