/* The request path: one function takes a parsed request to its handler.
 *
 *   vhost (Host: exact, wildcard, vhost_dir, default)
 *   -> path (percent-decoded, dot-segments removed)
 *   -> redirect (first match answers) -> rewrite (first match, internal)
 *   -> location (longest prefix of the final path)
 *   -> access (the location's rules, else the vhost's; first match decides)
 *   -> the site's handler chain (policy, static, listing; handlers/chain.c)
 *
 * Rules see the path the handlers will serve: access runs after rewrite, so
 * a rewrite cannot carry a request around a deny (nginx orders them so too). */
#include "core/request.h"

#include <stdio.h>

#include "core/trace.h"
#include "core/handler.h"
#include "http/path.h"
#include "log.h"
#include "worker.h"
#include "net/tlsctx.h"
#include "net/transport.h"
#include "llhttp.h"

/* The routing below is compiled into the request path and into --explain
 * (lx_route_explain): forced inline, the request path's copy has its trace
 * pointer as the constant NULL and no trace code left. */
#define LX_ROUTE_INLINE inline __attribute__((always_inline))

/* Splits an origin-form or absolute-form target into path and query, and
 * takes the host from an absolute form (RFC 9112 3.2.2). */
static LX_ROUTE_INLINE int split_target(lx_req_t *r) {
    const char *p = r->target.p, *end = p + r->target.len;
    /* An origin-form target (the common one) starts with '/': no scheme to
     * compare. */
    if (r->target.len > 7 && *p != '/' &&
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
static LX_ROUTE_INLINE int host_name(lx_str_t host, lx_str_t *name) {
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
static LX_ROUTE_INLINE lx_vhost_t *cached_vhost(const lx_req_t *r, lx_str_t raw, lx_str_t *name) {
    const lx_link_t *c = r->link;
    if (raw.len == 0 || c->vh_gen_id != r->gen->id || c->vh_host_len != raw.len ||
        memcmp(c->vh_host, raw.p, raw.len) != 0)
        return NULL;
    *name = (lx_str_t){raw.p, c->vh_name_len}; /* host_name's name starts the value */
    return c->vh;
}

/* Named vhosts first, then a directory under vhost_dir for a plain host
 * name, then the default vhost. raw is the Host value host came from. With
 * a trace (--explain) there is no connection: nothing is cached, and the
 * trace says how the vhost was chosen. */
static LX_ROUTE_INLINE lx_vhost_t *choose_vhost(lx_req_t *r, lx_str_t raw, lx_str_t host,
                                                lx_trace_t *t) {
    const lx_gen_t *g = r->gen;
    const lx_server_conf_t *s = &g->srv;
    lx_vhost_t *vh = t ? lx_gen_match_vhost_slot(g, host.p, host.len, &t->vhost_key)
                       : lx_gen_match_vhost(g, host.p, host.len);
    if (t)
        t->vhost_how =
            vh ? (t->vhost_key->name[0] == '.' ? LX_TRACE_VHOST_WILDCARD : LX_TRACE_VHOST_EXACT)
            : g->default_vhost ? LX_TRACE_VHOST_DEFAULT
                               : LX_TRACE_VHOST_NONE;
    if (vh != NULL || !s->vhost_dir) {
        vh = vh ? vh : g->default_vhost;
        if (!t && raw.len > 0 && raw.len <= sizeof(r->link->vh_host)) {
            lx_link_t *c = r->link;
            memcpy(c->vh_host, raw.p, raw.len);
            c->vh_host_len = (uint8_t)raw.len;
            c->vh_name_len = (uint8_t)host.len;
            c->vh_gen_id = g->id;
            c->vh = vh;
            c->vh_421 = 0;
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
        if (t) t->vhost_how = LX_TRACE_VHOST_DIR;
        return (lx_vhost_t *)&g->mass_vhost;
    }
    return g->default_vhost;
}

/* Whether a request over TLS names a vhost whose certificates or client
 * certificate policy are not those its connection's handshake was made
 * for (RFC 9110 15.5.20): a client must not reach a vhost it never
 * checked the certificate of, or whose client certificate policy it never
 * met, over a connection it opened for another name (a browser reuses
 * connections across names one certificate covers), nor over one opened
 * before a reload tightened that policy (net/tlsctx.c). */
static int misdirected(lx_req_t *r, int cached) {
    /* The verdict for a connection's cached Host holds as long as that
     * answer does (its handshake never changes): keep-alive requests do
     * not look the Host's certificates up again. */
    lx_link_t *c = r->link;
    if (cached && c->vh_421) return c->vh_421 - 1;
    unsigned len;
    const unsigned char *sid = lx_req_tls_sid(r, &len);
    int m = lx_tls_misdirected(r->gen, r->vhost, r->host.p, r->host.len, sid, len);
    if (cached) c->vh_421 = (uint8_t)(m + 1);
    return m;
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
 * The page is a path in the vhost: lx_request_finish chooses its location
 * (root, handlers) and applies that location's access rules as for a
 * request (enter_location), once the method is the page's. */
static int lx_request_error_page(lx_req_t *r, int status) {
    const char *page = error_page(r, status);
    if (page == NULL) return 0;
    r->error_status = status;
    r->decoded = (char *)page;
    r->decoded_len = strlen(page);
    return 1;
}

/* `from` rules ask for the client's address only when one is tested. */
static lx_addr_t match_addr(void *ud) {
    return lx_req_addr(ud);
}

static int enter_location(lx_req_t *r);

/* Runs the site's chain from r->handler on; a handler that waits is run
 * again from where it stopped (lx_request_resume). */
static void run_chain(lx_req_t *r) {
    const lx_site_t *site = r->site;
    r->wait.cb = NULL;
    while (r->handler < site->nchain) {
        int rc = site->chain[r->handler]->handle(r);
        if (rc == LX_DECLINED) {
            r->handler++;
            r->handler_data = NULL;
            continue;
        }
        if (rc == LX_REDIRECT) {
            /* try_files' last entry: the new path's location answers, from
             * the first handler of its chain (the policy included). */
            if (enter_location(r)) return;
            site = r->site;
            r->handler = 0;
            r->handler_data = NULL;
            continue;
        }
        if (rc == LX_ASYNC) {
            r->waiting = 1;
            return;
        }
        if (rc != LX_DONE)
            lx_request_finish(r, rc);
        else if (r->resp.state == LX_RESP_HEADERS || r->resp.state == LX_RESP_NONE)
            lx_resp_done(r); /* the handler queued all of its answer */
        return;
    }
    lx_request_finish(r, 404);
}

/* An error page is an internal redirect: the page's path chooses the
 * location again, the method becomes GET (a HEAD stays HEAD, as in nginx:
 * the client wants the page's head only, and a proxied page's backend is
 * asked for what its answer is read as), and the original status stays.
 * The page's location protects it as it protects a request (nginx runs its
 * access phase again too): its access rules here, its policy as the first
 * handler. A page they deny is not served: the client gets the built-in
 * page of the original status, as for any page that fails (static.c,
 * response.c). Only one page per request, so a denied or missing page
 * cannot loop. */
void lx_request_finish(lx_req_t *r, int status) {
    if (r->aborted) return;
    /* Before an error page moves the request to another location. */
    if (status == 405) lx_req_note_allow(r);
    /* A 1xx is interim: sent as the answer, the client would wait on for
     * the final response and take the next request's for it. */
    if (status < 200 || status > 599) status = 500;
    if (r->resp.state != LX_RESP_NONE) {
        /* A handler answered, then failed: nothing else can be said, and a
         * body cut short (a stream without its last chunk) leaves the
         * framing in doubt, so the connection ends with it. */
        if (r->resp.state == LX_RESP_STREAMING) r->keepalive = 0;
        lx_resp_done(r);
        return;
    }
    if (status >= 400 && lx_request_error_page(r, status)) {
        if (r->method != HTTP_HEAD) {
            r->method_sent = (uint8_t)r->method; /* for the log */
            r->method_changed = 1;
            r->method = HTTP_GET;
        }
        r->handler = 0;
        r->handler_data = NULL;
        if (enter_location(r) == 0) run_chain(r);
        return;
    }
    lx_resp_simple(r, status, NULL);
    lx_resp_done(r);
}

/* The captures of the rule that just matched, for the trace: the next
 * rule set's match reuses the match data. */
static __attribute__((noinline)) void trace_caps(lx_trace_t *t, const lx_match_ctx_t *m) {
    const PCRE2_SIZE *ov = m->ncap ? pcre2_get_ovector_pointer(m->md) : NULL;
    t->ncaps = 0;
    for (uint32_t k = 0; ov && k < m->ncap && k < LX_TRACE_CAPS; k++) {
        int set = ov[2 * k] != PCRE2_UNSET && ov[2 * k] <= ov[2 * k + 1] && ov[2 * k + 1] <= m->len;
        t->caps[k] =
            set ? (lx_str_t){m->path + ov[2 * k], ov[2 * k + 1] - ov[2 * k]} : (lx_str_t){NULL, 0};
        t->ncaps = k + 1;
    }
}

/* Where routing stops short of the chain, with the status it answers. */
static inline int route_stop(lx_trace_t *t, lx_trace_at_t at, int status) {
    if (t) {
        t->at = at;
        t->status = status;
    }
    return status;
}

/* redirect = { { regex, target, status } }: the first match answers. Returns
 * 0 when none matches, else the status, with *hdr the Location line (NULL
 * when the target did not fit: the status is 500 then). */
static LX_ROUTE_INLINE int redirect_match(lx_req_t *r, lx_match_ctx_t *m, lx_trace_t *t,
                                          const char **hdr) {
    int i = lx_ruleset_first(r->vhost->redirect, m);
    if (i < 0) return 0;
    const lx_rule_t *rule = &r->vhost->redirect->rules[i];
    if (t) {
        t->redirect = rule;
        trace_caps(t, m);
    }
    char loc[4096];
    int n = lx_rule_expand(rule->target, m, loc, sizeof(loc), LX_EXPAND_URL);
    if (n < 0) return 500;
    /* The client's query goes along, after the target's own (nginx does
     * the same). */
    size_t cap = (size_t)n + r->query.len + 16;
    char *line = lx_arena_alloc(r->arena, cap);
    if (line == NULL) return 500;
    snprintf(line, cap, "Location: %s%s%.*s\r\n", loc,
             r->query.len ? (strchr(loc, '?') ? "&" : "?") : "", (int)r->query.len, r->query.p);
    *hdr = line;
    return rule->status;
}

/* rewrite = { { regex, target } }: the first match changes the path; a query
 * in the target comes first, the client's own query follows it. */
static LX_ROUTE_INLINE int apply_rewrite(lx_req_t *r, lx_match_ctx_t *m, lx_trace_t *t) {
    int i = lx_ruleset_first(r->vhost->rewrite, m);
    if (i < 0) return 0;
    const lx_rule_t *rule = &r->vhost->rewrite->rules[i];
    if (t) {
        t->rewrite = rule;
        t->path_before = r->decoded;
        trace_caps(t, m);
    }
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

void lx_req_add_id_header(lx_req_t *r) {
    const lx_server_conf_t *srv = &r->gen->srv;
    size_t n = srv->request_id_header_len + 36, cap = n < 256 ? 256 : n;
    char *b = lx_arena_alloc(r->arena, cap);
    if (b == NULL) return; /* out of memory: no header, the log still has the id */
    memcpy(b, srv->request_id_header, srv->request_id_header_len);
    memcpy(b + srv->request_id_header_len, ": ", 2);
    memcpy(b + srv->request_id_header_len + 2, lx_req_id(r), 32);
    memcpy(b + n - 2, "\r\n", 2);
    r->extra = b;
    r->extra_len = n;
    r->extra_cap = cap;
}

/* The match context of r's path for its rules: the connection's address
 * and the loop's match data, or (explaining) those of t. */
static LX_ROUTE_INLINE lx_match_ctx_t route_ctx(lx_req_t *r, lx_trace_t *t) {
    lx_match_ctx_t m = {r->decoded, r->decoded_len, r->method, {0, 0}, NULL,
                        0,          match_addr,     r,         NULL};
    if (t) {
        /* No connection to ask: the address given (--from), through
         * real_ip as lx_req_addr takes it. */
        m.addr = lx_req_realip(r, t->addr);
        m.addr_of = NULL;
        m.md = t->md;
    } else {
        m.md = r->w->match_data;
        m.scratch = &r->w->rule_scratch;
    }
    return m;
}

/* The location of r->decoded (the vhost's own site when none matches) and
 * its access rules: for the request's path, and again for an internal
 * redirect (try_files, an error page), which a deny of the location it
 * lands in stops too.
 * Returns 0 when the chain of r->site is to run, else the deny's status. */
static LX_ROUTE_INLINE int route_location(lx_req_t *r, lx_trace_t *t, lx_match_ctx_t *m) {
    const lx_location_t *loc = lx_vhost_location(r->vhost, r->decoded, r->decoded_len);
    if (t) {
        t->location = loc;
        t->access = NULL;
    }
    r->site = loc ? &loc->site : &r->vhost->site;
    /* A vhost_dir host's root is its own directory (choose_vhost). */
    if (r->vhost != &r->gen->mass_vhost) {
        r->root = r->site->root;
        r->root_len = r->site->root_len;
    }
    if (r->site->access) {
        int i = lx_ruleset_first(r->site->access, m);
        if (t && i >= 0) t->access = &r->site->access->rules[i];
        if (i >= 0 && r->site->access->rules[i].kind == LX_RULE_DENY)
            return route_stop(t, LX_TRACE_AT_ACCESS, r->site->access->rules[i].status);
    }
    return route_stop(t, LX_TRACE_AT_CHAIN, 0);
}

void lx_req_note_allow(lx_req_t *r) {
    if (r->allow_set) return;
    r->allow_set = 1;
    const lx_site_t *site = r->site;
    if (site == NULL || r->decoded == NULL) return; /* not routed: no method */
    uint64_t m = site->methods;
    if (site->access) {
        /* Each method the chain serves, through the rules as a request of
         * that method would go: only a 405 pays for it. */
        lx_match_ctx_t ctx = route_ctx(r, NULL);
        for (int i = 0; i < 64; i++) {
            if (!(m & LX_METHOD(i))) continue;
            ctx.method = i;
            int k = lx_ruleset_first(site->access, &ctx);
            if (k >= 0 && site->access->rules[k].kind == LX_RULE_DENY) m &= ~LX_METHOD(i);
        }
    }
    r->allow = m;
}

/* The routing of a request, up to its handler chain: target, Host, vhost,
 * path, redirect, rewrite, location, access. Returns 0 when the chain of
 * r->site is to run, else the status to answer with (and *hdr the Location
 * line of a redirect). Compiled twice: into lx_request_run with t NULL,
 * where every trace branch folds away, and into lx_route_explain. */
static LX_ROUTE_INLINE int route(lx_req_t *r, lx_trace_t *t, const char **hdr) {
    lx_str_t host = {0};
    if (split_target(r) < 0) {
        r->keepalive = 0;
        return route_stop(t, LX_TRACE_AT_TARGET, 400);
    }
    lx_str_t raw = r->known[LX_H_HOST];
    r->vhost = t ? NULL : cached_vhost(r, raw, &host);
    int cached = r->vhost != NULL;
    if (r->vhost == NULL) {
        if (host_name(raw, &host) < 0) {
            r->keepalive = 0;
            return route_stop(t, LX_TRACE_AT_HOST, 400);
        }
        r->vhost = choose_vhost(r, raw, host, t);
    }
    r->host = host;
    if (r->vhost == NULL) return route_stop(t, LX_TRACE_AT_VHOST, host.len ? 404 : 400);
    r->site = &r->vhost->site;
    if (r->secure && !t && misdirected(r, cached)) return route_stop(t, LX_TRACE_AT_VHOST, 421);
    if (r->root == NULL) {
        r->root = r->site->root;
        r->root_len = r->site->root_len;
    }
    r->decoded = lx_arena_alloc(r->arena, r->path.len + 1);
    if (r->decoded == NULL) return route_stop(t, LX_TRACE_AT_ERROR, 500);
    if (lx_path_normalize(r->path.p, r->path.len, r->decoded, &r->decoded_len) < 0) {
        r->decoded = NULL; /* $uri: the path as sent */
        return route_stop(t, LX_TRACE_AT_PATH, 400);
    }

    lx_match_ctx_t m = route_ctx(r, t);
    if (r->vhost->redirect) {
        int status = redirect_match(r, &m, t, hdr);
        if (status) return route_stop(t, LX_TRACE_AT_REDIRECT, status);
    }
    if (r->vhost->rewrite) {
        int rc = apply_rewrite(r, &m, t);
        if (rc < 0) {
            if (!t)
                lx_log_error("%s:%d: rewrite of \"%s\" gave an unusable path", r->vhost->file,
                             r->vhost->line, r->decoded);
            return route_stop(t, LX_TRACE_AT_REWRITE, 500);
        }
        m.path = r->decoded;
        m.len = r->decoded_len;
    }
    return route_location(r, t, &m);
}

void lx_request_run(lx_req_t *r) {
    const char *hdr = NULL;
    int status = route(r, NULL, &hdr);
    if (status == 0) {
        r->handler = 0;
        run_chain(r);
    } else if (hdr) {
        lx_resp_simple(r, status, hdr);
        lx_resp_done(r);
    } else {
        lx_request_finish(r, status);
    }
}

/* An internal redirect (try_files, an error page): the location of the
 * new r->decoded, and its access rules (a deny is answered here; for an
 * error page with the built-in page of its status). Returns 0, or 1 when
 * the request was answered. */
static int enter_location(lx_req_t *r) {
    lx_match_ctx_t m = route_ctx(r, NULL);
    int status = route_location(r, NULL, &m);
    if (status == 0) return 0;
    lx_request_finish(r, status);
    return 1;
}

int lx_route_location_explain(lx_req_t *r, lx_trace_t *t) {
    lx_match_ctx_t m = route_ctx(r, t);
    return route_location(r, t, &m);
}

int lx_route_explain(lx_req_t *r, lx_trace_t *t) {
    const char *hdr = NULL;
    int status = route(r, t, &hdr);
    t->location_hdr = hdr;
    return status;
}

void lx_request_resume(lx_req_t *r) {
    if (r->aborted) return;
    r->waiting = 0;
    r->proto->enter(r, 0);
    run_chain(r);
    r->proto->leave(r, 0);
}

void lx_req_wake(lx_req_t *r, int status) {
    if (lx_req_release(r)) return;
    if (status < 0 && r->resp.state == LX_RESP_NONE) {
        /* Like lx_request_resume: an error page's handlers may end the
         * request, which must wait until they have returned. */
        r->waiting = 0;
        r->proto->enter(r, 0);
        lx_request_finish(r, 500);
        r->proto->leave(r, 0);
        return;
    }
    lx_request_resume(r);
}

void lx_req_enter(lx_req_t *r) {
    r->proto->enter(r, 1);
}

void lx_req_leave(lx_req_t *r) {
    r->proto->leave(r, 1);
}

void lx_req_hold(lx_req_t *r) {
    r->pending++;
}

int lx_req_release(lx_req_t *r) {
    r->pending--;
    if (r->link != NULL) return 0;
    r->proto->orphaned(r);
    return 1;
}

const char *lx_req_id(lx_req_t *r) {
    if (r->request_id == NULL) {
        static const char hex[] = "0123456789abcdef";
        char *id = lx_arena_alloc(r->arena, 32);
        if (id == NULL) return "00000000000000000000000000000000"; /* out of memory */
        for (int half = 0; half < 2; half++) {
            uint64_t v = lx_worker_random(r->w);
            for (int i = 0; i < 16; i++)
                id[half * 16 + i] = hex[(v >> (60 - 4 * i)) & 15];
        }
        r->request_id = id;
    }
    return r->request_id;
}
