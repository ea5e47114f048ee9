/* SPDX-License-Identifier: MIT */
/*
 * Response building into a caller-owned output buffer (no allocation):
 * status line, Content-Type/Length, Connection, then the body, appended in
 * one piece so that a batch of pipelined replies goes out in one write.
 */
#ifndef ORDERS_HTTP_REPLY_H
#define ORDERS_HTTP_REPLY_H
#include <stddef.h>
#include <stdint.h>

/* The longest reply we build (status line + headers + small JSON body). */
#define HTTP_REPLY_MAX_BYTES 512

struct obuf {
	char *data;
	size_t len; /* bytes queued */
	size_t off; /* bytes already written out */
	size_t cap;
};

struct http_reply {
	int status;
	const char *extra_headers; /* "Name: value\r\n"... or NULL */
	const char *body;          /* JSON */
	size_t body_len;
	int keep_alive;            /* 0: "Connection: close" */
	int http10;                /* HTTP/1.0 client: keep-alive must be said */
	int head_only;             /* HEAD request: no body bytes */
};

/* Append a whole reply. 0, or -ENOSPC (nothing appended) if it does not fit. */
int http_reply_append(struct obuf *out, const struct http_reply *r);

/* Append "HTTP/1.1 100 Continue\r\n\r\n". 0 or -ENOSPC. */
int http_reply_continue(struct obuf *out);

/* Decimal digits of v into dst (no NUL); returns how many. dst >= 20 bytes. */
size_t http_fmt_u64(char *dst, uint64_t v);

#endif
