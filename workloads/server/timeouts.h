/* SPDX-License-Identifier: MIT */
/*
 * Connection timeouts without a timer per connection or a syscall per
 * request. Each connection is on the list of its phase (waiting for or
 * receiving a request, idle between keep-alive requests, lingering after an
 * error reply), stamped with the time it was last marked. Marking always
 * uses the current time and moves the node to the head of its list, so each
 * list stays sorted newest -> oldest and the expired connections are a run
 * at the tail: finding them costs O(expired + phases), however many
 * connections are open. Pure (no I/O, no allocation), unit tested.
 */
#ifndef ORDERS_TIMEOUTS_H
#define ORDERS_TIMEOUTS_H
#include <stdint.h>

enum tmo_phase {
	TMO_REQUEST = 0, /* a request has not fully arrived, or its reply is stuck */
	TMO_IDLE,        /* keep-alive, between requests */
	TMO_LINGER,      /* half-closed after an error reply, draining input */
	TMO_PHASES,
};

struct tmo_node {
	struct tmo_node *newer, *older; /* neighbours on the phase's list */
	uint64_t t_mark_ns;             /* when it was last marked */
	unsigned phase;
};

struct tmo_list {
	struct tmo_node *newest, *oldest;
};

struct tmo_lists {
	struct tmo_list list[TMO_PHASES];
	uint64_t timeout_ns[TMO_PHASES]; /* UINT64_MAX: never expires */
};

/* Empty lists; timeout_ms[phase] == 0 means that phase never expires. */
void tmo_init(struct tmo_lists *l, const uint32_t timeout_ms[TMO_PHASES]);

/* Put n (on no list) at the head of phase's list, marked now_ns. */
void tmo_insert(struct tmo_lists *l, struct tmo_node *n, unsigned phase, uint64_t now_ns);

/* Take n off its list. */
void tmo_remove(struct tmo_lists *l, struct tmo_node *n);

/* Re-mark n (on a list) as entering phase at now_ns. now_ns must not be
 * older than any mark already given (one monotonic clock per lists). */
void tmo_mark(struct tmo_lists *l, struct tmo_node *n, unsigned phase, uint64_t now_ns);

/* The oldest node of some phase whose timeout has passed at now_ns, or NULL.
 * The caller must remove or re-mark it before asking again. */
struct tmo_node *tmo_expired(const struct tmo_lists *l, uint64_t now_ns);

/* Any node, or NULL when all lists are empty (for closing everything). */
struct tmo_node *tmo_any(const struct tmo_lists *l);

/* 1 if some node is on a list whose phase can expire (a scan is needed). */
int tmo_armed(const struct tmo_lists *l);

#endif
