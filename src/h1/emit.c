/* HTTP/1's side of a response (core/proto.h): the one serializer that turns
 * a structured response into bytes, with every framing rule in one place,
 * and the body pieces queued behind it.
 *
 *   length known      Content-Length (also on HEAD, as GET would send it)
 *   length unknown    HTTP/1.1: Transfer-Encoding: chunked; HTTP/1.0: the
 *                     body ends at the close (Connection: close)
 *   1xx, 204          no Content-Length or Transfer-Encoding (RFC 9110 8.6)
 *
 * Streamed bodies are copied into pooled buffers, framed, and written as
 * the connection drains (lx_producer_t). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "h1/conn.h"
#include "io/filecache.h"

/* Output still queued above this after a write makes lx_stream_send ask
 * the producer to wait. The socket's own buffer (the kernel sizes it to
 * the connection) is the stream's buffer; luxd keeps at most about one
 * piece beyond it, so a thousand slow downloads cost a thousand pieces,
 * not a thousand quarter-megabytes. */
#define STREAM_HIGH_WATER (16 * 1024)

static void put(lx_out_t *o, const char *p, size_t len) {
    char *b = lx_out_reserve(o, len);
    if (b == NULL) return; /* out of memory: the response comes out short and the close tells */
    memcpy(b, p, len);
    o->olen += len;
}

/* Writes v in decimal so that it ends at end; returns its length. Two
 * digits a step, from a table: every response with a length formats one. */
static size_t put_u64_before(char *end, uint64_t v) {
    static const char d2[201] = "0001020304050607080910111213141516171819"
                                "2021222324252627282930313233343536373839"
                                "4041424344454647484950515253545556575859"
                                "6061626364656667686970717273747576777879"
                                "8081828384858687888990919293949596979899";
    char *p = end;
    while (v >= 100) {
        const char *d = d2 + (v % 100) * 2;
        v /= 100;
        p -= 2;
        p[0] = d[0];
        p[1] = d[1];
    }
    if (v >= 10) {
        p -= 2;
        p[0] = d2[v * 2];
        p[1] = d2[v * 2 + 1];
    } else {
        *--p = (char)('0' + v);
    }
    return (size_t)(end - p);
}

static char *copy(char *dst, const char *src, size_t len) {
    memcpy(dst, src, len);
    return dst + len;
}

static void h1_head(lx_req_t *r) {
    lx_sess_t *s = lx_sess_of(r);
    lx_resp_t *rs = &r->resp;
    lx_out_t *o = &s->out;
    lx_worker_t *w = r->w;
    int st = rs->status;
    lx_worker_update_time(w);
    /* The common case costs one copy of a status line, Server and Date
     * built once a second. */
    const char *head = w->head200;
    size_t head_len = w->head200_len;
    char line[128];
    if (st != 200) {
        int n =
            snprintf(line, sizeof(line), "HTTP/1.1 %d %s\r\nServer: " LX_SERVER "\r\nDate: %s\r\n",
                     st, lx_status_reason(st), w->date);
        head = line;
        head_len = lx_clamp_len(n, sizeof(line));
    }
    /* Framing: a Content-Length, chunked, or the close. */
    char num[20];
    size_t num_len = 0, te_len = 0;
    if (st < 200 || st == 204) {
        /* No body, so no framing either. */
    } else if (rs->length >= 0) {
        if (st != 304) num_len = put_u64_before(num + sizeof(num), (uint64_t)rs->length);
    } else if (st != 304) {
        if (r->http_minor >= 1) {
            rs->chunked = !rs->no_body;
            te_len = 28;
        } else {
            r->keepalive = 0; /* HTTP/1.0: the close ends the body */
        }
    }
    /* The end of the block, and what keep-alive needs said (a 101's own
     * lines carry Connection: upgrade). */
    const char *end = "\r\n";
    size_t end_len = 2;
    if (st != 101 && !r->keepalive) {
        end = "Connection: close\r\n\r\n";
        end_len = 21;
    } else if (st != 101 && r->http_minor == 0) {
        end = "Connection: keep-alive\r\n\r\n";
        end_len = 26;
    }
    size_t len = head_len + rs->block_len + (num_len ? 16 + num_len + 2 : 0) + te_len + rs->len +
                 r->extra_len + end_len;
    /* One reservation for the whole header block. Out of memory, the
     * response comes out short and the close tells (out.failed). */
    char *b = lx_out_reserve(o, len);
    if (b == NULL) return;
    char *p = copy(b, head, head_len);
    if (rs->block_len) p = copy(p, rs->block, rs->block_len);
    if (num_len) {
        p = copy(p, "Content-Length: ", 16);
        p = copy(p, num + sizeof(num) - num_len, num_len);
        p = copy(p, "\r\n", 2);
    }
    if (te_len) p = copy(p, "Transfer-Encoding: chunked\r\n", 28);
    if (rs->len) p = copy(p, rs->lines, rs->len);
    if (r->extra_len) p = copy(p, r->extra, r->extra_len);
    copy(p, end, end_len);
    o->olen += len;
    r->head_bytes += len;
    lx_out_obuf(o, o->olen - len);
}

