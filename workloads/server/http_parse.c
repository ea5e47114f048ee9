/* SPDX-License-Identifier: MIT */
/* HTTP/1.x request parser (RFC 9112 subset). See http_parse.h. */
#include "http_parse.h"

#include <string.h>
#include <strings.h>

/* tchar of RFC 9110 5.6.2: token characters of methods and field names. */
static int is_tchar(unsigned char c)
{
	if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
		return 1;
	return c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static unsigned char lower(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') ? (unsigned char)(c + 32) : c;
}

static int name_is(const char *s, size_t n, const char *lit)
{
	size_t i;

	if (n != strlen(lit))
		return 0;
	for (i = 0; i < n; i++)
		if (lower((unsigned char)s[i]) != (unsigned char)lit[i])
			return 0;
	return 1;
}

/* One line [line, eol) ending in CRLF. Returns the length without CRLF,
 * -1 if the line is not complete yet, -2 if it ends in a bare LF. */
static long line_len(const char *line, const char *end)
{
	const char *lf = memchr(line, '\n', (size_t)(end - line));

	if (!lf)
		return -1;
	if (lf == line || lf[-1] != '\r')
		return -2;
	return (long)(lf - line - 1);
}

static enum http_method method_of(const char *s, size_t n)
{
	if (n == 3 && !memcmp(s, "GET", 3))
		return HTTP_M_GET;
	if (n == 4 && !memcmp(s, "POST", 4))
		return HTTP_M_POST;
	if (n == 4 && !memcmp(s, "HEAD", 4))
		return HTTP_M_HEAD;
	if (n == 3 && !memcmp(s, "PUT", 3))
		return HTTP_M_PUT;
	if (n == 6 && !memcmp(s, "DELETE", 6))
		return HTTP_M_DELETE;
	return HTTP_M_OTHER;
}

/* absolute-form target "http://host[:port]/path": the path starts at the
 * first '/' after the authority, which ends at '/', '?' or '#' (RFC 3986 3.2).
 * Other forms: unchanged. */
static size_t skip_authority(const char *s, size_t t0, size_t t1)
{
	size_t i = t0;

	if (t1 - t0 >= 7 && !strncasecmp(s + t0, "http://", 7))
		i = t0 + 7;
	else if (t1 - t0 >= 8 && !strncasecmp(s + t0, "https://", 8))
		i = t0 + 8;
	else
		return t0;
	while (i < t1 && s[i] != '/' && s[i] != '?' && s[i] != '#')
		i++;
	return i;
}

/* Request target [t0, t1): origin-form "/path?query", "*", or absolute-form.
 * Sets the path (without the query). 0, or -1 if malformed. */
static int parse_target(const char *s, size_t t0, size_t t1, struct http_request *req)
{
	size_t p = skip_authority(s, t0, t1), q;

	if (p != t0 && (p == t1 || s[p] == '?')) { /* "http://host": path "/" */
		req->path = "/";
		req->path_len = 1;
		return 0;
	}
	if (s[p] != '/' && !(t1 - p == 1 && s[p] == '*'))
		return -1;
	for (q = p; q < t1 && s[q] != '?'; q++)
		;
	req->path = s + p;
	req->path_len = q - p;
	return 0;
}

/* "METHOD SP target SP HTTP/1.x" */
static enum http_parse_status parse_request_line(const char *s, size_t n,
						 struct http_request *req)
{
	size_t i = 0, t0;

	while (i < n && is_tchar((unsigned char)s[i]))
		i++;
	if (i == 0 || i >= n || s[i] != ' ')
		return HTTP_PARSE_BAD;
	req->method = method_of(s, i);
	t0 = ++i;
	while (i < n && (unsigned char)s[i] > 0x20 && s[i] != 0x7f)
		i++;
	if (i == t0 || i >= n || s[i] != ' ' || parse_target(s, t0, i, req) != 0)
		return HTTP_PARSE_BAD;
	i++;
	if (n - i != 8 || memcmp(s + i, "HTTP/", 5) != 0 ||
	    s[i + 5] < '0' || s[i + 5] > '9' || s[i + 6] != '.' ||
	    s[i + 7] < '0' || s[i + 7] > '9')
		return HTTP_PARSE_BAD;
	if (s[i + 5] != '1' || s[i + 7] > '1')
		return HTTP_PARSE_BAD_VERSION;
	req->minor_version = s[i + 7] - '0';
	req->keep_alive = req->minor_version == 1;
	return HTTP_PARSE_OK;
}

/* 1*DIGIT; saturates to UINT64_MAX on overflow. -1 if not a number. */
static int parse_u64(const char *s, size_t n, uint64_t *out)
{
	uint64_t v = 0;
	size_t i;

	if (n == 0)
		return -1;
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		if (v > (UINT64_MAX - 9) / 10)
			v = UINT64_MAX;
		else
			v = v * 10 + (uint64_t)(s[i] - '0');
	}
	*out = v;
	return 0;
}

