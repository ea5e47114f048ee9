/* SPDX-License-Identifier: MIT */
/*
 * The smallest HTTP/1.1 server the exporter needs: one listening socket,
 * polled by the loader's loop; each connection is read, answered and closed
 * in turn (Connection: close), with a deadline so a stalled client cannot
 * hold the loader. GET and HEAD only.
 */
#ifndef TT_HTTP_SERVE_H
#define TT_HTTP_SERVE_H
#include <stdbool.h>
#include <stddef.h>

#define HTTP_CLIENT_TIMEOUT_MS 2000

/* The response to one GET/HEAD of path (accept: the request's Accept header
 * value, "" without one): status 200 with a body in *body (malloc'd, freed by
 * the server) and its content type; or 404. */
typedef int (*http_handler_fn)(void *arg, const char *path, const char *accept, char **body,
			       size_t *len, const char **content_type);

struct http_server {
	int fd;              /* listening socket, non-blocking; -1: closed */
	char bound[80];      /* "127.0.0.1:9431": where it listens (port 0 resolved) */
	http_handler_fn handler;
	void *arg;
	unsigned long long served, errors; /* responses sent; connections dropped */
};

/* Listen on "HOST:PORT", "[V6]:PORT" or ":PORT" (all interfaces); PORT 0
 * picks a free port. 0, or -errno with one line in err. */
int http_listen(struct http_server *s, const char *addr, char *err, size_t len);
/* Accept and answer every waiting connection (call when fd is readable). */
void http_serve_pending(struct http_server *s);
void http_close(struct http_server *s);

#endif
