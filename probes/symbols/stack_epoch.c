// SPDX-License-Identifier: MIT
/* stack_epoch: stack maps that take turns (stack_epoch.h). */
#include <bpf/bpf.h>

#include "core/probe.h"
#include "symbols/stack_epoch.h"

#define EPOCH_MIN_NS (60 * 1000000000ull)

void stack_epochs_init(struct stack_epochs *e, const struct tt_ctx *ctx, bool stacks,
		       uint32_t ids, uint64_t now_ns)
{
	const struct tt_opts *o = ctx->opts;
	uint64_t ns = (uint64_t)(2 * o->flight_s * 1e9);

	*e = (struct stack_epochs){ .ids = ids, .wrap = (uint32_t)(INT32_MAX / ids) & ~1u };
	if (!ctx->flight || !stacks)
		return;
	e->period_ns = o->debug.stack_epoch_ms ? o->debug.stack_epoch_ms * 1000000ull :
			ns > EPOCH_MIN_NS ? ns : EPOCH_MIN_NS;
	e->next_ns = now_ns + e->period_ns;
}

/* Empty one stack map. A key's successor is found before the key goes: from
 * a key it no longer holds, a stack map starts again from its first bucket. */
static void map_empty(int fd)
{
	__u32 key, next;
	bool more = !bpf_map_get_next_key(fd, NULL, &key);

	while (more) {
		more = !bpf_map_get_next_key(fd, &key, &next);
		bpf_map_delete_elem(fd, &key);
		key = next;
	}
}

int stack_epochs_tick(struct stack_epochs *e, uint32_t *epoch, const int *const gen_fds[2],
		      int nfds, uint64_t now_ns)
{
	uint32_t next = (*epoch + 1) % e->wrap;

	if (!e->period_ns)
		return -1;
	if (now_ns < e->next_ns)
		return (int)((e->next_ns - now_ns + 999999) / 1000000);
	for (int i = 0; i < nfds; i++)
		map_empty(gen_fds[next & 1][i]);
	__atomic_store_n(epoch, next, __ATOMIC_RELEASE);
	e->begun++;
	e->next_ns = now_ns + e->period_ns;
	return (int)(e->period_ns / 1000000);
}

int64_t stack_epochs_slot(struct stack_epochs *e, uint32_t epoch, int32_t id)
{
	uint32_t of = (uint32_t)id / e->ids, before = (epoch + e->wrap - 1) % e->wrap;

	if (id < 0 || of >= e->wrap)
		return -1;
	if (of != epoch && !(e->begun && of == before)) {
		e->expired++;
		return -1;
	}
	return (int64_t)(of & 1) * e->ids + (uint32_t)id % e->ids;
}

void stack_epochs_meta(const struct stack_epochs *e, const char *name, FILE *f)
{
	if (e->period_ns)
		fprintf(f, "  \"%s\": {\"period_ms\": %llu, \"begun\": %llu, \"expired\": %llu},\n",
			name, (unsigned long long)(e->period_ns / 1000000),
			(unsigned long long)e->begun, (unsigned long long)e->expired);
}
