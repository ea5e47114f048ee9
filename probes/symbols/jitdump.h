/* SPDX-License-Identifier: MIT */
/*
 * jitdump: the records of perf's jitdump format (tools/perf/util/jitdump.h), the
 * jit-PID.dump a runtime writes (node --perf-prof, perf's JVMTI agent): a header,
 * then records, each a prefix and its body. Only the types: perfmap.c reads them,
 * the tests write them.
 */
#ifndef TT_JITDUMP_H
#define TT_JITDUMP_H
#include <stdint.h>

#define JITDUMP_MAGIC 0x4A695444u /* "JiTD", in the writer's byte order */

enum jitdump_id { JIT_CODE_LOAD = 0, JIT_CODE_MOVE = 1, JIT_CODE_DEBUG_INFO = 2 };

struct jitdump_header {
	uint32_t magic, version, total_size, elf_mach, pad1, pid;
	uint64_t timestamp, flags;
};

struct jitdump_prefix {
	uint32_t id, total_size; /* total_size: the record's, prefix included */
	uint64_t timestamp;
};

struct jitdump_load { /* then the name, NUL-terminated, then the code */
	struct jitdump_prefix p;
	uint32_t pid, tid;
	uint64_t vma, code_addr, code_size, code_index;
};

struct jitdump_move {
	struct jitdump_prefix p;
	uint32_t pid, tid;
	uint64_t vma, old_code_addr, new_code_addr, code_size, code_index;
};

#endif
