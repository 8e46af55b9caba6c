/* An HTTP/2 connection (h2.h): a libnghttp2 server session over the
 * connection's transport. What the client sends goes to
 * nghttp2_session_mem_recv; the frames nghttp2 makes are gathered from
 * nghttp2_session_mem_send into one buffer and written with one write in
 * flight, so that a slow client holds back the frames (and the DATA
 * sources' reads) rather than luxd's memory.
 *
 * The defences nghttp2 has are switched on and bounded here: concurrent
 * streams, CONTINUATION frames per header block (the CONTINUATION flood),
 * RST_STREAM rate (Rapid Reset), SETTINGS and outbound ACK queues (the
 * SETTINGS and PING floods); window updates are ours to give, once a
 * request body's reader took the bytes (stream.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "h2/h2i.h"
#include "log.h"
#include "stats.h"

#define H2_PREFACE "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
/* SETTINGS_MAX_CONCURRENT_STREAMS: as nginx and h2o. */
#define H2_MAX_STREAMS 100
/* The connection's receive window: room for every stream's 64 KiB. */
#define H2_CONN_WINDOW (H2_MAX_STREAMS * 65535)
/* CONTINUATION frames a header block may have: a header section of
 * max_header_bytes fits in a few 16 KiB frames. */
#define H2_MAX_CONTINUATIONS 8
/* Streams a client may reset per second after a burst (nghttp2's Rapid
 * Reset guard, CVE-2023-44487). */
#define H2_RESET_BURST 1000
#define H2_RESET_RATE  33
/* Bytes written at once in one turn of the loop (as HTTP/1, out.h
 * LX_OUT_BURST): past them the rest goes by uv_write, whose callback
 * comes from the loop. */
#define H2_BURST (256 * 1024)
/* Between a drain's first GOAWAY and its second: requests a client sent
 * before it saw the first arrive meanwhile (a round trip, with room). */
#define LX_H2_DRAIN_MS 1000

_Static_assert(sizeof(H2_PREFACE) - 1 == LX_H2_PREFACE_LEN, "the preface is 24 bytes");

int lx_h2_preface(const char *p, size_t n) {
    size_t k = n < LX_H2_PREFACE_LEN ? n : LX_H2_PREFACE_LEN;
    if (memcmp(p, H2_PREFACE, k) != 0) return -1;
    return n >= LX_H2_PREFACE_LEN ? 1 : 0;
}

void lx_h2_maybe_free(lx_h2_t *h) {
    if (h->c || h->writing || h->depth || h->alive || h->pins) return;
    nghttp2_session_del(h->ng);
    lx_h2_batch_free(&h->out, &h->w->obufs);
    lx_h2_batch_free(&h->wout, &h->w->obufs);
    free(h);
}

void lx_h2_unhold(lx_h2_t *h) {
    if (--h->depth) return;
    if (h->c == NULL) {
        lx_h2_maybe_free(h);
    } else if (h->flush_pending) {
        h->flush_pending = 0;
        lx_h2_flush(h);
    }
}

/* nghttp2 bounds the RST_STREAM frames a client sends (Rapid Reset), not
 * the resets a client makes the server send (a body longer than its
 * content-length, a malformed trailer: MadeYouReset, CVE-2025-8671), after
 * which a backend may still work on a request the stream limit no longer
 * counts. Those count here, in a bucket like nghttp2's: past it, GOAWAY
 * ENHANCE_YOUR_CALM. */
int lx_h2_count_reset(lx_h2_t *h) {
    uint64_t now = uv_now(&h->w->loop);
    uint64_t add = (now - h->resets_at) * H2_RESET_RATE / 1000;
    if (add) {
        h->resets_left = (uint32_t)(h->resets_left + add > H2_RESET_BURST ? H2_RESET_BURST
                                                                          : h->resets_left + add);
        h->resets_at = now;
    }
    if (h->resets_left) {
        h->resets_left--;
        return 0;
    }
    if (!h->fatal) {
        h->fatal = 1;
        h->goaway = 1;
        nghttp2_session_terminate_session(h->ng, NGHTTP2_ENHANCE_YOUR_CALM);
    }
    return -1;
}

