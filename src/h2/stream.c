/* HTTP/2 streams: each is one request of the core (core/proto.h), with its
 * own arena and its request body as it arrives; its response is emit.c's.
 * A stream lives until nghttp2 is done with it, its request has ended and
 * nothing calls back into it; the connection's state lives as long as its
 * streams do.
 *
 * nghttp2 checks what RFC 9113 8.2 asks of a request (pseudo-header
 * fields, lower-case names, no connection-specific fields, content-length
 * against the DATA received) and answers what breaks it with a stream or
 * connection error; what is left here is what HTTP/1 checks too (the
 * header section's size, Host, the method, Expect, the body's size). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core/accesslog.h"
#include "core/fields.h"
#include "h2/h2i.h"
#include "io/filecache.h"
#include "log.h"
#include "stats.h"

/* Header fields a request may have (as HTTP/1, LX_MAX_HEADERS): the array
 * starts at this many and doubles. */
#define H2_HEADERS_FIRST 16

static lx_h2_stream_t *stream_get(nghttp2_session *ng, int32_t id) {
    return nghttp2_session_get_stream_user_data(ng, id);
}

/* ---- life ------------------------------------------------------------ */

void lx_h2_piece_release(lx_h2_stream_t *st, lx_h2_piece_t *p) {
    if (p->file) lx_file_unref(p->file);
    if (p->kind == LX_H2P_BUF) {
        lx_h2_ahead -= p->ahead;
        lx_h2_put_buf(st->h, p->buf, p->lent);
    }
    p->file = NULL;
    p->next = st->spare;
    st->spare = p;
}

static void stream_destroy(lx_spare_t *sp) {
    lx_h2_stream_t *st = container_of(sp, lx_h2_stream_t, kept);
    lx_arena_free(&st->arena);
    free(st);
}

void lx_h2_spares_trim(lx_worker_t *w, int all) {
    lx_spares_trim(&w->h2_spares, all, stream_destroy);
}

static void stream_free(lx_h2_stream_t *st) {
    lx_h2_t *h = st->h;
    while (st->head) {
        lx_h2_piece_t *p = st->head;
        st->head = p->next;
        lx_h2_piece_release(st, p);
    }
    if (h->hstream == st) h->hstream = NULL;
    free(st->in);
    /* Kept with its arena's first block: the next stream calls no malloc. */
    lx_arena_reset(&st->arena);
    if (!lx_spares_put(&h->w->h2_spares, &st->kept)) stream_destroy(&st->kept);
    h->alive--;
    lx_h2_maybe_free(h);
}

/* A stream is freed once nghttp2 is done with it (closed, or its
 * connection gone), its request has ended, and nothing calls back into it
 * (a handler on the stack, a job, a file read). */
void lx_h2_stream_maybe_free(lx_h2_stream_t *st) {
    if ((!st->closed && st->h->c) || st->state == LX_H2S_RUNNING || st->req.pending || st->file_io)
        return;
    if (st->depth) {
        st->free_pending = 1;
        return;
    }
    stream_free(st);
}

static void unlink_stream(lx_h2_stream_t *st) {
    lx_h2_t *h = st->h;
    if (!st->linked) return;
    st->linked = 0;
    if (st->prev)
        st->prev->next = st->next;
    else if (h->streams == st)
        h->streams = st->next;
    if (st->next) st->next->prev = st->prev;
    st->prev = st->next = NULL;
}

static void release_gen(lx_h2_stream_t *st) {
    if (!st->gen_held) return;
    st->gen_held = 0;
    lx_worker_gen_release(st->req.w, st->req.gen);
}

