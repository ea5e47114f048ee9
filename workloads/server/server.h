/* SPDX-License-Identifier: MIT */
/*
 * The server: N worker threads ("orders-w<i>"), each with its own epoll
 * instance and its own SO_REUSEPORT listener, so a connection lives on one
 * worker from accept to close and workers share nothing on the hot path.
 * A shared eventfd stops them all. Hostile clients are bounded by
 * max_conns (beyond it a new connection is reset at once) and by two
 * timeouts, checked at most every 250 ms per worker (see timeouts.h).
 */
#ifndef ORDERS_SERVER_H
#define ORDERS_SERVER_H
#include <stdint.h>

#include "orders.h"

struct server_config {
	const char *bind_addr;
	uint16_t port;        /* 0: ephemeral */
	int workers;
	int backlog;
	int max_conns;               /* open connections, all workers */
	uint32_t request_timeout_ms; /* first request, or a partial one: 408; 0: none */
	uint32_t idle_timeout_ms;    /* keep-alive between requests: close; 0: none */
	uint32_t spin_us;            /* poll this long, yielding, before sleeping; 0: none */
	struct orders_config orders; /* stop_fd, stopping: filled in by server_start */
};

struct server_stats {
	uint64_t connections;
	uint64_t requests;
	uint64_t errors;
	uint64_t refused;   /* reset at once: max_conns open already */
	uint64_t timed_out; /* closed by request_timeout_ms or idle_timeout_ms */
};

struct server;

/* Bind, listen and start the workers. 0 or a negative errno; on failure
 * *what names the failing step. */
int server_start(const struct server_config *cfg, struct server **out, const char **what);

uint16_t server_port(const struct server *s);

/* Stop the workers (they close their connections), join them, close
 * everything, free s. 0 or the first worker error (negative errno). */
int server_stop(struct server *s, struct server_stats *stats);

#endif