void lx_h2_close(lx_h2_t *h) {
    if (h->c) lx_conn_close(h->c);
}

/* The end after a GOAWAY: the client must be able to read it, so the
 * connection lingers rather than close with its bytes unread (which would
 * reset it and lose the GOAWAY in the client's buffer). */
static void h2_finish(lx_h2_t *h) {
    lx_conn_t *c = h->c;
    if (c == NULL) return;
    lx_h2_detach(c);
    lx_conn_linger(c);
}

/* With no stream running, the connection waits for the next request for
 * keepalive_timeout; after the final GOAWAY it is done (a drain's first
 * one waits for its second, LX_DL_LINGER). */
void lx_h2_set_idle(lx_h2_t *h) {
    lx_conn_t *c = h->c;
    if (c == NULL || h->nstreams) return;
    lx_conn_set_state(c, LX_CONN_IDLE);
    h->flush_pending = 1; /* its end sets the deadline */
    if (h->goaway) h->closing = 1;
}

void lx_h2_put_buf(lx_h2_t *h, char *buf, int lent) {
    /* Only a buffer the output pointed into waits: one a reset stream
     * never sent goes back at once, however long a write is stuck. */
    if (lent && (h->out.nseg || h->writing))
        lx_h2_batch_hold(&h->out, buf); /* after the write in flight, if any */
    else
        lx_pool_put(&h->w->obufs, buf, LX_OUT_BUF);
}

static void on_written(uv_write_t *req, int status) {
    lx_h2_t *h = container_of(req, lx_h2_t, wreq);
    h->writing = 0;
    lx_h2_batch_release(&h->wout, &h->w->obufs);
    if (h->c == NULL) {
        lx_h2_maybe_free(h);
        return;
    }
    if (status < 0) {
        lx_conn_close(h->c);
        return;
    }
    lx_h2_flush(h); /* which sets the deadline that applies now */
}

/* Writes the batch gathered: what the socket takes now, the rest by one
 * uv_write (the batch becomes the write's, and an empty one gathers).
 * Returns 0 when all went, 1 when a write is in flight, -1 on a close. */
static int write_out(lx_h2_t *h, size_t *burst) {
    lx_conn_t *c = h->c;
    lx_h2_batch_t *b = &h->out;
    uv_buf_t *iov = lx_h2_batch_iov(b);
    ssize_t n = *burst < H2_BURST ? lx_tp_try_write(&c->link.tp, iov, b->nseg, 0) : 0;
    if (n < 0) {
        lx_conn_close(c);
        return -1;
    }
    *burst += (size_t)n;
    if ((size_t)n == b->bytes) {
        lx_h2_batch_release(b, &h->w->obufs);
        return 0;
    }
    size_t k = (size_t)n;
    unsigned i = 0;
    while (k >= iov[i].len)
        k -= iov[i++].len;
    iov[i].base += k;
    iov[i].len -= k;
    lx_h2_batch_t t = h->wout;
    h->wout = h->out;
    h->out = t;
    if (lx_tp_write(&c->link.tp, &h->wreq, iov + i, h->wout.nseg - i, on_written) < 0) {
        lx_conn_close(c);
        return -1;
    }
    h->writing = 1;
    lx_conn_set_deadline(c, LX_DL_SEND, h->w->gen->srv.send_timeout);
    return 1;
}

static void goaway_final(lx_h2_t *h);

/* Whether a stream's response waits for the client's window (its own, or
 * the connection's): bytes queued that nghttp2 may not send. */
