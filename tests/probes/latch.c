// SPDX-License-Identifier: MIT
/*
 * latch N HOLD_US [gate]: a two-process program around a latch (a self-pipe
 * behind an epoll fd, the kind of wait primitive servers build themselves).
 * The parent serves N orders on one thread: serve_order() asks the child for
 * the order's lock and waits for it in order_lock_wait(); the child, a second
 * process of the same program, holds the lock HOLD_US and then sets the
 * parent's latch. Between orders the parent naps in idle_nap(), on a latch
 * nobody sets, for 1 ms. Both waits go through latch_wait(), the program's
 * generic wrapper, so only the frame above it says why the thread waited.
 * Both processes are named "latch". With "gate" it prints "ready PID" and
 * waits for a line on stdin first (a tracer attaches with --comm latch).
 * Prints "served N". Ground truth for tests/probes/test_labels.py.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tt_clock.h>

struct latch {
	int rfd, wfd, epfd;
};

static int latch_init(struct latch *l)
{
	int p[2];
	struct epoll_event ev = { .events = EPOLLIN };

	if (pipe(p))
		return -1;
	l->rfd = p[0], l->wfd = p[1];
	l->epfd = epoll_create1(0);
	ev.data.fd = l->rfd;
	return l->epfd < 0 ? -1 : epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->rfd, &ev);
}

static volatile int waits; /* after each call: no tail call, so each keeps its frame */

/* The block: as a frame-pointer unwinder sees libc without frame pointers, the
 * function that calls epoll_wait is lost from the stack; the ones above it stay. */
__attribute__((noinline)) int latch_block(struct latch *l, int timeout_ms)
{
	struct epoll_event ev;
	int n = epoll_wait(l->epfd, &ev, 1, timeout_ms);

	waits++;
	return n;
}

/* The wrapper: wait until the latch is set (or timeout_ms), then reset it. */
__attribute__((noinline)) int latch_wait(struct latch *l, int timeout_ms)
{
	char buf[16];
	int n = latch_block(l, timeout_ms);

	if (n > 0 && read(l->rfd, buf, sizeof(buf)) < 0)
		return -1;
	waits++;
	return n;
}

static void latch_set(struct latch *l)
{
	if (write(l->wfd, "x", 1) != 1)
		exit(1);
}

__attribute__((noinline)) int order_lock_wait(struct latch *granted)
{
	int n = latch_wait(granted, -1);

	waits++;
	return n;
}

__attribute__((noinline)) int idle_nap(struct latch *idle)
{
	int n = latch_wait(idle, 1); /* 1 ms: epoll's resolution */

	waits++;
	return n;
}

__attribute__((noinline, used)) long serve_order(long i, int ask_fd, struct latch *granted)
{
	if (write(ask_fd, "o", 1) != 1)
		return -1;
	order_lock_wait(granted);
	return i;
}

static void child_hold_locks(int ask_rfd, struct latch *granted, long n, long hold_us)
{
	char c;

	for (long i = 0; i < n && read(ask_rfd, &c, 1) == 1; i++) {
		tt_sleep_until_ns(tt_now_ns() + (uint64_t)hold_us * 1000);
		latch_set(granted);
	}
	_exit(0);
}

int main(int argc, char **argv)
{
	long n = argc >= 3 ? atol(argv[1]) : 0, hold_us = argc >= 3 ? atol(argv[2]) : 0;
	struct latch granted, idle;
	int ask[2], status;
	char line[16];
	pid_t child;

	if (n <= 0 || hold_us < 0 || argc > 4) {
		fprintf(stderr, "usage: latch N HOLD_US [gate]\n");
		return 2;
	}
	if (latch_init(&granted) || latch_init(&idle) || pipe(ask))
		return 1;
	if (argc == 4 && !strcmp(argv[3], "gate")) {
		printf("ready %d\n", (int)getpid());
		fflush(stdout);
		if (!fgets(line, sizeof(line), stdin))
			return 1;
	}
	child = fork();
	if (child < 0)
		return 1;
	if (child == 0)
		child_hold_locks(ask[0], &granted, n, hold_us);
	for (long i = 0; i < n; i++) {
		serve_order(i, ask[1], &granted);
		idle_nap(&idle);
	}
	waitpid(child, &status, 0);
	printf("served %ld\n", n);
	return 0;
}
