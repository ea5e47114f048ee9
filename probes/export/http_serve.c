// SPDX-License-Identifier: MIT
#include "export/http_serve.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <tt_clock.h>

#define REQUEST_MAX 8192

static int split_addr(const char *addr, char *host, size_t hlen, const char **port)
{
	const char *colon;

	if (addr[0] == '[') {
		const char *end = strchr(addr, ']');

		if (!end || end[1] != ':' || (size_t)(end - addr - 1) >= hlen)
			return -EINVAL;
		snprintf(host, hlen, "%.*s", (int)(end - addr - 1), addr + 1);
		*port = end + 2;
	} else {
		colon = strrchr(addr, ':');
		if (!colon || (size_t)(colon - addr) >= hlen)
			return -EINVAL;
		snprintf(host, hlen, "%.*s", (int)(colon - addr), addr);
		*port = colon + 1;
	}
	for (const char *p = *port; *p; p++)
		if (*p < '0' || *p > '9')
			return -EINVAL;
	return **port && strlen(*port) <= 5 && atoi(*port) <= 65535 ? 0 : -EINVAL;
}

static int listen_on(const struct addrinfo *ai)
{
	int one = 1, fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 64)) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

static void name_bound(struct http_server *s)
{
	struct sockaddr_storage ss;
	socklen_t n = sizeof(ss);
	char host[INET6_ADDRSTRLEN] = "?";
	int port = 0;

	if (getsockname(s->fd, (struct sockaddr *)&ss, &n))
		return;
	if (ss.ss_family == AF_INET6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;

		inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
		port = ntohs(a->sin6_port);
		snprintf(s->bound, sizeof(s->bound), "[%s]:%d", host, port);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;

		inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
		port = ntohs(a->sin_port);
		snprintf(s->bound, sizeof(s->bound), "%s:%d", host, port);
	}
}

int http_listen(struct http_server *s, const char *addr, char *err, size_t len)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
	struct addrinfo *res = NULL;
	char host[256];
	const char *port;
	int rc, fd = -EADDRNOTAVAIL;

	s->fd = -1;
	if (split_addr(addr, host, sizeof(host), &port)) {
		snprintf(err, len, "--listen '%s': expected HOST:PORT, [IPV6]:PORT or :PORT "
			 "(e.g. 127.0.0.1:9431)", addr);
		return -EINVAL;
	}
	rc = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
	if (rc) {
		snprintf(err, len, "--listen '%s': %s (give an address of this host)", addr,
			 gai_strerror(rc));
		return -EINVAL;
	}
	for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next)
		fd = listen_on(ai);
	freeaddrinfo(res);
	if (fd < 0) {
		snprintf(err, len, "--listen %s: %s (%s)", addr, strerror(-fd),
			 fd == -EADDRINUSE ? "another exporter runs there? choose another port" :
					     "choose another address");
		return fd;
	}
	s->fd = fd;
	name_bound(s);
	return 0;
}

static int wait_fd(int fd, short events, uint64_t deadline_ns)
{
	uint64_t now = tt_now_ns();
	struct pollfd p = { .fd = fd, .events = events };

	if (now >= deadline_ns)
		return -ETIMEDOUT;
	int n = poll(&p, 1, (int)((deadline_ns - now) / 1000000) + 1);

	return n > 0 ? 0 : n == 0 ? -ETIMEDOUT : -errno;
}

/* The request head (up to the blank line), NUL-terminated; its length or -errno. */
static int read_head(int fd, char *buf, size_t cap, uint64_t deadline_ns)
{
	size_t n = 0;

	while (n + 1 < cap) {
		ssize_t r = read(fd, buf + n, cap - 1 - n);

		if (r > 0) {
			n += (size_t)r;
			buf[n] = '\0';
			if (strstr(buf, "\r\n\r\n") || strstr(buf, "\n\n"))
				return (int)n;
			continue;
		}
		if (r == 0)
			return -ECONNRESET;
		if (errno != EAGAIN && errno != EINTR)
			return -errno;
		int err = wait_fd(fd, POLLIN, deadline_ns);

		if (err)
			return err;
	}
	return -E2BIG;
}

