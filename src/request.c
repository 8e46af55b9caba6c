/* The request path: one function takes a parsed request to its handler. */
#include "request.h"

#include "conn.h"
#include "handlers/handler.h"
#include "http/path.h"
#include "log.h"

/* Tried in order until one answers. */
static const lx_handler_t *const handlers[] = {
    &lx_static_handler,
};

/* Splits an origin-form or absolute-form target into path and query, and
 * takes the host from an absolute form (RFC 9112 3.2.2). */
static int split_target(lx_req_t *r) {
    const char *p = r->target.p, *end = p + r->target.len;
    if (r->target.len > 7 && (strncasecmp(p, "http://", 7) == 0 || strncasecmp(p, "https://", 8) == 0)) {
        p += p[4] == ':' ? 7 : 8;
        const char *host = p;
        while (p < end && *p != '/' && *p != '?')
            p++;
        r->known[LX_H_HOST] = (lx_str_t){host, (size_t)(p - host)};
        if (p == end || *p == '?') {
            /* "http://host" or "http://host?q": the path is "/" */
            r->path = LX_STR("/");
            if (p < end)
                r->query = (lx_str_t){p + 1, (size_t)(end - p - 1)};
            return 0;
        }
    }
    if (p == end || *p != '/')
        return -EINVAL;
    const char *q = memchr(p, '?', (size_t)(end - p));
    r->path = (lx_str_t){p, (size_t)((q ? q : end) - p)};
    if (q)
        r->query = (lx_str_t){q + 1, (size_t)(end - q - 1)};
    return 0;
}

/* The Host value without its port; refuses what is no host name. */
static int host_name(lx_str_t host, lx_str_t *name) {
    const char *p = host.p, *end = host.p + host.len;
    if (p < end && *p == '[') {
        const char *close = memchr(p, ']', host.len);
        if (close == NULL)
            return -EINVAL;
        *name = (lx_str_t){p, (size_t)(close + 1 - p)};
        return 0;
    }
    const char *colon = memchr(p, ':', host.len);
    if (colon)
        end = colon;
    for (const char *s = p; s < end; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch <= 0x20 || ch == '/' || ch == '\\' || ch >= 0x7f)
            return -EINVAL;
    }
    *name = (lx_str_t){p, (size_t)(end - p)};
    return 0;
}

static void finish(lx_req_t *r, int status) {
    if (status)
        lx_resp_error(r, status);
    lx_resp_done(r);
}

static void run_handlers(lx_req_t *r) {
    for (size_t i = 0; i < LX_ARRAY_SIZE(handlers); i++) {
        switch (handlers[i]->handle(r)) {
        case LX_DECLINED:
            continue;
        case LX_DONE:
            finish(r, 0);
            return;
        case LX_ASYNC:
            r->conn->waiting = 1;
            return;
        case LX_ERROR:
            finish(r, 500);
            return;
        }
    }
    finish(r, 404);
}

void lx_request_run(lx_req_t *r) {
    lx_str_t host = {0};
    if (split_target(r) < 0 || host_name(r->known[LX_H_HOST], &host) < 0) {
        r->keepalive = 0;
        finish(r, 400);
        return;
    }
    r->vhost = lx_gen_find_vhost(r->gen, host.p, host.len);
    if (r->vhost == NULL) {
        finish(r, 404);
        return;
    }
    r->site = &r->vhost->site;
    r->decoded = lx_arena_alloc(r->arena, r->path.len + 1);
    if (r->decoded == NULL) {
        finish(r, 500);
        return;
    }
    if (lx_path_normalize(r->path.p, r->path.len, r->decoded, &r->decoded_len) < 0) {
        finish(r, 400);
        return;
    }
    run_handlers(r);
}

void lx_request_resume(lx_req_t *r) {
    run_handlers(r);
}