/* The request is over: logged and counted, its generation let go. */
static void stream_end(lx_h2_stream_t *st) {
    lx_req_t *r = &st->req;
    if (st->state != LX_H2S_RUNNING) return;
    if (st->depth) {
        st->end_pending = 1;
        return;
    }
    if (r->body_cb) {
        /* A reader that answered without asking for the rest of the body
         * lets go of it now, as over HTTP/1 (serve.c lx_h1_flush). */
        lx_body_cb cb = r->body_cb;
        r->body_cb = NULL;
        r->body_state = LX_BODY_DISCARD;
        st->depth++;
        cb(r, NULL, 0, -ECANCELED);
        st->depth--;
    }
    st->state = LX_H2S_ENDED;
    const lx_access_log_conf_t *al = lx_access_log_of(r);
    if (al) lx_access_log(r->w, r, al);
    lx_stats_request(r->w->stats, r->vhost ? r->vhost->stat_slot : 0, r->status,
                     r->head_bytes + r->body_bytes);
    release_gen(st);
    lx_h2_t *h = st->h;
    /* The response is out: a body the client still sends is not wanted
     * (RFC 9113 8.1). */
    if (h->c && !st->in_eof && !st->closed)
        nghttp2_submit_rst_stream(h->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_NO_ERROR);
    if (--h->nstreams == 0 && h->c) lx_h2_set_idle(h);
    lx_h2_stream_maybe_free(st);
}

/* Pins a stream: nothing frees it until unpin (which may). */
void lx_h2_stream_pin(lx_h2_stream_t *st) {
    st->depth++;
}

void lx_h2_stream_unpin(lx_h2_stream_t *st) {
    if (--st->depth) return;
    if (st->end_pending) {
        st->end_pending = 0;
        stream_end(st);
    }
    if (st->free_pending) {
        st->free_pending = 0;
        lx_h2_stream_maybe_free(st);
    }
}

/* Around calls into the core: the stream is pinned, and its connection's
 * output waits for the last of them to return (one write for a head, a
 * piece and the end queued in one call). */
void lx_h2_stream_enter(lx_h2_stream_t *st) {
    lx_h2_stream_pin(st);
    lx_h2_hold(st->h);
}

void lx_h2_stream_leave(lx_h2_stream_t *st) {
    lx_h2_t *h = st->h; /* alive while st->h->depth is held */
    lx_h2_stream_unpin(st);
    lx_h2_unhold(h);
}

/* Its client is gone (the stream was reset, or the connection closed)
 * while its request ran: the request is logged as HTTP/1's is (499 when
 * no answer had begun), and whoever holds it is told. The caller has the
 * stream entered. */
static void stream_abort(lx_h2_stream_t *st) {
    lx_req_t *r = &st->req;
    if (st->state != LX_H2S_RUNNING) return;
    st->state = LX_H2S_ENDED; /* not through stream_end: nothing more goes out */
    st->end_pending = 0;
    LX_ST_INC(&r->w->stats->aborted);
    if (r->status == 0) r->status = 499;
    const lx_access_log_conf_t *al = lx_access_log_of(r);
    if (al) lx_access_log(r->w, r, al);
    release_gen(st);
    if (--st->h->nstreams == 0 && st->h->c) lx_h2_set_idle(st->h);
    r->aborted = 1;
    r->link = NULL;
    if (r->body_cb) {
        lx_body_cb cb = r->body_cb;
        r->body_cb = NULL;
        cb(r, NULL, 0, -ECONNRESET);
    }
    if (r->resp.state == LX_RESP_STREAMING && r->resp.producer && r->resp.producer->stop) {
        const lx_producer_t *p = r->resp.producer;
        r->resp.producer = NULL;
        p->stop(r);
    }
    if (r->on_abort) {
        void (*cb)(lx_req_t *) = r->on_abort;
        r->on_abort = NULL;
        cb(r);
    }
}

/* The connection is gone (h->c is NULL; the caller holds h). */
void lx_h2_streams_detach(lx_h2_t *h) {
    while (h->streams) {
        lx_h2_stream_t *st = h->streams;
        lx_h2_stream_enter(st);
        unlink_stream(st);
        nghttp2_session_set_stream_user_data(h->ng, st->id, NULL);
        stream_abort(st);
        if (st->state == LX_H2S_HEAD) {
            release_gen(st);
            st->state = LX_H2S_ENDED;
            h->nstreams--;
        }
        st->free_pending = 1;
        lx_h2_stream_leave(st);
    }
}

