/* SPDX-License-Identifier: MIT */
/* Unit tests of the orders-server HTTP parser and reply builder: complete,
 * partial (every prefix), pipelined, malformed and oversized inputs; the
 * trace-context headers. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_parse.h"
#include "http_reply.h"

#include "check.h"

#define MAX_BODY 65536

static enum http_parse_status parse(const char *s, struct http_request *req)
{
	return http_parse_request(s, strlen(s), MAX_BODY, req);
}

static int path_eq(const struct http_request *r, const char *p)
{
	return r->path_len == strlen(p) && memcmp(r->path, p, r->path_len) == 0;
}

static void test_complete_get(void)
{
	const char *s = "GET /health HTTP/1.1\r\nHost: x\r\nUser-Agent: t\r\n\r\n";
	struct http_request r;

	CHECK(parse(s, &r) == HTTP_PARSE_OK);
	CHECK(r.method == HTTP_M_GET);
	CHECK(path_eq(&r, "/health"));
	CHECK(r.minor_version == 1);
	CHECK(r.keep_alive == 1);
	CHECK(r.content_length == 0);
	CHECK(r.head_len == strlen(s));
	CHECK(r.total_len == strlen(s));
}

static void test_complete_post(void)
{
	const char *s = "POST /orders?src=t HTTP/1.1\r\nhost: x\r\n"
			"content-length: 10\r\n\r\n{\"qty\":12}";
	struct http_request r;

	CHECK(parse(s, &r) == HTTP_PARSE_OK);
	CHECK(r.method == HTTP_M_POST);
	CHECK(path_eq(&r, "/orders")); /* query string is not part of the path */
	CHECK(r.content_length == 10);
	CHECK(r.total_len == strlen(s));
	CHECK(r.body == s + strlen(s) - 10);
	CHECK(memcmp(r.body, "{\"qty\":12}", 10) == 0);
}

/* The trace-context headers' values, by name in any case, past the blanks after
 * the colon; NULL without them. */
static void test_trace_context(void)
{
	const char *s = "GET /health HTTP/1.1\r\nHost: x\r\nTraceParent:\t 00-ab-cd-01\r\n"
			"tracestate: k=v\r\n\r\n";
	struct http_request r;

	CHECK(parse(s, &r) == HTTP_PARSE_OK);
	CHECK(r.traceparent == strstr(s, "00-ab-cd-01"));
	CHECK(r.tracestate == strstr(s, "k=v\r\n"));
	CHECK(parse("GET / HTTP/1.1\r\nHost: x\r\n\r\n", &r) == HTTP_PARSE_OK);
	CHECK(r.traceparent == NULL && r.tracestate == NULL);
}

/* Every strict prefix is INCOMPLETE before the head ends, NEED_BODY after. */
static void test_every_prefix(void)
{
	const char *s = "POST /orders HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n{\"a\"}";
	size_t n = strlen(s), head = n - 5, i;
	struct http_request r;
	enum http_parse_status st;

	for (i = 0; i < n; i++) {
		st = http_parse_request(s, i, MAX_BODY, &r);
		CHECK(st == (i < head ? HTTP_PARSE_INCOMPLETE : HTTP_PARSE_NEED_BODY));
		if (i >= head)
			CHECK(r.total_len == n);
	}
	CHECK(http_parse_request(s, n, MAX_BODY, &r) == HTTP_PARSE_OK);
}

static void test_pipelined(void)
{
	const char *s = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
			"POST /orders HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
			"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n"
			"GET /hea"; /* a fourth request, cut short */
	const char *paths[] = { "/health", "/orders", "/nope" };
	size_t off = 0, len = strlen(s);
	struct http_request r;
	int i;

	for (i = 0; i < 3; i++) {
		CHECK(http_parse_request(s + off, len - off, MAX_BODY, &r) == HTTP_PARSE_OK);
		CHECK(path_eq(&r, paths[i]));
		off += r.total_len;
	}
	CHECK(strcmp(s + off, "GET /hea") == 0);
	CHECK(http_parse_request(s + off, len - off, MAX_BODY, &r) == HTTP_PARSE_INCOMPLETE);
	CHECK(http_parse_request(s, 0, MAX_BODY, &r) == HTTP_PARSE_INCOMPLETE);
}

