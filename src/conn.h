/* A client connection: read -> llhttp -> request -> write -> keep-alive.
 * Sockets are driven with uv_poll and plain read/writev/sendfile, so a
 * response can mix memory and file ranges without copies. */
#ifndef LX_CONN_H
#define LX_CONN_H

#include <sys/socket.h>
#include <uv.h>

#include "dispatch/cidr.h"
#include "llhttp.h"
#include "request.h"
#include "worker.h"

/* One piece of queued output. */
typedef struct {
    lx_file_t *file; /**< reference held until sent, or NULL */
    const char *ptr; /**< memory to send; NULL with a file: send from file->fd */
    uint64_t off;    /**< offset into obuf (ptr == obuf), or file offset */
    uint64_t len;    /**< bytes left */
    int in_obuf;     /**< ptr is the connection's obuf (which may move) */
} lx_out_t;

#define LX_OUT_MAX 80

/* What the Transfer-Encoding lines of a request added up to. Only a lone
 * "chunked" frames a body luxd can read; any other list is refused. */
typedef enum {
    LX_TE_NONE,    /**< no Transfer-Encoding line */
    LX_TE_CHUNKED, /**< exactly one coding, chunked */
    LX_TE_OTHER,   /**< only codings other than chunked so far (gzip, ...) */
    LX_TE_UNKNOWN, /**< other codings, then chunked last: 501 */
    LX_TE_BAD,     /**< chunked twice or not last, or an empty coding: 400 */
} lx_te_t;

/* A request with "Expect: 100-continue" whose body has not started to
 * arrive is answered before its body: the client waits for our word. */
typedef enum {
    LX_EXPECT_NONE,     /**< no expectation to meet */
    LX_EXPECT_WAITING,  /**< the client waits; the first response status decides */
    LX_EXPECT_ANSWERED, /**< answered before the body; the body is read and dropped */
} lx_expect_t;

struct lx_conn_s {
    uv_poll_t poll;            /**< socket readiness */
    uv_timer_t timer;          /**< fires at deadline */
    int fd;                    /**< the socket */
    int events;                /**< events poll is started with */
    lx_worker_t *w;            /**< owning loop */
    lx_conn_t *prev, *next;    /**< in w->conns */
    char peer[48];             /**< client address as text */
    lx_addr_t addr;            /**< client address for `from` rules */
    llhttp_t parser;           /**< HTTP/1 parser state */
    char *rbuf;                /**< read buffer */
    size_t rcap;               /**< its size */
    size_t rlen;               /**< bytes in it */
    size_t rpos;               /**< bytes parsed */
    size_t req_start;          /**< offset where the current request began */
    size_t body_base;          /**< offset body bytes are read into (0: unset) */
    lx_req_t req;              /**< the request being parsed or answered */
    lx_arena_t arena;          /**< its memory */
    lx_header_t *cur_header;   /**< header being parsed */
    const char *last_end;      /**< end of the last header byte seen */
    int err_status;            /**< status to answer a parse error with */
    int te;                    /**< lx_te_t: the Transfer-Encoding codings seen so far */
    int expect;                /**< lx_expect_t: where a 100-continue request stands */
    size_t ext_bytes;          /**< chunk-extension bytes of this request */
    size_t trailer_bytes;      /**< trailer-section bytes of this request */
    uint64_t framing_bytes;    /**< chunked-body bytes no other limit counts */
    uint32_t framing_parts;    /**< chunks and trailer fields that may bring such bytes */
    char ext_last;             /**< last byte of the chunk-extension value being read */
    lx_out_t out[LX_OUT_MAX];  /**< queued output */
    unsigned out_head;         /**< first queued entry */
    unsigned out_n;            /**< queued entries */
    char *obuf;                /**< header and small-body bytes */
    size_t olen, ocap;         /**< used and allocated */
    size_t resp_from;          /**< obuf offset where the response's headers start */
    uint64_t deadline;         /**< loop time of the next timeout */
    uint64_t req_started;      /**< loop time the current request began */
    uint64_t vh_gen_id;        /**< lx_gen_t.id of the cached Host -> vhost answer; 0: none */
    lx_vhost_t *vh;            /**< the vhost for vh_host */
    char vh_host[64];          /**< last Host value (as sent, port included) on this connection */
    size_t vh_host_len;        /**< bytes in vh_host */
    size_t vh_name_len;        /**< bytes of vh_host that name the host (host_name's answer) */
    int timeout_kind;          /**< what deadline is for */
    uint32_t nreq;             /**< requests started on this connection */
    unsigned in_request : 1;   /**< bytes of a request have arrived */
    unsigned in_url : 1;       /**< the request line is not complete */
    unsigned headers_done : 1; /**< headers complete, maybe body to come */
    unsigned message_done : 1; /**< whole request parsed */
    unsigned waiting : 1;      /**< the request waits on the thread pool */
    unsigned closing : 1;      /**< close once output is flushed */
    unsigned linger : 1;       /**< half-close and drain input before closing */
    unsigned closed : 1;       /**< uv_close called */
    unsigned eof : 1;          /**< the client closed its sending side */
    unsigned ext_refeed : 1;   /**< llhttp 8 skipped the ';' of the next chunk extension */
    unsigned polled : 1;       /**< poll is initialised (the socket is in epoll) */
    unsigned gen_held : 1;     /**< req.gen is counted in the worker's users */
    unsigned readahead : 1;    /**< a read-ahead of the output is on the thread pool */
    int handles;               /**< uv handles not yet closed */
    int pending;               /**< thread-pool jobs that will call back */
};

void lx_conn_accept(lx_worker_t *w, int fd, const struct sockaddr *peer);
/* Closes now (drops queued output). */
void lx_conn_close(lx_conn_t *c);
/* Stops keep-alive: idle connections close, busy ones after their response. */
void lx_conn_drain(lx_conn_t *c);

/* Output queue (used by response.c and handlers). */
char *lx_conn_obuf_reserve(lx_conn_t *c, size_t n); /* room for n bytes at obuf + olen */
void lx_conn_queue_obuf(lx_conn_t *c, size_t from); /* queue obuf[from, olen) */
void lx_conn_queue_mem(lx_conn_t *c, lx_file_t *f, const char *p, size_t len);
void lx_conn_queue_file(lx_conn_t *c, lx_file_t *f, uint64_t off, uint64_t len);
/* The request finished queuing its response: flush, then continue. */
void lx_conn_request_done(lx_conn_t *c);
/* A thread-pool job the request waited for completed. */
void lx_conn_resume(lx_conn_t *c);
/* The request waits for 100 Continue and its first response, of status,
 * begins: queue the 100 before it, or make it the last on the connection. */
void lx_conn_answer_expect(lx_conn_t *c, lx_req_t *r, int status);

#endif