static int stream_blocked(lx_h2_t *h, const lx_h2_stream_t *st, int conn_shut) {
    if (!st->submitted || st->sent || st->closed || (st->head == NULL && !st->eof)) return 0;
    return conn_shut || nghttp2_session_get_stream_remote_window_size(h->ng, st->id) <= 0;
}

/* The timeouts of each stream, as HTTP/1 has them for its one request:
 * header_timeout for a head not yet whole, body_timeout between two pieces
 * of a body the request waits for, send_timeout for a response that waits
 * for the client's window (whatever the connection's other streams do).
 * The connection's deadline is the earliest of them. With act, the streams
 * past theirs are ended (stream.c lx_h2_stream_timeout). Returns the
 * earliest still to come (loop ms), or 0 for none. */
static uint64_t stream_deadlines(lx_h2_t *h, uint64_t now, int act) {
    int conn_shut = nghttp2_session_get_remote_window_size(h->ng) <= 0;
    const lx_server_conf_t *srv = &h->w->gen->srv;
    uint64_t first = 0;
    lx_h2_stream_t *st = h->streams;
    if (st) lx_h2_stream_pin(st);
    while (st && h->c) {
        uint64_t due = 0;
        lx_dl_kind_t kind = LX_DL_NONE;
        if (stream_blocked(h, st, conn_shut)) {
            if (st->blocked_since == 0) st->blocked_since = now;
            if (srv->send_timeout) due = st->blocked_since + srv->send_timeout, kind = LX_DL_SEND;
        } else {
            st->blocked_since = 0;
            if (st->state == LX_H2S_HEAD && srv->header_timeout) {
                due = st->req.started + srv->header_timeout;
                kind = LX_DL_HEADER;
            } else if (lx_h2_stream_reading(st) && srv->body_timeout) {
                due = st->body_at + srv->body_timeout;
                kind = LX_DL_BODY;
            }
        }
        if (due && act && now >= due) {
            st->blocked_since = 0;
            lx_h2_stream_timeout(st, kind);
        } else if (due && (first == 0 || due < first)) {
            first = due;
        }
        lx_h2_stream_t *next = st->linked ? st->next : NULL;
        if (next) lx_h2_stream_pin(next);
        lx_h2_stream_unpin(st);
        st = next;
    }
    if (st) lx_h2_stream_unpin(st);
    return first;
}

/* The deadline that applies once the output is out. */
static void arm(lx_h2_t *h) {
    lx_conn_t *c = h->c;
    uint64_t now = uv_now(&h->w->loop);
    uint64_t due;
    if (h->notice && !h->goaway) {
        /* Draining: the second GOAWAY is due at notice_due. */
        if (now >= h->notice_due)
            goaway_final(h);
        else
            lx_conn_set_deadline(c, LX_DL_LINGER, (uint32_t)(h->notice_due - now));
    } else if (h->nstreams == 0) {
        /* Until its first request, the deadline lx_h2_start set, counted
         * from the start; then keepalive_timeout while idle. */
        if (h->open_last != 0 || c->dl_kind != LX_DL_IDLE)
            lx_conn_set_deadline(c, LX_DL_IDLE, h->w->gen->srv.keepalive_timeout);
        /* An idle connection keeps no output buffer (64 KiB and more). */
        lx_h2_batch_free(&h->out, &h->w->obufs);
        lx_h2_batch_free(&h->wout, &h->w->obufs);
    } else if ((due = stream_deadlines(h, now, 0)) != 0) {
        lx_conn_set_deadline(c, LX_DL_SEND, due > now ? (uint32_t)(due - now) : 1);
    } else if (c->dl_kind == LX_DL_SEND || c->dl_kind == LX_DL_IDLE) {
        lx_conn_set_deadline(c, LX_DL_NONE, 0);
    }
}

/* Pins h across a call that may close the connection (and free h when
 * nothing else holds it): the caller looks at h->c after it. */
static void pin(lx_h2_t *h) {
    h->pins++;
}

static void unpin(lx_h2_t *h) {
    if (--h->pins == 0 && h->c == NULL) lx_h2_maybe_free(h);
}

