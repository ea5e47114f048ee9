// SPDX-License-Identifier: MIT
/*
 * handoff_server WORKERS CPU_US SLEEP_US: a server whose socket thread hands
 * the work to others, as an event loop with a thread pool does (FastAPI's sync
 * endpoints, Netty's worker group, libuv's pool). One thread runs an epoll
 * loop over a loopback listening socket and its connections: it reads each
 * request (a line) and queues it; one of WORKERS threads takes it, spends
 * CPU_US of its own CPU and SLEEP_US asleep (known_cost.h), queues the answer
 * and wakes the loop through an eventfd; the loop writes "ok\n". Prints
 * {"pid": P, "port": N, "loop_tid": T}; runs until SIGTERM.
 */
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "known_cost.h"

#define QUEUE 1024

struct queue {
	int fds[QUEUE];
	unsigned head, tail;
};

static struct queue todo, done;
static pthread_mutex_t todo_lock = PTHREAD_MUTEX_INITIALIZER, done_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t todo_cond = PTHREAD_COND_INITIALIZER;
static unsigned cpu_us, sleep_us;
static int wake_fd;

static void queue_put(struct queue *q, int fd)
{
	q->fds[q->tail++ % QUEUE] = fd;
}

static int queue_take(struct queue *q)
{
	return q->head == q->tail ? -1 : q->fds[q->head++ % QUEUE];
}

static void *worker(void *arg)
{
	uint64_t one = 1;

	for (;;) {
		int fd;

		pthread_mutex_lock(&todo_lock);
		while ((fd = queue_take(&todo)) < 0)
			pthread_cond_wait(&todo_cond, &todo_lock);
		pthread_mutex_unlock(&todo_lock);
		known_cost(cpu_us, sleep_us);
		pthread_mutex_lock(&done_lock);
		queue_put(&done, fd);
		pthread_mutex_unlock(&done_lock);
		if (write(wake_fd, &one, sizeof(one)) != sizeof(one))
			return arg;
	}
}

/* A readable connection: each whole line is a request for the pool. */
static void on_readable(int ep, int fd)
{
	char buf[256];
	ssize_t n = read(fd, buf, sizeof(buf));

	if (n <= 0) {
		epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
		close(fd);
		return;
	}
	for (ssize_t i = 0; i < n; i++)
		if (buf[i] == '\n') {
			pthread_mutex_lock(&todo_lock);
			queue_put(&todo, fd);
			pthread_cond_signal(&todo_cond);
			pthread_mutex_unlock(&todo_lock);
		}
}

/* The pool woke the loop: answer every finished request. */
static void on_done(void)
{
	uint64_t n;
	int fd;

	if (read(wake_fd, &n, sizeof(n)) != sizeof(n))
		return;
	for (;;) {
		pthread_mutex_lock(&done_lock);
		fd = queue_take(&done);
		pthread_mutex_unlock(&done_lock);
		if (fd < 0 || write(fd, "ok\n", 3) != 3)
			return;
	}
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	struct epoll_event ev = { .events = EPOLLIN }, got[64];
	int n, lfd, ep, one = 1;

	if (argc != 4 || (n = atoi(argv[1])) < 1 || n > 64) {
		fprintf(stderr, "usage: handoff_server WORKERS(1-64) CPU_US SLEEP_US\n");
		return 2;
	}
	cpu_us = (unsigned)atoi(argv[2]);
	sleep_us = (unsigned)atoi(argv[3]);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 256) ||
	    getsockname(lfd, (struct sockaddr *)&a, &alen)) {
		perror("handoff_server: listen");
		return 1;
	}
	wake_fd = eventfd(0, 0);
	ep = epoll_create1(0);
	ev.data.fd = lfd;
	epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
	ev.data.fd = wake_fd;
	epoll_ctl(ep, EPOLL_CTL_ADD, wake_fd, &ev);
	for (int i = 0; i < n; i++) {
		pthread_t t;

		pthread_create(&t, NULL, worker, NULL);
	}
	printf("{\"pid\": %d, \"port\": %d, \"loop_tid\": %d}\n", getpid(), ntohs(a.sin_port),
	       gettid());
	fflush(stdout);
	for (;;) {
		int k = epoll_wait(ep, got, 64, -1);

		for (int i = 0; i < k; i++) {
			int fd = got[i].data.fd;

			if (fd == lfd) {
				ev.data.fd = accept(lfd, NULL, NULL);
				if (ev.data.fd >= 0)
					epoll_ctl(ep, EPOLL_CTL_ADD, ev.data.fd, &ev);
			} else if (fd == wake_fd) {
				on_done();
			} else {
				on_readable(ep, fd);
			}
		}
	}
}
