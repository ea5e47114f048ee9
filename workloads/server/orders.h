/* SPDX-License-Identifier: MIT */
/*
 * The orders service: routes one parsed request and appends its reply.
 *   POST /orders   JSON object body -> 200 {"order_id":N,"status":"accepted"}
 *                  (after --service-us of CPU work and a --sleep-us wait)
 *   GET  /health   200 {"status":"ok"}   (HEAD too)
 *   other path     404, keep-alive;  wrong method on a known path: 405.
 */
#ifndef ORDERS_ORDERS_H
#define ORDERS_ORDERS_H
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "http_parse.h"
#include "http_reply.h"

struct orders_config {
	uint32_t service_us;     /* CPU work per order */
	uint32_t sleep_us;       /* blocking downstream wait per order */
	uint64_t max_body_bytes; /* larger bodies get 413 */
	int stop_fd;             /* eventfd that cuts the wait short on shutdown */
	const atomic_bool *stopping; /* set on shutdown: cuts the CPU work short */
};

/* Handle one complete request. out must have HTTP_REPLY_MAX_BYTES free.
 * Returns the HTTP status sent, or -ENOSPC. *keep_alive: keep the connection
 * (0 after a 503: an order whose work or wait was cut short by shutdown). */
int orders_handle(const struct orders_config *cfg, const struct http_request *req,
		  struct obuf *out, int *keep_alive);

/* Reply to a request that failed to parse (400, 413, 431, 501, 505) or did
 * not arrive in time (408), with "Connection: close". 0 or -ENOSPC. */
int orders_reply_error(struct obuf *out, int status);

/* Orders accepted so far, all workers. */
uint64_t orders_count(void);

#endif
