/* The output queue of a connection and its writer: memory pieces go out by
 * uv_try_write, and what the socket does not take at once by uv_write (libuv
 * waits for writability). File pieces up to LX_OUT_COPY_MAX are read from
 * the page cache (RWF_NOWAIT) into the loop's scratch and written with what
 * precedes them; larger ones go by sendfile(2) on the stream's fd while
 * libuv's write queue is empty. When neither can go on (the socket is full,
 * or the data is not in the page cache), a piece of the file is read into a
 * pooled buffer, on the loop if RWF_NOWAIT finds it cached, else on the
 * thread pool, and that buffer is written with uv_write; the next piece goes
 * as before. A loop never waits on a disk. */
#ifndef LX_OUT_H
#define LX_OUT_H

#include <stdint.h>
#include <uv.h>

typedef struct lx_file_s lx_file_t;
typedef struct lx_sess_s lx_sess_t;
typedef struct lx_worker_s lx_worker_t;

typedef enum {
    LX_PIECE_OBUF, /**< bytes at off in the queue's obuf (which may move) */
    LX_PIECE_MEM,  /**< bytes at ptr, kept alive by file (a cached file's data) or static */
    LX_PIECE_BUF,  /**< bytes at ptr in a pooled buffer, given back once written */
    LX_PIECE_FILE, /**< bytes at off in file->fd */
} lx_piece_kind_t;

typedef struct {
    lx_file_t *file; /**< reference held until sent, or NULL */
    char *ptr;       /**< LX_PIECE_MEM, LX_PIECE_BUF: the bytes */
    char *buf;       /**< LX_PIECE_BUF: the pooled buffer to give back */
    uint64_t off;    /**< LX_PIECE_OBUF: offset in obuf; LX_PIECE_FILE: offset in the file */
    uint64_t len;    /**< bytes left */
    uint8_t kind;    /**< lx_piece_kind_t */
} lx_piece_t;

#define LX_OUT_MAX 80
/* Bytes of a file read into a pooled buffer when sendfile cannot go on,
 * and the size of the buffers streamed pieces are copied into. */
#define LX_OUT_BUF (64 * 1024)
/* Bytes written at once (uv_try_write) in one turn of the loop; past them
 * the next pieces go by uv_write, whose callback comes from the loop: a
 * producer that sends as long as the socket takes (a fast client of a long
 * stream) leaves the loop's other connections their turn (t/163). */
#define LX_OUT_BURST (256 * 1024)
/* A file piece up to this size goes out copied, not by sendfile: read from
 * the page cache (preadv2 RWF_NOWAIT, which never waits on the disk) into
 * the loop's scratch buffer, LX_OUT_BUF at a time, the first with the
 * headers in one writev. On this machine (BBR, which paces) a 100 KiB
 * response costs a third less CPU that way than by sendfile after probes
 * of the page cache; at 256 KiB they cost the same, past it sendfile wins
 * (bench/README.md, "Large files"). */
#define LX_OUT_COPY_MAX (128 * 1024)

typedef struct {
    lx_piece_t q[LX_OUT_MAX];    /**< queued output, a ring */
    unsigned head, n;            /**< first entry, entries */
    char *obuf;                  /**< header and small-body bytes */
    char *obuf_old;              /**< the obuf a uv_write still reads, freed when it is done */
    size_t olen, ocap;           /**< used and allocated */
    uint64_t queued;             /**< bytes in the queue */
    uv_write_t wreq;             /**< the uv_write in flight */
    uint64_t wlen;               /**< bytes it covers (consumed when it completes) */
    unsigned wpieces;            /**< pieces from the head it covers */
    uv_work_t work;              /**< a file read on the thread pool */
    lx_file_t *work_file;        /**< its file (a reference) */
    char *work_buf;              /**< its buffer */
    uint64_t work_off, work_len; /**< what it reads */
    ssize_t work_got;            /**< what it read, or -errno */
    uint64_t warm_to; /**< the head file piece's bytes below this were found in the page cache (by
                         this lx_out_flush call) */
    uint64_t cold;    /**< 1 + the page of the head file piece whose probe missed, which that
                         probe then read in itself: its being cached says nothing later */
    unsigned writing : 1; /**< a uv_write is in flight */
    unsigned file_io : 1; /**< a thread-pool read is in flight */
    unsigned failed : 1;  /**< out of queue entries or memory: the response is short */
    unsigned full : 1;    /**< the socket refused bytes and no uv_write has finished since */
    unsigned missed : 1;  /**< the head file piece was found not cached once: it is counted */
    unsigned stalled : 1; /**< the head file piece met a full socket: its rest goes by sendfile
                             (a slow client would have its copied bytes read again each time) */
    uint32_t burst;       /**< bytes written at once since the loop last ran this connection */
} lx_out_t;

void lx_out_init(lx_out_t *o);
/* On the loop's thread before it runs: the count its disk-read check
 * (probe_ends) starts from. */
void lx_out_thread_init(lx_worker_t *w);
/* Gives back every piece (references, pooled buffers); obuf is kept. */
void lx_out_reset(lx_out_t *o, lx_sess_t *s);
void lx_out_free(lx_out_t *o);

/* Room for n bytes at obuf + olen, or NULL when out of memory. While a
 * uv_write reads obuf, a larger one is a copy and the old one is kept until
 * the write is done. */
char *lx_out_reserve(lx_out_t *o, size_t n);
/* Queues obuf[from, olen). */
void lx_out_obuf(lx_out_t *o, size_t from);
void lx_out_mem(lx_out_t *o, lx_file_t *f, const char *p, size_t len);
void lx_out_file(lx_out_t *o, lx_file_t *f, uint64_t off, uint64_t len);
/* Queues len bytes at p in the pooled buffer buf (taken over). */
void lx_out_buf(lx_out_t *o, char *buf, char *p, size_t len);
/* Room for n more bytes at the end of the last queued pooled buffer, if it
 * has that much and no write holds it, else NULL; lx_out_grow_last then
 * counts them in. */
char *lx_out_last_room(lx_out_t *o, size_t n);
void lx_out_grow_last(lx_out_t *o, size_t n);

/* Writes what the socket takes. Returns 0 when the queue is empty, -EAGAIN
 * when a write or read is in flight (the session hears of it through
 * lx_sess_written), another negative errno when the connection must close. */
int lx_out_flush(lx_sess_t *s);

/* The writer moved on asynchronously (conn.c): status 0, or an error. */
void lx_sess_written(lx_sess_t *s, int status);

#endif
