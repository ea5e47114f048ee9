/* SPDX-License-Identifier: MIT */
/* Response building. See http_reply.h. */
#include "http_reply.h"
#include "http_parse.h"

#include <errno.h>
#include <string.h>

size_t http_fmt_u64(char *dst, uint64_t v)
{
	char tmp[20];
	size_t n = 0, i;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	for (i = 0; i < n; i++)
		dst[i] = tmp[n - 1 - i];
	return n;
}

static char *put(char *p, const char *s, size_t n)
{
	memcpy(p, s, n);
	return p + n;
}

#define PUT_LIT(p, lit) put((p), (lit), sizeof(lit) - 1)

int http_reply_append(struct obuf *out, const struct http_reply *r)
{
	const char *reason = http_reason(r->status);
	size_t extra = r->extra_headers ? strlen(r->extra_headers) : 0;
	size_t need = 160 + strlen(reason) + extra + r->body_len; /* fixed part <= 130 */
	char *p;

	if (out->cap - out->len < need)
		return -ENOSPC;
	p = out->data + out->len;
	p = PUT_LIT(p, "HTTP/1.1 ");
	p += http_fmt_u64(p, (uint64_t)r->status);
	*p++ = ' ';
	p = put(p, reason, strlen(reason));
	p = PUT_LIT(p, "\r\nServer: orders-server\r\n"
		       "Content-Type: application/json\r\nContent-Length: ");
	p += http_fmt_u64(p, r->body_len);
	if (!r->keep_alive)
		p = PUT_LIT(p, "\r\nConnection: close\r\n");
	else if (r->http10)
		p = PUT_LIT(p, "\r\nConnection: keep-alive\r\n");
	else
		p = PUT_LIT(p, "\r\n");
	if (extra)
		p = put(p, r->extra_headers, extra);
	p = PUT_LIT(p, "\r\n");
	if (!r->head_only)
		p = put(p, r->body, r->body_len);
	out->len = (size_t)(p - out->data);
	return 0;
}

int http_reply_continue(struct obuf *out)
{
	static const char line[] = "HTTP/1.1 100 Continue\r\n\r\n";

	if (out->cap - out->len < sizeof(line) - 1)
		return -ENOSPC;
	memcpy(out->data + out->len, line, sizeof(line) - 1);
	out->len += sizeof(line) - 1;
	return 0;
}
