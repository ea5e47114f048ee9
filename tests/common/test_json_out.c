/* json_out: exact escaping bytes; atomic file write leaves no temporary. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "json_out.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c); exit(1); } } while (0)

static void test_string(void)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	CHECK(f);
	json_write_string(f, "a\"b\\c\n\x01\x1f é/");
	fputc(' ', f);
	json_write_string(f, NULL);
	fputc(' ', f);
	json_write_string(f, "");
	CHECK(fclose(f) == 0);
	CHECK(strcmp(buf, "\"a\\\"b\\\\c\\u000a\\u0001\\u001f é/\" null \"\"") == 0);
	free(buf);
}

/* What json_write_string makes of s. */
static char *written(const char *s)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	CHECK(f);
	json_write_string(f, s);
	CHECK(fclose(f) == 0);
	return buf;
}

/* Well-formed UTF-8 as is; each byte of what is not UTF-8 as the replacement character. */
static void test_utf8(void)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{ "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"" },
		/* a 15-byte comm cut inside a 3-byte character: its first two bytes, then the end */
		{ "worker-\xe2\x82\xac\xe2\x82", "\"worker-\xe2\x82\xac\\ufffd\\ufffd\"" },
		{ "caf\xe9", "\"caf\\ufffd\"" },                       /* Latin-1 */
		{ "\x80x", "\"\\ufffdx\"" },                           /* a stray continuation */
		{ "\xc0\xaf", "\"\\ufffd\\ufffd\"" },                 /* overlong '/' */
		{ "\xe0\x80\xaf", "\"\\ufffd\\ufffd\\ufffd\"" },       /* overlong, 3 bytes */
		{ "\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\"" },       /* a surrogate, U+D800 */
		{ "\xf4\x90\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\"" }, /* above U+10FFFF */
		{ "\xf4\x8f\xbf\xbf", "\"\xf4\x8f\xbf\xbf\"" },             /* U+10FFFF itself */
		{ "\xff", "\"\\ufffd\"" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *got = written(cases[i].in);

		if (strcmp(got, cases[i].out)) {
			fprintf(stderr, "FAIL utf8 case %zu: got %s\n", i, got);
			exit(1);
		}
		free(got);
	}
}

static int body_ok(FILE *f, const void *arg)
{
	fputs(arg, f);
	return 0;
}

static int body_fail(FILE *f, const void *arg)
{
	(void)arg;
	fputs("partial", f);
	return -EINVAL;
}

static void test_file(const char *dir)
{
	char path[4096], tmp[4096], got[64] = "";
	char longname[5000];
	FILE *f;

	snprintf(path, sizeof(path), "%s/t.json", dir);
	snprintf(tmp, sizeof(tmp), "%s/.t.json.%d", dir, (int)getpid());
	CHECK(json_write_file(dir, "t.json", body_ok, "{\"x\": 1}\n") == 0);
	f = fopen(path, "r");
	CHECK(f && fgets(got, sizeof(got), f));
	fclose(f);
	CHECK(strcmp(got, "{\"x\": 1}\n") == 0);
	CHECK(access(tmp, F_OK) != 0);

	/* a failing body keeps the old file and removes the temporary */
	CHECK(json_write_file(dir, "t.json", body_fail, NULL) == -EINVAL);
	f = fopen(path, "r");
	CHECK(f && fgets(got, sizeof(got), f));
	fclose(f);
	CHECK(strcmp(got, "{\"x\": 1}\n") == 0);
	CHECK(access(tmp, F_OK) != 0);

	CHECK(json_write_file("/nonexistent-dir", "t.json", body_ok, "") == -ENOENT);
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	CHECK(json_write_file(dir, longname, body_ok, "") == -ENAMETOOLONG);
	remove(path);
}

int main(int argc, char **argv)
{
	test_string();
	test_utf8();
	test_file(argc > 1 ? argv[1] : ".");
	printf("json_out ok\n");
	return 0;
}