void lx_h2_flush(lx_h2_t *h) {
    if (h->c == NULL) return;
    if (h->depth || h->writing) {
        h->flush_pending = 1;
        return;
    }
    if (h->flushing) {
        h->flush_again = 1;
        return;
    }
    pin(h);
    h->flushing = 1;
    h->flush_pending = 0;
    size_t burst = 0;
    do {
        h->flush_again = 0;
        while (h->c && !h->writing) {
            while (h->out.bytes < H2_GATHER) {
                const uint8_t *d;
                ssize_t n = nghttp2_session_mem_send(h->ng, &d);
                if (n < 0) lx_log_debug("h2: %s; connection closed", nghttp2_strerror((int)n));
                if (n < 0 || (n > 0 && lx_h2_batch_copy(&h->out, d, (size_t)n) < 0)) {
                    lx_h2_close(h);
                    break;
                }
                if (n == 0) break;
            }
            if (h->c == NULL || h->out.bytes == 0 || write_out(h, &burst) < 0) break;
        }
        /* The output went: producers may send more. */
        if (h->c && !h->writing) lx_h2_streams_proceed(h);
    } while (h->flush_again && h->c && !h->writing);
    h->flushing = 0;
    if (h->c && !h->writing) {
        /* Nothing left to say or hear (a GOAWAY went and its streams are
         * done, or nghttp2 gave up on the peer): the connection ends. */
        if ((!nghttp2_session_want_read(h->ng) && !nghttp2_session_want_write(h->ng)) || h->fatal ||
            (h->closing && h->nstreams == 0))
            h2_finish(h);
        else
            arm(h);
    }
    unpin(h);
}

int lx_h2_start(lx_conn_t *c, const char *p, size_t n) {
    lx_worker_t *w = c->link.tp.tcp.loop->data;
    const lx_server_conf_t *s = &w->gen->srv;
    lx_h2_t *h = calloc(1, sizeof(*h));
    nghttp2_session_callbacks *cb = NULL;
    nghttp2_option *opt = NULL;
    int r = h && nghttp2_session_callbacks_new(&cb) == 0 && nghttp2_option_new(&opt) == 0 ? 0 : -1;
    if (r == 0) {
        lx_h2_callbacks(cb);
        /* Window updates are given once a reader took the bytes. */
        nghttp2_option_set_no_auto_window_update(opt, 1);
        nghttp2_option_set_max_continuations(opt, H2_MAX_CONTINUATIONS);
        nghttp2_option_set_stream_reset_rate_limit(opt, H2_RESET_BURST, H2_RESET_RATE);
        nghttp2_option_set_max_settings(opt, 32);
        nghttp2_option_set_max_outbound_ack(opt, 1000);
        r = nghttp2_session_server_new2(&h->ng, cb, h, opt);
    }
    nghttp2_session_callbacks_del(cb);
    nghttp2_option_del(opt);
    if (r != 0) {
        free(h);
        lx_conn_close(c);
        return -ENOMEM;
    }
    h->c = c;
    h->w = w;
    h->resets_left = H2_RESET_BURST;
    h->resets_at = uv_now(&w->loop);
    c->h2 = h;
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, H2_MAX_STREAMS},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, (uint32_t)s->max_header_bytes},
    };
    nghttp2_submit_settings(h->ng, NGHTTP2_FLAG_NONE, iv, sizeof(iv) / sizeof(iv[0]));
    /* The connection's window larger than a stream's: one stream whose
     * body nobody reads yet must not hold back every other upload. What
     * is buffered stays bounded by the streams' windows (64 KiB each). */
    nghttp2_session_set_local_window_size(h->ng, NGHTTP2_FLAG_NONE, 0, H2_CONN_WINDOW);
    lx_conn_set_state(c, LX_CONN_IDLE);
    /* Until its first request, header_timeout as for an HTTP/1
     * connection, or keepalive_timeout when that is shorter: then a
     * GOAWAY and the close (lx_h2_deadline), as when idle. */
    uint32_t first = s->header_timeout;
    if (s->keepalive_timeout && s->keepalive_timeout < first) first = s->keepalive_timeout;
    lx_conn_set_deadline(c, LX_DL_IDLE, first);
    if (n)
        lx_h2_recv(c, p, n);
    else
        lx_h2_flush(h);
    return 0;
}

