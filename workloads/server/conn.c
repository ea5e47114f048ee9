/* SPDX-License-Identifier: MIT */
/* Connection state machine. See conn.h. */
#include "conn.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http_parse.h"
#include "tt_clock.h"
#include "tt_usdt.h"

#define LINGER_MAX_BYTES (1u << 20)

struct conn *conn_new(void)
{
	struct conn *c = calloc(1, sizeof(*c));

	if (c)
		c->fd = -1;
	return c;
}

void conn_reset(struct conn *c, int fd)
{
	/* A buffer grown for a large body goes back to the default size. */
	if (c->in_cap > CONN_IN_BYTES) {
		char *small = realloc(c->in, CONN_IN_BYTES);

		if (small) {
			c->in = small;
			c->in_cap = CONN_IN_BYTES;
		}
	}
	c->fd = fd;
	c->readable = c->eof = c->closing = c->lingering = c->sent_continue = c->queued = 0;
	c->rdhup = c->served = 0;
	c->in_len = 0;
	c->lingered_bytes = 0;
	c->out.len = c->out.off = 0;
}

void conn_free(struct conn *c)
{
	if (!c)
		return;
	free(c->in);
	free(c->out.data);
	free(c);
}

unsigned conn_phase(const struct conn *c)
{
	if (c->lingering)
		return TMO_LINGER;
	if (!c->served || c->in_len || c->out.off < c->out.len || c->closing)
		return TMO_REQUEST;
	return TMO_IDLE;
}

/* Grow (or first allocate) the input buffer to cap bytes. 0 or -ENOMEM. */
static int in_grow(struct conn *c, size_t cap)
{
	char *p = realloc(c->in, cap);

	if (!p)
		return -ENOMEM;
	c->in = p;
	c->in_cap = cap;
	return 0;
}

/* The output buffer, allocated with the first reply. 0 or -ENOMEM. */
static int out_ready(struct conn *c)
{
	if (c->out.data)
		return 0;
	c->out.data = malloc(CONN_OUT_BYTES);
	if (!c->out.data)
		return -ENOMEM;
	c->out.cap = CONN_OUT_BYTES;
	return 0;
}

/* The buffer must hold a request of total_len bytes starting at offset 0. */
static int in_reserve(struct conn *c, size_t total_len)
{
	return total_len <= c->in_cap ? 0 : in_grow(c, total_len);
}

static void reply_error(struct conn *c, int status, struct conn_stats *st)
{
	orders_reply_error(&c->out, status);
	c->closing = 1;
	st->requests++;
	st->errors++;
}

/* A request whose body has not fully arrived: make room, answer Expect. */
static void await_body(struct conn *c, const struct http_request *req, struct conn_stats *st)
{
	if (in_reserve(c, req->total_len) != 0) {
		reply_error(c, 500, st);
		return;
	}
	if (req->expect_continue && !c->sent_continue && http_reply_continue(&c->out) == 0)
		c->sent_continue = 1;
}

/* Parse and answer every complete request in the input buffer while the
 * output buffer has room for one more reply. */
static void conn_process(struct conn *c, const struct orders_config *cfg, struct conn_stats *st)
{
	struct http_request req;
	enum http_parse_status ps;
	size_t pos = 0;
	int keep, status, retry = 0;
	uint64_t t_start_ns;

	while (!c->closing && pos < c->in_len &&
	       (!c->out.data || c->out.cap - c->out.len >= HTTP_REPLY_MAX_BYTES)) {
		ps = http_parse_request(c->in + pos, c->in_len - pos, cfg->max_body_bytes, &req);
		if (ps == HTTP_PARSE_INCOMPLETE)
			break;
		if (out_ready(c) != 0) {
			c->closing = 1; /* no memory for a reply: just close */
			break;
		}
		if (ps == HTTP_PARSE_NEED_BODY) {
			if (pos) { /* the body must fit at offset 0: compact first */
				retry = 1;
				break;
			}
			await_body(c, &req, st);
			break;
		}
		if (ps != HTTP_PARSE_OK) {
			reply_error(c, http_parse_status_code(ps), st);
			break;
		}
		t_start_ns = tt_now_ns();
		TT_USDT2(orders, request__start, (uintptr_t)c, req.total_len);
		status = orders_handle(cfg, &req, &c->out, &keep);
		/* with the caller's trace context (NULL without): `--span usdt:orders-server:
		 * orders:request,traceparent=arg3,tracestate=arg4` puts the span in its trace */
		TT_USDT4(orders, request__done, (uintptr_t)c, status, req.traceparent,
			 req.tracestate);
		TT_USDT5(orders, request__span, (uintptr_t)c, t_start_ns, status, req.traceparent,
			 req.tracestate);
		pos += req.total_len;
		c->sent_continue = 0;
		c->served = 1;
		st->requests++;
		st->errors += status >= 400;
		if (!keep)
			c->closing = 1;
	}
	if (pos) {
		memmove(c->in, c->in + pos, c->in_len - pos);
		c->in_len -= pos;
	}
	if (retry)
		conn_process(c, cfg, st);
}

