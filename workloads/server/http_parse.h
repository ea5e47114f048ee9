/* SPDX-License-Identifier: MIT */
/*
 * HTTP/1.x request parser: pure (no I/O, no allocation), so it can be unit
 * tested on any byte string. Call it on the bytes received so far; it says
 * whether they start with one complete request, need more bytes, or are bad.
 * Pipelined requests: after HTTP_PARSE_OK, the next request starts at
 * buf + req.total_len.
 */
#ifndef ORDERS_HTTP_PARSE_H
#define ORDERS_HTTP_PARSE_H
#include <stddef.h>
#include <stdint.h>

/* Request line + header fields + blank line: more than this is a 431. */
#define HTTP_MAX_HEAD_BYTES 8192

enum http_parse_status {
	HTTP_PARSE_OK = 0,          /* one complete request (head + body) */
	HTTP_PARSE_INCOMPLETE,      /* head not complete yet: read more */
	HTTP_PARSE_NEED_BODY,       /* head parsed (req filled), body incomplete */
	HTTP_PARSE_BAD,             /* malformed: 400 */
	HTTP_PARSE_HEAD_TOO_LARGE,  /* head > HTTP_MAX_HEAD_BYTES: 431 */
	HTTP_PARSE_BODY_TOO_LARGE,  /* Content-Length > max_body_bytes: 413 */
	HTTP_PARSE_UNSUPPORTED,     /* Transfer-Encoding: 501 */
	HTTP_PARSE_BAD_VERSION,     /* not HTTP/1.0 or HTTP/1.1: 505 */
};

enum http_method {
	HTTP_M_OTHER = 0,
	HTTP_M_GET,
	HTTP_M_HEAD,
	HTTP_M_POST,
	HTTP_M_PUT,
	HTTP_M_DELETE,
};

struct http_request {
	enum http_method method;
	const char *path;       /* points into the buffer; not NUL-terminated */
	size_t path_len;        /* target up to (excluding) '?' */
	int minor_version;      /* HTTP/1.<minor> */
	int keep_alive;         /* 1: connection stays open after the reply */
	int expect_continue;    /* "Expect: 100-continue" was sent */
	uint64_t content_length;
	size_t head_len;        /* bytes of request line + headers + CRLF */
	const char *body;       /* buf + head_len */
	size_t total_len;       /* head_len + content_length */
	/* The W3C trace-context headers' values (traceparent, tracestate), pointing
	 * into the buffer (each ends at its line's CR); NULL without. The last of
	 * each name counts. */
	const char *traceparent;
	const char *tracestate;
};

/* Parse the start of buf[0..len). max_body_bytes bounds Content-Length. */
enum http_parse_status http_parse_request(const char *buf, size_t len,
					  uint64_t max_body_bytes,
					  struct http_request *req);

/* HTTP status code for an error result (400, 431, 413, 501, 505); 0 if none. */
int http_parse_status_code(enum http_parse_status st);

/* Status line reason phrase ("OK", "Not Found"...); "Unknown" if unknown. */
const char *http_reason(int status);

#endif