void lx_h2_recv(lx_conn_t *c, const char *p, size_t n) {
    lx_h2_t *h = c->h2;
    lx_st_add(&h->w->stats->bytes_in, n);
    lx_h2_hold(h);
    ssize_t r = nghttp2_session_mem_recv(h->ng, (const uint8_t *)p, n);
    if (r < 0 && h->c) {
        /* A connection error: nghttp2 queued its GOAWAY (a flood, a bad
         * preface, a frame that breaks the protocol); it goes out, then
         * the close. */
        lx_log_debug("h2: %s", nghttp2_strerror((int)r));
        h->goaway = 1;
        h->fatal = 1;
        nghttp2_session_terminate_session(h->ng, r == NGHTTP2_ERR_FLOODED ||
                                                         r == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS
                                                     ? NGHTTP2_ENHANCE_YOUR_CALM
                                                     : NGHTTP2_PROTOCOL_ERROR);
    }
    h->flush_pending = 1; /* what came may want an answer (SETTINGS, PING, a window) */
    lx_h2_unhold(h);
}

/* The last stream it will take is the last it has seen: streams begun
 * after it go unanswered, and the client may retry them elsewhere. */
static void goaway_final(lx_h2_t *h) {
    h->goaway = 1;
    h->closing = 1;
    nghttp2_submit_goaway(h->ng, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(h->ng),
                          NGHTTP2_NO_ERROR, NULL, 0);
    lx_h2_flush(h);
}

/* A graceful end (reload, stop), as RFC 9113 6.8 suggests: a GOAWAY that
 * takes every stream first, so that requests already on their way are not
 * lost, then after LX_H2_DRAIN_MS the one with the last stream taken. */
void lx_h2_drain(lx_conn_t *c) {
    lx_h2_t *h = c->h2;
    if (h->goaway || h->notice) return;
    h->notice = 1;
    h->notice_due = uv_now(&h->w->loop) + LX_H2_DRAIN_MS;
    nghttp2_submit_shutdown_notice(h->ng);
    lx_h2_flush(h);
}

void lx_h2_detach(lx_conn_t *c) {
    lx_h2_t *h = c->h2;
    if (h == NULL) return;
    c->h2 = NULL;
    h->c = NULL;
    lx_h2_hold(h);
    lx_h2_streams_detach(h);
    lx_h2_unhold(h);
}

void lx_h2_deadline(lx_conn_t *c, lx_dl_kind_t kind) {
    lx_h2_t *h = c->h2;
    /* Idle (RFC 9113 9.1), or the drain's second GOAWAY: a GOAWAY says
     * so, then the close once the streams taken are answered. */
    if ((kind == LX_DL_IDLE || kind == LX_DL_LINGER) && !h->goaway) {
        goaway_final(h);
        return;
    }
    if (kind == LX_DL_SEND && !h->writing) {
        /* Streams past one of their timeouts are ended. */
        pin(h);
        stream_deadlines(h, uv_now(&h->w->loop), 1);
        lx_h2_flush(h);
        unpin(h);
        return;
    }
    lx_conn_close(c);
}

const lx_gen_t *lx_h2_gen(const lx_conn_t *c) {
    const lx_h2_t *h = c->h2;
    const lx_gen_t *g = NULL;
    for (const lx_h2_stream_t *st = h->streams; st; st = st->next)
        if (st->gen_held) g = st->req.gen; /* the list is newest first: the last is oldest */
    return g;
}