static lx_h2_stream_t *stream_new(lx_h2_t *h, int32_t id) {
    lx_worker_t *w = h->w;
    lx_spare_t *sp = lx_spares_take(&w->h2_spares);
    lx_h2_stream_t *st;
    if (sp) {
        st = container_of(sp, lx_h2_stream_t, kept);
        lx_arena_t a = st->arena;
        memset(st, 0, sizeof(*st));
        st->arena = a;
    } else {
        if ((st = calloc(1, sizeof(*st))) == NULL) return NULL;
        lx_arena_init(&st->arena, 4096);
    }
    st->h = h;
    st->id = id;
    lx_req_t *r = &st->req;
    r->gen = lx_worker_gen_acquire(w);
    st->gen_held = 1;
    r->w = w;
    r->arena = &st->arena;
    r->proto = &lx_h2_proto;
    r->link = &h->c->link;
    r->secure = lx_tp_secure(&h->c->link.tp) != 0;
    r->started = uv_now(&w->loop);
    r->http_major = 2;
    r->http_minor = 0;
    r->keepalive = 1;
    r->method = -1;
    st->next = h->streams;
    if (h->streams) h->streams->prev = st;
    h->streams = st;
    st->linked = 1;
    h->alive++;
    if (h->nstreams++ == 0) {
        lx_conn_set_state(h->c, LX_CONN_HANDLING);
        lx_conn_set_deadline(h->c, LX_DL_NONE, 0);
    }
    /* keepalive_requests bounds the streams of a connection as it bounds
     * HTTP/1's requests (nginx's http2_max_requests): this one is the last
     * taken. */
    if (++h->c->nreq >= r->gen->srv.keepalive_requests && !h->goaway) {
        h->goaway = 1;
        h->closing = 1;
        nghttp2_submit_goaway(h->ng, NGHTTP2_FLAG_NONE, id, NGHTTP2_NO_ERROR, NULL, 0);
    }
    if (r->gen->srv.request_id_header_len) lx_req_add_id_header(r);
    return st;
}

/* ---- the request's head ------------------------------------------------ */

/* llhttp's number for a method name, as HTTP/1 parses it, or -1. */
static int method_id(const uint8_t *m, size_t n) {
    if (n == 3 && memcmp(m, "GET", 3) == 0) return HTTP_GET;
    if (n == 4 && memcmp(m, "HEAD", 4) == 0) return HTTP_HEAD;
    if (n == 4 && memcmp(m, "POST", 4) == 0) return HTTP_POST;
    for (int k = 0; k <= HTTP_SOURCE; k++) {
        const char *name = llhttp_method_name((llhttp_method_t)k);
        if (name && strlen(name) == n && memcmp(name, m, n) == 0) return k;
    }
    return -1;
}

