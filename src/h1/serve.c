/* An HTTP/1 connection's requests, one after another (conn.h has the
 * states): llhttp runs over the read buffer (its callbacks are in h1.c), a
 * request is dispatched as soon as its head is complete, its response is
 * written as it is queued (out.c), and it ends once that is out and its
 * body read; then the next one, pipelined or to come, or the close. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "h1/h1.h"
#include "h1/serve.h"
#include "core/accesslog.h"
#include "log.h"
#include "net/tls.h"

/* Answers a request that could not be parsed: the framing is in doubt, so
 * the connection closes after the response. */
static void parse_error(lx_sess_t *s, int status) {
    lx_conn_t *c = s->c;
    lx_req_t *r = &s->req;
    if (lx_h1_body_failed(s, -EPROTO) < 0) return;
    r->keepalive = 0;
    r->body_state = LX_BODY_DONE; /* nothing more is parsed */
    lx_h1_keep_first_line(s);
    want_read(c, 0);
    lx_log_debug("bad request (%d): %s", status,
                 llhttp_get_error_reason(&s->parser) ? llhttp_get_error_reason(&s->parser)
                                                     : "limit");
    /* A request answered already (100-continue, or a response sent before
     * its body failed) can only close. */
    if (r->resp.state != LX_RESP_NONE) {
        lx_conn_close(c);
        return;
    }
    set_state(c, LX_CONN_HANDLING);
    lx_resp_simple(r, status, NULL);
    lx_resp_done(r);
}

/* Gives the read buffer room for a request under the current limits. The
 * buffer was sized for the limits when it was lent; a reload may have
 * raised them since. Called between requests, when nothing points into it. */
static int rbuf_fit(lx_sess_t *s, size_t max_header_bytes) {
    if (s->rcap < max_header_bytes + RBUF_SLACK) {
        size_t cap = max_header_bytes + RBUF_SLACK;
        char *b = s->rcap == s->w->rbufs.size ? NULL : s->rbuf;
        if (b == NULL) {
            b = malloc(cap);
            if (b == NULL) return -ENOMEM;
            memcpy(b, s->rbuf, s->rlen);
            lx_pool_put(&s->w->rbufs, s->rbuf, s->rcap);
        } else if ((b = realloc(b, cap)) == NULL) {
            return -ENOMEM;
        }
        s->rbuf = b;
        s->rcap = cap;
    }
    /* Make sure a whole header fits behind this request's first byte. */
    if (s->rcap - s->rpos < HEADER_ROOM(max_header_bytes) && s->rpos > 0) {
        memmove(s->rbuf, s->rbuf + s->rpos, s->rlen - s->rpos);
        s->rlen -= s->rpos;
        s->rpos = 0;
    }
    return 0;
}

static void request_begin(lx_sess_t *s) {
    lx_conn_t *c = s->c;
    lx_arena_reset(&s->arena);
    memset(&s->req, 0, sizeof(s->req));
    s->req.gen = lx_worker_gen_acquire(s->w);
    s->req.w = s->w;
    s->gen_held = 1;
    s->req.arena = &s->arena;
    s->req.proto = &lx_h1_proto;
    s->req.link = &c->link;
    s->req.secure = lx_tp_secure(&c->link.tp) != 0;
    s->req_start = s->rpos;
    s->body_base = 0;
    s->in_url = 1;
    s->message_done = 0;
    s->body_paused = 0;
    s->tunnel_paused = 0;
    s->err_status = 0;
    s->te = LX_TE_NONE;
    s->ext_bytes = 0;
    s->trailer_bytes = 0;
    s->framing_bytes = 0;
    s->framing_parts = 0;
    s->ext_last = 0;
    s->ext_refeed = 0;
    s->line_wait = 0;
    s->cur_header = NULL;
    s->last_end = NULL;
    s->version_at = NULL;
    c->nreq++;
    set_state(c, LX_CONN_HEAD);
    s->req.started = uv_now(&s->w->loop);
    if (s->req.gen->srv.request_id_header_len) lx_req_add_id_header(&s->req);
}

