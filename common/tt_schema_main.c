/* SPDX-License-Identifier: MIT */
/* tt-schema: print the record schema (JSON) that the analysis reads. */
#include <stdio.h>
#include <string.h>
#include "schema.h"

int main(int argc, char **argv)
{
	if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		printf("usage: tt-schema [DIR]\n"
		       "Print the tailtrace record schema as JSON, or write DIR/schema.json.\n");
		return 0;
	}
	if (argc > 1) {
		int err = schema_write_dir(argv[1]);

		if (err) {
			fprintf(stderr, "tt-schema: cannot write %s/schema.json: %s\n", argv[1], strerror(-err));
			return 1;
		}
		return 0;
	}
	return schema_print(stdout) ? 1 : 0;
}
