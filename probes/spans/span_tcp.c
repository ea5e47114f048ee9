// SPDX-License-Identifier: MIT
/*
 * span_tcp: a span of each request on a server's TCP port (tcp:PORT), for
 * servers whose handler no uprobe can name (JIT code). Here: which ports (the
 * ones the target listens on, from /proc/PID/net/tcp{,6} and its fds) and in
 * which network namespace; spans.bpf.c's tcp programs do the rest.
 */
#include "spans/span_plan.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TCP_LISTEN 0x0A /* /proc/net/tcp "st" */
#define MAX_SOCKS 4096

/* The socket inodes among pid's open files: n, or -errno. */
static int socket_inodes(int pid, unsigned long *ino, int max)
{
	char dir[64], path[320], link[64];
	struct dirent *e;
	int n = 0;
	DIR *d;

	snprintf(dir, sizeof(dir), "/proc/%d/fd", pid);
	d = opendir(dir);
	if (!d)
		return -errno;
	while (n < max && (e = readdir(d))) {
		ssize_t l;

		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		l = readlink(path, link, sizeof(link) - 1);
		if (l <= 0)
			continue;
		link[l] = '\0';
		if (sscanf(link, "socket:[%lu]", &ino[n]) == 1)
			n++;
	}
	closedir(d);
	return n;
}

static bool has_inode(const unsigned long *ino, int n, unsigned long want)
{
	for (int i = 0; i < n; i++)
		if (ino[i] == want)
			return true;
	return false;
}

static void add_port(struct span_tcp *t, unsigned port)
{
	int cap = (int)(sizeof(t->ports) / sizeof(t->ports[0]));

	for (int i = 0; i < t->nports; i++)
		if (t->ports[i] == port)
			return;
	if (t->nports < cap)
		t->ports[t->nports++] = port;
}

/* The listening ports in one /proc/PID/net/tcp{,6} whose socket pid holds. */
static void listen_ports(int pid, const char *file, const unsigned long *ino, int n,
			 struct span_tcp *t)
{
	char path[64], line[512];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/net/%s", pid, file);
	f = fopen(path, "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		unsigned port, st;
		unsigned long inode;
		char *c = strchr(line, ':');

		/* "sl: local_addr:PORT rem_addr:PORT st tx:rx tr:when retrnsmt uid timeout inode" */
		if (!c || !(c = strchr(c + 1, ':')) ||
		    sscanf(c + 1, "%x %*s %x %*s %*s %*s %*s %*s %lu", &port, &st, &inode) != 3)
			continue;
		if (st == TCP_LISTEN && has_inode(ino, n, inode))
			add_port(t, port);
	}
	fclose(f);
}

static unsigned long netns_of(int pid)
{
	char path[64];
	struct stat s;

	if (pid > 0)
		snprintf(path, sizeof(path), "/proc/%d/ns/net", pid);
	else
		snprintf(path, sizeof(path), "/proc/self/ns/net");
	return stat(path, &s) ? 0 : (unsigned long)s.st_ino;
}

int span_plan_tcp(int pid, unsigned port, struct span_plan *p, char *err, size_t len)
{
	struct span_tcp *t = &p->tcp;
	unsigned long *ino;
	int n;

	memset(p, 0, sizeof(*p));
	p->mode = SPAN_EXIT_TCP;
	p->symbol = t->name;
	t->netns = netns_of(pid);
	if (port) {
		t->ports[t->nports++] = port;
		snprintf(t->name, sizeof(t->name), "tcp:%u", port);
		return 0;
	}
	if (pid <= 0) {
		snprintf(err, len, "--span tcp: which port? give --span tcp:PORT (or --pid PID: each "
			 "port it listens on)");
		return -EINVAL;
	}
	ino = calloc(MAX_SOCKS, sizeof(*ino));
	if (!ino)
		return -ENOMEM;
	n = socket_inodes(pid, ino, MAX_SOCKS);
	listen_ports(pid, "tcp", ino, n, t);
	listen_ports(pid, "tcp6", ino, n, t);
	free(ino);
	if (!t->nports) {
		snprintf(err, len, "--span tcp: pid %d listens on no TCP port (yet); name it: "
			 "--span tcp:PORT", pid);
		return -ENOENT;
	}
	n = snprintf(t->name, sizeof(t->name), "tcp:%u", t->ports[0]);
	for (int i = 1; i < t->nports && n > 0 && (size_t)n < sizeof(t->name); i++)
		n += snprintf(t->name + n, sizeof(t->name) - (size_t)n, ",%u", t->ports[i]);
	return 0;
}
