/* SPDX-License-Identifier: MIT */
/*
 * The futex words the traced threads waited on, named by the global variable
 * holding them (symbols/syms.h: syms_resolve_data): LOCK_open in mariadbd,
 * _PyRuntime (the GIL among its fields) in python3.11, main_arena in libc.
 * Noted as switch records stream in, named at the end while the maps
 * snapshots are there: DIR/wait_names.jsonl, one line per word named,
 * {"pid", "addr", "symbol", "offset", "size", "object"}.
 */
#ifndef TT_WAIT_NAMES_H
#define TT_WAIT_NAMES_H
#include <stdint.h>

struct tt_syms_set;
struct wait_names;

struct wait_names *wait_names_new(void);
/* One futex wait of pid on the word at addr (cheap: a set insert). */
void wait_names_note(struct wait_names *w, uint32_t pid, uint64_t addr);
/* Name every word noted into DIR/wait_names.jsonl: 0 or -errno. */
int wait_names_write(struct wait_names *w, const char *dir, struct tt_syms_set *syms);
void wait_names_free(struct wait_names *w);

#endif
