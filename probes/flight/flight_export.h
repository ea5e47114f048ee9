/* SPDX-License-Identifier: MIT */
#ifndef TT_FLIGHT_EXPORT_H
#define TT_FLIGHT_EXPORT_H

#include <stddef.h>
#include <sys/types.h>

/*
 * --flight-recorder --otlp URL: each capture's slow requests sent as OTLP spans
 * as soon as the recorder lists the capture, by a process of its own,
 * `python3 -m analyze captures OUT --follow --otlp URL --recorder-pid PID`
 * (analyze/pipeline.py follow_captures), niced and in its own process group. The
 * recorder starts it and, at its end, gives it time to send what it has: it
 * never waits on the network, and a follower that dies costs no capture.
 */
struct flight_export {
	pid_t pid; /* 0: none */
};

/* Start the follower of OUT_DIR's captures; 0, or -errno with a line in err. */
int flight_export_start(struct flight_export *e, const char *out_dir, const char *url,
			char *err, size_t len);
/* The recorder has ended: wait up to timeout_ms for the follower to send what is
 * queued, then stop it. Its exit status (0: every span sent), -1 when stopped or
 * none. */
int flight_export_finish(struct flight_export *e, unsigned timeout_ms);

#endif