static int add_header(lx_h2_stream_t *st, const uint8_t *name, size_t nlen, const uint8_t *value,
                      size_t vlen) {
    lx_req_t *r = &st->req;
    int id = lx_known_header((const char *)name, nlen);
    /* Cookie may come as several fields, joined once the head is whole
     * (join_cookies); each counts as a field meanwhile. */
    if (nlen == 6 && memcmp(name, "cookie", 6) == 0) st->cookies++;
    if (r->nheaders >= LX_MAX_HEADERS) {
        st->err_status = 431;
        return 0;
    }
    if (r->nheaders == 0 ||
        (r->nheaders >= H2_HEADERS_FIRST && (r->nheaders & (r->nheaders - 1)) == 0)) {
        unsigned cap = r->nheaders ? r->nheaders * 2 : H2_HEADERS_FIRST;
        lx_header_t *n = lx_arena_alloc(&st->arena, cap * sizeof(*n));
        if (n == NULL) return -1;
        if (r->nheaders) memcpy(n, r->headers, r->nheaders * sizeof(*n));
        r->headers = n;
    }
    char *nv = lx_arena_alloc(&st->arena, nlen + vlen + 2);
    if (nv == NULL) return -1;
    memcpy(nv, name, nlen);
    nv[nlen] = '\0';
    memcpy(nv + nlen + 1, value, vlen);
    nv[nlen + 1 + vlen] = '\0';
    lx_header_t *h = &r->headers[r->nheaders++];
    h->name = (lx_str_t){nv, nlen};
    h->value = (lx_str_t){nv + nlen + 1, vlen};
    if (id == LX_H_HOST && r->hosts++ > 0) st->err_status = 400;
    if (id >= 0) r->known[id] = h->value;
    return 0;
}

/* The client opened stream id (on_begin_frame reads it). */
static void note_opened(lx_h2_t *h, int32_t id) {
    uint32_t k = (uint32_t)id / 2;
    if (k >= h->open_base + H2_OPENED_SPAN) {
        /* Slide: the window ends at k, whole bytes dropped from its start. */
        uint32_t base = (k - H2_OPENED_SPAN + 8) & ~7u, drop = (base - h->open_base) / 8;
        if (drop >= sizeof(h->opened)) {
            memset(h->opened, 0, sizeof(h->opened));
        } else {
            memmove(h->opened, h->opened + drop, sizeof(h->opened) - drop);
            memset(h->opened + sizeof(h->opened) - drop, 0, drop);
        }
        h->open_base = base;
    }
    h->opened[(k - h->open_base) / 8] |= (uint8_t)(1u << ((k - h->open_base) % 8));
    if (id > h->open_last) h->open_last = id;
}

static int on_begin_headers(nghttp2_session *ng, const nghttp2_frame *frame, void *ud) {
    lx_h2_t *h = ud;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    if (h->c == NULL) return NGHTTP2_ERR_CALLBACK_FAILURE;
    note_opened(h, frame->hd.stream_id);
    lx_h2_stream_t *st = stream_new(h, frame->hd.stream_id);
    if (st == NULL) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    nghttp2_session_set_stream_user_data(ng, frame->hd.stream_id, st);
    h->hstream = st;
    return 0;
}

/* A HEADERS frame on a client stream id below the highest it opened, for a
 * stream it never opened, is a connection error (RFC 9113 5.1.1), which
 * nghttp2 leaves to us: it cannot tell such a stream from one closed long
 * ago, whose trailers may still come (and must be ignored: 5.4.2). A bit
 * per stream id of the last H2_OPENED_SPAN tells; an id older than those
 * is given the benefit of the doubt. */
static int on_begin_frame(nghttp2_session *ng, const nghttp2_frame_hd *hd, void *ud) {
    lx_h2_t *h = ud;
    if (hd->type != NGHTTP2_HEADERS || !(hd->stream_id & 1) || hd->stream_id >= h->open_last ||
        nghttp2_session_find_stream(ng, hd->stream_id))
        return 0;
    uint32_t k = (uint32_t)hd->stream_id / 2;
    if (k < h->open_base || (h->opened[(k - h->open_base) / 8] & (1u << ((k - h->open_base) % 8))))
        return 0;
    nghttp2_session_terminate_session(ng, NGHTTP2_PROTOCOL_ERROR);
    return 0;
}