static void test_keep_alive_rules(void)
{
	struct http_request r;

	CHECK(parse("GET / HTTP/1.0\r\n\r\n", &r) == HTTP_PARSE_OK); /* no Host needed */
	CHECK(r.minor_version == 0 && r.keep_alive == 0);
	CHECK(parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", &r) == HTTP_PARSE_OK);
	CHECK(r.keep_alive == 1);
	CHECK(parse("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", &r) == HTTP_PARSE_OK);
	CHECK(r.keep_alive == 0);
	CHECK(parse("GET / HTTP/1.1\r\nHost: x\r\nConnection: te,  CLOSE \r\n\r\n", &r) == HTTP_PARSE_OK);
	CHECK(r.keep_alive == 0);
	CHECK(parse("POST /orders HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
		    "Content-Length: 3\r\n\r\n", &r) == HTTP_PARSE_NEED_BODY);
	CHECK(r.expect_continue == 1);
	/* absolute-form target: routed by its path. */
	CHECK(parse("GET http://example.com:8080/health?x=1 HTTP/1.1\r\nHost: x\r\n\r\n", &r) ==
	      HTTP_PARSE_OK);
	CHECK(path_eq(&r, "/health"));
	CHECK(parse("GET http://example.com HTTP/1.1\r\nHost: x\r\n\r\n", &r) == HTTP_PARSE_OK);
	CHECK(path_eq(&r, "/"));
	/* the authority ends at '?': a '/' in the query is not the path */
	CHECK(parse("GET http://example.com?next=/health HTTP/1.1\r\nHost: x\r\n\r\n", &r) ==
	      HTTP_PARSE_OK);
	CHECK(path_eq(&r, "/"));
	/* Empty lines before a request line are ignored (RFC 9112 2.2). */
	CHECK(parse("\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\n\r\n", &r) == HTTP_PARSE_OK);
	CHECK(path_eq(&r, "/health") && r.total_len == 4 + 33);
}

/* No line end yet: a request line that cannot become valid is rejected at
 * once; every prefix of a valid one waits for more. */
static void test_garbage_before_line_end(void)
{
#define BYTES(lit) { lit, sizeof(lit) - 1 }
	static const struct { const char *s; size_t n; } bad[] = {
		BYTES("\x16\x03\x01\x02\x00\x01"), /* TLS ClientHello on the plain port */
		BYTES("\x00"), BYTES("GET\x00"), BYTES("GET /x\x01"), BYTES("GET  "), BYTES(" GET"),
		BYTES("GET /x  "), BYTES("GET /x HTP"), BYTES("GET /x HTTP/1.1X"),
		BYTES("GET /x HTTP/a"), BYTES("GET /x http/1.1"), BYTES("GET /x HTTP/1.1\rHost"),
		BYTES("\r\r"), BYTES("GET /x\x7f"),
	};
#undef BYTES
	static const char *good[] = {
		"GET http://h:1/x?y=1 HTTP/1.1\r", "PRI * HTTP/2.0\r", "\r\n\r",
	};
	struct http_request r;
	size_t i, k;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (http_parse_request(bad[i].s, bad[i].n, MAX_BODY, &r) != HTTP_PARSE_BAD) {
			fprintf(stderr, "garbage not rejected: case %zu\n", i);
			failures++;
		}
	}
	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		for (k = 0; k <= strlen(good[i]); k++)
			CHECK(http_parse_request(good[i], k, MAX_BODY, &r) == HTTP_PARSE_INCOMPLETE);
}

