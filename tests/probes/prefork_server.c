// SPDX-License-Identifier: MIT
/*
 * prefork_server WORKERS CPU_US SLEEP_US: a pre-fork server of known cost. The
 * parent listens on an ephemeral loopback port, prints {"pid": P, "port": N}
 * and forks WORKERS children that accept on the shared socket; each request
 * (a line) costs CPU_US of the worker's CPU, then SLEEP_US asleep
 * (known_cost.h), and is answered with "ok\n" on the same connection. The
 * parent serves nothing: traced by its pid, every request runs in a
 * descendant. SIGTERM stops the children and the parent.
 */
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "known_cost.h"

static void serve_connection(int fd, unsigned cpu_us, unsigned sleep_us)
{
	char buf[256];
	ssize_t n;

	while ((n = read(fd, buf, sizeof(buf))) > 0)
		for (ssize_t i = 0; i < n; i++)
			if (buf[i] == '\n') {
				known_cost(cpu_us, sleep_us);
				if (write(fd, "ok\n", 3) != 3)
					return;
			}
}

static void worker(int lfd, unsigned cpu_us, unsigned sleep_us)
{
	for (;;) {
		int fd = accept(lfd, NULL, NULL);

		if (fd < 0) {
			if (errno == EINTR)
				continue;
			_exit(1);
		}
		serve_connection(fd, cpu_us, sleep_us);
		close(fd);
	}
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	pid_t kids[64];
	int n, lfd, one = 1, status, sig;
	sigset_t term;

	if (argc != 4 || (n = atoi(argv[1])) < 1 || n > 64) {
		fprintf(stderr, "usage: prefork_server WORKERS(1-64) CPU_US SLEEP_US\n");
		return 2;
	}
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 256) ||
	    getsockname(lfd, (struct sockaddr *)&a, &alen)) {
		perror("prefork_server: listen");
		return 1;
	}
	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	for (int i = 0; i < n; i++) {
		kids[i] = fork();
		if (kids[i] == 0)
			worker(lfd, (unsigned)atoi(argv[2]), (unsigned)atoi(argv[3]));
	}
	sigprocmask(SIG_BLOCK, &term, NULL); /* the children keep SIGTERM's default */
	printf("{\"pid\": %d, \"port\": %d}\n", getpid(), ntohs(a.sin_port));
	fflush(stdout);
	sigwait(&term, &sig);
	for (int i = 0; i < n; i++)
		kill(kids[i], SIGKILL);
	while (wait(&status) > 0)
		;
	return 0;
}
