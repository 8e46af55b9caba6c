/* The fields of a proxied exchange: the request head sent to the upstream
 * and the response fields relayed to the client (RFC 9110 7.6: hop-by-hop
 * fields and the names Connection lists stay behind, both ways), apart from
 * the handler that drives the connections (proxy.c). */
#include "proxy_fields.h"

#include <stdio.h>
#include <string.h>

#include "../buf.h"
#include "../log.h"
#include "../worker.h"

/* ---- the request head ----------------------------------------------- */

/* Fields that describe one connection, not the message (RFC 9110 7.6.1). */
static int hop_by_hop(lx_str_t n) {
    switch (n.len) {
    case 2: return lx_str_ieq(n, "te", 2);
    case 7: return lx_str_ieq(n, "trailer", 7) || lx_str_ieq(n, "upgrade", 7);
    case 10: return lx_str_ieq(n, "connection", 10) || lx_str_ieq(n, "keep-alive", 10);
    case 17: return lx_str_ieq(n, "transfer-encoding", 17);
    default: return n.len > 6 && lx_str_ieq((lx_str_t){n.p, 6}, "proxy-", 6);
    }
}

static int same_name(lx_str_t a, const char *b, size_t len) {
    if (a.len != len) return 0;
    for (size_t i = 0; i < len; i++)
        if ((a.p[i] | 0x20) != (b[i] | 0x20)) return 0;
    return 1;
}

/* The field names the Connection lines of a message list (RFC 9110 7.6.1:
 * hop-by-hop too), read once per message: of every Connection line, not
 * the last one only (h1.c keeps that one in r->known), and every element
 * of each line's list. "close", "keep-alive" and "upgrade" name fields
 * hop_by_hop() drops anyway and are not kept: the common value lists
 * nothing else, and then no field is compared with it. */
#define CONN_NAMES 8
typedef struct {
    lx_str_t name[CONN_NAMES];
    unsigned n;
    unsigned upgrade : 1; /**< "upgrade" is listed */
    unsigned many : 1;    /**< more than CONN_NAMES: every field is compared with the lines */
    const lx_header_t *h; /**< the message's fields, whose Connection lines `many` reads again */
    unsigned nh;
} conn_list_t;

/* The next element of a comma-separated list at *p (before end), or len
 * 0 when there is none left. */
static lx_str_t next_token(const char **p, const char *end) {
    const char *q = *p;
    while (q < end && (*q == ' ' || *q == '\t' || *q == ','))
        q++;
    const char *t = q;
    while (q < end && *q != ',' && *q != ' ' && *q != '\t')
        q++;
    *p = q;
    return (lx_str_t){t, (size_t)(q - t)};
}

static int is_connection(lx_str_t n) {
    return n.len == 10 && lx_str_ieq(n, "connection", 10);
}

static void conn_list(conn_list_t *cl, const lx_header_t *h, unsigned nh) {
    cl->n = 0;
    cl->upgrade = cl->many = 0;
    cl->h = h;
    cl->nh = nh;
    for (unsigned i = 0; i < nh; i++) {
        if (!is_connection(h[i].name)) continue;
        const char *p = h[i].value.p, *end = p + h[i].value.len;
        for (lx_str_t tok; p && (tok = next_token(&p, end)).len;) {
            if (lx_str_ieq(tok, "close", 5) || lx_str_ieq(tok, "keep-alive", 10)) continue;
            if (lx_str_ieq(tok, "upgrade", 7)) {
                cl->upgrade = 1;
                continue;
            }
            if (cl->n == CONN_NAMES) {
                cl->many = 1;
                continue;
            }
            cl->name[cl->n++] = tok;
        }
    }
}