/* Bytes of a chunked body that no limit counts: chunk-size lines (llhttp
 * takes any number of leading zeros), CRLFs and the whitespace of trailer
 * lines. Each chunk and trailer field brings a few; many more are a client
 * streaming filler to keep a request going (the CVE-2024-22019 class), and
 * get 413. Of consumed body bytes just parsed, those that took the data,
 * extension and trailer counts past counted_before were counted already.
 * The check runs at the end of each parse run against the parts complete
 * by then, so a long size line cut across reads is refused sooner than the
 * same bytes in one read: stricter, never looser (t/51 tests the bound). */
#define FRAMING_PER_PART 32
static int framing_overflow(lx_sess_t *s, size_t consumed, uint64_t counted_before) {
    uint64_t counted = s->req.body_read + s->ext_bytes + s->trailer_bytes - counted_before;
    if (consumed > counted) s->framing_bytes += consumed - counted;
    return s->framing_bytes > (uint64_t)FRAMING_PER_PART * (s->framing_parts + 2);
}

/* Whether the parser may go on: before the head is complete always; in the
 * body while someone takes it; after the request never (pipelined bytes
 * wait until the request ends). */
static int may_parse(lx_sess_t *s) {
    if (!s->req.head_done) return 1;
    if (s->message_done) return 0;
    lx_body_state_t b = (lx_body_state_t)s->req.body_state;
    return (b == LX_BODY_DISCARD || b == LX_BODY_READING) && !s->body_paused;
}

/* The bytes parsed so far end inside a request's head. Only a head that
 * can no longer end within the limit is refused here: one at exactly
 * max_header_bytes may still be waiting for its CRLF CRLF, as
 * on_headers_complete counts to the end of the last field. A full buffer
 * is the limit too: it was fitted to the limit in force when this request
 * began (rbuf_fit), and a reload raising it since must not leave the
 * request stalled until 408 with no room left. */
static void head_incomplete(lx_sess_t *s) {
    lx_conn_t *c = s->c;
    const lx_server_conf_t *srv = &s->w->gen->srv;
    if (s->rlen - s->req_start > HEADER_END(srv->max_header_bytes) || s->rlen == s->rcap) {
        parse_error(s, s->in_url ? 414 : 431);
        return;
    }
    /* A deadline for the whole header, from its first byte: a client
     * trickling bytes does not push it back. */
    if (c->dl_kind != LX_DL_HEADER)
        lx_h1_set_deadline_at(c, LX_DL_HEADER, s->req.started + srv->header_timeout);
}

/* The head is complete: the request is dispatched. */
static void dispatch(lx_sess_t *s) {
    lx_conn_t *c = s->c;
    lx_req_t *r = &s->req;
    set_state(c, LX_CONN_HANDLING);
    lx_conn_set_deadline(c, LX_DL_NONE, 0);
    /* A request without a body has been parsed to its end already
     * (on_headers_complete pauses only for one with a body), so the next
     * run starts at the next request. */
    r->body_state = (r->chunked || r->content_length) ? LX_BODY_UNREAD : LX_BODY_NONE;
    lx_request_run(r);
}

/* The body is all in: tell whoever takes it. */
static void body_complete(lx_sess_t *s) {
    lx_req_t *r = &s->req;
    lx_body_state_t was = (lx_body_state_t)r->body_state;
    r->body_state = LX_BODY_DONE;
    if (s->c && s->c->dl_kind == LX_DL_BODY) lx_conn_set_deadline(s->c, LX_DL_NONE, 0);
    if (was == LX_BODY_READING && r->body_cb) {
        lx_body_cb cb = r->body_cb;
        r->body_cb = NULL;
        cb(r, NULL, 0, 0);
    } else if (was == LX_BODY_DISCARD && r->waiting_body) {
        r->waiting_body = 0; /* a handler waits for the body to be gone */
        lx_request_resume(r);
    } else if (s->c && s->c->state == LX_CONN_BODY) {
        lx_h1_request_end(s); /* the response was out already */
    }
}

static void conn_parse_run(lx_conn_t *c, lx_sess_t *s);

/* Between requests with nothing of the next one buffered: the connection
 * waits for it under keepalive_timeout, and gives its session back once
 * nothing (a write, a job, a hold) refers to it. */
