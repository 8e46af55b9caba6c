/* Inside h2/: the connection (session.c) and its streams (stream.c). Nothing
 * outside h2/ includes it. */
#ifndef LX_H2I_H
#define LX_H2I_H

#include <nghttp2/nghttp2.h>

#include "core/request.h"
#include "h1/conn.h"
#include "h2/h2.h"

typedef struct lx_h2_stream_s lx_h2_stream_t;

/* Client stream ids remembered as opened or not (h2.c on_begin_frame). */
#define H2_OPENED_SPAN 4096

/* A piece of a stream's response body, waiting for DATA frames. */
typedef enum {
    LX_H2P_MEM,  /**< bytes at ptr, kept alive by file (a cached file's) or static */
    LX_H2P_BUF,  /**< bytes at ptr in a pooled buffer (buf), given back once sent */
    LX_H2P_FILE, /**< bytes at off in file->fd */
} lx_h2_piece_kind_t;

typedef struct lx_h2_piece_s {
    struct lx_h2_piece_s *next;
    lx_file_t *file; /**< a reference held until sent, or NULL */
    char *ptr;       /**< MEM, BUF: the bytes */
    char *buf;       /**< BUF: the pooled buffer (LX_OUT_BUF bytes) */
    uint64_t off;    /**< FILE: offset in the file */
    uint64_t len;    /**< bytes left */
    uint8_t kind;    /**< lx_h2_piece_kind_t */
    uint8_t ahead;   /**< BUF: a file's bytes read ahead (counted in lx_h2_ahead), laid
                          out in frames (H2_FRAME) with room for each header */
    uint8_t lent;    /**< BUF: the output has pointed into it (lx_h2_put_buf) */
} lx_h2_piece_t;

/* Output gathered for one write (out.c): seg holds its pieces in order,
 * each in buf (base NULL until lx_h2_batch_iov) or elsewhere; what those
 * elsewhere belong to is held until the write is done: pooled buffers
 * (held, a list through their last bytes) and cached files (files). */
typedef struct {
    char *buf;       /**< bytes copied */
    size_t len, cap; /**< bytes in buf, its size */
    uv_buf_t *seg;   /**< the pieces, in order */
    unsigned nseg, segcap;
    lx_file_t **files; /**< a reference each */
    unsigned nfiles, filecap;
    char *held;   /**< pooled buffers (LX_OUT_BUF) to give back */
    size_t bytes; /**< bytes in all pieces */
} lx_h2_batch_t;

/* Bytes of a pooled buffer (LX_OUT_BUF) that a stream fills; the rest
 * links it in a batch's list of buffers held (out.c). */
#define H2_BUF_ROOM (LX_OUT_BUF - sizeof(char *))

/* The payload of a DATA frame at most, so that a frame and its 9-byte
 * header fill one TLS record of 16 KiB, which the transport seals where it
 * lies (tls.c encrypt); a file read ahead is laid out in a pooled buffer
 * in such frames, each after 9 bytes of room for its header: the frame
 * goes out as one piece. */
#define H2_FRAME      16375
#define H2_FRAME_STEP (9 + H2_FRAME)
/* A file's bytes that a pooled buffer holds, laid out so. */
#define H2_AHEAD_ROOM (H2_BUF_ROOM - 9 * ((H2_BUF_ROOM + H2_FRAME_STEP - 1) / H2_FRAME_STEP))

/* A DATA payload smaller than this is copied into the batch rather than
 * sent from where it is (a segment of its own costs more than the copy). */
#define H2_REF_MIN 4096

/* out.c. Each returns 0 (the _ref ones: 1 when they refer), or -ENOMEM. */
/* Room for n more bytes at the end of buf (not yet counted), or NULL. */
char *lx_h2_batch_reserve(lx_h2_batch_t *b, size_t n);
/* n bytes written at the end of buf are counted. */
int lx_h2_batch_commit(lx_h2_batch_t *b, size_t n);
int lx_h2_batch_copy(lx_h2_batch_t *b, const void *p, size_t n);
/* n bytes at p, which stay as they are until the batch is released: 1,
 * or 0 when they were copied (too few to refer to), or -ENOMEM. */
int lx_h2_batch_ref(lx_h2_batch_t *b, const char *p, size_t n);
/* The same for a cached file's bytes: the batch holds a reference. */
int lx_h2_batch_ref_file(lx_h2_batch_t *b, lx_file_t *f, const char *p, size_t n);
/* A pooled buffer that pieces of the batch may point into. */
void lx_h2_batch_hold(lx_h2_batch_t *b, char *buf);
/* The pieces as buffers to write; nothing is added after. */
uv_buf_t *lx_h2_batch_iov(lx_h2_batch_t *b);
/* Written (or dropped): what it holds is given back, and it is empty. */
void lx_h2_batch_release(lx_h2_batch_t *b, lx_pool_t *pool);
void lx_h2_batch_free(lx_h2_batch_t *b, lx_pool_t *pool);

