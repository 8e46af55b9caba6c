/* The request path: one function takes a parsed request to its handler.
 *
 *   vhost (Host: exact, wildcard, vhost_dir, default)
 *   -> path (percent-decoded, dot-segments removed)
 *   -> redirect (first match answers) -> rewrite (first match, internal)
 *   -> location (longest prefix of the final path)
 *   -> access (the location's rules, else the vhost's; first match decides)
 *   -> handlers (static, ...)
 *
 * Rules see the path the handlers will serve: access runs after rewrite, so
 * a rewrite cannot carry a request around a deny (nginx orders them so too). */
#include "request.h"

#include <stdio.h>

#include "conn.h"
#include "handlers/handler.h"
#include "http/path.h"
#include "log.h"
#include "policy/policy.h"

/* Tried in order until one answers. */
static const lx_handler_t *const handlers[] = {
    &lx_static_handler,
};

/* Splits an origin-form or absolute-form target into path and query, and
 * takes the host from an absolute form (RFC 9112 3.2.2). */
static int split_target(lx_req_t *r) {
    const char *p = r->target.p, *end = p + r->target.len;
    if (r->target.len > 7 &&
        (strncasecmp(p, "http://", 7) == 0 || strncasecmp(p, "https://", 8) == 0)) {
        p += p[4] == ':' ? 7 : 8;
        const char *host = p;
        while (p < end && *p != '/' && *p != '?')
            p++;
        /* RFC 9110 4.2.1: an http URI with an empty host is invalid and
         * MUST be rejected. Taken as "no Host", it would pick the default
         * vhost over the Host header a front proxy routed by. */
        if (p == host || *host == ':') return -EINVAL;
        r->known[LX_H_HOST] = (lx_str_t){host, (size_t)(p - host)};
        if (p == end || *p == '?') {
            r->path = LX_STR("/");
            if (p < end) r->query = (lx_str_t){p + 1, (size_t)(end - p - 1)};
            return 0;
        }
    }
    if (p == end || *p != '/') return -EINVAL;
    const char *q = memchr(p, '?', (size_t)(end - p));
    r->path = (lx_str_t){p, (size_t)((q ? q : end) - p)};
    if (q) r->query = (lx_str_t){q + 1, (size_t)(end - q - 1)};
    return 0;
}

/* RFC 3986 reg-name: unreserved, sub-delims and '%' of pct-encoded, as a
 * bit set (this runs for every byte of every Host): ALPHA DIGIT
 * "-._~!$&'()*+,;=%". */
static int is_reg_name_char(unsigned char ch) {
    static const uint64_t set[4] = {0x2bff7ff200000000ULL, 0x47fffffe87fffffeULL, 0, 0};
    return (set[ch >> 6] >> (ch & 63)) & 1;
}

/* The Host value without its port; refuses what is no host name. */
static int host_name(lx_str_t host, lx_str_t *name) {
    const char *p = host.p, *end = host.p + host.len;
    if (host.len == 0) {
        *name = (lx_str_t){"", 0}; /* no Host: the default vhost decides */
        return 0;
    }
    /* RFC 9112 3.2: Host = uri-host [ ":" port ], and a server MUST answer
     * an invalid one with 400. The port is digits; a userinfo ("a@b"), a
     * second colon or a character no host name has is refused, so no two
     * parts of the server can read a different host out of one value. */
    const char *colon;
    if (*p == '[') {
        const char *close = memchr(p, ']', host.len);
        if (close == NULL || close == p + 1) return -EINVAL;
        for (const char *s = p + 1; s < close; s++)
            if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f') ||
                  (*s >= 'A' && *s <= 'F') || *s == ':' || *s == '.'))
                return -EINVAL;
        colon = close + 1 < end ? close + 1 : NULL;
        if (colon && *colon != ':') return -EINVAL;
        end = close + 1;
    } else {
        colon = memchr(p, ':', host.len);
        if (colon) end = colon;
    }
    if (colon)
        for (const char *s = colon + 1; s < host.p + host.len; s++)
            if (*s < '0' || *s > '9') return -EINVAL;
    if (*p == '[') {
        *name = (lx_str_t){p, (size_t)(end - p)};
        return 0;
    }
    /* No empty labels: ".a", "a..b" name no host (a single trailing dot,
     * the root label, is fine and is dropped). */
    if (end > p && end[-1] == '.') end--;
    if (p < end && *p == '.') return -EINVAL;
    for (const char *s = p; s < end; s++) {
        if (!is_reg_name_char((unsigned char)*s) || (*s == '.' && s[1] == '.')) return -EINVAL;
    }
    *name = (lx_str_t){p, (size_t)(end - p)};
    return 0;
}