static void conn_idle(lx_conn_t *c, lx_sess_t *s) {
    if (s->req.pending || s->out.n || s->out.writing) return;
    if (c->eof || c->draining) {
        lx_conn_close(c);
        return;
    }
    /* With nobody left to tell (a body reader, a stream, on_abort: all done
     * with the request as a rule), and no call on the stack, the session
     * goes back at once; else lx_h1_sess_detach tells them and frees it once the
     * call returns. */
    if (s->depth == 0 && s->req.body_cb == NULL && s->req.on_abort == NULL &&
        s->req.resp.state != LX_RESP_STREAMING)
        lx_h1_sess_return(c, s);
    else
        lx_h1_sess_detach(c);
    /* A PROXY header alone: the first request's header_timeout, set at
     * accept, runs on (keepalive_timeout is for clients that were answered). */
    if (c->nreq == 0) return;
    lx_conn_set_deadline(c, LX_DL_IDLE, worker_of(c)->gen->srv.keepalive_timeout);
}

/* Runs llhttp over what the read buffer holds, as far as the state lets. */
void lx_h1_parse(lx_conn_t *c) {
    lx_sess_t *s = sess(c);
    if (s == NULL || s->in_parse) return;
    lx_sess_enter(s);
    conn_parse_run(c, s);
    lx_sess_leave(s);
}

/* A tunnel's bytes go to its reader as they are, one piece at a time: the
 * reader copies what it keeps, so the buffer is empty again at once. */
static void tunnel_feed(lx_sess_t *s) {
    lx_req_t *r = &s->req;
    if (s->tunnel_paused || s->rpos == s->rlen || r->body_cb == NULL) return;
    const char *p = s->rbuf + s->rpos;
    size_t n = s->rlen - s->rpos;
    s->tunnel_paused = 1;
    s->rpos = s->rlen = 0;
    r->body_cb(r, p, n, 0);
}

