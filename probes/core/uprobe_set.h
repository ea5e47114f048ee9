/* SPDX-License-Identifier: MIT */
/*
 * The uprobes and USDT probes a module attached, kept so that the same ones
 * can be attached for another process: a target's descendant (a pre-fork
 * server's worker, the loader finds it in tree.c), which a uprobe attached
 * for one pid does not reach.
 */
#ifndef TT_UPROBE_SET_H
#define TT_UPROBE_SET_H
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <bpf/libbpf.h>

struct uprobe_spec {
	struct bpf_program *prog;
	char path[PATH_MAX];
	uint64_t offset;          /* uprobe: the site's file offset */
	bool retprobe;
	uint64_t cookie;          /* BPF cookie (0 where the kernel takes none) */
	const char *provider;     /* USDT: provider and probe name; NULL: a uprobe */
	const char *name;
};

struct uprobe_set {
	struct uprobe_spec *specs;
	int nspecs, specs_cap;
	struct bpf_link **links;
	int nlinks, links_cap;
	int pids;                 /* processes attached beyond the first */
};

/* Attach spec for pid (-1: every process) and keep it. 0 or -errno. */
int uprobe_set_attach(struct uprobe_set *s, const struct uprobe_spec *spec, int pid);
/* Attach every kept probe for one more process. 0, or the first failure's
 * -errno (the other probes are still attached). */
int uprobe_set_attach_pid(struct uprobe_set *s, int pid);
/* Detach everything and free the set (it can be used again, empty). */
void uprobe_set_free(struct uprobe_set *s);

#endif
