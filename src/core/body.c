/* The request body as a stream: a handler that wants the body reads it as
 * it arrives, and reading from the client pauses while it does not keep up;
 * one that does not drops it. */
#include "request.h"

int lx_body_read(lx_req_t *r, lx_body_cb cb) {
    if (r->body_state == LX_BODY_NONE || r->body_state == LX_BODY_DONE) {
        cb(r, NULL, 0, 0);
        return 0;
    }
    if (r->body_state != LX_BODY_UNREAD) return 500; /* read twice: a handler's bug */
    r->body_cb = cb;
    r->body_state = LX_BODY_READING;
    if (r->aborted) return 0; /* the client is gone: nothing more will come */
    /* The client waits for our word before it sends the body: this is the
     * moment it is wanted (RFC 9110 10.1.1). */
    if (r->expect == LX_EXPECT_WAITING) {
        if (r->proto->cont(r) < 0) return 500;
        r->proto->output(r);
    }
    r->proto->body_resume(r);
    return 0;
}

void lx_body_more(lx_req_t *r) {
    if (r->aborted || r->body_state != LX_BODY_READING) return;
    r->proto->body_resume(r);
}

int lx_body_discard(lx_req_t *r) {
    if (r->body_state == LX_BODY_NONE || r->body_state == LX_BODY_DONE) return 0;
    /* A client waiting for 100 Continue has sent nothing yet: the answer's
     * status decides whether the body is wanted (response.c). */
    if (r->expect == LX_EXPECT_WAITING) return 0;
    r->body_state = LX_BODY_DISCARD;
    if (!r->aborted) r->proto->body_resume(r);
    /* The whole body may have been in the buffer already. */
    if (r->body_state == LX_BODY_DONE) return 0;
    r->waiting_body = 1; /* the protocol resumes the handler once it is all read */
    return LX_ASYNC;
}