static void conn_parse_run(lx_conn_t *c, lx_sess_t *s) {
    s->in_parse = 1;
    while (c->state != LX_CONN_CLOSED && sess(c) == s) {
        const lx_server_conf_t *srv = &s->w->gen->srv;
        if (c->state == LX_CONN_TUNNEL) {
            tunnel_feed(s);
            break;
        }
        if (c->state == LX_CONN_IDLE) {
            if (s->rpos == s->rlen) break;
            if (c->proxy_wait) {
                int pr = lx_conn_proxy_header(c, s);
                if (pr < 0) {
                    s->in_parse = 0;
                    lx_conn_close(c);
                    return;
                }
                if (pr == 0) break;
                /* What follows may be h2's preface: conn.c got_bytes
                 * looks first, outside this run (h2 takes the session). */
                if (c->h2_ok && c->nreq == 0) break;
                continue;
            }
            if (rbuf_fit(s, srv->max_header_bytes) < 0) {
                s->in_parse = 0;
                lx_conn_close(c);
                return;
            }
            request_begin(s);
        }
        if (c->state == LX_CONN_LINGER) {
            s->rpos = s->rlen = 0; /* read and dropped */
            break;
        }
        /* In a body, llhttp may still owe a callback with no byte left
         * (the end of the message, after a piece a reader paused at). */
        if (!may_parse(s) || (s->rpos == s->rlen && !s->req.head_done)) break;
        const char *start = s->rbuf + s->rpos;
        /* Framing is counted over runs that start inside a chunked body;
         * the run that ends the header block may take a little uncounted. */
        int chunked_body = s->req.head_done && s->req.chunked;
        uint64_t counted = s->req.body_read + s->ext_bytes + s->trailer_bytes;
        /* A request line whose method llhttp refused is read on without
         * it (its state is an error now) until lx_h1_line_status can tell. */
        llhttp_errno_t e = s->line_wait ? HPE_INVALID_METHOD
                                        : llhttp_execute(&s->parser, start, s->rlen - s->rpos);
        if (c->state == LX_CONN_CLOSED || sess(c) != s) break;
        if (e == HPE_OK) {
            if (chunked_body && framing_overflow(s, s->rlen - s->rpos, counted)) {
                parse_error(s, 413);
                break;
            }
            s->rpos = s->rlen;
            if (!s->req.head_done) {
                head_incomplete(s);
            } else {
                /* Body bytes are taken or dropped: read the rest into the
                 * same space. */
                if (s->body_base == 0) s->body_base = s->rlen;
                if (s->body_base == s->rcap) {
                    /* The header filled the buffer to its last byte: with
                     * HEADER_ROOM kept free, only a header longer than
                     * max_header_bytes (padded after its last field) does,
                     * and no byte of its body could ever be read. */
                    parse_error(s, 431);
                    break;
                }
                s->rlen = s->rpos = s->body_base;
                lx_conn_set_deadline(c, LX_DL_BODY, srv->body_timeout);
            }
            break;
        }
        if (e == HPE_PAUSED) {
            size_t pos = (size_t)(llhttp_get_error_pos(&s->parser) - s->rbuf);
            if (s->ext_refeed) {
                /* Give llhttp the ';' it skipped again (on_chunk_extension_
                 * value_complete): it goes on with the next extension. */
                s->ext_refeed = 0;
                pos--;
            }
            if (chunked_body && framing_overflow(s, pos - s->rpos, counted)) {
                parse_error(s, 413);
                break;
            }
            s->rpos = pos;
            llhttp_resume(&s->parser);
            /* A reader holds a piece: luxd reads nothing from the client
             * until it asks for more, so the client's body_timeout waits
             * too (lx_sess_body_resume starts it again). */
            if (s->body_paused && c->dl_kind == LX_DL_BODY) lx_conn_set_deadline(c, LX_DL_NONE, 0);
            if (s->message_done && s->req.body_state != LX_BODY_NONE &&
                s->req.body_state != LX_BODY_DONE) {
                body_complete(s);
                continue;
            }
            if (s->req.head_done && c->state == LX_CONN_HEAD) {
                /* An Expect: 100-continue whose body has started to arrive
                 * is no question any more. */
                if (s->req.expect == LX_EXPECT_WAITING && s->rpos < s->rlen)
                    s->req.expect = LX_EXPECT_NONE;
                dispatch(s);
            }
            continue;
        }
        if (!s->req.head_done && s->err_status == 0 &&
            (e == HPE_INVALID_METHOD || e == HPE_INVALID_CONSTANT)) {
            /* llhttp knows a fixed set of methods and stops at the first
             * byte that none of them continues with: a valid method it
             * does not know (501) looks the same to it as bytes that are
             * no method at all (400). Its state is lost either way, so
             * even a 501 closes the connection (parse_error): where this
             * request ends, and the next begins, is nobody's to say. */
            /* While it waits, the line is looked at again only once the
             * bytes just read hold a LF that may end it: each look reads it
             * from its start, and a line dribbled in small pieces up to a
             * large max_header_bytes would cost its length squared. A byte
             * that makes it no request line then has its 400 at the LF (or
             * the limit's status, or 408), not as it comes. */
            int st = s->line_wait && memchr(start, '\n', s->rlen - s->rpos) == NULL
                         ? 0
                         : lx_h1_line_status(s->rbuf + s->req_start, s->rlen - s->req_start,
                                             srv->max_header_bytes);
            if (st == 0) {
                s->line_wait = 1;
                s->rpos = s->rlen;
                head_incomplete(s);
                break;
            }
            parse_error(s, st);
            break;
        }
        int status = s->err_status ? s->err_status : 400;
        parse_error(s, status);
        break;
    }
    if (sess(c) == s) s->in_parse = 0;
    if (c->state == LX_CONN_CLOSED || sess(c) != s) return;
    if (c->state == LX_CONN_TUNNEL) {
        want_read(c, !s->tunnel_paused);
        return;
    }
    /* The client has stopped sending: a request begun in what it sent will
     * never be whole. */
    if (c->eof && (c->state == LX_CONN_HEAD ||
                   ((c->state == LX_CONN_HANDLING || c->state == LX_CONN_BODY) &&
                    s->req.body_state != LX_BODY_NONE && s->req.body_state != LX_BODY_DONE &&
                    s->rpos == s->rlen && !s->body_paused))) {
        lx_conn_close(c);
        return;
    }
    /* Backpressure: a full buffer stops reading until the request ahead
     * takes its bytes; a body reader that waits stops it at once. */
    int room = s->rbuf == NULL || s->rlen < s->rcap;
    int paused = s->req.head_done && !s->message_done && s->req.body_state == LX_BODY_READING &&
                 s->body_paused;
    want_read(c, room && !paused);
    if (c->state == LX_CONN_IDLE && s->rpos == s->rlen) conn_idle(c, s);
}