static int on_header(nghttp2_session *ng, const nghttp2_frame *frame, const uint8_t *name,
                     size_t nlen, const uint8_t *value, size_t vlen, uint8_t flags, void *ud) {
    (void)flags;
    /* A header block is never interleaved with another (RFC 9113 6.10):
     * the stream it began is remembered rather than looked up per field. */
    lx_h2_t *h = ud;
    lx_h2_stream_t *st = h->hstream;
    if (st == NULL || st->id != frame->hd.stream_id) st = stream_get(ng, frame->hd.stream_id);
    if (st == NULL || st->closed) return 0;
    lx_req_t *r = &st->req;
    size_t max = r->gen->srv.max_header_bytes;
    /* As HTTP/1 counts a header section: its names and values. Past the
     * limit the request gets 431; far past it (a decompression bomb: a
     * byte of HPACK can stand for a 4 KiB field) the stream is reset, and
     * nothing more of it is looked at. Trailers count too, and are
     * dropped: they never join the request's header fields. */
    st->head_bytes_in += nlen + vlen;
    if (st->head_bytes_in > 4 * max) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    if (frame->headers.cat != NGHTTP2_HCAT_REQUEST || st->err_status) return 0;
    if (st->head_bytes_in > max) {
        st->err_status = 431;
        return 0;
    }
    if (nlen && name[0] == ':') {
        char *v = lx_arena_strndup(&st->arena, (const char *)value, vlen);
        if (v == NULL) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        if (nlen == 7 && memcmp(name, ":method", 7) == 0) {
            r->method = method_id(value, vlen);
            if (r->method < 0) st->err_status = 501; /* as HTTP/1: a method luxd has not */
            r->head = r->method == HTTP_HEAD;
        } else if (nlen == 5 && memcmp(name, ":path", 5) == 0) {
            r->target = (lx_str_t){v, vlen};
            if (vlen > max) st->err_status = 414;
        } else if (nlen == 10 && memcmp(name, ":authority", 10) == 0) {
            r->host = (lx_str_t){v, vlen}; /* set again by routing; kept until then */
        }
        return 0;
    }
    return add_header(st, name, nlen, value, vlen) < 0 ? NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE : 0;
}

/* HTTP/1 and the core see one Cookie field (RFC 9113 8.2.3): the crumbs
 * are joined with "; " into the first, in one piece of the arena (joined
 * as they came, each crumb would copy all before it: a few KiB of HPACK
 * made hundreds of MB). Returns 0, or -1 out of memory. */
static int join_cookies(lx_h2_stream_t *st) {
    lx_req_t *r = &st->req;
    size_t len = 0;
    lx_header_t *first = NULL;
    for (unsigned i = 0; i < r->nheaders; i++)
        if (lx_str_eq(r->headers[i].name, "cookie", 6)) {
            if (first == NULL) first = &r->headers[i];
            len += r->headers[i].value.len + 2;
        }
    char *v = lx_arena_alloc(&st->arena, len);
    if (v == NULL) return -1;
    size_t at = 0;
    unsigned k = 0;
    for (unsigned i = 0; i < r->nheaders; i++) {
        lx_header_t *h = &r->headers[i];
        if (lx_str_eq(h->name, "cookie", 6)) {
            if (at) memcpy(v + at, "; ", 2), at += 2;
            memcpy(v + at, h->value.p, h->value.len);
            at += h->value.len;
            if (h != first) continue; /* dropped: the first holds them all */
        }
        r->headers[k++] = *h;
    }
    r->nheaders = k;
    for (unsigned i = 0; i < k; i++)
        if (lx_str_eq(r->headers[i].name, "cookie", 6)) r->headers[i].value = (lx_str_t){v, at};
    return 0;
}

/* The request's content-length, which nghttp2 has checked is a number
 * (and will check against the DATA that comes). */
static int content_length(lx_req_t *r, uint64_t *out) {
    for (unsigned i = 0; i < r->nheaders; i++) {
        lx_header_t *h = &r->headers[i];
        if (!lx_str_eq(h->name, "content-length", 14)) continue;
        uint64_t v = 0;
        for (size_t k = 0; k < h->value.len; k++) {
            if (h->value.p[k] < '0' || h->value.p[k] > '9' || v > UINT64_MAX / 10 - 9) return -1;
            v = v * 10 + (uint64_t)(h->value.p[k] - '0');
        }
        *out = v;
        return 1;
    }
    return 0;
}

