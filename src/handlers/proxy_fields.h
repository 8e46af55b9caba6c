/* The fields of a proxied exchange (proxy_fields.c). */
#ifndef LX_PROXY_FIELDS_H
#define LX_PROXY_FIELDS_H

#include "../buf.h"
#include "core/request.h"
#include "../upstream/h1resp.h"

/* What the request head for the upstream asks for. The head is built once
 * (and sent again for the one retry). */
typedef struct {
    unsigned chunked : 1; /**< the body goes in chunked framing */
    unsigned expect : 1;  /**< the head asks the backend for 100 Continue */
    unsigned upgrade : 1; /**< the head asks the backend for a WebSocket upgrade */
} lx_proxy_head_t;

/* Builds r's head for upstream u into head (emptied first; its room is
 * kept from one request to the next); with_body: the request's body goes
 * on. Returns 0, or -ENOMEM (head's bytes are then not to be used). */
int lx_proxy_head(lx_req_t *r, const lx_upstream_t *u, int with_body, lx_buf_t *head,
                  lx_proxy_head_t *out);
/* Adds the response's fields that go on to the client to r->resp. */
void lx_proxy_relay_fields(lx_req_t *r, const lx_h1resp_t *p);

#endif