/* A plain DNS name: labels of [a-z0-9-_], none empty, none starting with a
 * dot-dot. Only such a name may become a directory under vhost_dir. */
static int plain_hostname(const char *h, size_t len) {
    if (len == 0 || len > 253 || h[0] == '.' || h[len - 1] == '.') return 0;
    for (size_t i = 0; i < len; i++) {
        char c = h[i];
        if (c == '.') {
            if (h[i + 1] == '.') return 0;
            continue;
        }
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_'))
            return 0;
    }
    return 1;
}

/* Keep-alive clients send the same Host each time: the connection keeps
 * the last Host value as sent (port included), the length of its name part
 * and the vhost it chose, so a repeat skips both the syntax check and the
 * hash. The cache holds no reference, so it is keyed by the generation's
 * number, which is never reused, not by its address, which is: a freed
 * generation's memory comes back as a later one, and c->vh would point into
 * freed memory. */
static lx_vhost_t *cached_vhost(const lx_req_t *r, lx_str_t raw, lx_str_t *name) {
    const lx_conn_t *c = r->conn;
    if (raw.len == 0 || c->vh_gen_id != r->gen->id || c->vh_host_len != raw.len ||
        memcmp(c->vh_host, raw.p, raw.len) != 0)
        return NULL;
    *name = (lx_str_t){raw.p, c->vh_name_len}; /* host_name's name starts the value */
    return c->vh;
}

/* Named vhosts first, then a directory under vhost_dir for a plain host
 * name, then the default vhost. raw is the Host value host came from. */
static lx_vhost_t *choose_vhost(lx_req_t *r, lx_str_t raw, lx_str_t host) {
    const lx_gen_t *g = r->gen;
    const lx_server_conf_t *s = &g->srv;
    lx_conn_t *c = r->conn;
    lx_vhost_t *vh = lx_gen_match_vhost(g, host.p, host.len);
    if (vh != NULL || !s->vhost_dir) {
        vh = vh ? vh : g->default_vhost;
        if (raw.len > 0 && raw.len <= sizeof(c->vh_host)) {
            memcpy(c->vh_host, raw.p, raw.len);
            c->vh_host_len = raw.len;
            c->vh_name_len = host.len;
            c->vh_gen_id = g->id;
            c->vh = vh;
        }
        return vh;
    }
    if (s->vhost_dir && plain_hostname(host.p, host.len)) {
        size_t n = s->vhost_dir_len + 1 + host.len;
        char *root = lx_arena_alloc(r->arena, n + 1);
        if (root == NULL) return NULL;
        memcpy(root, s->vhost_dir, s->vhost_dir_len);
        root[s->vhost_dir_len] = '/';
        for (size_t i = 0; i < host.len; i++) {
            char ch = host.p[i];
            root[s->vhost_dir_len + 1 + i] = (ch >= 'A' && ch <= 'Z') ? (char)(ch | 0x20) : ch;
        }
        root[n] = '\0';
        r->root = root;
        r->root_len = n;
        return (lx_vhost_t *)&g->mass_vhost;
    }
    return g->default_vhost;
}