/* Whether a Host field names what :authority does: the host without case,
 * and the port when both give one (RFC 9113 8.3.1 asks for the same
 * entity, not the same bytes). */
static int same_authority(lx_str_t a, lx_str_t b) {
    const char *ca = memrchr(a.p, ':', a.len), *cb = memrchr(b.p, ':', b.len);
    if (ca && memchr(ca, ']', (size_t)(a.p + a.len - ca))) ca = NULL; /* an IPv6 literal's */
    if (cb && memchr(cb, ']', (size_t)(b.p + b.len - cb))) cb = NULL;
    size_t ha = ca ? (size_t)(ca - a.p) : a.len, hb = cb ? (size_t)(cb - b.p) : b.len;
    if (ha != hb || strncasecmp(a.p, b.p, ha) != 0) return 0;
    if (ca && cb) return a.len - ha == b.len - hb && memcmp(ca, cb, a.len - ha) == 0;
    return 1;
}

/* The header section is complete: the request is checked as HTTP/1's is,
 * then run. */
static void request_ready(lx_h2_stream_t *st) {
    lx_req_t *r = &st->req;
    const lx_server_conf_t *s = &r->gen->srv;
    st->state = LX_H2S_RUNNING;
    r->head_done = 1;
    int status = st->err_status;
    if (st->cookies > 1 && !status && join_cookies(st) < 0) status = 500;
    /* :authority is the Host (RFC 9113 8.3.1); a Host field beside it must
     * name the same. */
    lx_str_t auth = r->host;
    r->host = (lx_str_t){NULL, 0};
    if (auth.p) {
        if (r->hosts && !same_authority(r->known[LX_H_HOST], auth)) status = status ? status : 400;
        r->known[LX_H_HOST] = auth;
        r->hosts = 1;
    }
    if (r->method == HTTP_CONNECT && !status) status = 405; /* as HTTP/1: luxd is no tunnel */
    if (r->target.p == NULL && !status) status = 400;
    uint64_t cl = 0;
    int has_cl = content_length(r, &cl);
    if (has_cl < 0 && !status) status = 400;
    if (has_cl > 0) r->content_length = cl;
    if (has_cl > 0 && cl > s->max_body_bytes && !status) status = 413;
    if (!st->in_eof && !has_cl) r->chunked = 1; /* a body of unknown length comes */
    r->body_state = st->in_eof ? LX_BODY_NONE : LX_BODY_UNREAD;
    st->body_at = uv_now(&r->w->loop);
    if (st->in_eof) r->chunked = 0, r->content_length = 0;
    if (!status && r->known[LX_H_EXPECT].len && !st->in_eof) {
        if (!lx_str_ieq(r->known[LX_H_EXPECT], "100-continue", 12))
            status = 417;
        else
            r->expect = LX_EXPECT_WAITING;
    }
    lx_h2_stream_enter(st);
    if (status) {
        if (r->method < 0) r->method = HTTP_GET; /* for the log: the line is not kept */
        r->body_state = LX_BODY_DISCARD;
        lx_resp_simple(r, status, NULL);
        lx_resp_done(r);
    } else {
        lx_request_run(r);
    }
    lx_h2_stream_leave(st);
}

/* ---- the request body --------------------------------------------------- */

/* The request's body failed (too slow, too long) before an answer began:
 * its reader lets go, the rest is dropped, and the client hears status. */
static void body_fail(lx_h2_stream_t *st, int err, int status) {
    lx_req_t *r = &st->req;
    lx_h2_stream_enter(st);
    if (r->body_cb) {
        lx_body_cb cb = r->body_cb;
        r->body_cb = NULL;
        cb(r, NULL, 0, err);
    }
    r->body_state = LX_BODY_DISCARD;
    r->waiting = 0;
    lx_request_finish(r, status);
    lx_h2_stream_leave(st);
}

