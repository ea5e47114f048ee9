/* SPDX-License-Identifier: MIT */
/*
 * Function symbols wherever the distribution keeps them, through libdwfl
 * (elfutils): a stripped file's debug file (/usr/lib/debug/.build-id/NN/…,
 * .gnu_debuglink, debuginfod when DEBUGINFOD_URLS is set) or its MiniDebugInfo
 * (.gnu_debugdata). syms.c asks for a file that has no .symtab of its own.
 */
#ifndef TT_DEBUGINFO_H
#define TT_DEBUGINFO_H
#include <gelf.h>
#include <stdbool.h>
#include <stdint.h>

/* vaddr: the symbol's value, in the file's own addresses; global: not a local
 * (static) symbol. Non-zero stops. */
typedef int (*debuginfo_func_fn)(const char *name, uint64_t vaddr, uint64_t size, bool global,
				 void *arg);

/* Call fn for each function symbol (objects: each sized data object, a global
 * variable) the debug data of the ELF file at path holds: 0, -ENOENT when it
 * has none (the file's .dynsym is all there is), or fn's non-zero return. */
int debuginfo_each_sym(const char *path, bool objects, debuginfo_func_fn fn, void *arg);
/* A defined function symbol (objects false) or sized data object (objects true). */
bool debuginfo_sym_wanted(const GElf_Sym *s, bool objects);
/* A file's DWARF (its own .debug_info, or its debug file's), kept open to name
 * the functions inlined at an address. */
struct debuginfo_lines;

/* NULL when the file has no DWARF (Debian's stripped binaries without their
 * -dbgsym package). */
struct debuginfo_lines *debuginfo_lines_open(const char *path);
/* The functions inlined at vaddr (the file's own addresses), innermost first,
 * into out (max names of len bytes each; C++ and Rust ones mangled, as the
 * file spells them): how many. The function they were inlined into is not among them. */
int debuginfo_inlined(struct debuginfo_lines *l, uint64_t vaddr, char *out, size_t len, int max);
void debuginfo_lines_free(struct debuginfo_lines *l);

/* Bound debuginfod's waits when the user has not (DEBUGINFOD_TIMEOUT and
 * DEBUGINFOD_MAXTIME): a server that is down or slow costs seconds, once. */
void debuginfo_bound_waits(void);

#endif
