/* The request body as a stream: a handler that wants the body reads it as
 * it arrives, and reading from the client pauses while it does not keep up;
 * one that does not drops it. */
#include "h1/conn.h"

int lx_body_read(lx_req_t *r, lx_body_cb cb) {
    lx_sess_t *s = lx_sess_of(r);
    if (r->body_state == LX_BODY_NONE || r->body_state == LX_BODY_DONE) {
        cb(r, NULL, 0, 0);
        return 0;
    }
    if (r->body_state != LX_BODY_UNREAD) return 500; /* read twice: a handler's bug */
    r->body_cb = cb;
    r->body_state = LX_BODY_READING;
    /* The client waits for our word before it sends the body: this is the
     * moment it is wanted (RFC 9110 10.1.1). */
    if (s->expect == LX_EXPECT_WAITING) {
        if (lx_sess_send_continue(s) < 0) return 500;
        lx_sess_output(s);
    }
    lx_sess_body_resume(s);
    return 0;
}

void lx_body_more(lx_req_t *r) {
    if (r->aborted || r->body_state != LX_BODY_READING) return;
    lx_sess_body_resume(lx_sess_of(r));
}

int lx_body_discard(lx_req_t *r) {
    lx_sess_t *s = lx_sess_of(r);
    if (r->body_state == LX_BODY_NONE || r->body_state == LX_BODY_DONE) return 0;
    /* A client waiting for 100 Continue has sent nothing yet: the answer's
     * status decides whether the body is wanted (response.c). */
    if (s->expect == LX_EXPECT_WAITING) return 0;
    r->body_state = LX_BODY_DISCARD;
    lx_sess_body_resume(s);
    /* The whole body may have been in the buffer already. */
    if (r->body_state == LX_BODY_DONE) return 0;
    r->waiting_body = 1; /* conn.c body_complete resumes the handler */
    return LX_ASYNC;
}
