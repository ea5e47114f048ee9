/* SPDX-License-Identifier: MIT */
/*
 * The smallest HTTP/1.1 server the exporter needs: one listening socket and up
 * to HTTP_MAX_CLIENTS connections, all non-blocking, driven by the loader's
 * loop (http_serve_poll_fds, then http_serve): a connection is read, answered
 * and closed (Connection: close) a step at a time, whatever the client does,
 * so a client that sends nothing, reads nothing or opens a thousand
 * connections never holds the loop that drains the rings. Each connection has
 * HTTP_CLIENT_TIMEOUT_MS from its accept. At the cap a new connection takes the
 * place of the oldest that has sent nothing (so connections held open cannot keep
 * a scraper out), or is closed when every one is mid-request; both counted
 * refused. GET and HEAD only.
 */
#ifndef TT_HTTP_SERVE_H
#define TT_HTTP_SERVE_H
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>

#define HTTP_CLIENT_TIMEOUT_MS 2000
#define HTTP_MAX_CLIENTS 32      /* connections open at once */
#define HTTP_ACCEPT_PER_CALL 64  /* connections taken off the backlog in one call */
#define HTTP_REQUEST_MAX 8192

/* The response to one GET/HEAD of path (accept: the request's Accept header
 * value, "" without one): status 200 with a body in *body (malloc'd, freed by
 * the server) and its content type; or 404. */
typedef int (*http_handler_fn)(void *arg, const char *path, const char *accept, char **body,
			       size_t *len, const char **content_type);

/* One connection: its request head as read so far, then its response as sent so far. */
struct http_client {
	int fd;                  /* -1: a free slot */
	unsigned long long deadline_ns;
	size_t in_len;
	char *out;               /* the whole response once the head is in; NULL before */
	size_t out_len, out_sent;
	char in[HTTP_REQUEST_MAX];
};

struct http_server {
	int fd;              /* listening socket, non-blocking; -1: closed */
	char bound[80];      /* "127.0.0.1:9431": where it listens (port 0 resolved) */
	http_handler_fn handler;
	void *arg;
	struct http_client clients[HTTP_MAX_CLIENTS];
	unsigned long long served, errors; /* responses sent; connections dropped */
	unsigned long long timed_out, refused; /* of errors: past the deadline, over the cap */
};

/* No socket, no connection (what http_close may be called on). */
void http_server_init(struct http_server *s);
/* Listen on "HOST:PORT", "[V6]:PORT" or ":PORT" (all interfaces); PORT 0
 * picks a free port. 0, or -errno with one line in err. */
int http_listen(struct http_server *s, const char *addr, char *err, size_t len);
/* The descriptors to poll (the listening socket, then each connection for what it
 * waits for) into fds (room for 1 + HTTP_MAX_CLIENTS); how many. */
int http_serve_poll_fds(const struct http_server *s, struct pollfd *fds);
/* One step for every connection that can make one without waiting: accept what
 * waits (up to HTTP_ACCEPT_PER_CALL), read, answer, send, close; and close each
 * connection past its deadline. Never blocks. */
void http_serve(struct http_server *s);
/* The poll timeout that honours the nearest connection deadline, at most max_ms. */
int http_serve_timeout_ms(const struct http_server *s, int max_ms);
void http_close(struct http_server *s);

#endif
