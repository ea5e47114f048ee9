/* SPDX-License-Identifier: MIT */
/*
 * The record schema as JSON, generated from include/tailtrace/records.h:
 *   {"magic": "TTREC01", "header_size": 16,
 *    "records": {"request": {"type": 1, "size": 56, "file": "requests.bin",
 *                "fields": [{"name": "id", "type": "u64", "offset": 0, "count": 1}, ...]}, ...}}
 * The Python analysis builds its numpy dtypes from this and nothing else.
 */
#ifndef TT_SCHEMA_H
#define TT_SCHEMA_H
#include <stdio.h>

int schema_print(FILE *out);
/* Write DIR/schema.json atomically (tmp + rename). 0 or -errno. */
int schema_write_dir(const char *dir);

#endif