/* ---- output and the end of a request --------------------------------- */

void lx_h1_flush(lx_sess_t *s) {
    lx_conn_t *c = s->c;
    if (s->cork) {
        s->flush_pending = 1; /* lx_req_leave writes it */
        return;
    }
    int r = lx_out_flush(s);
    if (r == -EAGAIN) {
        /* send_timeout bounds the time between two writes that moved the
         * output on (as nginx's does), not the whole response. */
        if (s->out.writing && c->dl_kind != LX_DL_SEND)
            lx_conn_set_deadline(c, LX_DL_SEND, s->w->gen->srv.send_timeout);
        return;
    }
    if (r < 0) {
        lx_conn_close(c);
        return;
    }
    if (c->dl_kind == LX_DL_SEND) lx_conn_set_deadline(c, LX_DL_NONE, 0);
    lx_req_t *req = &s->req;
    if (req->resp.state == LX_RESP_STREAMING && req->resp.producer) {
        /* Output written at once calls proceed from inside the producer's
         * own send: it is called again once the outer call returns, so a
         * stream the socket keeps taking loops here instead of growing
         * the stack. */
        if (s->proceeding) {
            s->proceed_again = 1;
            return;
        }
        lx_sess_enter(s);
        s->proceeding = 1;
        do {
            s->proceed_again = 0;
            req->resp.producer->proceed(req);
        } while (s->proceed_again && s->c && req->resp.state == LX_RESP_STREAMING &&
                 req->resp.producer);
        s->proceeding = 0;
        lx_sess_leave(s);
        return;
    }
    if (req->resp.state != LX_RESP_DONE || c->state != LX_CONN_WRITING) return;
    if (req->body_state == LX_BODY_DONE || req->body_state == LX_BODY_NONE || !req->keepalive) {
        lx_h1_request_end(s);
        return;
    }
    /* The response is out; the rest of the body is read and dropped before
     * the next request. */
    set_state(c, LX_CONN_BODY);
    req->body_state = LX_BODY_DISCARD;
    /* A reader that answered without asking for the rest (a piece left
     * it paused) is done with the body: it lets go, and the parser goes on
     * dropping, or nothing would parse again. */
    s->body_paused = 0;
    if (req->body_cb) {
        lx_body_cb cb = req->body_cb;
        req->body_cb = NULL;
        lx_sess_enter(s);
        cb(req, NULL, 0, -ECANCELED);
        lx_sess_leave(s);
        /* s may be gone if the reader closed; c lives until on_closed. */
        if (c->state == LX_CONN_CLOSED) return;
    }
    lx_conn_set_deadline(c, LX_DL_BODY, s->w->gen->srv.body_timeout);
    lx_h1_parse(c);
}

void lx_sess_written(lx_sess_t *s, int status) {
    if (s->c == NULL) {
        lx_h1_sess_maybe_free(s);
        return;
    }
    if (status < 0) {
        lx_conn_close(s->c);
        return;
    }
    /* The write moved the output on: send_timeout starts afresh. */
    if (s->c->dl_kind == LX_DL_SEND)
        lx_conn_set_deadline(s->c, LX_DL_SEND, s->w->gen->srv.send_timeout);
    lx_h1_flush(s);
}

void lx_sess_output(lx_sess_t *s) {
    if (s->c && !s->out.writing && !s->out.file_io) lx_h1_flush(s);
}

void lx_sess_response_done(lx_sess_t *s) {
    lx_conn_t *c = s->c;
    if (c == NULL) return;
    set_state(c, LX_CONN_WRITING);
    lx_h1_flush(s);
}

/* Half-close, then read and drop what the client still sends, so that our
 * close does not reset the connection and destroy the response in flight
 * (nginx's lingering close). */
static void on_shutdown(uv_shutdown_t *req, int status) {
    lx_conn_t *c = req->data;
    free(req);
    if (status < 0 && c->state != LX_CONN_CLOSED) lx_conn_close(c);
}

