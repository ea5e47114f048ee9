/* SPDX-License-Identifier: MIT */
/*
 * One client connection: input buffer, output buffer and the state machine
 * driven by edge-triggered epoll events (read -> parse -> handle -> one write
 * per batch of replies; partial reads and writes resumed on the next event).
 * After an error reply the connection half-closes and drains ("lingers") so
 * the client reads the reply instead of a reset. Buffers are allocated on
 * first use (a connection that never sends costs no buffer) and kept while
 * the conn is recycled; the input buffer starts small and grows to
 * CONN_IN_BYTES the first time a read fills it.
 */
#ifndef ORDERS_CONN_H
#define ORDERS_CONN_H
#include <stddef.h>
#include <stdint.h>

#include "http_reply.h"
#include "orders.h"
#include "timeouts.h"

#define CONN_IN_START_BYTES 2048 /* a typical request head */
#define CONN_IN_BYTES 16384  /* holds a maximal head (8 KiB) + small bodies */
#define CONN_OUT_BYTES 16384 /* replies of a pipelined batch */
#define CONN_LINGER_MS 2000  /* at most this long draining after an error reply */

#define CONN_READS_PER_DRIVE 16 /* then other connections get a turn */

enum conn_result {
	CONN_KEEP = 0,  /* wait for the next event */
	CONN_CLOSE = 1, /* caller closes and frees it */
	CONN_AGAIN = 2, /* more input may be waiting: drive again soon */
};

struct conn_stats {
	uint64_t requests; /* replies sent, any status */
	uint64_t errors;   /* of which 4xx/5xx */
};

struct conn {
	struct tmo_node tmo;         /* owner's timeout list of its phase */
	int fd;
	unsigned readable : 1;       /* may have unread bytes (edge seen) */
	unsigned eof : 1;            /* peer finished sending */
	unsigned closing : 1;        /* last reply queued: flush, then half-close */
	unsigned lingering : 1;      /* half-closed: discard input until EOF */
	unsigned sent_continue : 1;  /* "100 Continue" sent for this request */
	unsigned queued : 1;         /* on the owner's drive-again list */
	unsigned rdhup : 1;          /* peer shut down its side: read to the EOF */
	unsigned served : 1;         /* answered at least one request */
	char *in;                    /* NULL until the first read */
	size_t in_len;
	size_t in_cap;
	size_t lingered_bytes;
	struct obuf out;             /* data NULL until the first reply */
	struct conn *spare_next;     /* owner's list of closed conns */
	struct conn *again_next;     /* owner's drive-again list */
};

/* A conn without buffers. NULL on ENOMEM. */
struct conn *conn_new(void);
/* Make a (new or recycled) conn serve fd. */
void conn_reset(struct conn *c, int fd);
void conn_free(struct conn *c);

/* Handle the epoll events of c (0: none, resume after CONN_AGAIN). */
enum conn_result conn_drive(struct conn *c, uint32_t events,
			    const struct orders_config *cfg, struct conn_stats *st);

/* Its timeout phase (enum tmo_phase) after a drive: LINGER when draining,
 * IDLE between keep-alive requests, else REQUEST (no request answered yet,
 * a partial request or body in the buffer, or replies not yet sent). */
unsigned conn_phase(const struct conn *c);

/* Its phase's timeout passed. A partial request gets "408 Request Timeout"
 * and the lingering close; anything else (nothing received, idle, replies
 * stuck, a 408 already sent) is closed: CONN_CLOSE. */
enum conn_result conn_expire(struct conn *c, const struct orders_config *cfg,
			     struct conn_stats *st);

#endif
