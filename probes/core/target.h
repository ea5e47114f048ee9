/* SPDX-License-Identifier: MIT */
/*
 * What tailtrace traces: a command it starts (held before exec until the
 * probes are attached), a running process, or a cgroup. 0 or -errno, with a
 * one-line reason in err.
 */
#ifndef TT_TARGET_H
#define TT_TARGET_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct tt_child {
	pid_t pid;
	int go_fd;     /* write end: one byte releases the child into exec */
	int err_fd;    /* read end: exec's errno if it failed, EOF if it worked */
	int pidfd;
	bool reaped;
	int status;    /* waitpid status once reaped */
};

/* Fork cmd; the child waits for target_release() before exec. */
int target_spawn_held(char **cmd, struct tt_child *c, char *err, size_t len);
/* Let the child exec; reports an exec failure (e.g. command not found). */
int target_release(struct tt_child *c, char **cmd, char *err, size_t len);
/* Non-blocking: has the child exited? Reaps it. */
bool target_child_exited(struct tt_child *c);
/* Stop the child (SIGTERM, then SIGKILL after grace_ms) and reap it. */
void target_child_stop(struct tt_child *c, int grace_ms);
/* Shell-style exit code of a reaped child (128 + signal when killed). */
int target_exit_code(const struct tt_child *c);

/* A running process: check it exists; pidfd to watch it (-1 if unsupported). */
int target_check_pid(int pid, int *pidfd, char *err, size_t len);
bool target_pid_exited(int pid, int pidfd);
/* The first line of /proc/PID/NAME that starts with prefix ("" for the first
 * line), without it and its newline, into buf. 0, or -errno ("" in buf). */
int target_proc_line(int pid, const char *name, const char *prefix, char *buf, size_t len);
/* When process pid started (clock ticks since boot, /proc/PID/stat field 22):
 * with the pid it names one process, so a reused pid shows a new value.
 * 0 when it cannot be read (the process is gone). */
uint64_t target_start_time(int pid);

/* Where the cgroup v2 hierarchy is mounted: 0, or -ENOENT. */
int target_cgroup2_mount(char *out, size_t len);
/* cgroup v2 path (absolute, or relative to the cgroup2 mount) -> id. */
int target_cgroup_id(const char *path, uint64_t *id, char *err, size_t len);

#endif
