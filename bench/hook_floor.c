// SPDX-License-Identifier: MIT
/*
 * hook_floor [--out DIR] [--usdt BIN:PROVIDER:NAME]... -- CMD ARGS: attach empty
 * programs to sched_switch and sched_waking (hook_floor.bpf.c), or with --usdt
 * to those USDT probes of BIN in every process instead, run CMD, detach, exit
 * with CMD's status. bench/overhead.sh's `hooks` and `spanfloor` modes; --out is
 * accepted and ignored so that it takes tailtrace's place in a command line.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bpf/libbpf.h>

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

#define MAX_USDT 8

/* Attach the empty USDT program to BIN:PROVIDER:NAME; 0 or -1. */
static int attach_usdt(struct hook_floor_bpf *skel, char *spec, struct bpf_link **link)
{
	char *name = strrchr(spec, ':'), *provider;

	if (!name || name == spec)
		return -1;
	*name++ = '\0';
	provider = strrchr(spec, ':');
	if (!provider)
		return -1;
	*provider++ = '\0';
	*link = bpf_program__attach_usdt(skel->progs.floor_usdt, -1, spec, provider, name, NULL);
	return *link ? 0 : -1;
}

int main(int argc, char **argv)
{
	struct hook_floor_bpf *skel = NULL;
	struct bpf_link *links[MAX_USDT] = { 0 };
	char *usdt[MAX_USDT];
	int i = 1, rc = 1, nusdt = 0, err = 0;

	for (;;) {
		if (i + 1 < argc && !strcmp(argv[i], "--out"))
			i += 2;
		else if (i + 1 < argc && !strcmp(argv[i], "--usdt") && nusdt < MAX_USDT)
			usdt[nusdt++] = argv[i + 1], i += 2;
		else
			break;
	}
	if (i >= argc || strcmp(argv[i], "--") || i + 1 >= argc) {
		fprintf(stderr, "usage: hook_floor [--out DIR] [--usdt BIN:PROVIDER:NAME]... -- CMD [ARGS]\n");
		return 2;
	}
	skel = hook_floor_bpf__open();
	if (skel) {
		bpf_program__set_autoload(skel->progs.floor_switch, !nusdt);
		bpf_program__set_autoload(skel->progs.floor_waking, !nusdt);
		bpf_program__set_autoload(skel->progs.floor_usdt, nusdt > 0);
	}
	if (!skel || hook_floor_bpf__load(skel)) {
		fprintf(stderr, "hook_floor: cannot load the BPF programs (run as root, kernel with BTF)\n");
		hook_floor_bpf__destroy(skel);
		return 1;
	}
	for (int u = 0; u < nusdt && !err; u++)
		if ((err = attach_usdt(skel, usdt[u], &links[u])))
			fprintf(stderr, "hook_floor: cannot attach to USDT %s (BIN:PROVIDER:NAME)\n", usdt[u]);
	if (!nusdt && (err = hook_floor_bpf__attach(skel)))
		fprintf(stderr, "hook_floor: cannot attach to tp_btf/sched_switch and sched_waking\n");
	if (!err)
		rc = run_cmd(argv + i + 1);
	for (int u = 0; u < nusdt; u++)
		bpf_link__destroy(links[u]);
	hook_floor_bpf__destroy(skel); /* NULL-safe; detaches the rest */
	return rc;
}