static int conn_listed(const conn_list_t *cl, lx_str_t name) {
    if (cl->many) {
        for (unsigned i = 0; i < cl->nh; i++) {
            if (!is_connection(cl->h[i].name)) continue;
            const char *p = cl->h[i].value.p, *end = p + cl->h[i].value.len;
            for (lx_str_t tok; p && (tok = next_token(&p, end)).len;)
                if (same_name(name, tok.p, tok.len)) return 1;
        }
        return 0;
    }
    for (unsigned i = 0; i < cl->n; i++)
        if (same_name(name, cl->name[i].p, cl->name[i].len)) return 1;
    return 0;
}

static int named_in(const lx_site_t *s, lx_str_t name) {
    for (size_t i = 0; i < s->nproxy_headers; i++)
        if (same_name(name, s->proxy_headers[i].name.p, s->proxy_headers[i].name.len)) return 1;
    return 0;
}

static void put_field(lx_buf_t *b, lx_str_t name, lx_str_t value) {
    lx_buf_put(b, name.p, name.len);
    LX_BUF_PUTS(b, ": ");
    lx_buf_put(b, value.p, value.len);
    LX_BUF_PUTS(b, "\r\n");
}

/* The path luxd routed on, percent-encoded again where RFC 3986 wants it:
 * the backend sees what chose the location, never a raw form that a
 * different normalisation could read as another path. */
static void put_path(lx_buf_t *b, const char *p, size_t len) {
    /* RFC 3986 pchar and '/' as a 256-bit set: unreserved, sub-delims, ':'
     * and '@'. */
    static const uint64_t keep[4] = {0x2fffffd200000000ULL, 0x47fffffe87ffffffULL, 0, 0};
    static const char hex[] = "0123456789ABCDEF";
    size_t run = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)p[i];
        if ((keep[ch >> 6] >> (ch & 63)) & 1) continue;
        lx_buf_put(b, p + run, i - run);
        char e[3] = {'%', hex[ch >> 4], hex[ch & 15]};
        lx_buf_put(b, e, 3);
        run = i + 1;
    }
    lx_buf_put(b, p + run, len - run);
}

/* The values of every field named name.len bytes of lname (lower case)
 * that goes on, from the first at index `from`, each followed by ", ": the
 * lines of one list (RFC 9110 5.3), in order. */
static void put_list(lx_buf_t *b, const lx_req_t *r, const conn_list_t *conn, unsigned from,
                     const char *lname, size_t len) {
    for (unsigned i = from; i < r->nheaders; i++) {
        lx_str_t n = r->headers[i].name, v = r->headers[i].value;
        if (!lx_str_ieq(n, lname, len) || conn_listed(conn, n) || v.len == 0) continue;
        lx_buf_put(b, v.p, v.len);
        LX_BUF_PUTS(b, ", ");
    }
}

/* A request field whose name has a '_' stays behind (nginx's
 * underscores_in_headers off): CGI and WSGI backends map '_' and '-' to the
 * same variable, so X_Forwarded_For beside luxd's X-Forwarded-For, or a
 * Transfer_Encoding, could pass for the real one. Logged, for the operator
 * whose client does send such names (proxy_underscores = true lets them
 * through). */
static __attribute__((noinline)) void drop_underscored(lx_req_t *r, const lx_upstream_t *u,
                                                       lx_str_t n) {
    char peer[48];
    lx_req_peer(r, peer);
    int len = n.len > 64 ? 64 : (int)n.len; /* a token: printable, but maybe long */
    lx_log_info("upstream %s: request field \"%.*s%s\" from %s not sent: its name has a \"_\" "
                "(proxy_underscores = true sends it)",
                u->name, len, n.p, n.len > 64 ? "..." : "", peer);
}

