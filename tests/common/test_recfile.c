/* Record files: write, read back, reject wrong type/size/truncation. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include "recfile.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c); exit(1); } } while (0)

static void test_roundtrip(const char *dir)
{
	enum { N = 100000 }; /* > one 1 MiB buffer of 56-byte records */
	struct recfile *f = recfile_open_kind(dir, TT_REC_REQUEST);
	struct tt_request r, *back = NULL;
	char path[4096];
	size_t n = 0;

	CHECK(f);
	for (unsigned i = 0; i < N; i++) {
		memset(&r, 0, sizeof(r));
		r.id = i;
		r.t_start_ns = 1000ull * i;
		r.status = (i % 7) ? 200 : -7;
		CHECK(recfile_write(f, &r, 1) == 0);
	}
	CHECK(recfile_count(f) == N);
	CHECK(recfile_close(f) == 0);
	snprintf(path, sizeof(path), "%s/requests.bin", dir);
	CHECK(recfile_read_all(path, TT_REC_REQUEST, sizeof(r), (void **)&back, &n) == 0);
	CHECK(n == N);
	for (unsigned i = 0; i < N; i++)
		CHECK(back[i].id == i && back[i].t_start_ns == 1000ull * i &&
		      back[i].status == ((i % 7) ? 200 : -7));
	free(back);

	/* wrong type and wrong size are refused */
	CHECK(recfile_read_all(path, TT_REC_RUNQ, sizeof(r), (void **)&back, &n) == -EBADMSG);
	CHECK(recfile_read_all(path, TT_REC_REQUEST, sizeof(r) + 8, (void **)&back, &n) == -EBADMSG);
	/* a truncated record is refused */
	CHECK(truncate(path, 16 + 3 * (long)sizeof(r) + 5) == 0);
	CHECK(recfile_read_all(path, TT_REC_REQUEST, sizeof(r), (void **)&back, &n) == -EBADMSG);
}

/* A write that fails part-way (here: the file size limit, as a full disk would)
 * leaves whole records only, readable, and counts the rest as dropped. */
static void test_write_error_keeps_whole_records(const char *dir)
{
	enum { N = 30000, LIMIT = 100000 }; /* 1.68 MB of records into 100 kB */
	struct tt_request r = { 0 }, *back = NULL;
	struct rlimit old, lim = { .rlim_cur = LIMIT, .rlim_max = RLIM_INFINITY };
	uint64_t kept = (LIMIT - 16) / sizeof(r);
	char path[4096];
	struct recfile *f;
	struct stat st;
	size_t n = 0;
	int first_err = 0;

	snprintf(path, sizeof(path), "%s/runq.bin", dir); /* any name: not a kind's file */
	f = recfile_open(path, TT_REC_REQUEST, sizeof(r));
	CHECK(f);
	signal(SIGXFSZ, SIG_IGN); /* write() then fails with EFBIG */
	CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0);
	lim.rlim_max = old.rlim_max;
	CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
	for (unsigned i = 0; i < N; i++) {
		int err;

		r.id = i;
		err = recfile_write(f, &r, 1);
		if (err && !first_err)
			first_err = err;
	}
	CHECK(first_err == -EFBIG);
	CHECK(recfile_close(f) == -EFBIG); /* the sticky error */
	CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0);
	CHECK(stat(path, &st) == 0 && (uint64_t)st.st_size == 16 + kept * sizeof(r));
	CHECK(recfile_read_all(path, TT_REC_REQUEST, sizeof(r), (void **)&back, &n) == 0);
	CHECK(n == kept);
	for (unsigned i = 0; i < n; i++)
		CHECK(back[i].id == i);
	free(back);
}

/* The counts a write error leaves: kept + dropped = every record written. */
static void test_write_error_counts(const char *dir)
{
	enum { N = 30000, LIMIT = 100000 };
	struct tt_request r = { 0 };
	struct rlimit old, lim = { .rlim_cur = LIMIT };
	char path[4096];
	struct recfile *f;

	snprintf(path, sizeof(path), "%s/counts.bin", dir);
	f = recfile_open(path, TT_REC_REQUEST, sizeof(r));
	CHECK(f);
	CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0);
	lim.rlim_max = old.rlim_max;
	CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
	for (unsigned i = 0; i < N; i++)
		recfile_write(f, &r, 1);
	CHECK(recfile_flush(f) == -EFBIG);
	CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0);
	CHECK(recfile_count(f) == (LIMIT - 16) / sizeof(r));
	CHECK(recfile_count(f) + recfile_dropped(f) == N);
	recfile_close(f);
}

static void test_layouts(void)
{
	/* sizes are multiples of 8 so arrays of records stay aligned */
#define SIZE_OK(kind, st, id, fields, file) CHECK(sizeof(struct st) % 8 == 0); \
	CHECK(recfile_kind_size(id) == sizeof(struct st)); CHECK(!strcmp(recfile_kind_file(id), file));
	TT_RECORD_KINDS(SIZE_OK)
	CHECK(sizeof(struct tt_file_header) == 16);
}

int main(int argc, char **argv)
{
	CHECK(argc > 1);
	test_layouts();
	test_roundtrip(argv[1]);
	test_write_error_keeps_whole_records(argv[1]);
	test_write_error_counts(argv[1]);
	printf("test_recfile: ok\n");
	return 0;
}
