/* Who the client is: the connection's peer, what a trusted PROXY protocol
 * header said instead (h1/proxy.c reads it before the first request), and
 * what a trusted proxy's header (real_ip) says per request. Every user of
 * the address (access rules, policies, logs, X-Forwarded-For) asks
 * lx_req_addr or lx_req_peer here. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "request.h"

int lx_link_addr(lx_link_t *c) {
    if (c->addr_state == 0) {
        /* libuv's accept does not ask for the address; most requests never
         * need it, so it is asked for once, here. */
        struct sockaddr_storage ss;
        int len = sizeof(ss);
        c->addr_state = 2;
        if (uv_tcp_getpeername(&c->tp.tcp, (struct sockaddr *)&ss, &len) == 0 &&
            (ss.ss_family == AF_INET || ss.ss_family == AF_INET6)) {
            lx_addr_from_sockaddr((struct sockaddr *)&ss, &c->addr);
            c->addr_state = 1;
        }
    }
    return c->addr_state == 1;
}

/* One address of a forwarding header ("192.0.2.1", "2001:db8::1"), with
 * the white space around it. Returns 0, or -1 when it is none. */
static int parse_fwd_addr(const char *p, size_t n, lx_addr_t *out) {
    while (n && (*p == ' ' || *p == '\t'))
        p++, n--;
    while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
        n--;
    char buf[48];
    unsigned char b[16];
    if (n == 0 || n >= sizeof(buf)) return -1;
    memcpy(buf, p, n);
    buf[n] = '\0';
    struct sockaddr_in6 sa = {.sin6_family = AF_INET6};
    if (inet_pton(AF_INET, buf, b) == 1) {
        struct sockaddr_in s4 = {.sin_family = AF_INET};
        memcpy(&s4.sin_addr, b, 4);
        lx_addr_from_sockaddr((struct sockaddr *)&s4, out);
        return 0;
    }
    if (inet_pton(AF_INET6, buf, &sa.sin6_addr) != 1) return -1;
    lx_addr_from_sockaddr((struct sockaddr *)&sa, out);
    return 0;
}

/* The client real_ip's header names, for a request from a trusted proxy
 * at `a`. X-Forwarded-For is walked from its right end, every line of it
 * (the last line first) and every element, skipping the trusted proxies:
 * the first address that is not one is the client (nginx's
 * real_ip_recursive on); when all are trusted, the leftmost. Any other
 * header holds one address (of its last line). An element that is no
 * address ends the walk with `a` kept: what lies to its left was written
 * by someone nobody vouches for. */
static lx_addr_t header_client(const lx_req_t *r, const lx_realip_t *ri, lx_addr_t a) {
    lx_addr_t cand = a;
    for (unsigned i = r->nheaders; i-- > 0;) {
        const lx_header_t *h = &r->headers[i];
        if (!lx_str_ieq(h->name, ri->header, ri->header_len)) continue;
        if (!ri->xff) {
            lx_addr_t x;
            return parse_fwd_addr(h->value.p, h->value.len, &x) == 0 ? x : a;
        }
        const char *p = h->value.p, *end = p + h->value.len;
        while (end > p) {
            const char *q = end;
            while (q > p && q[-1] != ',')
                q--;
            const char *e = q;
            size_t n = (size_t)(end - e);
            end = q > p ? q - 1 : p;
            /* Empty elements (", ,") are skipped, as nginx does. */
            size_t k = 0;
            while (k < n && (e[k] == ' ' || e[k] == '\t'))
                k++;
            if (k == n) continue;
            lx_addr_t x;
            if (parse_fwd_addr(e, n, &x) < 0) return a;
            if (!lx_cidrset_has(&ri->from, x)) return x;
            cand = x;
        }
    }
    return cand;
}

/* The real_ip that applies: the vhost's (its own, the server's, or none),
 * or before a vhost is chosen the server's. */
static const lx_realip_t *req_realip(const lx_req_t *r) {
    return r->vhost ? r->vhost->real_ip : r->gen ? r->gen->srv.real_ip : NULL;
}

/* What real_ip makes of a request whose head is parsed, from a client at
 * `a`: the address its header names when `a` is a proxy real_ip trusts,
 * else `a`. Inlined into req_addr; lx_req_realip is it for --explain. */
static inline __attribute__((always_inline)) lx_addr_t realip_client(const lx_req_t *r,
                                                                     lx_addr_t a) {
    const lx_realip_t *ri = req_realip(r);
    if (ri && ri->header && lx_cidrset_has(&ri->from, a)) a = header_client(r, ri, a);
    return a;
}

lx_addr_t lx_req_realip(const lx_req_t *r, lx_addr_t a) {
    return realip_client(r, a);
}

static int req_addr(lx_req_t *r, lx_addr_t *out) {
    if (r->client_state) {
        *out = r->client;
        return r->client_state == 1;
    }
    lx_link_t *c = r->link;
    if (c == NULL || !lx_link_addr(c)) {
        *out = (lx_addr_t){0, 0};
        return 0;
    }
    lx_addr_t a = c->addr;
    /* A request refused while its head was read has no header to believe. */
    if (r->head_done && !r->unparsed) a = realip_client(r, a);
    /* Kept once the vhost (whose real_ip counts) is known. */
    if (r->vhost) {
        r->client = a;
        r->client_state = 1;
    }
    *out = a;
    return 1;
}

lx_addr_t lx_req_addr(lx_req_t *r) {
    lx_addr_t a;
    req_addr(r, &a);
    return a;
}

const char *lx_addr_text(lx_addr_t a, char *buf) {
    unsigned char b[16];
    for (int i = 0; i < 8; i++) {
        b[i] = (unsigned char)(a.hi >> (56 - 8 * i));
        b[8 + i] = (unsigned char)(a.lo >> (56 - 8 * i));
    }
    static const unsigned char v4[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (memcmp(b, v4, 12) != 0) {
        inet_ntop(AF_INET6, b, buf, 48);
        return buf;
    }
    /* IPv4, the common case, by hand: inet_ntop formats it with sprintf,
     * a sixth of a proxied request's instructions (X-Forwarded-For) and
     * of a logged one's. */
    char *p = buf;
    for (int i = 12; i < 16; i++) {
        unsigned v = b[i];
        if (v >= 100) *p++ = (char)('0' + v / 100);
        if (v >= 10) *p++ = (char)('0' + v / 10 % 10);
        *p++ = (char)('0' + v % 10);
        *p++ = i < 15 ? '.' : '\0';
    }
    return buf;
}

const char *lx_req_peer(lx_req_t *r, char *buf) {
    lx_addr_t a;
    if (!req_addr(r, &a)) return strcpy(buf, "-");
    return lx_addr_text(a, buf);
}

const char *lx_req_conn_peer(lx_req_t *r, char *buf) {
    lx_link_t *c = r->link;
    if (c == NULL || !lx_link_addr(c)) return strcpy(buf, "-");
    return lx_addr_text(c->proxied ? c->peer : c->addr, buf);
}

const char *lx_req_tls(lx_req_t *r, int field) {
    lx_link_t *c = r->link;
    return c ? lx_tls_field(&c->tp, (lx_tls_field_t)field) : NULL;
}

const unsigned char *lx_req_tls_sid(lx_req_t *r, unsigned *len) {
    lx_link_t *c = r->link;
    *len = 0;
    return c ? lx_tls_sid_ctx(&c->tp, len) : NULL;
}
