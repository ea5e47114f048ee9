/* SPDX-License-Identifier: MIT */
/*
 * Record files: a 16-byte struct tt_file_header, then fixed-size records.
 * Writes are buffered and go to disk in bulk; recfile_close() flushes.
 * All functions return 0 or a negative errno. The first write error (disk
 * full...) is sticky: the file is cut back to its last whole record, so what
 * it holds stays readable, and every record that did not make it is counted
 * by recfile_dropped().
 */
#ifndef TT_RECFILE_H
#define TT_RECFILE_H
#include <stddef.h>
#include <stdint.h>
#include <tailtrace/records.h>

struct recfile;

/* Create (truncate) path and write its header. NULL on error, errno set. */
struct recfile *recfile_open(const char *path, uint32_t rec_type, uint32_t rec_size);
/* Where a sink's records go instead of a file: 0, or a negative errno (the
 * records are then counted as dropped). */
typedef int (*recfile_sink_fn)(void *arg, uint32_t rec_type, const void *recs, size_t n);
/* A recfile without a file: every write is handed to fn (tailtrace's flight
 * recorder keeps them in memory). Flush and close only free it. */
struct recfile *recfile_open_sink(enum tt_rec_type type, recfile_sink_fn fn, void *arg);
/* Open "DIR/<kind's file name>" for one of TT_RECORD_KINDS. */
struct recfile *recfile_open_kind(const char *dir, enum tt_rec_type type);
int recfile_write(struct recfile *f, const void *recs, size_t n);
int recfile_flush(struct recfile *f);
/* Flush every open file-backed recfile (one thread's: not thread-safe); the
 * first error, or 0 (each file keeps its own, sticky). */
int recfile_flush_all(void);
/* Records accepted and (after a write error: only those) on disk. */
uint64_t recfile_count(const struct recfile *f);
/* Records lost to a write error. */
uint64_t recfile_dropped(const struct recfile *f);
/* Flush, close, free. Safe on NULL. */
int recfile_close(struct recfile *f);

/* Read a whole file back (tests, tools). *out is malloc'ed; free() it.
 * -EBADMSG on a bad magic, type, record size or truncated record. */
int recfile_read_all(const char *path, uint32_t rec_type, uint32_t rec_size,
		     void **out, size_t *n);

/* Record size and file name of a type; 0 / NULL if unknown. */
uint32_t recfile_kind_size(enum tt_rec_type type);
const char *recfile_kind_file(enum tt_rec_type type);

#endif