/* The site's error page for status, or NULL. */
static const char *error_page(const lx_req_t *r, int status) {
    const lx_site_t *s = r->site;
    if (s == NULL || r->error_status) return NULL; /* one error page per request: no loops */
    for (size_t i = 0; i < s->nerror_pages; i++)
        if (s->error_status[i] == status) return s->error_page[i];
    return NULL;
}

/* Switches the request to serving its error page. Returns 0 if it has none.
 * The page is a path in the vhost, so its file is looked for under the root
 * of the location that path falls in (or the vhost's), not under the root of
 * the location the failed request was in: a vhost's /404.html is not in a
 * location's own root. The response keeps the failed request's site (its
 * headers), as the page answers for that request. */
int lx_request_error_page(lx_req_t *r, int status) {
    const char *page = error_page(r, status);
    if (page == NULL) return 0;
    r->error_status = status;
    r->decoded = (char *)page;
    r->decoded_len = strlen(page);
    if (r->vhost != &r->gen->mass_vhost) {
        const lx_location_t *loc = lx_vhost_location(r->vhost, r->decoded, r->decoded_len);
        const lx_site_t *home = loc ? &loc->site : &r->vhost->site;
        r->root = home->root;
        r->root_len = home->root_len;
    }
    return 1;
}

static void run_handlers(lx_req_t *r);

static void finish(lx_req_t *r, int status) {
    if (status && lx_request_error_page(r, status)) {
        run_handlers(r);
        return;
    }
    if (status) lx_resp_error(r, status);
    lx_resp_done(r);
}

static void run_handlers(lx_req_t *r) {
    r->in_handlers = 1;
    for (size_t i = 0; i < LX_ARRAY_SIZE(handlers); i++) {
        lx_rc_t rc = handlers[i]->handle(r);
        if (rc == LX_DONE && r->reroute) {
            /* lx_resp_error chose an error page: serve it from the top. */
            r->reroute = 0;
            i = (size_t)-1;
            continue;
        }
        switch (rc) {
        case LX_DECLINED: continue;
        case LX_DONE:
            r->in_handlers = 0;
            finish(r, 0);
            return;
        case LX_ASYNC: r->conn->waiting = 1; return;
        case LX_ERROR:
            r->in_handlers = 0;
            finish(r, 500);
            return;
        }
    }
    r->in_handlers = 0;
    finish(r, 404);
}

/* redirect = { { regex, target, status } }: the first match answers. */
static int apply_redirect(lx_req_t *r, lx_match_ctx_t *m) {
    int i = lx_ruleset_first(r->vhost->redirect, m);
    if (i < 0) return 0;
    const lx_rule_t *rule = &r->vhost->redirect->rules[i];
    char loc[4096];
    int n = lx_rule_expand(rule->target, m, loc, sizeof(loc), LX_EXPAND_URL);
    if (n < 0) {
        finish(r, 500);
        return 1;
    }
    /* The client's query goes along, after the target's own (nginx does
     * the same). */
    size_t cap = (size_t)n + r->query.len + 16;
    char *hdr = lx_arena_alloc(r->arena, cap);
    if (hdr == NULL) {
        finish(r, 500);
        return 1;
    }
    snprintf(hdr, cap, "Location: %s%s%.*s\r\n", loc,
             r->query.len ? (strchr(loc, '?') ? "&" : "?") : "", (int)r->query.len, r->query.p);
    lx_resp_error_with(r, rule->status, hdr);
    lx_resp_done(r);
    return 1;
}

/* rewrite = { { regex, target } }: the first match changes the path; a query
 * in the target comes first, the client's own query follows it. */
