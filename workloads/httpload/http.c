/* SPDX-License-Identifier: MIT */
/* libcurl easy handles: keep-alive POST /orders. */
#include "http.h"

#include <stdio.h>

#include "tt_clock.h"

static struct curl_slist *http_headers; /* shared, read-only once set up */

int http_global_init(void)
{
	if (curl_global_init(CURL_GLOBAL_ALL) != CURLE_OK)
		return -1;
	http_headers = curl_slist_append(NULL, "Content-Type: application/json");
	return http_headers ? 0 : -1;
}

void http_global_cleanup(void)
{
	curl_slist_free_all(http_headers);
	http_headers = NULL;
	curl_global_cleanup();
}

static size_t http_on_body(char *data, size_t size, size_t nmemb, void *arg)
{
	struct hl_conn *c = arg;

	c->bytes += size * nmemb;
	return size * nmemb;
}

int http_conn_init(struct hl_conn *c, const struct hl_opts *o)
{
	CURL *e = curl_easy_init();

	c->easy = e;
	c->bytes = 0;
	if (!e)
		return -1;
	curl_easy_setopt(e, CURLOPT_URL, o->url);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, http_headers);
	curl_easy_setopt(e, CURLOPT_POSTFIELDS, c->body);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, http_on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, c);
	curl_easy_setopt(e, CURLOPT_PRIVATE, c);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);  /* threads: no SIGALRM timeouts */
	curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, o->timeout_ms);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, o->timeout_ms);
	curl_easy_setopt(e, CURLOPT_PROXY, "");     /* never an environment proxy */
	return 0;
}

void http_conn_cleanup(struct hl_conn *c)
{
	if (c->easy)
		curl_easy_cleanup(c->easy);
	c->easy = NULL;
}

void http_prepare(struct hl_conn *c, uint64_t id, uint32_t conn)
{
	int n = snprintf(c->body, sizeof(c->body),
			 "{\"customer\":%u,\"item\":\"widget-%llu\",\"qty\":%llu,\"request\":%llu}",
			 conn, (unsigned long long)(id % 97), (unsigned long long)(1 + id % 5),
			 (unsigned long long)id);

	c->bytes = 0;
	curl_easy_setopt(c->easy, CURLOPT_POSTFIELDSIZE, (long)n);
}

void http_complete(struct hl_conn *c, CURLcode rc, struct tt_request *r)
{
	long code = 0;

	r->bytes = c->bytes;
	if (rc != CURLE_OK) {
		r->status = -(int32_t)rc;
		return;
	}
	curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &code);
	r->status = (int32_t)code;
}

void http_execute(struct hl_conn *c, struct tt_request *r)
{
	CURLcode rc;

	if (!c->easy) {
		r->t_start_ns = r->t_end_ns = tt_now_ns();
		r->status = -(int32_t)CURLE_FAILED_INIT;
		return;
	}
	http_prepare(c, r->id, r->conn);
	r->t_start_ns = tt_now_ns();
	rc = curl_easy_perform(c->easy);
	r->t_end_ns = tt_now_ns();
	http_complete(c, rc, r);
}
