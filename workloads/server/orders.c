/* SPDX-License-Identifier: MIT */
/* The orders service handlers. See orders.h. */
#include "orders.h"
#include "stall.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include "work.h"

static _Atomic uint64_t next_order_id = 1;

#define JSON(s) s, sizeof(s) - 1

static int path_is(const struct http_request *req, const char *lit)
{
	size_t n = strlen(lit);

	return req->path_len == n && memcmp(req->path, lit, n) == 0;
}

/* A JSON object: after trimming whitespace, '{' ... '}'. */
static int body_is_object(const char *b, size_t n)
{
	while (n && (b[n - 1] == ' ' || b[n - 1] == '\t' || b[n - 1] == '\r' || b[n - 1] == '\n'))
		n--;
	while (n && (*b == ' ' || *b == '\t' || *b == '\r' || *b == '\n')) {
		b++;
		n--;
	}
	return n >= 2 && b[0] == '{' && b[n - 1] == '}';
}

static int reply(struct obuf *out, int status, const char *body, size_t body_len,
		 const char *extra, const struct http_request *req)
{
	struct http_reply r = {
		.status = status,
		.extra_headers = extra,
		.body = body,
		.body_len = body_len,
		.keep_alive = req->keep_alive,
		.http10 = req->minor_version == 0,
		.head_only = req->method == HTTP_M_HEAD,
	};
	int rc = http_reply_append(out, &r);

	return rc ? rc : status;
}

static int order_post(const struct orders_config *cfg, const struct http_request *req,
		      struct obuf *out)
{
	char body[64];
	size_t n = 0;
	uint64_t id;

	if (!body_is_object(req->body, (size_t)req->content_length))
		return reply(out, 400, JSON("{\"error\":\"body must be a JSON object\"}"), NULL, req);
	if (work_cpu_us(cfg->service_us, cfg->stopping) != 0 ||
	    work_block_us(cfg->sleep_us, cfg->stop_fd) != 0) { /* shutting down */
		int rc = orders_reply_error(out, 503);

		return rc ? rc : 503;
	}
	stall_order();
	id = atomic_fetch_add_explicit(&next_order_id, 1, memory_order_relaxed);
	memcpy(body, "{\"order_id\":", 12);
	n = 12;
	n += http_fmt_u64(body + n, id);
	memcpy(body + n, ",\"status\":\"accepted\"}", 21);
	n += 21;
	return reply(out, 200, body, n, NULL, req);
}

int orders_handle(const struct orders_config *cfg, const struct http_request *req,
		  struct obuf *out, int *keep_alive)
{
	*keep_alive = req->keep_alive;
	if (path_is(req, "/orders")) {
		if (req->method == HTTP_M_POST) {
			int status = order_post(cfg, req, out);

			if (status == 503)
				*keep_alive = 0;
			return status;
		}
		return reply(out, 405, JSON("{\"error\":\"method not allowed\"}"),
			     "Allow: POST\r\n", req);
	}
	if (path_is(req, "/health")) {
		if (req->method == HTTP_M_GET || req->method == HTTP_M_HEAD)
			return reply(out, 200, JSON("{\"status\":\"ok\"}"), NULL, req);
		return reply(out, 405, JSON("{\"error\":\"method not allowed\"}"),
			     "Allow: GET, HEAD\r\n", req);
	}
	return reply(out, 404, JSON("{\"error\":\"not found\"}"), NULL, req);
}

int orders_reply_error(struct obuf *out, int status)
{
	char body[96];
	const char *reason = http_reason(status);
	size_t n = strlen(reason);
	struct http_reply r = { .status = status, .body = body, .keep_alive = 0 };

	if (n > sizeof(body) - 16)
		n = sizeof(body) - 16;
	memcpy(body, "{\"error\":\"", 10);
	memcpy(body + 10, reason, n);
	memcpy(body + 10 + n, "\"}", 2);
	r.body_len = 12 + n;
	return http_reply_append(out, &r);
}

uint64_t orders_count(void)
{
	return atomic_load(&next_order_id) - 1;
}