int lx_h2_stream_reading(const lx_h2_stream_t *st) {
    const lx_req_t *r = &st->req;
    return st->state == LX_H2S_RUNNING && !st->in_eof && !st->closed && !st->in_paused &&
           r->expect != LX_EXPECT_WAITING && r->body_state != LX_BODY_NONE &&
           r->body_state != LX_BODY_DONE;
}

void lx_h2_stream_timeout(lx_h2_stream_t *st, lx_dl_kind_t kind) {
    lx_req_t *r = &st->req;
    lx_h2_t *h = st->h;
    if (kind == LX_DL_BODY && r->resp.state == LX_RESP_NONE && !r->aborted) {
        body_fail(st, -ETIMEDOUT, 408); /* as HTTP/1's (conn.c timed_out_reading) */
        return;
    }
    if (h->c && !st->closed)
        nghttp2_submit_rst_stream(h->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL);
}

static void body_complete(lx_h2_stream_t *st) {
    lx_req_t *r = &st->req;
    lx_body_state_t was = (lx_body_state_t)r->body_state;
    r->body_state = LX_BODY_DONE;
    if (was == LX_BODY_READING && r->body_cb) {
        lx_body_cb cb = r->body_cb;
        r->body_cb = NULL;
        cb(r, NULL, 0, 0);
    } else if (was == LX_BODY_DISCARD && r->waiting_body) {
        r->waiting_body = 0;
        lx_request_resume(r);
    }
}

/* The client's window gets back what was taken: the reader wants more, or
 * the bytes were dropped. */
void lx_h2_give_back(lx_h2_stream_t *st, size_t n) {
    if (n && st->h->c && !st->closed) nghttp2_session_consume(st->h->ng, st->id, n);
}

/* Hands what came of the body to its reader, a piece at a time, each once
 * the reader asked for more; drops it when the body is to be dropped. */
void lx_h2_body_pump(lx_h2_stream_t *st) {
    lx_req_t *r = &st->req;
    if (st->pumping || st->state != LX_H2S_RUNNING) return;
    st->pumping = 1;
    lx_h2_stream_enter(st);
    for (;;) {
        size_t n = st->in_len - st->in_pos;
        if (r->body_state == LX_BODY_DISCARD) {
            lx_h2_give_back(st, n + st->in_unacked);
            st->in_unacked = 0;
            st->in_pos = st->in_len = 0;
            break;
        }
        if (r->body_state != LX_BODY_READING || r->body_cb == NULL || st->in_paused || n == 0)
            break;
        const char *p = st->in + st->in_pos;
        st->in_pos = st->in_len;
        st->in_unacked += n;
        st->in_paused = 1;
        r->body_cb(r, p, n, 0);
        if (r->aborted) break;
    }
    if (st->in_pos == st->in_len) st->in_pos = st->in_len = 0;
    if (st->in_eof && st->in_len == 0 && !r->aborted &&
        ((r->body_state == LX_BODY_READING && !st->in_paused) || r->body_state == LX_BODY_DISCARD))
        body_complete(st);
    st->pumping = 0;
    lx_h2_stream_leave(st);
}

/* Gives back len bytes of the window: the stream's and the connection's,
 * or the connection's alone once nghttp2 has forgotten the stream. */
static void consume(nghttp2_session *ng, int32_t id, size_t len) {
    if (nghttp2_session_consume(ng, id, len) != 0) nghttp2_session_consume_connection(ng, len);
}

