// SPDX-License-Identifier: MIT
/*
 * hook_floor [--out DIR] -- CMD ARGS: attach empty programs to sched_switch and
 * sched_waking (hook_floor.bpf.c), run CMD, detach, exit with CMD's status.
 * bench/overhead.sh's `hooks` mode; --out is accepted and ignored so that it
 * takes tailtrace's place in a command line.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hook_floor.skel.h"

static int run_cmd(char **argv)
{
	int status = 0;
	pid_t pid = fork();

	if (pid < 0) {
		fprintf(stderr, "hook_floor: fork: %s\n", strerror(errno));
		return 1;
	}
	if (pid == 0) {
		execvp(argv[0], argv);
		fprintf(stderr, "hook_floor: cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	signal(SIGINT, SIG_IGN); /* the command gets it; we detach after it exits */
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

int main(int argc, char **argv)
{
	struct hook_floor_bpf *skel = NULL;
	int i = 1, rc = 1;

	if (i + 1 < argc && !strcmp(argv[i], "--out"))
		i += 2;
	if (i >= argc || strcmp(argv[i], "--") || i + 1 >= argc) {
		fprintf(stderr, "usage: hook_floor [--out DIR] -- CMD [ARGS]\n");
		return 2;
	}
	skel = hook_floor_bpf__open_and_load();
	if (!skel)
		fprintf(stderr, "hook_floor: cannot load the BPF programs (run as root, kernel with BTF)\n");
	else if (hook_floor_bpf__attach(skel))
		fprintf(stderr, "hook_floor: cannot attach to tp_btf/sched_switch and sched_waking\n");
	else
		rc = run_cmd(argv + i + 1);
	hook_floor_bpf__destroy(skel); /* NULL-safe; detaches both */
	return rc;
}
