/* SPDX-License-Identifier: MIT */
/* libcurl easy handles: keep-alive POST /orders. */
#include "http.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>

#include "tt_clock.h"
#include "tt_usdt.h"

#define HTTP_POLL_MAX_MS 1000 /* as curl_easy_perform: wait at most this long at once */

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
	c->multi = NULL;
	c->nsocks = 0;
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
	if (c->multi)
		curl_multi_cleanup(c->multi); /* closes the kept-alive connection */
	c->multi = NULL;
	if (c->easy)
		curl_easy_cleanup(c->easy);
	c->easy = NULL;
}

/* CURLMOPT_SOCKETFUNCTION of the connection's own multi handle. */
static int http_on_socket(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
	struct hl_conn *c = userp;
	unsigned i = 0;

	while (i < c->nsocks && c->socks[i].fd != fd)
		i++;
	if (what == CURL_POLL_REMOVE) {
		if (i < c->nsocks)
			c->socks[i] = c->socks[--c->nsocks];
		return 0;
	}
	if (i == c->nsocks) {
		if (c->nsocks == HL_CONN_SOCKS)
			return -1; /* curl fails the transfer */
		c->socks[c->nsocks++].fd = fd;
	}
	c->socks[i].events = (short)((what & CURL_POLL_IN ? POLLIN : 0) |
				     (what & CURL_POLL_OUT ? POLLOUT : 0));
	return 0;
}

static int http_on_timer(CURLM *multi, long timeout_ms, void *userp)
{
	((struct hl_conn *)userp)->timer_ms = timeout_ms;
	return 0;
}

static int http_multi_init(struct hl_conn *c)
{
	c->multi = curl_multi_init();
	if (!c->multi)
		return -1;
	c->nsocks = 0;
	c->timer_ms = -1;
	curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, http_on_socket);
	curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c);
	curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, http_on_timer);
	curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c);
	return 0;
}

/* Wait for what curl asked for, or its timer; hand curl what happened. */
static void http_wait(struct hl_conn *c, int *running)
{
	struct pollfd p[HL_CONN_SOCKS];
	long t = c->timer_ms < 0 || c->timer_ms > HTTP_POLL_MAX_MS ? HTTP_POLL_MAX_MS : c->timer_ms;
	unsigned n = c->nsocks;
	int ready;

	for (unsigned i = 0; i < n; i++)
		p[i] = (struct pollfd){ .fd = c->socks[i].fd, .events = c->socks[i].events };
	ready = t ? poll(p, n, (int)t) : 0;
	if (ready < 0 && errno == EINTR)
		return;
	for (unsigned i = 0; ready > 0 && i < n; i++)
		if (p[i].revents)
			curl_multi_socket_action(c->multi, p[i].fd,
						 (p[i].revents & POLLIN ? CURL_CSELECT_IN : 0) |
						 (p[i].revents & POLLOUT ? CURL_CSELECT_OUT : 0) |
						 (p[i].revents & (POLLERR | POLLHUP | POLLNVAL) ?
						  CURL_CSELECT_ERR : 0), running);
	if (ready <= 0) /* curl's timer: its timeouts, a new transfer's start */
		curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, running);
}

/* curl_easy_perform's job on the connection's own multi handle. Never
 * inlined: one call per request, so `--span httpload:http_perform` brackets
 * every request (tests/probes/test_spans.py). */
__attribute__((noinline)) CURLcode http_perform(struct hl_conn *c)
{
	CURLcode rc = CURLE_FAILED_INIT;
	int running = 1, left;
	CURLMsg *msg;

	if (!c->multi && http_multi_init(c))
		return CURLE_OUT_OF_MEMORY;
	if (curl_multi_add_handle(c->multi, c->easy) != CURLM_OK)
		return CURLE_FAILED_INIT;
	curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	while (running)
		http_wait(c, &running);
	while ((msg = curl_multi_info_read(c->multi, &left)))
		if (msg->msg == CURLMSG_DONE)
			rc = msg->data.result;
	curl_multi_remove_handle(c->multi, c->easy);
	return rc;
}

void http_prepare(struct hl_conn *c, uint64_t id, uint32_t conn)
{
	int n = hl_order_body(c->body, sizeof(c->body), conn, id);

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
	TT_USDT2(httpload, request__start, r->id, r->conn);
	rc = http_perform(c);
	r->t_end_ns = tt_now_ns();
	http_complete(c, rc, r);
	TT_USDT2(httpload, request__done, r->id, r->status);
	TT_USDT3(httpload, request__span, r->id, r->t_start_ns, r->status);
}
