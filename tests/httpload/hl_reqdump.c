/* Test helper: print DIR/requests.bin as CSV, read with recfile_read_all, so
 * the tests can check that the C reader and analyze/load/schema.py agree. */
#include <stdio.h>
#include <stdlib.h>

#include "recfile.h"

int main(int argc, char **argv)
{
	struct tt_request *r;
	char path[4096];
	size_t n;
	int err;

	if (argc != 2) {
		fprintf(stderr, "usage: hl_reqdump RUN_DIR\n");
		return 2;
	}
	snprintf(path, sizeof(path), "%s/requests.bin", argv[1]);
	err = recfile_read_all(path, TT_REC_REQUEST, sizeof(*r), (void **)&r, &n);
	if (err) {
		fprintf(stderr, "hl_reqdump: %s: error %d\n", path, err);
		return 1;
	}
	printf("id,conn,tid,pid,t_enqueue_ns,t_start_ns,t_end_ns,status,bytes\n");
	for (size_t i = 0; i < n; i++)
		printf("%llu,%u,%u,%u,%llu,%llu,%llu,%d,%llu\n", r[i].id, r[i].conn, r[i].tid,
		       r[i].pid, r[i].t_enqueue_ns, r[i].t_start_ns, r[i].t_end_ns, r[i].status,
		       r[i].bytes);
	if (n)
		free(r);
	return 0;
}