int lx_proxy_head(lx_req_t *r, const lx_upstream_t *u, int with_body, lx_buf_t *head,
                  lx_proxy_head_t *out) {
    const lx_site_t *s = r->site;
    lx_buf_t b = *head; /* built here, given back at the end */
    b.len = 0;
    b.oom = 0;
    const char *m = llhttp_method_name((llhttp_method_t)r->method);
    lx_buf_put(&b, m, strlen(m));
    LX_BUF_PUTS(&b, " ");
    put_path(&b, r->decoded, r->decoded_len);
    if (r->query.len) {
        LX_BUF_PUTS(&b, "?");
        lx_buf_put(&b, r->query.p, r->query.len);
    }
    LX_BUF_PUTS(&b, " HTTP/1.1\r\nHost: ");
    lx_str_t host = r->known[LX_H_HOST];
    if (s->proxy_host)
        lx_buf_put(&b, s->proxy_host, strlen(s->proxy_host));
    else if (host.len)
        lx_buf_put(&b, host.p, host.len);
    else
        lx_buf_put(&b, u->name, strlen(u->name));
    LX_BUF_PUTS(&b, "\r\n");
    conn_list_t conn;
    conn_list(&conn, r->headers, r->nheaders);
    lx_str_t upgrade = {0};
    unsigned xff = UINT32_MAX, via = UINT32_MAX; /* the first of each, if any */
    for (unsigned i = 0; i < r->nheaders; i++)
        if (lx_str_ieq(r->headers[i].name, "upgrade", 7)) upgrade = r->headers[i].value;
    /* An Upgrade (WebSocket) goes on to the backend, the one hop-by-hop
     * field that does: a 101 then makes the two connections one tunnel.
     * Only for a request without a body, whose end is then the tunnel's
     * start, and only to WebSocket: another protocol (h2c) would carry
     * requests past luxd's rules and policies, each one unseen. */
    out->upgrade = lx_str_ieq(upgrade, "websocket", 9) && conn.upgrade && !with_body;
    /* request_id_header: the backend gets this request's id, the one the
     * client is answered with and the log shows, in place of a client's. */
    const char *idh = r->gen->srv.request_id_header;
    lx_str_t idname = {idh, r->gen->srv.request_id_header_len};
    for (unsigned i = 0; i < r->nheaders; i++) {
        lx_str_t n = r->headers[i].name, v = r->headers[i].value;
        if (hop_by_hop(n) || conn_listed(&conn, n)) continue;
        if (idh && same_name(n, idname.p, idname.len)) continue;
        if (!s->proxy_underscores && memchr(n.p, '_', n.len)) {
            drop_underscored(r, u, n);
            continue;
        }
        switch (n.len) {
        case 3:
            if (lx_str_ieq(n, "via", 3)) {
                if (via == UINT32_MAX) via = i; /* one list, ours appended */
                continue;
            }
            break;
        case 4:
            if (lx_str_ieq(n, "host", 4)) continue;
            break;
        case 6:
            /* Expect is this hop's business: luxd asks for it itself. */
            if (lx_str_ieq(n, "expect", 6)) continue;
            break;
        case 14:
            if (lx_str_ieq(n, "content-length", 14)) continue;
            break;
        case 15:
            if (lx_str_ieq(n, "x-forwarded-for", 15)) {
                if (xff == UINT32_MAX) xff = i; /* all its lines, ours appended */
                continue;
            }
            break;
        case 16:
            if (lx_str_ieq(n, "x-forwarded-host", 16)) continue;
            break;
        case 17:
            if (lx_str_ieq(n, "x-forwarded-proto", 17)) continue;
            break;
        }
        if (named_in(s, n)) continue;
        put_field(&b, n, v);
    }
    /* The fields luxd makes itself give way to proxy_headers of the same
     * name (set there, or removed with ""), as the client's do: the config
     * behind a TLS front end says X-Forwarded-Proto: https, and the backend
     * must not get http beside it. */
    if (!named_in(s, LX_STR("X-Forwarded-For"))) {
        char peer[48];
        lx_req_peer(r, peer);
        LX_BUF_PUTS(&b, "X-Forwarded-For: ");
        if (xff != UINT32_MAX) put_list(&b, r, &conn, xff, "x-forwarded-for", 15);
        lx_buf_put(&b, peer, strlen(peer));
        LX_BUF_PUTS(&b, "\r\n");
    }
    if (!named_in(s, LX_STR("X-Forwarded-Proto"))) {
        if (r->secure)
            LX_BUF_PUTS(&b, "X-Forwarded-Proto: https\r\n");
        else
            LX_BUF_PUTS(&b, "X-Forwarded-Proto: http\r\n");
    }
    if (host.len && !named_in(s, LX_STR("X-Forwarded-Host")))
        put_field(&b, LX_STR("X-Forwarded-Host"), host);
    if (!named_in(s, LX_STR("Via")) && (s->proxy_via || via != UINT32_MAX)) {
        size_t at = b.len;
        LX_BUF_PUTS(&b, "Via: ");
        if (via != UINT32_MAX) put_list(&b, r, &conn, via, "via", 3);
        if (s->proxy_via) {
            if (r->http_major == 2)
                LX_BUF_PUTS(&b, "2 luxd\r\n");
            else if (r->http_minor)
                LX_BUF_PUTS(&b, "1.1 luxd\r\n");
            else
                LX_BUF_PUTS(&b, "1.0 luxd\r\n");
        } else if (!b.oom && b.len > at + 5) {
            b.len -= 2; /* the last ", " */
            LX_BUF_PUTS(&b, "\r\n");
        } else if (!b.oom) {
            b.len = at; /* only empty values */
        }
    }
    for (size_t i = 0; i < s->nproxy_headers; i++)
        if (s->proxy_headers[i].value.len)
            put_field(&b, s->proxy_headers[i].name, s->proxy_headers[i].value);
    if (idh && !named_in(s, idname)) put_field(&b, idname, (lx_str_t){lx_req_id(r), 32});
    if (with_body) {
        if (r->chunked) {
            LX_BUF_PUTS(&b, "Transfer-Encoding: chunked\r\n");
            out->chunked = 1;
        } else {
            char cl[48];
            int n = snprintf(cl, sizeof(cl), "Content-Length: %llu\r\n",
                             (unsigned long long)r->content_length);
            lx_buf_put(&b, cl, (size_t)n);
        }
        if (r->known[LX_H_EXPECT].len) {
            LX_BUF_PUTS(&b, "Expect: 100-continue\r\n");
            out->expect = 1;
        }
    }
    if (out->upgrade) {
        put_field(&b, LX_STR("Upgrade"), upgrade);
        LX_BUF_PUTS(&b, "Connection: upgrade\r\n");
    } else if (u->keepalive == 0) {
        LX_BUF_PUTS(&b, "Connection: close\r\n");
    }
    LX_BUF_PUTS(&b, "\r\n");
    *head = b;
    return b.oom ? -ENOMEM : 0;
}

/* The response's fields that go on to the client: none of this hop's, and
 * not Date or Server, which the serializer writes for luxd, nor the
 * request_id_header it writes too, nor an Allow where luxd writes one. */
void lx_proxy_relay_fields(lx_req_t *r, const lx_h1resp_t *p) {
    conn_list_t conn;
    conn_list(&conn, p->headers, p->nheaders);
    const char *idh = r->gen->srv.request_id_header;
    size_t idlen = r->gen->srv.request_id_header_len;
    for (unsigned i = 0; i < p->nheaders; i++) {
        lx_str_t n = p->headers[i].name;
        if (hop_by_hop(n) || conn_listed(&conn, n)) continue;
        if (lx_str_ieq(n, "content-length", 14) || lx_str_ieq(n, "date", 4) ||
            lx_str_ieq(n, "server", 6) || (idh && same_name(n, idh, idlen)))
            continue;
        /* A 405 of luxd's own whose error page is proxied: luxd writes the
         * target's Allow; the page's backend lists the page's methods. */
        if (r->allow_set && lx_str_ieq(n, "allow", 5)) continue;
        lx_resp_field(r, n, p->headers[i].value);
    }
}
