// SPDX-License-Identifier: MIT
/* Uprobes kept to be attached again for other processes (uprobe_set.h). */
#include "core/uprobe_set.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int grow(void **arr, int *cap, int n, size_t size)
{
	void *p;
	int c;

	if (n < *cap)
		return 0;
	c = *cap ? *cap * 2 : 16;
	p = realloc(*arr, (size_t)c * size);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = c;
	return 0;
}

static int link_one(struct uprobe_set *s, const struct uprobe_spec *spec, int pid)
{
	struct bpf_link *l;

	if (grow((void **)&s->links, &s->links_cap, s->nlinks, sizeof(*s->links)))
		return -ENOMEM;
	if (spec->provider) {
		LIBBPF_OPTS(bpf_usdt_opts, uo, .usdt_cookie = spec->cookie);

		l = bpf_program__attach_usdt(spec->prog, pid, spec->path, spec->provider, spec->name,
					     &uo);
	} else {
		LIBBPF_OPTS(bpf_uprobe_opts, uo, .retprobe = spec->retprobe,
			    .bpf_cookie = spec->cookie);

		l = bpf_program__attach_uprobe_opts(spec->prog, pid, spec->path, spec->offset, &uo);
	}
	if (!l)
		return errno ? -errno : -EINVAL;
	s->links[s->nlinks++] = l;
	return 0;
}

int uprobe_set_attach(struct uprobe_set *s, const struct uprobe_spec *spec, int pid)
{
	int err = link_one(s, spec, pid);

	if (err)
		return err;
	if (grow((void **)&s->specs, &s->specs_cap, s->nspecs, sizeof(*s->specs)))
		return -ENOMEM;
	s->specs[s->nspecs++] = *spec;
	return 0;
}

int uprobe_set_attach_pid(struct uprobe_set *s, int pid)
{
	int first = 0;

	for (int i = 0; i < s->nspecs; i++) {
		int err = link_one(s, &s->specs[i], pid);

		first = first ?: err;
	}
	if (s->nspecs)
		s->pids++;
	return first;
}

void uprobe_set_free(struct uprobe_set *s)
{
	for (int i = 0; i < s->nlinks; i++)
		bpf_link__destroy(s->links[i]);
	free(s->links);
	free(s->specs);
	memset(s, 0, sizeof(*s));
}