static int apply_rewrite(lx_req_t *r, lx_match_ctx_t *m) {
    int i = lx_ruleset_first(r->vhost->rewrite, m);
    if (i < 0) return 0;
    const lx_rule_t *rule = &r->vhost->rewrite->rules[i];
    /* The query starts at the target's own '?', never at one a capture
     * brings in (a decoded %3F is part of the path). */
    const char *tq = strchr(rule->target, '?');
    size_t tplen = tq ? (size_t)(tq - rule->target) : strlen(rule->target);
    char tpath[1024], buf[4096], qbuf[4096];
    if (tplen >= sizeof(tpath)) return -EINVAL;
    memcpy(tpath, rule->target, tplen);
    tpath[tplen] = '\0';
    int n = lx_rule_expand(tpath, m, buf, sizeof(buf), LX_EXPAND_RAW);
    if (n < 0 || buf[0] != '/') return -EINVAL;
    char *path = lx_arena_alloc(r->arena, (size_t)n + 1);
    if (path == NULL || lx_path_clean(buf, (size_t)n, path, &r->decoded_len) < 0) return -EINVAL;
    r->decoded = path;
    if (tq) {
        int q = lx_rule_expand(tq + 1, m, qbuf, sizeof(qbuf), LX_EXPAND_QUERY);
        if (q < 0) return -EINVAL;
        size_t cq = r->query.len;
        char *nq = lx_arena_alloc(r->arena, (size_t)q + cq + 2);
        if (nq == NULL) return -ENOMEM;
        memcpy(nq, qbuf, (size_t)q);
        size_t len = (size_t)q;
        if (cq) {
            if (q) nq[len++] = '&';
            memcpy(nq + len, r->query.p, cq);
            len += cq;
        }
        r->query = (lx_str_t){nq, len};
    }
    return 1;
}

void lx_request_run(lx_req_t *r) {
    lx_str_t host = {0};
    if (split_target(r) < 0) {
        r->keepalive = 0;
        finish(r, 400);
        return;
    }
    lx_str_t raw = r->known[LX_H_HOST];
    r->vhost = cached_vhost(r, raw, &host);
    if (r->vhost == NULL) {
        if (host_name(raw, &host) < 0) {
            r->keepalive = 0;
            finish(r, 400);
            return;
        }
        r->vhost = choose_vhost(r, raw, host);
    }
    r->host = host;
    if (r->vhost == NULL) {
        finish(r, host.len ? 404 : 400);
        return;
    }
    r->site = &r->vhost->site;
    if (r->root == NULL) {
        r->root = r->site->root;
        r->root_len = r->site->root_len;
    }
    r->decoded = lx_arena_alloc(r->arena, r->path.len + 1);
    if (r->decoded == NULL) {
        finish(r, 500);
        return;
    }
    if (lx_path_normalize(r->path.p, r->path.len, r->decoded, &r->decoded_len) < 0) {
        finish(r, 400);
        return;
    }

    lx_conn_t *c = r->conn;
    lx_match_ctx_t m = {r->decoded, r->decoded_len, r->method, c->addr, c->w->match_data, 0};
    if (r->vhost->redirect && apply_redirect(r, &m)) return;
    if (r->vhost->rewrite) {
        int rc = apply_rewrite(r, &m);
        if (rc < 0) {
            lx_log_error("%s:%d: rewrite of \"%s\" gave an unusable path", r->vhost->file,
                         r->vhost->line, r->decoded);
            finish(r, 500);
            return;
        }
        m.path = r->decoded;
        m.len = r->decoded_len;
    }
    const lx_location_t *loc = lx_vhost_location(r->vhost, r->decoded, r->decoded_len);
    if (loc) {
        r->site = &loc->site;
        if (r->vhost != &r->gen->mass_vhost) {
            r->root = r->site->root;
            r->root_len = r->site->root_len;
        }
    }
    if (r->site->access) {
        int i = lx_ruleset_first(r->site->access, &m);
        if (i >= 0 && r->site->access->rules[i].kind == LX_RULE_DENY) {
            finish(r, r->site->access->rules[i].status);
            return;
        }
    }
    if (r->site->policy) {
        int status = lx_policy_run(r, c->w->index, r->site->policy);
        if (status < 0) {
            lx_resp_done(r); /* the policy answered, or failed closed with a 500 */
            return;
        }
        if (status > 0) {
            finish(r, status);
            return;
        }
    }
    run_handlers(r);
}

void lx_request_resume(lx_req_t *r) {
    run_handlers(r);
}