static int on_data_chunk(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *ud) {
    (void)flags, (void)ud;
    lx_h2_stream_t *st = stream_get(ng, id);
    if (st == NULL || st->state != LX_H2S_RUNNING) {
        consume(ng, id, len); /* nobody wants it: the window goes on */
        return 0;
    }
    lx_req_t *r = &st->req;
    r->body_read += len;
    if (r->body_read > r->gen->srv.max_body_bytes) {
        consume(ng, id, len);
        if (r->resp.state == LX_RESP_NONE && r->body_state != LX_BODY_DONE)
            body_fail(st, -EMSGSIZE, 413);
        return 0;
    }
    if (r->body_state == LX_BODY_DISCARD || r->body_state == LX_BODY_DONE) {
        consume(ng, id, len);
        return 0;
    }
    /* The window we gave the stream bounds what can be here. */
    if (st->in_len + len > st->in_cap) {
        size_t cap = st->in_cap ? st->in_cap : 16384;
        while (cap < st->in_len + len)
            cap *= 2;
        char *n = realloc(st->in, cap);
        if (n == NULL) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        st->in = n;
        st->in_cap = cap;
    }
    memcpy(st->in + st->in_len, data, len);
    st->in_len += len;
    st->body_at = uv_now(&r->w->loop);
    lx_h2_body_pump(st);
    return 0;
}

static int on_frame_recv(nghttp2_session *ng, const nghttp2_frame *frame, void *ud) {
    (void)ud;
    lx_h2_stream_t *st = stream_get(ng, frame->hd.stream_id);
    if (st == NULL) return 0;
    int end = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
    switch (frame->hd.type) {
    case NGHTTP2_HEADERS:
        if (end) st->in_eof = 1;
        if (frame->headers.cat == NGHTTP2_HCAT_REQUEST)
            request_ready(st);
        else if (end)
            lx_h2_body_pump(st); /* trailers: the body's end */
        break;
    case NGHTTP2_DATA:
        if (end) {
            st->in_eof = 1;
            lx_h2_body_pump(st);
        }
        break;
    default: break;
    }
    return 0;
}

static int on_frame_send(nghttp2_session *ng, const nghttp2_frame *frame, void *ud) {
    (void)ud;
    if (frame->hd.type == NGHTTP2_RST_STREAM) {
        /* A reset of ours before the answer went: one the client made us
         * send (MadeYouReset), or a stream we gave up on. */
        lx_h2_stream_t *st = stream_get(ng, frame->hd.stream_id);
        if (st && !st->sent && st->h->c) lx_h2_count_reset(st->h);
        return 0;
    }
    if (!(frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) return 0;
    if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) return 0;
    lx_h2_stream_t *st = stream_get(ng, frame->hd.stream_id);
    if (st == NULL) return 0;
    st->sent = 1;
    stream_end(st);
    return 0;
}

static int on_stream_close(nghttp2_session *ng, int32_t id, uint32_t code, void *ud) {
    (void)code, (void)ud;
    lx_h2_stream_t *st = stream_get(ng, id);
    if (st == NULL) return 0;
    nghttp2_session_set_stream_user_data(ng, id, NULL);
    lx_h2_stream_enter(st);
    st->closed = 1;
    unlink_stream(st);
    /* Body bytes it received that nobody took, or took without the window
     * back yet: the connection's window gets them now, or a few cancelled
     * uploads would close it for every stream. */
    size_t owed = st->in_len - st->in_pos + st->in_unacked;
    if (owed) nghttp2_session_consume_connection(ng, owed);
    st->in_pos = st->in_len = st->in_unacked = 0;
    if (st->state == LX_H2S_RUNNING) {
        stream_abort(st);
    } else if (st->state == LX_H2S_HEAD) {
        release_gen(st); /* reset before its head was whole: no request */
        st->state = LX_H2S_ENDED;
        if (--st->h->nstreams == 0 && st->h->c) lx_h2_set_idle(st->h);
    }
    st->free_pending = 1;
    lx_h2_stream_leave(st);
    return 0;
}

void lx_h2_callbacks(nghttp2_session_callbacks *cb) {
    nghttp2_session_callbacks_set_on_begin_frame_callback(cb, on_begin_frame);
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    nghttp2_session_callbacks_set_send_data_callback(cb, lx_h2_send_data);
}
