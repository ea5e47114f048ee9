/* SPDX-License-Identifier: MIT */
#include "recfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RECFILE_BUF_BYTES (1u << 20)

struct recfile {
	int fd;              /* -1: a sink (recfile_open_sink), no file */
	recfile_sink_fn sink;
	void *sink_arg;
	uint32_t rec_type;
	int err;             /* first write error: sticky, later writes are dropped */
	uint32_t rec_size;
	uint64_t count;      /* records accepted (buffered or on disk) */
	uint64_t dropped;    /* records lost to a write error */
	uint64_t disk_bytes; /* record bytes the file holds after its header */
	size_t used;
	char *buf;           /* RECFILE_BUF_BYTES; NULL for a sink */
	struct recfile *prev, *next; /* the open files (recfile_flush_all) */
};

/* Every open file-backed recfile: the loader flushes them all on a timer, so
 * a recorder killed outright loses only what its buffers held since then. */
static struct recfile *open_files;

static void link_open(struct recfile *f)
{
	f->prev = NULL;
	f->next = open_files;
	if (open_files)
		open_files->prev = f;
	open_files = f;
}

static void unlink_open(struct recfile *f)
{
	if (f->prev)
		f->prev->next = f->next;
	else if (open_files == f)
		open_files = f->next;
	if (f->next)
		f->next->prev = f->prev;
	f->prev = f->next = NULL;
}

int recfile_flush_all(void)
{
	int err = 0, e;

	for (struct recfile *f = open_files; f; f = f->next)
		if ((e = recfile_flush(f)) && !err)
			err = e;
	return err;
}

#define KIND_SIZE(kind, st, id, fields, file) case id: return sizeof(struct st);
uint32_t recfile_kind_size(enum tt_rec_type type)
{
	switch (type) { TT_RECORD_KINDS(KIND_SIZE) }
	return 0;
}

#define KIND_FILE(kind, st, id, fields, file) case id: return file;
const char *recfile_kind_file(enum tt_rec_type type)
{
	switch (type) { TT_RECORD_KINDS(KIND_FILE) }
	return NULL;
}

/* Write all of p; *done (if given) counts the bytes that did reach the file. */
static int write_full(int fd, const void *p, size_t len, uint64_t *done)
{
	const char *c = p;

	while (len > 0) {
		ssize_t w = write(fd, c, len);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		c += w;
		len -= (size_t)w;
		if (done)
			*done += (uint64_t)w;
	}
	return 0;
}

struct recfile *recfile_open(const char *path, uint32_t rec_type, uint32_t rec_size)
{
	struct tt_file_header hdr = { .rec_type = rec_type, .rec_size = rec_size };
	struct recfile *f;
	int err;

	if (rec_size == 0 || rec_size > RECFILE_BUF_BYTES) {
		errno = EINVAL;
		return NULL;
	}
	f = malloc(sizeof(*f));
	if (!f)
		return NULL;
	f->buf = malloc(RECFILE_BUF_BYTES);
	if (!f->buf) {
		free(f);
		return NULL;
	}
	f->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (f->fd < 0) {
		free(f->buf);
		free(f);
		return NULL;
	}
	f->err = 0;
	f->sink = NULL;
	f->rec_type = rec_type;
	f->rec_size = rec_size;
	f->count = 0;
	f->dropped = 0;
	f->disk_bytes = 0;
	f->used = 0;
	memcpy(hdr.magic, TT_FILE_MAGIC, sizeof(hdr.magic));
	err = write_full(f->fd, &hdr, sizeof(hdr), NULL);
	if (err) { /* no file rather than one without a whole header */
		struct stat st;

		if (!fstat(f->fd, &st) && S_ISREG(st.st_mode))
			unlink(path);
		close(f->fd);
		free(f->buf);
		free(f);
		errno = -err;
		return NULL;
	}
	link_open(f);
	return f;
}

struct recfile *recfile_open_sink(enum tt_rec_type type, recfile_sink_fn fn, void *arg)
{
	struct recfile *f;

