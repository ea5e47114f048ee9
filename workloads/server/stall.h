/* SPDX-License-Identifier: MIT */
/*
 * stall: an injected server-side stall (--stall-every-ms E --stall-ms S): every
 * order takes the ledger lock for an instant, and the orders-ledger thread holds
 * it S ms every E ms, as a compaction or snapshot would. Off (no lock on the
 * request path) unless S > 0. Each stall is logged: "stall T_START_NS T_END_NS"
 * (CLOCK_MONOTONIC) to --stall-log, the oracle of bench/flight_stalls.sh.
 */
#ifndef ORDERS_STALL_H
#define ORDERS_STALL_H
#include <stdint.h>

struct stall_config {
	uint32_t every_ms, hold_ms;
	const char *log_path;    /* NULL: stderr */
};

/* Start the orders-ledger thread when hold_ms > 0. 0 or -errno. */
int stall_start(const struct stall_config *c);
/* Stop it (a stall in progress ends first). */
void stall_stop(void);
/* On the request path: take and release the ledger lock (no-op when off). */
void stall_order(void);

#endif
