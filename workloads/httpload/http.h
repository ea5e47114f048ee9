/* SPDX-License-Identifier: MIT */
/*
 * One keep-alive HTTP connection: a libcurl easy handle that is reused for
 * every request it carries (POST /orders with a small JSON body). The
 * blocking models (naive, pool) run a request with http_execute, on a multi
 * handle of the connection's own; the async model adds the easy handle to
 * its loop's multi handle instead.
 */
#ifndef HL_HTTP_H
#define HL_HTTP_H
#include <curl/curl.h>
#include <stdint.h>
#include <tailtrace/records.h>

#include "options.h"
#include "order_body.h"

#define HL_CONN_SOCKS 4 /* sockets curl may watch at once (happy eyeballs, resolver) */

struct hl_conn {
	CURL *easy;
	uint64_t bytes;  /* response body bytes of the current request */
	char body[HL_ORDER_BODY_BYTES];
	void *owner;     /* async: the slot this handle belongs to */
	CURLM *multi;    /* http_execute's, made on first use */
	struct {
		int fd;
		short events;        /* POLLIN / POLLOUT, as curl asks */
	} socks[HL_CONN_SOCKS];
	unsigned nsocks;
	long timer_ms;           /* curl's timer (CURLMOPT_TIMERFUNCTION); -1: none */
};

/* Once, before any thread starts / after all are done. */
int http_global_init(void);
void http_global_cleanup(void);

int http_conn_init(struct hl_conn *c, const struct hl_opts *o);
void http_conn_cleanup(struct hl_conn *c);

/* Set the body for request (id, conn); reset the byte count. */
void http_prepare(struct hl_conn *c, uint64_t id, uint32_t conn);
/* After a transfer ended with rc: fill r->status (HTTP code or -CURLcode)
 * and r->bytes. */
void http_complete(struct hl_conn *c, CURLcode rc, struct tt_request *r);
/* Blocking: prepare, t_start_ns, perform, t_end_ns, complete. The caller
 * has set r->id, conn, tid, pid, t_enqueue_ns. What curl_easy_perform does,
 * driven by the multi socket API: curl is told which socket is ready, so it
 * does not poll again to find out (3 poll() calls a request instead of 5). */
void http_execute(struct hl_conn *c, struct tt_request *r);
/* The transfer alone (what http_execute times): curl's result. */
CURLcode http_perform(struct hl_conn *c);

/* A request failed: transport error, or an HTTP status >= 400. */
static inline int http_failed(int32_t status)
{
	return status <= 0 || status >= 400;
}

#endif
