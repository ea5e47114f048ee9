/* SPDX-License-Identifier: MIT */
/*
 * One keep-alive HTTP connection: a libcurl easy handle that is reused for
 * every request it carries (POST /orders with a small JSON body).
 */
#ifndef HL_HTTP_H
#define HL_HTTP_H
#include <curl/curl.h>
#include <stdint.h>
#include <tailtrace/records.h>

#include "options.h"

struct hl_conn {
	CURL *easy;
	uint64_t bytes;  /* response body bytes of the current request */
	char body[160];
	void *owner;     /* async: the slot this handle belongs to */
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
 * has set r->id, conn, tid, pid, t_enqueue_ns. */
void http_execute(struct hl_conn *c, struct tt_request *r);

/* A request failed: transport error, or an HTTP status >= 400. */
static inline int http_failed(int32_t status)
{
	return status <= 0 || status >= 400;
}

#endif