static int write_all(int fd, const char *p, size_t n, uint64_t deadline_ns)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w > 0) {
			p += w;
			n -= (size_t)w;
			continue;
		}
		if (w < 0 && errno != EAGAIN && errno != EINTR)
			return -errno;
		int err = wait_fd(fd, POLLOUT, deadline_ns);

		if (err)
			return err;
	}
	return 0;
}

static const struct status {
	int code;
	const char *reason, *body; /* body: of an error response */
} statuses[] = {
	{ 200, "OK", "" },
	{ 400, "Bad Request", "bad request\n" },
	{ 404, "Not Found", "not found: try /metrics\n" },
	{ 405, "Method Not Allowed", "only GET and HEAD\n" },
	{ 500, "Internal Server Error", "internal error (out of memory)\n" },
};

static const struct status *status_of(int code)
{
	for (size_t i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++)
		if (statuses[i].code == code)
			return &statuses[i];
	return &statuses[sizeof(statuses) / sizeof(statuses[0]) - 1]; /* 500 */
}

static int respond(int fd, const struct status *st, const char *type, const char *body,
		   size_t len, bool head_only, uint64_t deadline_ns)
{
	char hdr[256];
	int n = snprintf(hdr, sizeof(hdr), "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n"
			 "Content-Length: %zu\r\nConnection: close\r\n%s\r\n", st->code, st->reason,
			 type, len, st->code == 405 ? "Allow: GET, HEAD\r\n" : "");

	return write_all(fd, hdr, (size_t)n, deadline_ns) ?:
	       (head_only ? 0 : write_all(fd, body, len, deadline_ns));
}

/* The value of header name (e.g. "accept") in the request head, copied into
 * out ("" when absent). Names compare without case, as HTTP says. */
static void header_value(const char *req, const char *name, char *out, size_t len)
{
	size_t n = strlen(name);
	const char *line = strchr(req, '\n');

	out[0] = '\0';
	for (; line; line = strchr(line + 1, '\n')) {
		const char *v = line + 1;

		if (strncasecmp(v, name, n) || v[n] != ':')
			continue;
		v += n + 1;
		v += strspn(v, " \t");
		snprintf(out, len, "%.*s", (int)strcspn(v, "\r\n"), v);
		return;
	}
}

static int serve_one(struct http_server *s, int fd)
{
	uint64_t deadline = tt_now_ns() + HTTP_CLIENT_TIMEOUT_MS * 1000000ull;
	char req[REQUEST_MAX], path[1024], accept[512];
	const char *type = "text/plain; charset=utf-8";
	const struct status *st;
	char *body = NULL;
	size_t len = 0;
	bool head;
	int err = read_head(fd, req, sizeof(req), deadline), code;

	if (err < 0)
		return err;
	head = !strncmp(req, "HEAD ", 5);
	if (sscanf(req, "%*[A-Z] %1023[^ ?\r\n]", path) != 1)
		code = 400;
	else if (strncmp(req, "GET ", 4) && !head)
		code = 405;
	else {
		header_value(req, "accept", accept, sizeof(accept));
		code = s->handler(s->arg, path, accept, &body, &len, &type);
	}
	st = status_of(code);
	if (st->code == 200)
		err = respond(fd, st, type, body, len, head, deadline);
	else
		err = respond(fd, st, "text/plain; charset=utf-8", st->body, strlen(st->body), head,
			      deadline);
	free(body);
	return err;
}

void http_serve_pending(struct http_server *s)
{
	for (;;) {
		int fd = accept4(s->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0)
			return; /* EAGAIN: none left (or a transient error: next poll) */
		if (serve_one(s, fd))
			s->errors++;
		else
			s->served++;
		close(fd);
	}
}

void http_close(struct http_server *s)
{
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
}
