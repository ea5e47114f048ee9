// SPDX-License-Identifier: MIT
#include "core/toggle.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

#include <tt_clock.h>

int toggle_start(struct tt_toggle *t, unsigned period_ms, const char *out_dir, uint64_t now_ns)
{
	char path[PATH_MAX];

	*t = (struct tt_toggle){ .period_ms = period_ms, .on = true };
	if (!period_ms)
		return 0;
	snprintf(path, sizeof(path), "%s/toggles.txt", out_dir);
	t->log = fopen(path, "w");
	if (!t->log) {
		int e = errno;

		t->period_ms = 0; /* not toggling: toggle_stop has nothing to do */
		return -e;
	}
	fprintf(t->log, "%llu %llu on\n", (unsigned long long)now_ns, (unsigned long long)now_ns);
	t->next_ns = now_ns + period_ms * 1000000ull;
	return 0;
}

/* Every module's programs detached or attached; the first error stops it. */
static int toggle_all(bool on, const struct tt_probe *const *mods, void *const *states, int nmods,
		      char *err, size_t len)
{
	for (int i = 0; i < nmods; i++) {
		int e = mods[i]->toggle ? mods[i]->toggle(states[i], on) : 0;

		if (e) {
			snprintf(err, len, "--toggle-ms: %s: cannot attach again: %s", mods[i]->name,
				 strerror(e < 0 ? -e : e));
			return e < 0 ? e : -e;
		}
	}
	return 0;
}

int toggle_tick(struct tt_toggle *t, const struct tt_probe *const *mods, void *const *states,
		int nmods, uint64_t now_ns, char *err, size_t len)
{
	uint64_t t_end_ns;
	int e;

	if (!t->period_ms)
		return -1;
	if (now_ns < t->next_ns)
		return (int)((t->next_ns - now_ns + 999999) / 1000000);
	e = toggle_all(!t->on, mods, states, nmods, err, len);
	if (e)
		return e < -1 ? e : -EIO;
	t->on = !t->on;
	t_end_ns = tt_now_ns();
	fprintf(t->log, "%llu %llu %s\n", (unsigned long long)now_ns, (unsigned long long)t_end_ns,
		t->on ? "on" : "off");
	t->next_ns = t_end_ns + t->period_ms * 1000000ull;
	return (int)t->period_ms;
}

void toggle_stop(struct tt_toggle *t, const struct tt_probe *const *mods, void *const *states,
		 int nmods)
{
	uint64_t now_ns = tt_now_ns();
	char err[128];

	if (!t->period_ms)
		return;
	if (!t->on && !toggle_all(true, mods, states, nmods, err, sizeof(err)))
		t->on = true;
	fprintf(t->log, "%llu %llu end\n", (unsigned long long)now_ns,
		(unsigned long long)tt_now_ns());
	fclose(t->log);
	t->log = NULL;
}