/* Where a stream's request stands, as h2 sees it. */
typedef enum {
    LX_H2S_HEAD,    /**< its header section is being received */
    LX_H2S_RUNNING, /**< dispatched: the core has it */
    LX_H2S_ENDED,   /**< logged and counted: only what refers to it keeps it */
} lx_h2_stream_state_t;

struct lx_h2_stream_s {
    lx_req_t req;                  /**< the request (first: the core's handle) */
    lx_arena_t arena;              /**< its memory (its first block kept by a spare) */
    lx_spare_t kept;               /**< in the loop's h2_spares once freed */
    lx_h2_t *h;                    /**< its connection's h2 state, which lives as long as its
                                      streams do (h->c is NULL once the connection is gone) */
    int32_t id;                    /**< the stream id */
    lx_h2_stream_t *prev, *next;   /**< in h->streams */
    lx_h2_piece_t *head, *tail;    /**< response body pieces not yet sent */
    lx_h2_piece_t *spare;          /**< pieces given back, for reuse */
    uint64_t queued;               /**< bytes in them */
    uint64_t blocked_since;        /**< loop ms its response began to wait for a window, or 0 */
    uint64_t body_at;              /**< loop ms its request last got body bytes (or began to
                                      wait for them) */
    char *in;                      /**< request body bytes received, not yet taken (malloc) */
    size_t in_pos, in_len, in_cap; /**< taken, received, allocated */
    size_t in_unacked;             /**< bytes taken that the client's window has not had back */
    size_t head_bytes_in;          /**< header section bytes received (names and values) */
    uv_work_t work;                /**< a file piece read on the thread pool */
    char *work_buf;                /**< its buffer */
    ssize_t work_got;              /**< what it read, or -errno */
    size_t direct;                 /**< bytes data_read put in the output (emit.c) */
    unsigned cookies;              /**< cookie fields received */
    int err_status;                /**< a status to answer the request with at once, or 0 */
    uint8_t state;                 /**< lx_h2_stream_state_t */
    unsigned depth;                /**< calls on the stack that use it: it is not freed */
    unsigned gen_held : 1;         /**< req.gen is counted in the loop's users */
    unsigned submitted : 1;        /**< the response's HEADERS are submitted */
    unsigned eof : 1;              /**< all of the response body is queued */
    unsigned deferred : 1;         /**< the data source said "later": resume it when more comes */
    unsigned sent : 1;             /**< the response's last frame (END_STREAM) went out */
    unsigned closed : 1;           /**< nghttp2 closed the stream */
    unsigned in_eof : 1;           /**< the request body ended (END_STREAM came) */
    unsigned in_paused : 1;        /**< the body reader has a piece and wants no more yet */
    unsigned file_io : 1;          /**< a thread-pool read is in flight */
    unsigned end_pending : 1;      /**< the request ended while depth > 0 */
    unsigned free_pending : 1;     /**< freeing waits for depth 0 */
    unsigned pumping : 1;          /**< body_pump is on the stack */
    unsigned linked : 1;           /**< in h->streams */
    unsigned proceeding : 1;       /**< the producer's proceed is on the stack */
    unsigned proceed_again : 1;    /**< its output went out at once: call it again */
};

struct lx_h2_s {
    lx_conn_t *c;            /**< the connection, NULL once it is gone */
    lx_worker_t *w;          /**< its loop */
    nghttp2_session *ng;     /**< the protocol state */
    lx_h2_stream_t *streams; /**< streams with a request, newest first */
    unsigned nstreams;       /**< streams whose request runs */
    unsigned alive;          /**< streams not freed yet: each keeps this state */
    lx_h2_stream_t *hstream; /**< the stream whose request head is arriving (on_header) */
    lx_h2_batch_t out;       /**< output gathered, not yet written */
    lx_h2_batch_t wout;      /**< what the write in flight sends */
    uv_write_t wreq;         /**< the write in flight */
    /* Which client stream ids were opened, of the last H2_OPENED_SPAN
     * (a bit each, from open_base), and the highest one. */
    uint8_t opened[H2_OPENED_SPAN / 8];
    uint32_t open_base;         /**< the stream index (id / 2) of opened's first bit */
    int32_t open_last;          /**< the highest stream id opened, or 0 */
    uint64_t notice_due;        /**< loop ms the drain's second GOAWAY is due (notice) */
    uint64_t resets_at;         /**< loop ms resets_left was last refilled */
    uint32_t resets_left;       /**< streams that may yet end in a reset (H2_RESET_*) */
    unsigned pins;              /**< calls on the stack that look at it after a close */
    unsigned depth;             /**< calls on the stack: output waits for the last to return,
                                   and the state is not freed */
    unsigned writing : 1;       /**< a uv_write is in flight */
    unsigned flush_pending : 1; /**< output came while depth > 0 */
    unsigned flushing : 1;      /**< h2_flush is on the stack */
    unsigned flush_again : 1;   /**< ... and was asked again meanwhile */
    unsigned goaway : 1;        /**< the final GOAWAY went out (drain, stop, idle, error) */
    unsigned notice : 1;        /**< a drain's first GOAWAY (every stream taken) went out */
    unsigned closing : 1;       /**< the connection closes once the output is out */
    unsigned fatal : 1;         /**< nghttp2 gave up on the peer: its GOAWAY, then the close */
};