/* 0: all written; -EAGAIN: wait for EPOLLOUT; other negative: fatal. */
static int conn_flush(struct conn *c)
{
	ssize_t n;

	while (c->out.off < c->out.len) {
		n = send(c->fd, c->out.data + c->out.off, c->out.len - c->out.off, MSG_NOSIGNAL);
		if (n > 0) {
			c->out.off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		return (n < 0 && errno == EAGAIN) ? -EAGAIN : -EPIPE;
	}
	c->out.off = c->out.len = 0;
	return 0;
}

/* Discard input until the peer closes, so it reads our reply, not a reset. */
static enum conn_result conn_linger(struct conn *c)
{
	char small[4096], *sink = c->in ? c->in : small;
	size_t sink_len = c->in ? c->in_cap : sizeof(small);
	ssize_t n;

	if (!c->lingering) {
		if (shutdown(c->fd, SHUT_WR) != 0 || c->eof)
			return CONN_CLOSE;
		c->lingering = 1; /* the owner closes it after CONN_LINGER_MS */
	}
	for (;;) {
		/* TCP discards MSG_TRUNC data without copying it; the input
		 * buffer (not needed any more) only bounds the bytes per call. */
		n = recv(c->fd, sink, sink_len, MSG_TRUNC);
		if (n > 0) {
			c->lingered_bytes += (size_t)n;
			if (c->lingered_bytes > LINGER_MAX_BYTES)
				return CONN_CLOSE;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		return (n < 0 && errno == EAGAIN) ? CONN_KEEP : CONN_CLOSE;
	}
}

/* Read what is there. 1: got bytes or EOF, 0: nothing (wait), -1: fatal. */
static int conn_read(struct conn *c)
{
	size_t space;
	ssize_t n;

	if (!c->in && in_grow(c, CONN_IN_START_BYTES) != 0)
		return -1;
	space = c->in_cap - c->in_len;
	if (space == 0)
		return -1; /* cannot happen: parser bounds heads, bodies get room */
	n = recv(c->fd, c->in + c->in_len, space, 0);
	if (n > 0) {
		c->in_len += (size_t)n;
		/* A full small buffer: a long head or pipelining. Grow now,
		 * so the head fits and batches are read 16 KiB at a time. */
		if ((size_t)n == space && c->in_cap < CONN_IN_BYTES && in_grow(c, CONN_IN_BYTES) != 0)
			return -1;
		/* A short read drained the socket: the next arrival raises a
		 * new edge. After RDHUP, read on to see the EOF itself. */
		if ((size_t)n < space && !c->rdhup)
			c->readable = 0;
		return 1;
	}
	if (n == 0) {
		c->eof = 1;
		c->readable = 0;
		return 1;
	}
	if (errno == EAGAIN || errno == EINTR) {
		c->readable = errno == EINTR;
		return 0;
	}
	return -1;
}

enum conn_result conn_expire(struct conn *c, const struct orders_config *cfg,
			     struct conn_stats *st)
{
	if (!c->in_len || c->closing || c->lingering || c->out.off < c->out.len ||
	    out_ready(c) != 0)
		return CONN_CLOSE;
	reply_error(c, 408, st);
	return conn_drive(c, 0, cfg, st);
}

enum conn_result conn_drive(struct conn *c, uint32_t events,
			    const struct orders_config *cfg, struct conn_stats *st)
{
	int rc, reads = 0;

	if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
		c->rdhup = 1;
	if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
		c->readable = 1;
	for (;;) {
		if (c->out.off < c->out.len) {
			rc = conn_flush(c);
			if (rc == -EAGAIN)
				return CONN_KEEP;
			if (rc < 0)
				return CONN_CLOSE;
		}
		if (c->closing)
			return conn_linger(c);
		conn_process(c, cfg, st);
		if (c->out.off < c->out.len || c->closing)
			continue;
		if (c->eof)
			return CONN_CLOSE;
		if (!c->readable)
			return CONN_KEEP;
		if (++reads > CONN_READS_PER_DRIVE)
			return CONN_AGAIN; /* a client that keeps sending must not starve the others */
		rc = conn_read(c);
		if (rc < 0)
			return CONN_CLOSE;
		if (rc == 0)
			return CONN_KEEP;
	}
}
