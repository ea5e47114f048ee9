/* SPDX-License-Identifier: MIT */
/* The JSON body of request id on connection conn: what httpload posts, and what
 * bench/blocking_client posts so both send the same bytes. */
#ifndef HL_ORDER_BODY_H
#define HL_ORDER_BODY_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define HL_ORDER_BODY_BYTES 160

/* snprintf's count: the body's length when it fit in len. */
static inline int hl_order_body(char *buf, size_t len, uint32_t conn, uint64_t id)
{
	return snprintf(buf, len, "{\"customer\":%u,\"item\":\"widget-%llu\",\"qty\":%llu,\"request\":%llu}",
			conn, (unsigned long long)(id % 97), (unsigned long long)(1 + id % 5),
			(unsigned long long)id);
}
#endif
