/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: http_parse_request on arbitrary bytes, as orders-server
 * sees them (pipelined requests, bodies, any split of a read).
 * Properties checked beyond "no crash, no sanitizer report":
 *  - an accepted request lies inside the buffer (head, path, body; the path
 *    "/" of an absolute-form target without one is the parser's own);
 *  - error results map to an HTTP status, other results to none;
 *  - every prefix of an accepted request is "incomplete" (never an error):
 *    the server may receive a valid request in pieces at any byte boundary.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "fuzz.h"
#include "http_parse.h"

#define FUZZ_MAX_BODY_BYTES 4096
#define FUZZ_MAX_PIPELINED 64
#define FUZZ_PREFIX_SAMPLES 64

static int is_error(enum http_parse_status st)
{
	return st != HTTP_PARSE_OK && st != HTTP_PARSE_INCOMPLETE && st != HTTP_PARSE_NEED_BODY;
}

static void check_status_code(enum http_parse_status st)
{
	int code = http_parse_status_code(st);

	if (is_error(st))
		REQUIRE(code >= 400 && code <= 599);
	else
		REQUIRE(code == 0);
}

static void check_inside(const char *buf, size_t len, const struct http_request *req)
{
	REQUIRE(req->head_len > 0 && req->head_len <= len);
	REQUIRE(req->total_len == req->head_len + req->content_length);
	REQUIRE(req->total_len <= len);
	REQUIRE(req->content_length <= FUZZ_MAX_BODY_BYTES);
	/* absolute-form "http://host" has the path "/", which the parser supplies */
	REQUIRE((req->path >= buf && req->path + req->path_len <= buf + req->head_len) ||
		(req->path_len == 1 && req->path[0] == '/'));
	REQUIRE(req->body == buf + req->head_len);
}

/* Every prefix of an accepted request must ask for more bytes. */
static void check_prefixes(const char *buf, size_t total_len)
{
	size_t step = total_len / FUZZ_PREFIX_SAMPLES + 1;
	struct http_request req;

	for (size_t n = 0; n < total_len; n += step) {
		enum http_parse_status st = http_parse_request(buf, n, FUZZ_MAX_BODY_BYTES, &req);

		REQUIRE(st == HTTP_PARSE_INCOMPLETE || st == HTTP_PARSE_NEED_BODY);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	size_t off = 0;

	for (int i = 0; i < FUZZ_MAX_PIPELINED && off < size; i++) {
		struct http_request req;
		enum http_parse_status st =
			http_parse_request(buf + off, size - off, FUZZ_MAX_BODY_BYTES, &req);

		check_status_code(st);
		if (st != HTTP_PARSE_OK)
			break;
		check_inside(buf + off, size - off, &req);
		check_prefixes(buf + off, req.total_len);
		off += req.total_len;
	}
	return 0;
}
