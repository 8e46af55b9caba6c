/* The PROXY protocol header a proxy_protocol listener's connections begin
 * with (the parser is http/proxyproto.c). */
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "h1/conn.h"
#include "http/proxyproto.h"
#include "log.h"

/* The header a proxy_protocol listener's connections begin with, at the
 * start of the read buffer. Returns 1 when it is taken (what follows it is
 * the client's first request), 0 when more bytes are needed, -1 when the
 * connection is to be closed: no header, or a malformed one (nothing HTTP
 * can be said to a client that does not speak it; nginx closes too). Its
 * address replaces the peer's only when the peer is one real_ip trusts:
 * anyone can send the header, and a forged one must change nothing. */
int lx_conn_proxy_header(lx_conn_t *c, lx_sess_t *s) {
    lx_proxy_hdr_t h;
    const char *why = "";
    ssize_t n = lx_proxy_parse(s->rbuf + s->rpos, s->rlen - s->rpos, &h, &why);
    if (n == 0 && s->rlen < s->rcap) return 0;
    char peer[48];
    int known = lx_link_addr(&c->link);
    if (n <= 0) {
        lx_log_info("PROXY protocol: %s from %s; connection closed", why,
                    known ? lx_addr_text(c->link.addr, peer) : "-");
        return -1;
    }
    s->rpos += (size_t)n;
    c->proxy_wait = 0;
    if (h.family == 0) return 1; /* LOCAL, UNKNOWN, AF_UNIX: the peer stands */
    const lx_realip_t *ri = s->w->gen->srv.real_ip;
    if (!known || ri == NULL || !lx_cidrset_has(&ri->from, c->link.addr)) {
        lx_log_debug("PROXY protocol: header from %s, which real_ip does not trust: ignored",
                     known ? lx_addr_text(c->link.addr, peer) : "-");
        return 1;
    }
    c->link.peer = c->link.addr;
    if (h.family == AF_INET) {
        struct sockaddr_in s4 = {.sin_family = AF_INET};
        memcpy(&s4.sin_addr, h.src, 4);
        lx_addr_from_sockaddr((struct sockaddr *)&s4, &c->link.addr);
    } else {
        struct sockaddr_in6 s6 = {.sin6_family = AF_INET6};
        memcpy(&s6.sin6_addr, h.src, 16);
        lx_addr_from_sockaddr((struct sockaddr *)&s6, &c->link.addr);
    }
    c->link.proxied = 1;
    return 1;
}
