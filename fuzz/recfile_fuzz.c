/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: recfile_read_all on arbitrary file contents, read as every
 * record kind. Accepted files must hold exactly a header plus whole records,
 * returned byte for byte; anything else is refused with a negative errno.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"
#include "recfile.h"

#define KIND_TYPE(kind, st, type, fields, file) type,
static const enum tt_rec_type kinds[] = { TT_RECORD_KINDS(KIND_TYPE) };

static int file_fd = -1;
static char file_path[64];

static void file_fill(const uint8_t *data, size_t size)
{
	if (file_fd < 0) {
		file_fd = memfd_create("recfile_fuzz", 0);
		REQUIRE(file_fd >= 0);
		snprintf(file_path, sizeof(file_path), "/proc/self/fd/%d", file_fd);
	}
	REQUIRE(ftruncate(file_fd, 0) == 0);
	REQUIRE(pwrite(file_fd, data, size, 0) == (ssize_t)size);
}

static void read_as(const uint8_t *data, size_t size, uint32_t type, uint32_t rec_size)
{
	void *recs = NULL;
	size_t n = 0;
	int rc = recfile_read_all(file_path, type, rec_size, &recs, &n);

	if (rc) {
		REQUIRE(rc < 0 && !recs);
		return;
	}
	REQUIRE(size >= sizeof(struct tt_file_header));
	REQUIRE(n * rec_size == size - sizeof(struct tt_file_header));
	REQUIRE(!n || memcmp(recs, data + sizeof(struct tt_file_header), n * rec_size) == 0);
	free(recs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tt_file_header hdr;

	file_fill(data, size);
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		read_as(data, size, kinds[i], recfile_kind_size(kinds[i]));
	/* whatever the header claims, so the fuzzer reaches the accepting path too */
	if (size >= sizeof(hdr)) {
		memcpy(&hdr, data, sizeof(hdr));
		if (hdr.rec_size)
			read_as(data, size, hdr.rec_type, hdr.rec_size);
	}
	return 0;
}