void lx_conn_linger(lx_conn_t *c) {
    uv_shutdown_t *req = malloc(sizeof(*req));
    if (req == NULL || c->eof) {
        free(req);
        lx_conn_close(c);
        return;
    }
    req->data = c;
    if (lx_tp_shutdown(&c->link.tp, req, on_shutdown) < 0) {
        free(req);
        lx_conn_close(c);
        return;
    }
    set_state(c, LX_CONN_LINGER);
    lx_conn_set_deadline(c, LX_DL_LINGER, LINGER_MS);
    lx_sess_t *s = sess(c);
    if (s) s->rpos = s->rlen = 0;
    want_read(c, 1);
}

/* The response is out and the body read: log, let the generation go, and
 * go on to the next request or close. */
void lx_h1_request_end(lx_sess_t *s) {
    lx_conn_t *c = s->c;
    lx_req_t *r = &s->req;
    if (s->depth) {
        s->end_pending = 1; /* a handler is on the stack: after it returns */
        return;
    }
    const lx_access_log_conf_t *al = lx_access_log_of(r);
    if (al) lx_access_log(s->w, r, al);
    lx_stats_request(s->w->stats, r->vhost ? r->vhost->stat_slot : 0, r->status,
                     r->head_bytes + r->body_bytes);
    lx_h1_release_gen(s);
    int unread = !s->message_done || s->rpos != s->rlen;
    /* A response that came out short (out of memory or queue entries in
     * out.c) said a length it did not send: the connection cannot go on. */
    if (!r->keepalive || s->out.failed || c->draining || s->w->stop || (c->eof && !unread)) {
        /* Bytes the transport took but the socket has not (TLS records
         * of its own in flight) go out before the close, as a plain
         * socket's would from the kernel: linger's shutdown waits for
         * them. */
        if ((unread || lx_tp_queued(&c->link.tp)) && !c->eof)
            lx_conn_linger(c);
        else
            lx_conn_close(c);
        return;
    }
    lx_out_reset(&s->out, s);
    set_state(c, LX_CONN_IDLE);
    if (s->rpos == s->rlen) {
        /* The common case, no pipelined request: nothing to parse. */
        s->rpos = s->rlen = 0;
        want_read(c, 1);
        /* A failed uv_read_start closed the connection (and pooled s). */
        if (c->state == LX_CONN_CLOSED) return;
        conn_idle(c, s);
        return;
    }
    /* A pipelined request waits in the buffer: its header_timeout starts
     * now, not at its first byte (a long response was ahead of it). */
    lx_conn_set_deadline(c, LX_DL_HEADER, s->w->gen->srv.header_timeout);
    lx_h1_parse(c);
}

/* ---- for the request body (core/body.c) and tunnels ------------------------- */

void lx_sess_body_resume(lx_sess_t *s) {
    lx_conn_t *c = s->c;
    if (c == NULL) return;
    s->body_paused = 0;
    /* Called from inside the reader's callback (llhttp runs): the parse
     * loop goes on by itself. */
    if (s->in_parse) return;
    /* Bytes delivered are gone: the rest moves down to where the body is
     * read into, so the buffer has room again. */
    if (s->body_base && s->rpos > s->body_base) {
        memmove(s->rbuf + s->body_base, s->rbuf + s->rpos, s->rlen - s->rpos);
        s->rlen -= s->rpos - s->body_base;
        s->rpos = s->body_base;
    }
    lx_conn_set_deadline(c, LX_DL_BODY, s->w->gen->srv.body_timeout);
    lx_h1_parse(c);
}

void lx_h1_tunnel(lx_req_t *r, const lx_producer_t *p, lx_body_cb cb) {
    lx_sess_t *s = lx_sess_of(r);
    lx_conn_t *c = s->c;
    if (c == NULL) return;
    r->keepalive = 0;
    r->resp.no_body = 0;
    r->resp.chunked = 0;
    r->resp.state = LX_RESP_STREAMING;
    r->resp.producer = p;
    r->body_cb = cb;
    r->waiting = 0;
    set_state(c, LX_CONN_TUNNEL);
    lx_conn_set_deadline(c, LX_DL_NONE, 0);
    s->tunnel_paused = 0;
    lx_sess_output(s);
    if (s->c) lx_h1_parse(c); /* bytes the client sent after the head, then read on */
}

void lx_h1_tunnel_more(lx_req_t *r) {
    lx_sess_t *s = lx_sess_of(r);
    s->tunnel_paused = 0;
    if (s->c && !s->in_parse) lx_h1_parse(s->c);
}
