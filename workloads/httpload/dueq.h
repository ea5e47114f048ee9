/* SPDX-License-Identifier: MIT */
/* Open loop, naive model: the dispatcher queues due request ids here and a
 * free connection thread takes the oldest (mutex + condvar FIFO). */
#ifndef HL_DUEQ_H
#define HL_DUEQ_H
#include <pthread.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdint.h>

struct hl_dueq {
	pthread_mutex_t lock;
	pthread_cond_t ready;
	uint64_t *ids;
	size_t cap, head, count;
	bool closed;
};

int dueq_init(struct hl_dueq *q);
void dueq_destroy(struct hl_dueq *q);
int dueq_push(struct hl_dueq *q, uint64_t id);
/* Blocks until an id is queued (true) or the queue is closed and empty,
 * or abort is set (false). */
bool dueq_pop(struct hl_dueq *q, uint64_t *id, atomic_int *abort_flag);
void dueq_close(struct hl_dueq *q);

#endif
