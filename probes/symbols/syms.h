/* SPDX-License-Identifier: MIT */
/*
 * Symbols for uprobes and stacks, from /proc/PID/maps and ELF files on disk.
 * Works for third-party binaries and after the target exited: the maps are
 * snapshotted while it runs (syms_refresh) and ELF files are read from disk.
 */
#ifndef TT_SYMS_H
#define TT_SYMS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tt_syms;

/* A traced process's maps are read again (the symbolizers', the unwinder's) first
 * this soon after the poll loop starts (its exec under way), then twice as late
 * each time, up to every SYMS_REFRESH_NS (its dlopens). */
#define SYMS_FIRST_REFRESH_NS 5000000ull
#define SYMS_REFRESH_NS 1000000000ull

struct tt_syms *syms_new(int pid);
/* Re-read /proc/PID/maps, keeping mappings already seen (cheap if unchanged). */
int syms_refresh(struct tt_syms *s);
/* "func+0x1a (libc.so.6)" or "[unknown] (0x7f..)" into buf; returns buf. C++ and
 * Rust names demangled ("ns::C::f(int)+0x1a (app)"). */
const char *syms_resolve(struct tt_syms *s, uint64_t addr, char *buf, size_t len);
/* The functions inlined at addr, innermost first (the DWARF of its file, or of
 * the file's debug file), into out as frames, "take_a_nap (inlined) (app)": max
 * of len bytes each; how many. */
int syms_inlined(struct tt_syms *s, uint64_t addr, char *out, size_t len, int max);
/* syms_resolve, and the frame's mangled name in *mangled when it was demangled
 * (else NULL; valid while s lives). */
const char *syms_resolve_mangled(struct tt_syms *s, uint64_t addr, char *buf, size_t len,
				 const char **mangled);
/* The global variable holding a data address of the process (a lock in its
 * .data or .bss): its symbol, the address's offset in it, and the file's name
 * (all valid while s lives). */
struct syms_data {
	const char *name;
	uint64_t offset;
	uint64_t size;    /* the variable's */
	const char *object;
};
/* 0, or -ENOENT when no file's image holds addr or no symbol covers it. */
int syms_resolve_data(struct tt_syms *s, uint64_t addr, struct syms_data *out);
void syms_free(struct tt_syms *s);
/* Does pid see the same / as tailtrace (not a container's)? True when it cannot
 * be told. Its files are read through /proc/PID/root otherwise. */
bool syms_shares_root(int pid);

/* One symbolizer per process (syms_set.c): made when a process is first seen,
 * so its mappings are read while it lives. */
struct tt_syms_set;
struct tt_syms_set *syms_set_new(void);
/* pid's symbolizer; made (and its maps read now) if create. NULL: none / full. */
struct tt_syms *syms_set_get(struct tt_syms_set *set, int pid, bool create);
void syms_set_refresh(struct tt_syms_set *set);
void syms_set_free(struct tt_syms_set *set);

/* Kernel symbols from /proc/kallsyms. */
struct tt_ksyms;
struct tt_ksyms *ksyms_load(void);
const char *ksyms_resolve(struct tt_ksyms *k, uint64_t addr, char *buf, size_t len);
void ksyms_free(struct tt_ksyms *k);

/* Find the file a library name (libc.so.6, libcurl.so.4, or a path) refers to
 * for pid: its mapping in /proc/PID/maps, else the dynamic loader's search
 * (ldconfig cache, standard dirs). 0 or -ENOENT. */
int syms_find_library(int pid, const char *name, char *path, size_t len);
/* name in the dynamic loader's cache file (glibc format): 0 and its real path,
 * -ENOENT, or -EINVAL when the file is missing or not one syms_lib.c reads. */
int syms_ldcache_find(const char *cache, const char *name, char *path, size_t len);
/* 1 if pid maps the file at path (same device and inode), else 0. */
int syms_is_mapped(int pid, const char *path);
/* File offset of a symbol in an ELF (.symtab then .dynsym) for a uprobe.
 * -ENOENT if absent; then syms_suggest() lists close matches. */
int syms_elf_offset(const char *path, const char *symbol, uint64_t *offset);
/* A function symbol's place in an ELF file. */
struct syms_func {
	uint64_t vaddr;  /* st_value */
	uint64_t size;   /* st_size */
	uint64_t offset; /* file offset of its first byte */
};
/* syms_elf_offset with the symbol's size and address: 0 or -errno. */
int syms_elf_func(const char *path, const char *symbol, struct syms_func *f);
/* The sized function symbol containing vaddr (name into name[len] if not
 * NULL): 0 or -ENOENT. */
int syms_elf_func_at(const char *path, uint64_t vaddr, struct syms_func *f, char *name, size_t len);
/* Call fn for each DT_NEEDED library name of the ELF file; a non-zero return
 * stops and is returned. 0, or -errno if the file cannot be read. */
int syms_elf_needed(const char *path, int (*fn)(const char *lib, void *arg), void *arg);
/* 1 if the ELF file names the symbol (defined or imported, .symtab or .dynsym),
 * 0 if not, or -errno. */
int syms_elf_has_symbol(const char *path, const char *name);
/* 1 if the ELF file has a section of that name, 0 if not, or -errno. */
int syms_elf_has_section(const char *path, const char *name);
/* One USDT probe (.note.stapsdt, SystemTap's format as sys/sdt.h writes it). */
struct syms_usdt {
	const char *provider, *name, *args; /* args: "8@%rax -4@-12(%rbp)", "" if none */
	uint64_t vaddr;  /* its nop, in the file's addresses (.stapsdt.base applied) */
	uint64_t offset; /* file offset of that nop: where the uprobe goes */
	uint64_t sema;   /* file offset of its is-enabled semaphore, 0 if none */
	int nargs;
};
/* Call fn for each USDT probe of the ELF file; a non-zero return stops and is
 * returned. 0, or -errno if the file cannot be read. */
int syms_elf_usdt(const char *path, int (*fn)(const struct syms_usdt *u, void *arg), void *arg);
/* A C++ (Itanium) or Rust (legacy, v0) name as c++filt and rustfilt print it
 * (malloc'd), or NULL if name is not one (demangle.c). */
char *syms_demangle(const char *name);
/* Is want the demangled name, or it without its parameter list ("ns::C::f"
 * for "ns::C::f(int) const")? */
bool syms_demangled_matches(const char *demangled, const char *want);
/* The mangled name (into mangled[len]) of the one function of the ELF file whose
 * demangled name is want (syms_demangled_matches): 0; -ENOENT none; -EEXIST
 * several, their demangled names joined with "; " into cands. */
int syms_elf_demangled(const char *path, const char *want, char *mangled, size_t len,
		       char *cands, size_t clen);
/* Up to max close matches of symbol in path (substring, case-insensitive),
 * joined with ", " into buf. Returns number found. */
int syms_suggest(const char *path, const char *symbol, char *buf, size_t len, int max);

#endif
