/* A handler for luxd's own tests, linked into luxd-test only (Makefile):
 * it drives the parts of the core that the static handler does not use.
 * `location "/t/" { test_handler = true }` answers, by the path's last
 * segment:
 *
 *   stream?bytes=N&piece=P  200 of N bytes of unknown length ('a' + i % 26),
 *                           P bytes a piece, the next when the output drains
 *   body?delay_ms=D         reads the request body as a stream, waiting D ms
 *                           after each piece; answers "bytes=N fnv=H"
 *   body?early=1            answers "early" after the first piece of the body,
 *                           without asking for more (the core drops the rest)
 *   async?ms=M              waits M ms on the thread pool (LX_ASYNC), then
 *                           answers "async entered=E resumed=R"
 *   status?code=N           returns status N
 *   decline                 declines
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "handlers/handler.h"
#include "worker.h"

typedef struct {
    lx_req_t *r;
    uv_timer_t timer;  /* body: the delay after a piece */
    uv_work_t work;    /* async: the thread-pool wait */
    uint64_t left;     /* stream: bytes still to send */
    uint64_t sent;     /* stream: bytes sent */
    size_t piece;      /* stream: bytes a piece */
    uint64_t bytes;    /* body: bytes received */
    uint64_t fnv;      /* body: FNV-1a of them */
    unsigned delay_ms; /* body */
    unsigned ms;       /* async */
    int early;         /* body: answer at the first piece */
    int entered, resumed;
    int timer_open; /* the timer handle is initialised */
    int timing;     /* a delay is running (the request is held) */
    int dead;       /* the client is gone: free once the timer is done */
} tstate_t;

static uint64_t query_num(const lx_req_t *r, const char *name, uint64_t dflt) {
    size_t n = strlen(name);
    const char *p = r->query.p, *end = p + r->query.len;
    while (p && p < end) {
        if ((size_t)(end - p) > n && memcmp(p, name, n) == 0 && p[n] == '=')
            return strtoull(p + n + 1, NULL, 10);
        p = memchr(p, '&', (size_t)(end - p));
        if (p) p++;
    }
    return dflt;
}

static int ends_with(const lx_req_t *r, const char *name) {
    size_t n = strlen(name);
    return r->decoded_len >= n && memcmp(r->decoded + r->decoded_len - n, name, n) == 0;
}

static void on_timer_closed(uv_handle_t *h) {
    free(container_of((uv_timer_t *)h, tstate_t, timer));
}

static void state_free(tstate_t *st) {
    if (st->timer_open)
        uv_close((uv_handle_t *)&st->timer, on_timer_closed);
    else
        free(st);
}

static void answer_text(lx_req_t *r, const char *text) {
    size_t n = strlen(text);
    lx_resp_init(r, 200);
    r->resp.length = (int64_t)n;
    lx_resp_header(r, "Content-Type: text/plain\r\n", 26);
    lx_resp_send_headers(r);
    lx_resp_body_copy(r, text, n);
    lx_resp_done(r);
}

/* ---- stream ------------------------------------------------------------- */

static void stream_proceed(lx_req_t *r) {
    tstate_t *st = r->handler_data;
    char buf[65536];
    while (st->left) {
        size_t n = st->left < st->piece ? (size_t)st->left : st->piece;
        if (n > sizeof(buf)) n = sizeof(buf);
        for (size_t i = 0; i < n; i++)
            buf[i] = (char)('a' + (st->sent + i) % 26);
        st->left -= n;
        st->sent += n;
        if (lx_stream_send(r, buf, n) < 0) return; /* above the high-water mark */
    }
    r->handler_data = NULL;
    free(st);
    lx_stream_end(r);
}

static void stream_stop(lx_req_t *r) {
    free(r->handler_data);
    r->handler_data = NULL;
}

static const lx_producer_t stream_producer = {stream_proceed, stream_stop};

static int do_stream(lx_req_t *r) {
    tstate_t *st = calloc(1, sizeof(*st));
    if (st == NULL) return 500;
    st->left = query_num(r, "bytes", 0);
    st->piece = (size_t)query_num(r, "piece", 16384);
    if (st->piece == 0) st->piece = 16384;
    r->handler_data = st;
    lx_resp_init(r, 200);
    lx_resp_header(r, "Content-Type: text/plain\r\n", 26);
    lx_stream_start(r, &stream_producer);
    if (r->resp.state == LX_RESP_DONE && r->handler_data) {
        free(r->handler_data); /* HEAD: no body was wanted */
        r->handler_data = NULL;
    }
    return LX_DONE;
}