/* Output gathered before it is written (session.c lx_h2_flush). */
#define H2_GATHER (64 * 1024)

/* Files' bytes read ahead of their DATA frames, in pooled buffers, held
 * by the streams of a loop at most: a read ahead saves a read per frame;
 * past this, each frame's bytes are read into the output as it is made,
 * and a client that opens many streams and reads slowly cannot make luxd
 * hold a buffer for each. */
#define H2_AHEAD_MAX 256
/* The buffers read ahead in this loop (emit.c). */
extern _Thread_local unsigned lx_h2_ahead;

/* session.c */
void lx_h2_flush(lx_h2_t *h);
/* A pooled buffer goes back: at once, or, when the output has pointed
 * into it (lent), once what may still point there is written. */
void lx_h2_put_buf(lx_h2_t *h, char *buf, int lent);
void lx_h2_close(lx_h2_t *h);
void lx_h2_maybe_free(lx_h2_t *h);
/* Around calls that may queue output or close the connection. */
static inline void lx_h2_hold(lx_h2_t *h) {
    h->depth++;
}
void lx_h2_unhold(lx_h2_t *h);
void lx_h2_set_idle(lx_h2_t *h);
/* A stream ended in a reset before its answer went: 0, or -1 when the
 * client has had too many (the connection ends). */
int lx_h2_count_reset(lx_h2_t *h);

/* Response bytes queued in a stream above this make lx_stream_send ask the
 * producer to wait (the stream's window is 64 KiB until the client says
 * otherwise). */
#define H2_HIGH_WATER (64 * 1024)

static inline lx_h2_stream_t *lx_h2_stream_of(lx_req_t *r) {
    return container_of(r, lx_h2_stream_t, req);
}

/* stream.c: nghttp2's callbacks for requests, and the streams' life. */
/* Pins a stream: nothing frees it until unpin (which may). */
void lx_h2_stream_pin(lx_h2_stream_t *st);
void lx_h2_stream_unpin(lx_h2_stream_t *st);
/* Around calls into the core: the stream pinned, its connection held. */
void lx_h2_stream_enter(lx_h2_stream_t *st);
void lx_h2_stream_leave(lx_h2_stream_t *st);
void lx_h2_stream_maybe_free(lx_h2_stream_t *st);
void lx_h2_piece_release(lx_h2_stream_t *st, lx_h2_piece_t *p);
/* Whether the stream's request waits for body bytes from the client (not
 * for its own reader, nor for a 100 Continue). */
int lx_h2_stream_reading(const lx_h2_stream_t *st);
/* A stream past a timeout (session.c): LX_DL_HEADER, LX_DL_BODY (408 when
 * no answer began) or LX_DL_SEND; it is reset. */
void lx_h2_stream_timeout(lx_h2_stream_t *st, lx_dl_kind_t kind);
/* Hands the body's next piece to its reader, or drops what came. */
void lx_h2_body_pump(lx_h2_stream_t *st);
/* The client's window gets n bytes back. */
void lx_h2_give_back(lx_h2_stream_t *st, size_t n);
/* emit.c: the response side. */
extern const lx_proto_t lx_h2_proto;
/* nghttp2's send_data_callback: a DATA frame into the output. */
int lx_h2_send_data(nghttp2_session *ng, nghttp2_frame *fr, const uint8_t *hd, size_t length,
                    nghttp2_data_source *src, void *ud);
/* stream.c */
void lx_h2_callbacks(nghttp2_session_callbacks *cb);
/* The connection is gone: each stream's request is told. */
void lx_h2_streams_detach(lx_h2_t *h);
/* After a flush: producers whose output drained are asked for more. */
void lx_h2_streams_proceed(lx_h2_t *h);

#endif
