/* SPDX-License-Identifier: MIT */
/*
 * Small JSON output helpers shared by the writers of schema.json, meta.json,
 * workload.json and the probes' stacks.json.
 */
#ifndef TT_JSON_OUT_H
#define TT_JSON_OUT_H
#include <stdio.h>

/* Write s as a JSON string: '"' and '\\' escaped, control bytes as \u00XX,
 * well-formed UTF-8 as is, and each byte of what is not UTF-8 (a comm cut in the
 * middle of a character, a Latin-1 argv or cgroup path) as \ufffd, the
 * replacement character, so that the file always decodes. NULL is written as null. */
void json_write_string(FILE *f, const char *s);

/* Writes a file body; returns 0 or a negative errno. */
typedef int (*json_body_fn)(FILE *f, const void *arg);

/* Write DIR/NAME atomically: body(f, arg) into DIR/.NAME.<pid>, then rename.
 * The temporary is removed on any error. 0 or -errno (-ENAMETOOLONG if a path
 * does not fit, -EIO if a write failed). */
int json_write_file(const char *dir, const char *name, json_body_fn body, const void *arg);

#endif
