// SPDX-License-Identifier: MIT
#include "core/target.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <mntent.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/magic.h>

#include <tt_clock.h>

static int pidfd_open_(pid_t pid)
{
#ifdef SYS_pidfd_open
	return (int)syscall(SYS_pidfd_open, pid, 0);
#else
	errno = ENOSYS;
	return -1;
#endif
}

static void child_main(char **cmd, int go_fd, int err_fd)
{
	char b = 0;
	ssize_t n;
	int e;

	/* Held: tracing starts before the first instruction of cmd. Only the
	 * parent's "g" releases it: EOF means tailtrace gave up (it refused to
	 * attach, or died), and cmd must not run untraced. */
	signal(SIGINT, SIG_DFL); /* tailtrace's stop handlers: not for the held child */
	signal(SIGTERM, SIG_DFL);
	do
		n = read(go_fd, &b, 1);
	while (n < 0 && errno == EINTR);
	if (n != 1 || b != 'g')
		_exit(127);
	close(go_fd);
	execvp(cmd[0], cmd);
	e = errno;
	if (write(err_fd, &e, sizeof(e)) < 0)
		_exit(127);
	_exit(127);
}

int target_spawn_held(char **cmd, struct tt_child *c, char *err, size_t len)
{
	int go[2], ex[2];

	memset(c, 0, sizeof(*c));
	c->pidfd = -1;
	if (pipe2(go, O_CLOEXEC) || pipe2(ex, O_CLOEXEC)) {
		snprintf(err, len, "cannot create pipes: %s", strerror(errno));
		return -errno;
	}
	c->pid = fork();
	if (c->pid < 0) {
		snprintf(err, len, "cannot fork to run %s: %s", cmd[0], strerror(errno));
		return -errno;
	}
	if (c->pid == 0) {
		close(go[1]);
		close(ex[0]);
		child_main(cmd, go[0], ex[1]);
	}
	close(go[0]);
	close(ex[1]);
	c->go_fd = go[1];
	c->err_fd = ex[0];
	c->pidfd = pidfd_open_(c->pid);
	return 0;
}

int target_release(struct tt_child *c, char **cmd, char *err, size_t len)
{
	ssize_t n;
	int e = 0;

	if (write(c->go_fd, "g", 1) != 1) {
		snprintf(err, len, "cannot release %s: %s", cmd[0], strerror(errno));
		return -errno;
	}
	close(c->go_fd);
	c->go_fd = -1;
	do
		n = read(c->err_fd, &e, sizeof(e));
	while (n < 0 && errno == EINTR);
	close(c->err_fd);
	c->err_fd = -1;
	if (n == (ssize_t)sizeof(e)) {
		/* the child _exits(127) right after that write: reap it, so its
		 * status is 127 and not a SIGTERM from target_child_stop racing it */
		if (waitpid(c->pid, &c->status, 0) == c->pid)
			c->reaped = true;
		snprintf(err, len, "cannot run '%s': %s%s", cmd[0], strerror(e),
			 e == ENOENT ? " (check the path or PATH)" : "");
		return -e;
	}
	return 0;
}

bool target_child_exited(struct tt_child *c)
{
	if (c->reaped)
		return true;
	if (waitpid(c->pid, &c->status, WNOHANG) == c->pid)
		c->reaped = true;
	return c->reaped;
}

void target_child_stop(struct tt_child *c, int grace_ms)
{
	uint64_t deadline = tt_now_ns() + (uint64_t)grace_ms * 1000000ull;

	if (c->pid <= 0 || target_child_exited(c))
		return;
	kill(c->pid, SIGTERM);
	while (!target_child_exited(c) && tt_now_ns() < deadline)
		usleep(10000);
	if (!c->reaped) {
		kill(c->pid, SIGKILL);
		if (waitpid(c->pid, &c->status, 0) == c->pid)
			c->reaped = true;
	}
}