/* ---- body --------------------------------------------------------------- */

static void body_delay_done(uv_timer_t *t) {
    tstate_t *st = container_of(t, tstate_t, timer);
    st->timing = 0;
    /* The hold is given back whether or not the reader was let go: a dead
     * reader's request still counts it, and its session would never be
     * freed. */
    int gone = lx_req_release(st->r);
    if (st->dead || gone) {
        state_free(st);
        return;
    }
    lx_body_more(st->r);
}

static void body_piece(lx_req_t *r, const char *p, size_t len, int status) {
    tstate_t *st = r->handler_data;
    if (status < 0) {
        /* The core answers (or the client is gone): let go. */
        r->handler_data = NULL;
        if (st->timing)
            st->dead = 1;
        else
            state_free(st);
        return;
    }
    if (p == NULL) {
        char text[64];
        snprintf(text, sizeof(text), "bytes=%llu fnv=%016llx\n", (unsigned long long)st->bytes,
                 (unsigned long long)st->fnv);
        r->handler_data = NULL;
        state_free(st);
        answer_text(r, text);
        return;
    }
    for (size_t i = 0; i < len; i++) {
        st->fnv ^= (unsigned char)p[i];
        st->fnv *= 0x100000001b3ULL;
    }
    st->bytes += len;
    if (st->early) {
        /* The reader stays registered: the core tells it (status < 0)
         * when it lets go of the body, and st is freed then. */
        answer_text(r, "early\n");
        return;
    }
    if (st->delay_ms == 0) {
        lx_body_more(r);
        return;
    }
    if (!st->timer_open) {
        uv_timer_init(&r->w->loop, &st->timer);
        st->timer_open = 1;
    }
    st->timing = 1;
    lx_req_hold(r);
    uv_timer_start(&st->timer, body_delay_done, st->delay_ms, 0);
}

static int do_body(lx_req_t *r) {
    tstate_t *st = calloc(1, sizeof(*st));
    if (st == NULL) return 500;
    st->r = r;
    st->fnv = 0xcbf29ce484222325ULL;
    st->delay_ms = (unsigned)query_num(r, "delay_ms", 0);
    st->early = query_num(r, "early", 0) != 0;
    r->handler_data = st;
    int rc = lx_body_read(r, body_piece);
    if (rc) return rc;
    return r->resp.state == LX_RESP_NONE ? LX_ASYNC : LX_DONE;
}

/* ---- async -------------------------------------------------------------- */

static void async_work(uv_work_t *w) {
    tstate_t *st = container_of(w, tstate_t, work);
    usleep(st->ms * 1000u);
}

static void async_done(uv_work_t *w, int status) {
    tstate_t *st = container_of(w, tstate_t, work);
    lx_req_t *r = st->r;
    if (r->aborted) {
        free(st);
        lx_req_release(r);
        return;
    }
    lx_req_wake(r, status);
}

static int do_async(lx_req_t *r) {
    tstate_t *st = r->handler_data;
    if (st) {
        /* Run again after the wait: here, not from the chain's start. */
        st->resumed++;
        char text[64];
        snprintf(text, sizeof(text), "async entered=%d resumed=%d\n", st->entered, st->resumed);
        r->handler_data = NULL;
        free(st);
        answer_text(r, text);
        return LX_DONE;
    }
    if ((st = calloc(1, sizeof(*st))) == NULL) return 500;
    st->r = r;
    st->entered = 1;
    st->ms = (unsigned)query_num(r, "ms", 100);
    r->handler_data = st;
    if (uv_queue_work(&r->w->loop, &st->work, async_work, async_done) < 0) {
        r->handler_data = NULL;
        free(st);
        return 500;
    }
    lx_req_hold(r);
    return LX_ASYNC;
}

static int test_handle(lx_req_t *r) {
    if (ends_with(r, "/stream")) return do_stream(r);
    if (ends_with(r, "/body")) return do_body(r);
    if (ends_with(r, "/async")) return do_async(r);
    if (ends_with(r, "/status")) {
        uint64_t code = query_num(r, "code", 500);
        return code >= 100 && code <= 599 ? (int)code : 500;
    }
    if (ends_with(r, "/decline")) return LX_DECLINED;
    return 404;
}

const lx_handler_t lx_test_handler = {
    .name = "test",
    .handle = test_handle,
    .methods = LX_METHODS_ALL,
};
