/* SPDX-License-Identifier: MIT */
/* FIFO of due request ids (open loop, naive model). */
#include "dueq.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

int dueq_init(struct hl_dueq *q)
{
	*q = (struct hl_dueq){ .cap = 1024 };
	q->ids = malloc(q->cap * sizeof(*q->ids));
	if (!q->ids)
		return -ENOMEM;
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->ready, NULL);
	return 0;
}

void dueq_destroy(struct hl_dueq *q)
{
	pthread_cond_destroy(&q->ready);
	pthread_mutex_destroy(&q->lock);
	free(q->ids);
	q->ids = NULL;
}

static int dueq_grow(struct hl_dueq *q)
{
	size_t cap = 2 * q->cap;
	uint64_t *ids = malloc(cap * sizeof(*ids));

	if (!ids)
		return -ENOMEM;
	for (size_t i = 0; i < q->count; i++)
		ids[i] = q->ids[(q->head + i) % q->cap];
	free(q->ids);
	q->ids = ids;
	q->cap = cap;
	q->head = 0;
	return 0;
}

int dueq_push(struct hl_dueq *q, uint64_t id)
{
	int err = 0;

	pthread_mutex_lock(&q->lock);
	if (q->count == q->cap)
		err = dueq_grow(q);
	if (!err) {
		q->ids[(q->head + q->count) % q->cap] = id;
		q->count++;
	}
	pthread_mutex_unlock(&q->lock);
	pthread_cond_signal(&q->ready);
	return err;
}

bool dueq_pop(struct hl_dueq *q, uint64_t *id, atomic_int *abort_flag)
{
	bool got = false;

	pthread_mutex_lock(&q->lock);
	while (!q->count && !q->closed && !atomic_load_explicit(abort_flag, memory_order_relaxed)) {
		struct timespec ts;

		/* wake now and then to notice the stop flag set by a signal */
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 100000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&q->ready, &q->lock, &ts);
	}
	if (q->count && !atomic_load_explicit(abort_flag, memory_order_relaxed)) {
		*id = q->ids[q->head];
		q->head = (q->head + 1) % q->cap;
		q->count--;
		got = true;
	}
	pthread_mutex_unlock(&q->lock);
	return got;
}

void dueq_close(struct hl_dueq *q)
{
	pthread_mutex_lock(&q->lock);
	q->closed = true;
	pthread_mutex_unlock(&q->lock);
	pthread_cond_broadcast(&q->ready);
}