static void test_malformed(void)
{
	static const char *bad[] = {
		"GET\r\n\r\n",
		"GET /x\r\n\r\n",
		"GET  /x HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET x HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /x HTTP/1.1 \r\nHost: x\r\n\r\n",
		"GET /x http/1.1\r\nHost: x\r\n\r\n",
		"GET /x HTTP/1.1\nHost: x\n\n",          /* bare LF */
		"\x01\x02\x03 / HTTP/1.1\r\n\r\n",
		"GET /x HTTP/1.1\r\nHost x\r\n\r\n",       /* no colon */
		"GET /x HTTP/1.1\r\nHost : x\r\n\r\n",     /* space before colon */
		"GET /x HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n",
		"GET /x HTTP/1.1\r\nHost: x\r\nX: a\x01z\r\n\r\n",
		"GET /x HTTP/1.1\r\n\r\n",                 /* 1.1 without Host */
		"POST /orders HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
		"POST /orders HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
		"POST /orders HTTP/1.1\r\nHost: x\r\nContent-Length:\r\n\r\n",
		"POST /orders HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n",
		"GET /x HTTP/1.1\r\n", /* head not complete, but the request line is fine... */
	};
	struct http_request r;
	size_t i, n = sizeof(bad) / sizeof(bad[0]);

	for (i = 0; i + 1 < n; i++) {
		if (parse(bad[i], &r) != HTTP_PARSE_BAD) {
			fprintf(stderr, "not rejected: case %zu\n", i);
			failures++;
		}
	}
	CHECK(parse(bad[n - 1], &r) == HTTP_PARSE_INCOMPLETE);
	/* A bad request line is rejected before the head is complete. */
	CHECK(parse("HELLO\r\n", &r) == HTTP_PARSE_BAD);
	test_garbage_before_line_end();
	/* Equal duplicate lengths are fine. */
	CHECK(parse("POST /o HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
		    "Content-Length: 2\r\n\r\n{}", &r) == HTTP_PARSE_OK);
	CHECK(parse("GET /x HTTP/2.0\r\nHost: x\r\n\r\n", &r) == HTTP_PARSE_BAD_VERSION);
	CHECK(parse("GET /x HTTP/1.2\r\nHost: x\r\n\r\n", &r) == HTTP_PARSE_BAD_VERSION);
	CHECK(parse("POST /orders HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
		    &r) == HTTP_PARSE_UNSUPPORTED);
}

/* A head of exactly head_len bytes: request line, Host, one padding field. */
static char *make_head(size_t head_len)
{
	const char *pre = "GET /health HTTP/1.1\r\nHost: x\r\nX-Pad: ";
	size_t pre_len = strlen(pre), pad = head_len - pre_len - 4;
	char *s = malloc(head_len + 1);

	memcpy(s, pre, pre_len);
	memset(s + pre_len, 'a', pad);
	memcpy(s + pre_len + pad, "\r\n\r\n", 5);
	return s;
}

static void test_oversized(void)
{
	struct http_request r;
	char *s = make_head(HTTP_MAX_HEAD_BYTES);

	CHECK(strlen(s) == HTTP_MAX_HEAD_BYTES);
	CHECK(parse(s, &r) == HTTP_PARSE_OK); /* the limit itself is allowed */
	free(s);
	s = make_head(HTTP_MAX_HEAD_BYTES + 1);
	CHECK(parse(s, &r) == HTTP_PARSE_HEAD_TOO_LARGE);
	/* Without its end: incomplete up to the limit, too large past it. */
	CHECK(http_parse_request(s, HTTP_MAX_HEAD_BYTES - 10, MAX_BODY, &r) == HTTP_PARSE_INCOMPLETE);
	CHECK(http_parse_request(s, HTTP_MAX_HEAD_BYTES, MAX_BODY, &r) == HTTP_PARSE_INCOMPLETE);
	CHECK(http_parse_request(s, HTTP_MAX_HEAD_BYTES - 3, MAX_BODY, &r) == HTTP_PARSE_INCOMPLETE);
	free(s);
	s = make_head(3 * HTTP_MAX_HEAD_BYTES);
	CHECK(http_parse_request(s, HTTP_MAX_HEAD_BYTES + 1, MAX_BODY, &r) == HTTP_PARSE_HEAD_TOO_LARGE);
	CHECK(parse(s, &r) == HTTP_PARSE_HEAD_TOO_LARGE);
	free(s);

	CHECK(parse("POST /orders HTTP/1.1\r\nHost: x\r\nContent-Length: 65536\r\n\r\n", &r) ==
	      HTTP_PARSE_NEED_BODY);
	CHECK(parse("POST /orders HTTP/1.1\r\nHost: x\r\nContent-Length: 65537\r\n\r\n", &r) ==
	      HTTP_PARSE_BODY_TOO_LARGE);
	CHECK(parse("POST /orders HTTP/1.1\r\nHost: x\r\n"
		    "Content-Length: 99999999999999999999999999\r\n\r\n", &r) == HTTP_PARSE_BODY_TOO_LARGE);
}

