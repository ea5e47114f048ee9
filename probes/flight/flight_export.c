// SPDX-License-Identifier: MIT
#include "flight/flight_export.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tt_clock.h>

extern char **environ;

#define EXPORT_NICE "10"     /* below the recorder (LOADER_NICE) and the target */
#define EXPORT_STOP_MS 5000  /* after SIGTERM, before SIGKILL */
#define SOURCE_LEVELS 4      /* build/probes/tailtrace: the tree is three levels up */

/* Does dir hold the analyze package? */
static int has_analyze(const char *dir)
{
	char path[PATH_MAX + 32];

	snprintf(path, sizeof(path), "%s/analyze/__main__.py", dir);
	return access(path, R_OK) == 0;
}

/* The directory that holds analyze/: $TAILTRACE_ANALYZE_DIR, else the nearest one
 * above this executable (a build tree inside the source tree). */
static int analyze_dir_find(char *dir, size_t len, char *err, size_t err_len)
{
	const char *env = getenv("TAILTRACE_ANALYZE_DIR");
	char exe[PATH_MAX];
	ssize_t n;

	if (env) {
		if (!has_analyze(env)) {
			snprintf(err, err_len, "--otlp: TAILTRACE_ANALYZE_DIR=%s holds no "
				 "analyze/__main__.py: give tailtrace's source tree", env);
			return -ENOENT;
		}
		snprintf(dir, len, "%s", env);
		return 0;
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = '\0';
	snprintf(dir, len, "%s", exe);
	for (int i = 0; i < SOURCE_LEVELS; i++) {
		char *slash = strrchr(dir, '/');

		if (!slash || slash == dir)
			break;
		*slash = '\0';
		if (has_analyze(dir))
			return 0;
	}
	snprintf(err, err_len, "--otlp runs python3 -m analyze: no analyze/ above %s; set "
		 "TAILTRACE_ANALYZE_DIR to tailtrace's source tree", exe);
	return -ENOENT;
}

/* environ with PYTHONPATH=dir in front; free the array (not its strings) and *own. */
static char **env_with_pythonpath(const char *dir, char **own)
{
	const char *old = getenv("PYTHONPATH");
	size_t n = 0, k = 0;
	char **env;

	while (environ[n])
		n++;
	env = calloc(n + 2, sizeof(*env));
	if (!env || asprintf(own, "PYTHONPATH=%s%s%s", dir, old ? ":" : "", old ? old : "") < 0) {
		free(env);
		return NULL;
	}
	env[k++] = *own;
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "PYTHONPATH=", 11))
			env[k++] = environ[i];
	return env;
}

int flight_export_start(struct flight_export *e, const char *out_dir, const char *url,
			char *err, size_t len)
{
	char dir[PATH_MAX], pid[16], *own = NULL, **env;
	char *argv[] = { "nice", "-n", EXPORT_NICE, "python3", "-m", "analyze", "captures",
			 (char *)out_dir, "--follow", "--otlp", (char *)url, "--recorder-pid", pid,
			 NULL };
	posix_spawnattr_t attr;
	int ret;

	e->pid = 0;
	if ((ret = analyze_dir_find(dir, sizeof(dir), err, len)))
		return ret;
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	if (!(env = env_with_pythonpath(dir, &own))) {
		snprintf(err, len, "--otlp: out of memory");
		return -ENOMEM;
	}
	posix_spawnattr_init(&attr);
	posix_spawnattr_setpgroup(&attr, 0); /* a Ctrl-C stops the recorder; it ends this */
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
	ret = posix_spawnp(&e->pid, "nice", NULL, &attr, argv, env);
	posix_spawnattr_destroy(&attr);
	free(env);
	free(own);
	if (ret) {
		e->pid = 0;
		snprintf(err, len, "--otlp: cannot start python3 -m analyze captures --follow: %s "
			 "(install python3 and scripts/install-deps.sh's packages)", strerror(ret));
		return -ret;
	}
	return 0;
}

/* The follower's exit status once it has exited within timeout_ms, else -2. */
static int export_wait(pid_t pid, unsigned timeout_ms)
{
	uint64_t end = tt_now_ns() + (uint64_t)timeout_ms * 1000000;
	int status;

	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid)
			return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
		if (r < 0 && errno != EINTR)
			return -1;
		if (tt_now_ns() >= end)
			return -2;
		usleep(20000);
	}
}

int flight_export_finish(struct flight_export *e, unsigned timeout_ms)
{
	int status;

	if (!e->pid)
		return -1;
	status = export_wait(e->pid, timeout_ms);
	if (status == -2) {
		kill(e->pid, SIGTERM); /* it drops (counts) what it had not sent */
		status = export_wait(e->pid, EXPORT_STOP_MS);
		if (status == -2) {
			kill(e->pid, SIGKILL);
			waitpid(e->pid, NULL, 0);
		}
		status = -1;
	}
	e->pid = 0;
	return status;
}