/* Comma-separated connection options: close / keep-alive. */
static void parse_connection(const char *v, size_t n, struct http_request *req)
{
	size_t i = 0, a, b;

	while (i < n) {
		while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
			i++;
		a = i;
		while (i < n && v[i] != ',')
			i++;
		b = i;
		while (b > a && (v[b - 1] == ' ' || v[b - 1] == '\t'))
			b--;
		if (name_is(v + a, b - a, "close"))
			req->keep_alive = 0;
		else if (name_is(v + a, b - a, "keep-alive"))
			req->keep_alive = 1;
	}
}

struct head_state {
	int have_host;
	int have_length;
	int have_te;
	int length_too_big;
};

/* "name: OWS value OWS" */
static enum http_parse_status parse_field(const char *s, size_t n, uint64_t max_body,
					  struct http_request *req, struct head_state *hs)
{
	size_t i = 0, v0, v1, k;
	uint64_t cl;

	while (i < n && is_tchar((unsigned char)s[i]))
		i++;
	if (i == 0 || i >= n || s[i] != ':')
		return HTTP_PARSE_BAD; /* also obs-fold and space before ':' */
	v0 = i + 1;
	while (v0 < n && (s[v0] == ' ' || s[v0] == '\t'))
		v0++;
	v1 = n;
	while (v1 > v0 && (s[v1 - 1] == ' ' || s[v1 - 1] == '\t'))
		v1--;
	for (k = v0; k < v1; k++) {
		unsigned char c = (unsigned char)s[k];

		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return HTTP_PARSE_BAD;
	}
	if (name_is(s, i, "content-length")) {
		if (parse_u64(s + v0, v1 - v0, &cl) != 0)
			return HTTP_PARSE_BAD;
		if (hs->have_length && cl != req->content_length)
			return HTTP_PARSE_BAD;
		hs->have_length = 1;
		req->content_length = cl;
		hs->length_too_big = cl > max_body;
	} else if (name_is(s, i, "transfer-encoding")) {
		hs->have_te = 1;
	} else if (name_is(s, i, "host")) {
		hs->have_host = 1;
	} else if (name_is(s, i, "connection")) {
		parse_connection(s + v0, v1 - v0, req);
	} else if (name_is(s, i, "expect")) {
		req->expect_continue = name_is(s + v0, v1 - v0, "100-continue");
	} else if (name_is(s, i, "traceparent")) {
		req->traceparent = s + v0;
	} else if (name_is(s, i, "tracestate")) {
		req->tracestate = s + v0;
	}
	return HTTP_PARSE_OK;
}

/* The head ends at line_start: check it as a whole, then the body. */
static enum http_parse_status finish_head(size_t head_len, size_t len,
					  const char *buf, struct http_request *req,
					  const struct head_state *hs)
{
	if (head_len > HTTP_MAX_HEAD_BYTES)
		return HTTP_PARSE_HEAD_TOO_LARGE;
	if (hs->have_te)
		return HTTP_PARSE_UNSUPPORTED;
	if (req->minor_version == 1 && !hs->have_host)
		return HTTP_PARSE_BAD;
	if (hs->length_too_big)
		return HTTP_PARSE_BODY_TOO_LARGE;
	req->head_len = head_len;
	req->body = buf + head_len;
	req->total_len = head_len + (size_t)req->content_length;
	return len >= req->total_len ? HTTP_PARSE_OK : HTTP_PARSE_NEED_BODY;
}

