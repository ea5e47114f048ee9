/* SPDX-License-Identifier: MIT */
/* Listening sockets. See listener.h. */
#include "listener.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Numeric IPv4/IPv6 address + port -> sockaddr. */
static int addr_resolve(const char *bind_addr, uint16_t port,
			struct sockaddr_storage *ss, socklen_t *len)
{
	struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, bind_addr, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons(port);
		*len = sizeof(*a4);
		return 0;
	}
	if (inet_pton(AF_INET6, bind_addr, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons(port);
		*len = sizeof(*a6);
		return 0;
	}
	return -EINVAL;
}

static int port_of(int fd, uint16_t *port)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
		return -errno;
	if (ss.ss_family == AF_INET)
		*port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	else
		*port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return 0;
}

/* SO_REUSEPORT would let a second server silently share a busy port: first
 * bind one plain socket, which fails with EADDRINUSE if anyone holds the
 * port, and learn the port it got (for port 0). */
static int port_claim(struct sockaddr_storage *ss, socklen_t len, uint16_t *port)
{
	int one = 1, fd, rc;

	fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	rc = bind(fd, (const struct sockaddr *)ss, len) ? -errno : port_of(fd, port);
	close(fd);
	if (rc == 0 && ss->ss_family == AF_INET)
		((struct sockaddr_in *)ss)->sin_port = htons(*port);
	else if (rc == 0)
		((struct sockaddr_in6 *)ss)->sin6_port = htons(*port);
	return rc;
}

static int listen_one(const struct sockaddr_storage *ss, socklen_t len, int backlog,
		      const char **what)
{
	int one = 1, fd, err;

	fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		*what = "socket";
		return -errno;
	}
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0) {
		*what = "setsockopt(SO_REUSEPORT)";
		goto fail;
	}
	/* Linux: accepted sockets inherit TCP_NODELAY from their listener,
	 * which saves a setsockopt per connection. */
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) {
		*what = "setsockopt(TCP_NODELAY)";
		goto fail;
	}
	if (bind(fd, (const struct sockaddr *)ss, len) != 0) {
		*what = "bind";
		goto fail;
	}
	if (listen(fd, backlog) != 0) {
		*what = "listen";
		goto fail;
	}
	return fd;
fail:
	err = -errno;
	close(fd);
	return err;
}

int listener_open(const char *bind_addr, uint16_t port, int backlog, int n,
		  int *fds, uint16_t *port_out, const char **what)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int i, rc;

	*what = "address";
	if (addr_resolve(bind_addr, port, &ss, &len) != 0)
		return -EINVAL;
	*what = "bind";
	rc = port_claim(&ss, len, port_out);
	if (rc < 0)
		return rc;
	for (i = 0; i < n; i++) {
		rc = listen_one(&ss, len, backlog, what);
		if (rc < 0)
			goto fail;
		fds[i] = rc;
	}
	return 0;
fail:
	listener_close(fds, i);
	return rc;
}

void listener_close(int *fds, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		if (fds[i] >= 0)
			close(fds[i]);
		fds[i] = -1;
	}
}
