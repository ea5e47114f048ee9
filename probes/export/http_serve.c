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

void http_server_init(struct http_server *s)
{
	s->fd = -1;
	for (int i = 0; i < HTTP_MAX_CLIENTS; i++)
		s->clients[i].fd = -1;
}

int http_listen(struct http_server *s, const char *addr, char *err, size_t len)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
	struct addrinfo *res = NULL;
	char host[256];
	const char *port;
	int rc, fd = -EADDRNOTAVAIL;

	http_server_init(s);
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

/* The whole response for the request head in c->in (complete): c->out, or -ENOMEM. */
static int build_response(struct http_server *s, struct http_client *c)
{
	char path[1024], accept[512], hdr[256];
	const char *type = "text/plain; charset=utf-8";
	const struct status *st;
	char *body = NULL;
	size_t len = 0;
	bool head = !strncmp(c->in, "HEAD ", 5);
	int code, n;

	if (sscanf(c->in, "%*[A-Z] %1023[^ ?\r\n]", path) != 1)
		code = 400;
	else if (strncmp(c->in, "GET ", 4) && !head)
		code = 405;
	else {
		header_value(c->in, "accept", accept, sizeof(accept));
		code = s->handler(s->arg, path, accept, &body, &len, &type);
	}
	st = status_of(code);
	if (st->code != 200) {
		free(body);
		body = NULL;
		type = "text/plain; charset=utf-8";
		len = strlen(st->body);
	}
	n = snprintf(hdr, sizeof(hdr), "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n"
		     "Content-Length: %zu\r\nConnection: close\r\n%s\r\n", st->code, st->reason,
		     type, len, st->code == 405 ? "Allow: GET, HEAD\r\n" : "");
	c->out_len = (size_t)n + (head ? 0 : len);
	c->out = malloc(c->out_len ? c->out_len : 1);
	if (!c->out) {
		free(body);
		return -ENOMEM;
	}
	memcpy(c->out, hdr, (size_t)n);
	if (!head)
		memcpy(c->out + n, body ? body : st->body, len);
	free(body);
	return 0;
}

static void client_close(struct http_server *s, struct http_client *c, bool ok)
{
	close(c->fd);
	free(c->out);
	c->fd = -1;
	c->out = NULL;
	c->in_len = c->out_len = c->out_sent = 0;
	if (ok)
		s->served++;
	else
		s->errors++;
}

/* Read what has come; once the head is in, the response. 1: go on, 0: closed. */
static int client_read(struct http_server *s, struct http_client *c)
{
	for (;;) {
		ssize_t r = read(c->fd, c->in + c->in_len, sizeof(c->in) - 1 - c->in_len);

		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			return 1;
		if (r <= 0) {
			client_close(s, c, false);
			return 0;
		}
		c->in_len += (size_t)r;
		c->in[c->in_len] = '\0';
		if (strstr(c->in, "\r\n\r\n") || strstr(c->in, "\n\n"))
			break;
		if (c->in_len + 1 >= sizeof(c->in)) { /* a head too long: dropped */
			client_close(s, c, false);
			return 0;
		}
	}
	if (build_response(s, c)) {
		client_close(s, c, false);
		return 0;
	}
	return 1;
}

/* Send what the socket takes; closed once all is sent. */
static void client_write(struct http_server *s, struct http_client *c)
{
	while (c->out_sent < c->out_len) {
		ssize_t w = send(c->fd, c->out + c->out_sent, c->out_len - c->out_sent, MSG_NOSIGNAL);

		if (w < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (w <= 0) {
			client_close(s, c, false);
			return;
		}
		c->out_sent += (size_t)w;
	}
	client_close(s, c, true);
}

/* One step of c: read what has come, answer once the head is in, send what the socket takes. */
static void client_step(struct http_server *s, struct http_client *c)
{
	if (!c->out && !client_read(s, c))
		return;
	if (c->out)
		client_write(s, c);
}

/* A slot for a new connection: a free one, else the oldest that has sent nothing yet
 * (closed, counted refused: a client holding connections open cannot keep a scraper
 * out), else none. */
static struct http_client *slot_for_new(struct http_server *s)
{
	struct http_client *idle = NULL;

	for (int i = 0; i < HTTP_MAX_CLIENTS; i++)
		if (s->clients[i].fd < 0)
			return &s->clients[i];
	/* full: first what has come since (a scraper's request may have) */
	for (int i = 0; i < HTTP_MAX_CLIENTS; i++)
		if (!s->clients[i].in_len && !s->clients[i].out)
			client_step(s, &s->clients[i]);
	for (int i = 0; i < HTTP_MAX_CLIENTS; i++) {
		struct http_client *c = &s->clients[i];

		if (c->fd < 0)
			return c;
		if (!c->in_len && !c->out && (!idle || c->deadline_ns < idle->deadline_ns))
			idle = c;
	}
	if (idle) {
		s->refused++;
		client_close(s, idle, false);
	}
	return idle;
}

static void accept_waiting(struct http_server *s, uint64_t now)
{
	for (int i = 0; i < HTTP_ACCEPT_PER_CALL; i++) {
		int fd = accept4(s->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct http_client *c;

		if (fd < 0)
			return; /* EAGAIN: none left (or a transient error: next poll) */
		c = slot_for_new(s);
		if (!c) { /* every slot mid-request: the newcomer is closed, counted */
			close(fd);
			s->errors++;
			s->refused++;
			continue;
		}
		c->fd = fd;
		c->deadline_ns = now + HTTP_CLIENT_TIMEOUT_MS * 1000000ull;
		client_step(s, c); /* a scraper's request is usually there already */
	}
}

int http_serve_poll_fds(const struct http_server *s, struct pollfd *fds)
{
	int n = 0;

	if (s->fd < 0)
		return 0;
	fds[n++] = (struct pollfd){ .fd = s->fd, .events = POLLIN };
	for (int i = 0; i < HTTP_MAX_CLIENTS; i++) {
		const struct http_client *c = &s->clients[i];

		if (c->fd >= 0)
			fds[n++] = (struct pollfd){ .fd = c->fd, .events = c->out ? POLLOUT : POLLIN };
	}
	return n;
}

int http_serve_timeout_ms(const struct http_server *s, int max_ms)
{
	uint64_t now = tt_now_ns();
	int ms = max_ms;

	for (int i = 0; i < HTTP_MAX_CLIENTS; i++) {
		const struct http_client *c = &s->clients[i];
		int left;

		if (c->fd < 0)
			continue;
		left = c->deadline_ns <= now ? 0 : (int)((c->deadline_ns - now) / 1000000) + 1;
		ms = left < ms ? left : ms;
	}
	return ms;
}

void http_serve(struct http_server *s)
{
	uint64_t now = tt_now_ns();

	if (s->fd < 0)
		return;
	accept_waiting(s, now);
	for (int i = 0; i < HTTP_MAX_CLIENTS; i++) {
		struct http_client *c = &s->clients[i];

		if (c->fd < 0)
			continue;
		if (now >= c->deadline_ns) {
			s->timed_out++;
			client_close(s, c, false);
			continue;
		}
		client_step(s, c);
	}
}

void http_close(struct http_server *s)
{
	for (int i = 0; i < HTTP_MAX_CLIENTS; i++)
		if (s->clients[i].fd >= 0) {
			close(s->clients[i].fd);
			free(s->clients[i].out);
			s->clients[i].fd = -1;
			s->clients[i].out = NULL;
		}
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
}
