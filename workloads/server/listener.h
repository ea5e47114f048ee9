/* SPDX-License-Identifier: MIT */
/* Listening sockets: one per worker on the same address with SO_REUSEPORT,
 * so the kernel spreads new connections over the workers' accept queues. */
#ifndef ORDERS_LISTENER_H
#define ORDERS_LISTENER_H
#include <stdint.h>

/* Open n non-blocking listeners on bind_addr:port (port 0: the first one
 * picks an ephemeral port, the others join it). fds[] gets n sockets,
 * *port_out the port. 0, or a negative errno (nothing left open); *what
 * names the failing step. */
int listener_open(const char *bind_addr, uint16_t port, int backlog, int n,
		  int *fds, uint16_t *port_out, const char **what);

void listener_close(int *fds, int n);

#endif
