/* HTTP/1 response parsing for upstream connections: llhttp in response
 * mode, strictly (RFC 9112), plus the checks llhttp 8 leaves to us.
 *
 * A response whose framing is in doubt is an error, and the connection it
 * came on is not used again: a status line that is not HTTP/1.x, two
 * Content-Length values, Content-Length with Transfer-Encoding, a transfer
 * coding other than a lone "chunked", a field name that is no token or has
 * whitespace before the colon, an obs-fold line, a bare CR or LF in a head,
 * a header section over the limit. A 1xx has no body, whatever it says.
 * The head's bytes are copied (a head may span reads); body bytes are
 * handed on where they lie. */
#ifndef LX_H1RESP_H
#define LX_H1RESP_H

#include <stddef.h>
#include <stdint.h>

#include "../lx.h"
#include "llhttp.h"

typedef struct lx_h1resp_s lx_h1resp_t;

typedef struct {
    /* The head of a response is in (a 1xx too: another head follows).
     * Returns 0, or -1 to fail the response. */
    int (*head)(lx_h1resp_t *p);
    /* Body bytes (decoded from chunked framing), valid during the call.
     * Returns 0 or -1. */
    int (*body)(lx_h1resp_t *p, const char *at, size_t len);
} lx_h1resp_ops_t;

/* What lx_h1resp_feed found. */
typedef enum {
    LX_H1R_MORE = 0,    /**< all bytes taken; the response goes on */
    LX_H1R_DONE = 1,    /**< the final response is complete (bytes after it are not taken) */
    LX_H1R_UPGRADE = 2, /**< a 101 to a request that asked for it: what follows is the tunnel's */
    LX_H1R_ERROR = -1   /**< malformed: p->why says how */
} lx_h1resp_rc_t;

struct lx_h1resp_s {
    llhttp_t parser;
    const lx_h1resp_ops_t *ops;
    void *data;                /**< the caller's */
    int status;                /**< of the head just parsed */
    int64_t length;            /**< Content-Length, or -1: chunked or until close */
    lx_header_t *headers;      /**< the head's fields (into hbuf), at ops->head */
    unsigned nheaders;         /**< entries in headers */
    unsigned hdrcap;           /**< room in headers */
    const char *why;           /**< what was wrong, for the error log */
    char *hbuf;                /**< field and value bytes of the head being parsed */
    size_t hlen, hcap;         /**< used and allocated */
    size_t max_head;           /**< limit on the head's bytes */
    size_t head_bytes;         /**< bytes of the head so far, status line to empty line */
    uint32_t *marks;           /**< per field: name start, name length, value start, value length */
    unsigned nmarks, mcap;     /**< fields recorded, room */
    uint8_t in;                /**< 0: none, 1: in a name, 2: in a value */
    uint8_t crlf;              /**< where scan_head is in the head's lines: it ends at 4 */
    unsigned head_request : 1; /**< the request was HEAD: no body whatever is said */
    unsigned upgrade : 1;      /**< the request asked for an upgrade: a 101 may end the head */
    unsigned te : 1;           /**< a Transfer-Encoding field was seen */
    unsigned in_body : 1;      /**< the head is complete: fields now are trailers */
    unsigned done : 1;         /**< the final response completed */
};

/* Ready for the response to one request; head_request: it was HEAD. */
void lx_h1resp_init(lx_h1resp_t *p, size_t max_head, int head_request, const lx_h1resp_ops_t *ops,
                    void *data);
/* Ready for the response to the next request, as init, keeping the
 * buffers of p, which is a parser of init's or was zeroed. */
void lx_h1resp_reset(lx_h1resp_t *p, size_t max_head, int head_request, const lx_h1resp_ops_t *ops,
                     void *data);
/* The bytes its buffers hold: field bytes, and per field a mark and an
 * entry (a head of many empty fields is small in hbuf, large here). */
size_t lx_h1resp_room(const lx_h1resp_t *p);
/* Frees the buffers; p may be reset again after. */
void lx_h1resp_free(lx_h1resp_t *p);
/* Parses len bytes; *used is how many were taken. */
lx_h1resp_rc_t lx_h1resp_feed(lx_h1resp_t *p, const char *buf, size_t len, size_t *used);
/* The upstream closed: ends a close-delimited body (LX_H1R_DONE), or
 * errors (the response was cut short). */
lx_h1resp_rc_t lx_h1resp_eof(lx_h1resp_t *p);
/* Whether the connection may carry another request after this response. */
int lx_h1resp_keepalive(const lx_h1resp_t *p);
/* The value of the first field named lname (lower case), or len 0: of a
 * list that may come on several lines (Connection) the first line only. */
lx_str_t lx_h1resp_get(const lx_h1resp_t *p, const char *lname, size_t len);

#endif
