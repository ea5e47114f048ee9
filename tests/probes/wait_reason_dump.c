// SPDX-License-Identifier: MIT
/* wait_reason_dump: probes/sched/wait_reason.h's class of every syscall number
 * -1..511, one per line, for tests/probes/test_exporter.py to compare with
 * analyze/explain/waits.py. */
#include <stdio.h>

#include "sched/wait_reason.h"

int main(void)
{
	for (long nr = -1; nr < 512; nr++)
		printf("%ld %u\n", nr, tt_wait_reason(nr));
	return 0;
}