static enum http_parse_status incomplete(size_t len)
{
	return len > HTTP_MAX_HEAD_BYTES ? HTTP_PARSE_HEAD_TOO_LARGE : HTTP_PARSE_INCOMPLETE;
}

/* The start of a request line, no LF yet: can it still become one? Garbage
 * (binary, a TLS handshake on the plain port) is rejected at once instead
 * of waiting for a line end that may never come. */
static int request_line_prefix_ok(const char *s, size_t n)
{
	static const char version[] = "HTTP/d.d\r"; /* d: any digit */
	size_t i = 0, t0, k;

	if (n == 1 && s[0] == '\r')
		return 1; /* an empty line before the request, cut short */
	while (i < n && is_tchar((unsigned char)s[i]))
		i++;
	if (i == n)
		return 1;
	if (i == 0 || s[i] != ' ')
		return 0;
	t0 = ++i;
	while (i < n && (unsigned char)s[i] > 0x20 && s[i] != 0x7f)
		i++;
	if (i == n)
		return 1;
	if (i == t0 || s[i] != ' ')
		return 0;
	for (i++, k = 0; i < n; i++, k++) {
		if (k >= sizeof(version) - 1)
			return 0;
		if (version[k] == 'd' ? (s[i] < '0' || s[i] > '9') : s[i] != version[k])
			return 0;
	}
	return 1;
}

enum http_parse_status http_parse_request(const char *buf, size_t len,
					  uint64_t max_body_bytes,
					  struct http_request *req)
{
	const char *end = buf + len, *p = buf;
	struct head_state hs = {0};
	enum http_parse_status st;
	long n;

	memset(req, 0, sizeof(*req));
	/* RFC 9112 2.2: ignore empty lines before the request line. */
	while (end - p >= 2 && p[0] == '\r' && p[1] == '\n')
		p += 2;
	n = line_len(p, end);
	if (n == -1)
		return request_line_prefix_ok(p, (size_t)(end - p)) ? incomplete(len) : HTTP_PARSE_BAD;
	if (n == -2)
		return HTTP_PARSE_BAD;
	st = parse_request_line(p, (size_t)n, req);
	if (st != HTTP_PARSE_OK)
		return st;
	p += n + 2;
	for (;;) {
		if ((size_t)(p - buf) > HTTP_MAX_HEAD_BYTES)
			return HTTP_PARSE_HEAD_TOO_LARGE;
		n = line_len(p, end);
		if (n == -1)
			return incomplete(len);
		if (n == -2)
			return HTTP_PARSE_BAD;
		if (n == 0)
			return finish_head((size_t)(p + 2 - buf), len, buf, req, &hs);
		st = parse_field(p, (size_t)n, max_body_bytes, req, &hs);
		if (st != HTTP_PARSE_OK)
			return st;
		p += n + 2;
	}
}

int http_parse_status_code(enum http_parse_status st)
{
	switch (st) {
	case HTTP_PARSE_BAD: return 400;
	case HTTP_PARSE_HEAD_TOO_LARGE: return 431;
	case HTTP_PARSE_BODY_TOO_LARGE: return 413;
	case HTTP_PARSE_UNSUPPORTED: return 501;
	case HTTP_PARSE_BAD_VERSION: return 505;
	default: return 0;
	}
}

const char *http_reason(int status)
{
	switch (status) {
	case 100: return "Continue";
	case 200: return "OK";
	case 201: return "Created";
	case 400: return "Bad Request";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 413: return "Content Too Large";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 503: return "Service Unavailable";
	case 505: return "HTTP Version Not Supported";
	default: return "Unknown";
	}
}