int target_exit_code(const struct tt_child *c)
{
	if (!c->reaped)
		return -1;
	if (WIFEXITED(c->status))
		return WEXITSTATUS(c->status);
	if (WIFSIGNALED(c->status))
		return 128 + WTERMSIG(c->status);
	return -1;
}

int target_check_pid(int pid, int *pidfd, char *err, size_t len)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	if (access(path, F_OK) || (kill(pid, 0) && errno == ESRCH)) {
		snprintf(err, len, "no process with PID %d (check the PID with ps, or start it with -- CMD)", pid);
		return -ESRCH;
	}
	*pidfd = pidfd_open_(pid);
	return 0;
}

int target_proc_line(int pid, const char *name, const char *prefix, char *buf, size_t len)
{
	char path[64], line[512];
	size_t n = strlen(prefix);
	int ret = -ENOENT;
	FILE *f;

	buf[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/%s", pid, name);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (ret && fgets(line, sizeof(line), f))
		if (!strncmp(line, prefix, n)) {
			line[strcspn(line, "\n")] = '\0';
			snprintf(buf, len, "%s", line + n);
			ret = 0;
		}
	fclose(f);
	return ret;
}

/* /proc/PID/stat from field 3 (state) on, past the comm, which may hold
 * spaces and parentheses; NULL when the process is gone. */
static const char *proc_stat_after_comm(int pid, char *buf, size_t len)
{
	const char *p;

	if (target_proc_line(pid, "stat", "", buf, len))
		return NULL;
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p + 2 : NULL;
}

bool target_pid_exited(int pid, int pidfd)
{
	char buf[512];
	const char *f;

	if (pidfd >= 0) {
		struct pollfd pfd = { .fd = pidfd, .events = POLLIN };

		return poll(&pfd, 1, 0) > 0; /* readable once the process exited */
	}
	f = proc_stat_after_comm(pid, buf, sizeof(buf));
	return !f || f[0] == 'Z' || f[0] == 'X';
}

uint64_t target_start_time(int pid)
{
	char buf[512];
	const char *f = proc_stat_after_comm(pid, buf, sizeof(buf));
	unsigned long long start;

	/* state (field 3) ... starttime (field 22) */
	if (!f || sscanf(f, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d "
			 "%*d %*d %*d %llu", &start) != 1)
		return 0;
	return start;
}

int target_cgroup2_mount(char *out, size_t len)
{
	FILE *f = setmntent("/proc/self/mounts", "r");
	struct mntent *m;
	int ret = -ENOENT;

	if (!f)
		return -errno;
	while ((m = getmntent(f)))
		if (!strcmp(m->mnt_type, "cgroup2")) {
			snprintf(out, len, "%s", m->mnt_dir);
			ret = 0;
			break;
		}
	endmntent(f);
	return ret;
}

int target_cgroup_id(const char *path, uint64_t *id, char *err, size_t len)
{
	char mnt[PATH_MAX], full[PATH_MAX * 2];
	struct statfs sfs;
	struct stat st;

	if (target_cgroup2_mount(mnt, sizeof(mnt))) {
		snprintf(err, len, "no cgroup v2 hierarchy mounted: mount -t cgroup2 none /sys/fs/cgroup");
		return -ENOENT;
	}
	if (path[0] == '/' && stat(path, &st) == 0)
		snprintf(full, sizeof(full), "%s", path);
	else
		snprintf(full, sizeof(full), "%s/%s", mnt, path[0] == '/' ? path + 1 : path);
	if (stat(full, &st) || !S_ISDIR(st.st_mode)) {
		snprintf(err, len, "cgroup '%s' not found (looked at %s): give a directory of the "
			 "cgroup2 mount %s", path, full, mnt);
		return -ENOENT;
	}
	if (statfs(full, &sfs) || sfs.f_type != CGROUP2_SUPER_MAGIC) {
		snprintf(err, len, "'%s' is not a cgroup v2 directory (cgroup2 is mounted at %s)", full, mnt);
		return -EINVAL;
	}
	*id = st.st_ino; /* the kernfs node id, which bpf_get_current_cgroup_id() returns */
	return 0;
}