	if (!recfile_kind_size(type) || !fn) {
		errno = EINVAL;
		return NULL;
	}
	f = calloc(1, sizeof(*f)); /* no buffer: records go straight on */
	if (!f)
		return NULL;
	f->fd = -1;
	f->sink = fn;
	f->sink_arg = arg;
	f->rec_type = type;
	f->rec_size = recfile_kind_size(type);
	return f;
}

struct recfile *recfile_open_kind(const char *dir, enum tt_rec_type type)
{
	const char *name = recfile_kind_file(type);
	char path[PATH_MAX];

	if (!name) {
		errno = EINVAL;
		return NULL;
	}
	if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path)) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	return recfile_open(path, type, recfile_kind_size(type));
}

/* A write failed (disk full, I/O error): cut the file back to its last whole
 * record so what is there stays readable; count every record not on disk. */
static int write_failed(struct recfile *f, int err)
{
	uint64_t whole = f->disk_bytes - f->disk_bytes % f->rec_size;

	f->err = err;
	if (ftruncate(f->fd, (off_t)(sizeof(struct tt_file_header) + whole)) == 0)
		f->disk_bytes = whole;
	f->dropped = f->count - f->disk_bytes / f->rec_size;
	f->count = f->disk_bytes / f->rec_size;
	return err;
}

int recfile_flush(struct recfile *f)
{
	int err;

	if (!f || f->err || f->used == 0 || f->sink)
		return f ? f->err : 0;
	err = write_full(f->fd, f->buf, f->used, &f->disk_bytes);
	f->used = 0;
	return err ? write_failed(f, err) : 0;
}

int recfile_write(struct recfile *f, const void *recs, size_t n)
{
	const char *src = recs;
	size_t left = n * f->rec_size;
	int err;

	if (f->err) {
		f->dropped += n;
		return f->err;
	}
	f->count += n;
	if (f->sink) {
		err = f->sink(f->sink_arg, f->rec_type, recs, n);
		if (err) { /* the sink refused them (out of memory): counted, not sticky */
			f->count -= n;
			f->dropped += n;
		}
		return err;
	}
	while (left > 0) {
		size_t room = RECFILE_BUF_BYTES - f->used;
		size_t chunk = left < room ? left : room;

		memcpy(f->buf + f->used, src, chunk);
		f->used += chunk;
		src += chunk;
		left -= chunk;
		if (f->used == RECFILE_BUF_BYTES) {
			err = recfile_flush(f);
			if (err)
				return err;
		}
	}
	return 0;
}

uint64_t recfile_count(const struct recfile *f)
{
	return f ? f->count : 0;
}

uint64_t recfile_dropped(const struct recfile *f)
{
	return f ? f->dropped : 0;
}

int recfile_close(struct recfile *f)
{
	int err;

	if (!f)
		return 0;
	err = recfile_flush(f);
	if (f->fd >= 0)
		unlink_open(f);
	if (f->fd >= 0 && close(f->fd) && !err)
		err = -errno;
	free(f->buf);
	free(f);
	return err;
}

static int read_full(int fd, void *p, size_t len)
{
	char *c = p;

	while (len > 0) {
		ssize_t r = read(fd, c, len);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			return -EBADMSG;
		c += r;
		len -= (size_t)r;
	}
	return 0;
}

int recfile_read_all(const char *path, uint32_t rec_type, uint32_t rec_size,
		     void **out, size_t *n)
{
	struct tt_file_header hdr;
	struct stat st;
	size_t body;
	void *buf = NULL;
	int fd, err;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	err = fstat(fd, &st) ? -errno : read_full(fd, &hdr, sizeof(hdr));
	if (!err && (memcmp(hdr.magic, TT_FILE_MAGIC, sizeof(hdr.magic)) ||
		     hdr.rec_type != rec_type || hdr.rec_size != rec_size))
		err = -EBADMSG;
	body = err ? 0 : (size_t)st.st_size - sizeof(hdr);
	if (!err && body % rec_size)
		err = -EBADMSG;
	if (!err && body) {
		buf = malloc(body);
		err = buf ? read_full(fd, buf, body) : -ENOMEM;
	}
	close(fd);
	if (err) {
		free(buf);
		return err;
	}
	*out = buf;
	*n = body / rec_size;
	return 0;
}