static void h1_copy(lx_req_t *r, const char *p, size_t len) {
    lx_out_t *o = &lx_sess_of(r)->out;
    size_t from = o->olen;
    put(o, p, len);
    lx_out_obuf(o, from);
}

/* From the page cache when the file is open (filecache.h LX_MEM_FD_FROM),
 * else from the cache's memory. */
static void h1_file(lx_req_t *r, lx_file_t *f, uint64_t off, uint64_t len) {
    lx_out_t *o = &lx_sess_of(r)->out;
    if (f->data && f->fd < 0)
        lx_out_mem(o, f, f->data + off, (size_t)len);
    else
        lx_out_file(o, f, off, len);
}

static void h1_interim(lx_req_t *r) {
    lx_sess_t *s = lx_sess_of(r);
    lx_resp_t *rs = &r->resp;
    lx_out_t *o = &s->out;
    if (r->http_minor == 0) return; /* HTTP/1.0 knows no 1xx */
    /* A client that does not read while a backend sends 1xx after 1xx
     * (103s, 102s) would have them all queued here, with nothing to stop
     * the backend: past the stream's high-water mark they are dropped.
     * They are advice, and the final response still comes. */
    if (o->queued > STREAM_HIGH_WATER || o->n > LX_OUT_MAX / 2) return;
    char line[64];
    int n = snprintf(line, sizeof(line), "HTTP/1.1 %d %s\r\n", rs->status,
                     lx_status_reason(rs->status));
    size_t from = o->olen;
    put(o, line, lx_clamp_len(n, sizeof(line)));
    if (rs->len) put(o, rs->lines, rs->len);
    put(o, "\r\n", 2);
    r->head_bytes += o->olen - from;
    lx_out_obuf(o, from);
    lx_sess_output(s);
}

/* Writes a piece (as one chunk when chunked) at dst: returns its length. */
static size_t frame_piece(char *dst, const char *p, size_t n, int chunked) {
    size_t h = 0;
    if (chunked) h = (size_t)snprintf(dst, 20, "%zx\r\n", n);
    memcpy(dst + h, p, n);
    if (chunked) memcpy(dst + h + n, "\r\n", 2);
    return h + n + (chunked ? 2 : 0);
}

static int h1_send(lx_req_t *r, const char *p, size_t len) {
    lx_sess_t *s = lx_sess_of(r);
    lx_out_t *o = &s->out;
    int chunked = r->resp.chunked;
    /* Room for a chunk's size line and its closing CRLF. */
    size_t frame = chunked ? 20 : 0, room = LX_OUT_BUF - frame;
    while (len) {
        size_t n = len < room ? len : room;
        /* Small pieces share a buffer (and a queue entry), each its own
         * chunk; a buffer is given to a write only once it is queued. */
        char *dst = lx_out_last_room(o, n + frame);
        if (dst) {
            lx_out_grow_last(o, frame_piece(dst, p, n, chunked));
        } else {
            char *buf = lx_pool_get(&s->w->obufs);
            if (buf == NULL) {
                lx_conn_close(s->c);
                return -ENOMEM;
            }
            lx_out_buf(o, buf, buf, frame_piece(buf, p, n, chunked));
        }
        p += n;
        len -= n;
    }
    lx_sess_output(s);
    return o->queued > STREAM_HIGH_WATER || o->n > LX_OUT_MAX / 2 ? -EAGAIN : 0;
}

static void h1_end(lx_req_t *r) {
    if (r->resp.chunked) lx_out_mem(&lx_sess_of(r)->out, NULL, "0\r\n\r\n", 5);
}

static int h1_cont(lx_req_t *r) {
    static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
    lx_out_t *o = &lx_sess_of(r)->out;
    r->expect = LX_EXPECT_ANSWERED;
    size_t from = o->olen;
    char *b = lx_out_reserve(o, sizeof(cont) - 1);
    if (b == NULL) return -ENOMEM;
    memcpy(b, cont, sizeof(cont) - 1);
    o->olen += sizeof(cont) - 1;
    r->head_bytes += sizeof(cont) - 1;
    lx_out_obuf(o, from);
    return 0;
}

static void h1_output(lx_req_t *r) {
    lx_sess_output(lx_sess_of(r));
}

static void h1_done(lx_req_t *r) {
    lx_sess_response_done(lx_sess_of(r));
}

static void h1_body_resume(lx_req_t *r) {
    lx_sess_body_resume(lx_sess_of(r));
}

const lx_proto_t lx_h1_proto = {
    .enter = lx_h1_enter,
    .leave = lx_h1_leave,
    .orphaned = lx_h1_orphaned,
    .head = h1_head,
    .interim = h1_interim,
    .copy = h1_copy,
    .file = h1_file,
    .send = h1_send,
    .end = h1_end,
    .output = h1_output,
    .done = h1_done,
    .cont = h1_cont,
    .body_resume = h1_body_resume,
    .tunnel = lx_h1_tunnel,
    .tunnel_more = lx_h1_tunnel_more,
};
