/* SPDX-License-Identifier: MIT */
#include "json_out.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <unistd.h>

/* The length of the well-formed UTF-8 sequence at s (1-4), or 0 when the bytes there are
 * not one (a stray continuation byte, a sequence cut short, an overlong form, a
 * surrogate, a code point above U+10FFFF). s[0] >= 0x80. */
static int utf8_sequence_len(const unsigned char *s)
{
	int n = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc0 ? 2 : 0;
	unsigned cp;

	if (!n || s[0] > 0xf4 || s[0] == 0xc0 || s[0] == 0xc1)
		return 0;
	cp = s[0] & (0x7f >> n);
	for (int i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80) /* the string's NUL ends it here too */
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

void json_write_string(FILE *f, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;

	if (!s) {
		fputs("null", f);
		return;
	}
	fputc('"', f);
	while (*s) {
		unsigned char c = *s;
		int n;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else if (c < 0x80)
			fputc(c, f);
		else if ((n = utf8_sequence_len(s))) {
			fwrite(s, 1, (size_t)n, f);
			s += n;
			continue;
		} else
			fputs("\\ufffd", f); /* not UTF-8: the replacement character */
		s++;
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