static void test_status_codes(void)
{
	CHECK(http_parse_status_code(HTTP_PARSE_BAD) == 400);
	CHECK(http_parse_status_code(HTTP_PARSE_HEAD_TOO_LARGE) == 431);
	CHECK(http_parse_status_code(HTTP_PARSE_BODY_TOO_LARGE) == 413);
	CHECK(http_parse_status_code(HTTP_PARSE_UNSUPPORTED) == 501);
	CHECK(http_parse_status_code(HTTP_PARSE_BAD_VERSION) == 505);
	CHECK(http_parse_status_code(HTTP_PARSE_OK) == 0);
	CHECK(strcmp(http_reason(431), "Request Header Fields Too Large") == 0);
	CHECK(strcmp(http_reason(408), "Request Timeout") == 0);
}

static void test_reply(void)
{
	char buf[600], digits[20];
	struct obuf out = { .data = buf, .cap = sizeof(buf) };
	struct http_reply r = { .status = 200, .body = "{\"a\":1}", .body_len = 7, .keep_alive = 1 };
	const char *want = "HTTP/1.1 200 OK\r\nServer: orders-server\r\n"
			   "Content-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"a\":1}";
	const char *want_close = "HTTP/1.1 404 Not Found\r\nServer: orders-server\r\n"
				 "Content-Type: application/json\r\nContent-Length: 7\r\n"
				 "Connection: close\r\nAllow: GET\r\n\r\n";

	CHECK(http_reply_append(&out, &r) == 0);
	CHECK(out.len == strlen(want) && memcmp(buf, want, out.len) == 0);
	out.len = 0;
	r.status = 404;
	r.keep_alive = 0;
	r.head_only = 1;
	r.extra_headers = "Allow: GET\r\n";
	CHECK(http_reply_append(&out, &r) == 0);
	CHECK(out.len == strlen(want_close) && memcmp(buf, want_close, out.len) == 0);
	/* An HTTP/1.0 client is told the connection stays open. */
	out.len = 0;
	r.keep_alive = 1;
	r.http10 = 1;
	r.extra_headers = NULL;
	CHECK(http_reply_append(&out, &r) == 0);
	CHECK(memmem(buf, out.len, "\r\nConnection: keep-alive\r\n\r\n", 28) != NULL);
	out.len = 0;
	r.keep_alive = 0;
	r.extra_headers = "Allow: GET\r\n";
	CHECK(http_reply_append(&out, &r) == 0);
	out.cap = out.len + 10; /* no room for another */
	CHECK(http_reply_append(&out, &r) == -ENOSPC);
	CHECK(out.len == strlen(want_close));
	CHECK(http_fmt_u64(digits, 0) == 1 && digits[0] == '0');
	CHECK(http_fmt_u64(digits, 18446744073709551615ull) == 20 &&
	      memcmp(digits, "18446744073709551615", 20) == 0);
}

int main(void)
{
	test_complete_get();
	test_complete_post();
	test_trace_context();
	test_every_prefix();
	test_pipelined();
	test_keep_alive_rules();
	test_malformed();
	test_oversized();
	test_status_codes();
	test_reply();
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("http_parse: all checks passed\n");
	return 0;
}
