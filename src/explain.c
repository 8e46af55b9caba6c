/* luxd -t -c FILE --explain 'GET http://example.com/old/x': what the config
 * would do with one request, each step with the file:line that decides it.
 *
 * The request is parsed by the server's own parser (llhttp with h1.c's
 * callbacks, on a session of explain's own), so the head's checks are the
 * server's: max_header_bytes, the header count, Host, Transfer-Encoding,
 * CONNECT, Content-Length over max_body_bytes, Expect. A body is not read
 * (it changes nothing routing decides). The request is routed by
 * request.c's own routing (lx_route_explain: the function the request path
 * runs, with a trace), and the handler chain is the one handlers/chain.c
 * built for the site. What runs after routing is told, not run: a policy is
 * Lua that may have effects (luxd.shared, its own state), so explain says
 * where it is and that it would run; the static handler's steps are
 * followed with the open the file cache uses (lx_file_open, with the
 * site's follow_symlinks), in the order static.c tries them; no upstream is
 * contacted. */
#include "explain.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fields.h"
#include "h1/conn.h"
#include "h1/h1.h"
#include "handlers/handler.h"
#include "io/filecache.h"
#include "llhttp.h"

static void put_str(FILE *out, const char *p, size_t len) {
    fputc('"', out);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c < 0x20 || c == 0x7f || c == '"' || c == '\\')
            fprintf(out, "\\x%02x", c);
        else
            fputc(c, out);
    }
    fputc('"', out);
}

/* An address as text (IPv4 without its ::ffff: prefix), in buf of 48. */
static const char *addr_str(lx_addr_t a, char *buf) {
    unsigned char b[16];
    for (int i = 0; i < 8; i++) {
        b[i] = (unsigned char)(a.hi >> (56 - 8 * i));
        b[8 + i] = (unsigned char)(a.lo >> (56 - 8 * i));
    }
    static const unsigned char v4[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (memcmp(b, v4, 12) == 0)
        inet_ntop(AF_INET, b + 12, buf, 48);
    else
        inet_ntop(AF_INET6, b, buf, 48);
    return buf;
}

static void put_caps(FILE *out, const lx_trace_t *t) {
    if (t->ncaps == 0) return;
    fprintf(out, "  captures:");
    for (uint32_t k = 0; k < t->ncaps; k++) {
        fprintf(out, " $%u=", k);
        if (t->caps[k].p)
            put_str(out, t->caps[k].p, t->caps[k].len);
        else
            fprintf(out, "(unset)");
    }
    fprintf(out, "\n");
}

/* The settings' owner: the location, or the vhost. */
static void put_site_owner(FILE *out, const lx_req_t *r, const lx_trace_t *t) {
    if (t->location)
        fprintf(out, "location \"%s\" at %s:%d", t->location->prefix, t->location->file,
                t->location->line);
    else if (r->vhost == &r->gen->mass_vhost)
        fprintf(out, "vhost_dir (%s:%d)", r->gen->srv.file, r->gen->srv.line);
    else
        fprintf(out, "vhost \"%s\" at %s:%d", r->vhost->name, r->vhost->file, r->vhost->line);
}

static void put_upstream(FILE *out, const char *how, const lx_upstream_t *u) {
    fprintf(out, "upstream: \"%s\" at %s:%d (%s)\n", u->name, u->file, u->line, how);
    for (size_t i = 0; i < u->nservers; i++) {
        const lx_upstream_server_t *s = &u->servers[i];
        fprintf(out, "  server %s weight %u at %s:%d\n", s->addr_text, s->weight, s->file, s->line);
    }
}

/* One file under the root: what lx_file_open says about it. Returns 0 for
 * a regular file, 1 for a directory, or a negative errno. */
static int probe(const lx_req_t *r, const char *path, size_t len, char *full, size_t cap,
                 struct stat *st) {
    if (r->root_len + len + 1 > cap) return -ENAMETOOLONG;
    memcpy(full, r->root, r->root_len);
    memcpy(full + r->root_len, path, len);
    full[r->root_len + len] = '\0';
    int fd = lx_file_open(full, r->root_len, r->site->follow_symlinks, st);
    if (fd < 0) return fd;
    close(fd);
    return S_ISDIR(st->st_mode) ? 1 : 0;
}

static const char *why(int err) {
    return err == -ENOENT ? "does not exist" : strerror(-err);
}

/* A directory's index files, then the directory itself (static.c
 * static_serve for a path ending in '/'), told. */
static int explain_dir(FILE *out, lx_req_t *r, const char *path, size_t len, int fallback) {
    const lx_site_t *s = r->site;
    char full[8192];
    struct stat st;
    for (size_t i = 0; i < s->nindex; i++) {
        char ipath[4096];
        int n = snprintf(ipath, sizeof(ipath), "%s%s", path, s->index[i]);
        if (n < 0 || (size_t)n >= sizeof(ipath)) break;
        int rc = probe(r, ipath, (size_t)n, full, sizeof(full), &st);
        fprintf(out, "index: %s (index \"%s\") ", full, s->index[i]);
        if (rc == 0) {
            fprintf(out, "exists, %lld bytes -> 200\n", (long long)st.st_size);
            return 200;
        }
        fprintf(out, "%s\n", rc == 1 ? "is a directory" : why(rc));
    }
    if (s->nindex == 0) fprintf(out, "index: none configured\n");
    int rc = probe(r, path, len, full, sizeof(full), &st);
    int res = rc < 0 ? lx_static_status(rc) : rc == 1 ? 403 : 404;
    if (rc == 1 && s->dir_listing) {
        fprintf(out, "directory: %s has no index file -> the listing\n", full);
        r->dir_unindexed = 1; /* as static.c marks it */
        /* ... and the listing lists this directory ("/dir/" of a try_files
         * "$uri/" entry), as static_serve sets it. */
        r->decoded = (char *)path;
        r->decoded_len = len;
        return LX_DECLINED;
    }
    fprintf(out, "directory: %s %s -> ", full,
            rc == 1   ? "has no index file"
            : rc == 0 ? "is a file, not a directory"
                      : why(rc));
    if (fallback && res == 404) {
        fprintf(out, "the fallback\n");
        return LX_DECLINED;
    }
    fprintf(out, "%d\n", res);
    return res;
}

/* try_files (static.c try_files), told: each entry opened as the file
 * cache opens it; the first that is there answers. Returns the status, or
 * LX_REDIRECT with r->decoded (and r->query) set to where the last entry
 * sends the request. */
static int explain_try_files(FILE *out, lx_req_t *r) {
    const lx_site_t *s = r->site;
    char full[8192];
    struct stat st;
    size_t last = s->ntry_files - 1;
    fprintf(out, "try_files:");
    for (size_t i = 0; i < s->ntry_files; i++)
        fprintf(out, " \"%s\"", s->try_files[i]);
    fprintf(out, "\n");
    for (size_t i = 0; r->root != NULL && i < last; i++) {
        const char *e = s->try_files[i];
        size_t elen = strlen(e), xlen, len;
        int want_dir = e[elen - 1] == '/';
        char *x = lx_static_try_expand(r, e, elen, &xlen);
        char *path = x ? lx_static_try_clean(r, x, xlen, &len) : NULL;
        if (path == NULL) {
            fprintf(out, "  \"%s\": names no path below the root -> next\n", e);
            continue;
        }
        if (!want_dir && path[len - 1] == '/') {
            fprintf(out, "  \"%s\" is \"%s\", a directory's path: no file -> next\n", e, path);
            continue;
        }
        int rc = probe(r, path, len, full, sizeof(full), &st);
        fprintf(out, "  \"%s\" is %s: ", e, full);
        if (rc < 0) {
            int res = lx_static_status(rc);
            fprintf(out, "%s -> ", why(rc));
            if (res == 404) {
                fprintf(out, "next\n");
                continue;
            }
            fprintf(out, "%d\n", res);
            return res;
        }
        if ((rc == 1) != want_dir) {
            fprintf(out, "%s -> next\n",
                    rc == 1 ? "a directory, not a file" : "a file, not a directory");
            continue;
        }
        if (want_dir) {
            fprintf(out, "a directory\n");
            /* static_serve answers the method before the index, as here. */
            if (r->method != HTTP_GET && r->method != HTTP_HEAD) {
                fprintf(out, "static: %s is not GET or HEAD -> 405\n",
                        llhttp_method_name(r->method));
                return 405;
            }
            return explain_dir(out, r, path, len, 0);
        }
        if (r->method != HTTP_GET && r->method != HTTP_HEAD) {
            fprintf(out, "exists, but %s is not GET or HEAD -> 405\n",
                    llhttp_method_name(r->method));
            return 405;
        }
        fprintf(out, "exists, %lld bytes -> 200\n", (long long)st.st_size);
        return 200;
    }
    if (s->try_status) {
        fprintf(out, "  none is there -> \"%s\": %d\n", s->try_files[last], s->try_status);
        return s->try_status;
    }
    const char *e = s->try_files[last], *q = strchr(e, '?');
    size_t plen, len;
    char *x = lx_static_try_expand(r, e, q ? (size_t)(q - e) : strlen(e), &plen);
    char *path = x ? lx_static_try_clean(r, x, plen, &len) : NULL;
    if (path == NULL) {
        fprintf(out, "  none is there -> \"%s\" gives no usable path -> 500\n", e);
        return 500;
    }
    if (q) {
        size_t qlen;
        char *qx = lx_static_try_expand(r, q + 1, strlen(q + 1), &qlen);
        if (qx) r->query = (lx_str_t){qx, qlen};
    }
    r->decoded = path;
    r->decoded_len = len;
    fprintf(out,
            "  none is there -> internal redirect to \"%s\"%s%.*s (the location is chosen again)\n",
            path, r->query.len ? " query " : "", (int)r->query.len, r->query.p);
    return LX_REDIRECT;
}

/* The static handler's steps (static.c static_serve), told. Returns the
 * status it answers, or LX_DECLINED when the next handler would run. */
static int explain_static(FILE *out, lx_req_t *r) {
    const lx_site_t *s = r->site;
    char full[8192];
    struct stat st;
    int fallback = s->fallback != NULL;
    fprintf(out, "static: root %s (", r->root ? r->root : "(none)");
    if (r->vhost == &r->gen->mass_vhost)
        fprintf(out, "vhost_dir %s plus the host name", r->gen->srv.vhost_dir);
    else
        put_site_owner(out, r, (const lx_trace_t *)r->handler_data);
    fprintf(out, ")\n");
    if (s->ntry_files && !(fallback && r->method != HTTP_GET && r->method != HTTP_HEAD))
        return explain_try_files(out, r);
    if (r->root == NULL) return LX_DECLINED;
    if (r->method != HTTP_GET && r->method != HTTP_HEAD) {
        fprintf(out, "static: %s is not GET or HEAD -> %s\n", llhttp_method_name(r->method),
                fallback ? "the fallback" : "405");
        return fallback ? LX_DECLINED : 405;
    }
    const char *path = r->decoded;
    size_t len = r->decoded_len;
    if (path[len - 1] == '/') return explain_dir(out, r, path, len, fallback);
    int rc = probe(r, path, len, full, sizeof(full), &st);
    if (rc == 1) {
        fprintf(out, "file: %s is a directory -> 301 to \"%s/\"\n", full, path);
        return 301;
    }
    if (rc < 0) {
        int res = lx_static_status(rc);
        fprintf(out, "file: %s %s -> %s\n", full, why(rc),
                fallback && res == 404 ? "the fallback"
                : res == 404           ? "404"
                : res == 403           ? "403"
                                       : "500");
        return fallback && res == 404 ? LX_DECLINED : res;
    }
    fprintf(out, "file: %s exists, %lld bytes -> 200\n", full, (long long)st.st_size);
    if (s->gzip_static) {
        char gz[4096];
        int n = snprintf(gz, sizeof(gz), "%s.gz", path);
        struct stat gst;
        if (n > 0 && (size_t)n < sizeof(gz)) {
            int g = probe(r, gz, (size_t)n, full, sizeof(full), &gst);
            fprintf(out, "gzip_static: %s %s\n", full,
                    g == 0 ? "exists: sent to clients that accept gzip" : "is not there");
        }
    }
    return 200;
}

static int is_url(const char *w) {
    return w[0] == '/' || strncasecmp(w, "http://", 7) == 0 || strncasecmp(w, "https://", 8) == 0;
}

/* Splits "[METHOD] URL [HTTP/1.x]" into a request line in buf. Without a
 * version, a client's defaults: an absolute URL gets HTTP/1.1 and, unless
 * -H gave one, its host as Host (as curl sends it); a path alone gets
 * HTTP/1.0, where no Host is needed and the default vhost answers. */
static int split_line(const char *line, int have_host, char *buf, size_t cap) {
    const char *w[4];
    size_t wl[4];
    int n = 0;
    for (const char *p = line; *p;) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '\0') break;
        if (n == 4) return -1;
        w[n] = p;
        while (*p && *p != ' ' && *p != '\t')
            p++;
        wl[n] = (size_t)(p - w[n]);
        n++;
    }
    if (n == 0 || n > 3) return -1;
    int off = is_url(w[0]) ? 1 : 0; /* no method: GET */
    if (n - (1 - off) < 1 || n - (1 - off) > 2 || !is_url(w[1 - off])) return -1;
    const char *url = w[1 - off];
    size_t ul = wl[1 - off];
    int absolute = url[0] != '/', version = n - (1 - off) == 2;
    int r = snprintf(buf, cap, "%.*s %.*s %.*s\r\n", off ? 3 : (int)wl[0], off ? "GET" : w[0],
                     (int)ul, url, version ? (int)wl[2 - off] : 8,
                     version                 ? w[2 - off]
                     : absolute || have_host ? "HTTP/1.1"
                                             : "HTTP/1.0");
    if (r < 0 || (size_t)r >= cap) return -1;
    if (absolute && !version && !have_host) {
        const char *h = url + (url[4] == ':' ? 7 : 8), *e = h;
        while (e < url + ul && *e != '/' && *e != '?')
            e++;
        int k = snprintf(buf + r, cap - (size_t)r, "Host: %.*s\r\n", (int)(e - h), h);
        if (k < 0 || (size_t)k >= cap - (size_t)r) return -1;
        r += k;
    }
    return r;
}

int lx_explain(lx_gen_t *g, const char *request, const char *const *headers, size_t nheaders,
               const char *from, FILE *out) {
    static char buf[65536];
    int have_host = 0;
    for (size_t i = 0; i < nheaders; i++) {
        const char *c = strchr(headers[i], ':');
        if (c && lx_known_header(headers[i], (size_t)(c - headers[i])) == LX_H_HOST) have_host = 1;
    }
    int n = split_line(request, have_host, buf, sizeof(buf));
    if (n < 0) {
        fprintf(stderr,
                "luxd: --explain: cannot parse the request \"%s\": want [METHOD] URL [HTTP/1.x], "
                "e.g. 'GET http://example.com/path'\n",
                request);
        return 2;
    }
    size_t len = (size_t)n;
    for (size_t i = 0; i < nheaders; i++) {
        if (strpbrk(headers[i], "\r\n") || strchr(headers[i], ':') == NULL) {
            fprintf(stderr, "luxd: -H \"%s\": want one \"Name: value\" line\n", headers[i]);
            return 2;
        }
        n = snprintf(buf + len, sizeof(buf) - len, "%s\r\n", headers[i]);
        if (n < 0 || (size_t)n >= sizeof(buf) - len) {
            fprintf(stderr, "luxd: --explain: the headers are too long\n");
            return 2;
        }
        len += (size_t)n;
    }
    if (len + 3 > sizeof(buf)) return 2;
    memcpy(buf + len, "\r\n", 3);
    len += 2;

    /* Parsed as the server parses it: llhttp with h1.c's callbacks, which
     * want a session, its loop (for the generation's limits) and its
     * connection; none of them does any I/O. */
    lx_worker_t *w = calloc(1, sizeof(*w));
    lx_conn_t *c = calloc(1, sizeof(*c));
    lx_sess_t *s = calloc(1, sizeof(*s));
    if (w == NULL || c == NULL || s == NULL) {
        free(w), free(c), free(s);
        return 1;
    }
    w->gen = g;
    s->w = w;
    s->c = c;
    s->rbuf = buf;
    s->rcap = sizeof(buf);
    s->rlen = len;
    s->in_url = 1;
    lx_arena_init(&s->arena, 16384);
    s->req.gen = g;
    s->req.arena = &s->arena;
    lx_h1_parser_init(&s->parser, &lx_h1_settings); /* as conn.c */
    s->parser.data = s;
    llhttp_t *p = &s->parser;
    llhttp_errno_t e = llhttp_execute(p, buf, len);
    lx_req_t r = s->req;
    int status = 0; /* the head's refusal */
    if (e != HPE_PAUSED || !s->req.head_done) {
        status = s->err_status;
        if (status == 414 || status == 431 || (status == 0 && !s->req.head_done)) {
            if (status == 0) {
                /* A method llhttp does not know: conn.c asks the same. */
                int line = e == HPE_INVALID_METHOD || e == HPE_INVALID_CONSTANT
                               ? lx_h1_line_status(buf, len, g->srv.max_header_bytes)
                               : 0;
                fprintf(stderr, "luxd: --explain: cannot parse the request \"%s\": %s\n", request,
                        e == HPE_OK        ? "incomplete"
                        : s->req.hosts > 1 ? "two Host headers (the server answers 400)"
                        : line == 501      ? "a method luxd does not implement (the server "
                                             "answers 501)"
                        : line == 505      ? "not HTTP/1.x (the server answers 505)"
                                           : llhttp_get_error_reason(p));
                goto fail;
            }
        } else if (status == 505 || p->http_major != 1) {
            fprintf(stderr, "luxd: --explain: cannot parse the request \"%s\": not HTTP/1.x\n",
                    request);
            goto fail;
        } else if (status == 0) {
            status = 400;
        }
        /* What h1.c had set when it refused: method and version are set
         * by on_headers_complete before its later checks. */
        if (!s->req.head_done || r.unparsed) {
            r.method = (int)p->method;
            r.http_minor = p->http_minor > 1 ? 1 : p->http_minor; /* as on_headers_complete */
        }
    }

    lx_addr_t first, last;
    if (from == NULL) from = "127.0.0.1";
    if (strchr(from, '/') || lx_cidr_parse(from, &first, &last) < 0) {
        fprintf(stderr, "luxd: --from \"%s\": want an IPv4 or IPv6 address\n", from);
        goto fail;
    }

    r.keepalive = 1;
    lx_trace_t t;
    memset(&t, 0, sizeof(t));
    t.addr = first;
    t.md = pcre2_match_data_create(10, NULL); /* as each loop's: $0..$9 */
    if (t.md == NULL) {
        lx_arena_free(&s->arena);
        free(w), free(c), free(s);
        return 1;
    }

    lx_str_t host = r.known[LX_H_HOST];
    fprintf(out, "request: %s %.*s HTTP/1.%d, Host ", llhttp_method_name(p->method),
            (int)r.target.len, r.target.p, r.http_minor);
    if (host.p)
        put_str(out, host.p, host.len);
    else
        fprintf(out, "(none)");
    fprintf(out, ", from %s\n", from);
    if (status) {
        /* Refused by the parser's checks (h1.c), before any routing. */
        const lx_server_conf_t *sc = &g->srv;
        if (status == 414)
            fprintf(out, "head: the target is longer than max_header_bytes (%zu) at %s:%d",
                    (size_t)sc->max_header_bytes, sc->file, sc->line);
        else if (status == 431 && !s->req.head_done && r.nheaders == LX_MAX_HEADERS)
            fprintf(out, "head: more than %d header lines", LX_MAX_HEADERS);
        else if (status == 431)
            fprintf(out, "head: longer than max_header_bytes (%zu) at %s:%d",
                    (size_t)sc->max_header_bytes, sc->file, sc->line);
        else if (status == 413)
            fprintf(out, "head: Content-Length %llu is over max_body_bytes (%llu) at %s:%d",
                    (unsigned long long)p->content_length, (unsigned long long)sc->max_body_bytes,
                    sc->file, sc->line);
        else if (status == 405)
            fprintf(out, "head: CONNECT (luxd is no tunnel)");
        else if (status == 417)
            fprintf(out, "head: Expect other than 100-continue");
        else if (status == 501)
            fprintf(out, "head: a Transfer-Encoding other than chunked");
        else if (r.http_minor >= 1 && r.hosts == 0)
            fprintf(out, "host: an HTTP/1.1 request without Host");
        else
            fprintf(out, "head: a framing the server refuses (Transfer-Encoding, RFC 9112 6.1)");
        fprintf(out, " -> %d\nanswer: %d\n", status, status);
        pcre2_match_data_free(t.md);
        lx_arena_free(&s->arena);
        free(w), free(c), free(s);
        return 0;
    }
    if (r.chunked)
        fprintf(out, "body: chunked, not read (routing does not look at it)\n");
    else if (r.content_length)
        fprintf(out, "body: %llu bytes (Content-Length), not read (routing does not look at it)\n",
                (unsigned long long)r.content_length);

    status = lx_route_explain(&r, &t);
    int answer = status;
    /* How far routing went: the chain is past every other stop. */
    int reached = t.at == LX_TRACE_AT_CHAIN ? LX_TRACE_AT_ERROR : (int)t.at;

    if (host.p &&
        (r.known[LX_H_HOST].len != host.len || memcmp(r.known[LX_H_HOST].p, host.p, host.len) != 0))
        fprintf(out,
                "host: the URL's host \"%.*s\" is used, not the Host header (RFC 9112 3.2.2)\n",
                (int)r.known[LX_H_HOST].len, r.known[LX_H_HOST].p);
    /* The vhost, whenever one was chosen. */
    if (r.vhost) {
        const lx_vhost_t *vh = r.vhost;
        switch (t.vhost_how) {
        case LX_TRACE_VHOST_EXACT:
            fprintf(out, "vhost: \"%s\" at %s:%d (exact name \"%s\")\n", vh->name, vh->file,
                    vh->line, t.vhost_key->name);
            break;
        case LX_TRACE_VHOST_WILDCARD:
            fprintf(out, "vhost: \"%s\" at %s:%d (wildcard \"*%s\")\n", vh->name, vh->file,
                    vh->line, t.vhost_key->name);
            break;
        case LX_TRACE_VHOST_DIR:
            fprintf(out, "vhost: vhost_dir %s at %s:%d (no vhost is named \"%.*s\"): root %s\n",
                    g->srv.vhost_dir, g->srv.file, g->srv.line, (int)r.host.len, r.host.p, r.root);
            break;
        default:
            fprintf(out, "vhost: \"%s\" at %s:%d (default: ", vh->name, vh->file, vh->line);
            if (r.host.len)
                fprintf(out, "no vhost is named \"%.*s\")\n", (int)r.host.len, r.host.p);
            else
                fprintf(out, "the request names no host)\n");
            break;
        }
        /* real_ip, as the server applies it (lx_req_realip is lx_req_addr's
         * own step): the address `from` rules test. */
        const lx_realip_t *ri = vh->real_ip;
        lx_addr_t a = lx_req_realip(&r, first);
        if (ri && (a.hi != first.hi || a.lo != first.lo)) {
            char at[48];
            fprintf(out, "real_ip: %s is trusted (real_ip at %s:%d): the client is %s (%s)\n", from,
                    ri->file, ri->line, addr_str(a, at), ri->header);
        } else if (ri && ri->header && lx_cidrset_has(&ri->from, first)) {
            fprintf(out, "real_ip: %s is trusted (real_ip at %s:%d), %s names no other client\n",
                    from, ri->file, ri->line, ri->header);
        }
        const char *norm = t.path_before ? t.path_before : r.decoded;
        if (norm && (r.path.len != strlen(norm) || memcmp(r.path.p, norm, r.path.len)))
            fprintf(out, "path: \"%.*s\" is \"%s\" once decoded and normalised\n", (int)r.path.len,
                    r.path.p, norm);
    }

    switch (t.at) {
    case LX_TRACE_AT_TARGET:
        fprintf(out, "target: \"%.*s\" is neither a path nor an http(s) URL -> 400\n",
                (int)r.target.len, r.target.p);
        break;
    case LX_TRACE_AT_HOST:
        fprintf(out, "host: ");
        put_str(out, r.known[LX_H_HOST].p, r.known[LX_H_HOST].len);
        fprintf(out, " is no host name -> 400\n");
        break;
    case LX_TRACE_AT_VHOST:
        fprintf(out, "vhost: none (no vhost is named \"%.*s\" and none is the default) -> %d\n",
                (int)r.host.len, r.host.p, status);
        break;
    case LX_TRACE_AT_PATH:
        fprintf(out, "path: \"%.*s\" does not normalise (\"..\" above the root?) -> 400\n",
                (int)r.path.len, r.path.p);
        break;
    case LX_TRACE_AT_ERROR: fprintf(out, "error: out of memory -> 500\n"); break;
    default: break;
    }

    if (t.redirect) {
        fprintf(out, "redirect: rule at %s:%d: ", t.redirect->file, t.redirect->line);
        lx_rule_describe(t.redirect, out);
        fprintf(out, "\n");
        put_caps(out, &t);
        if (t.location_hdr)
            fprintf(out, "  -> %d %.*s\n", status, (int)strcspn(t.location_hdr, "\r"),
                    t.location_hdr);
        else
            fprintf(out, "  -> 500 (the target does not fit)\n");
    } else if (reached > LX_TRACE_AT_PATH && r.vhost->redirect) {
        fprintf(out, "redirect: none of %u matched\n", r.vhost->redirect->n);
    }
    if (t.rewrite) {
        fprintf(out, "rewrite: rule at %s:%d: ", t.rewrite->file, t.rewrite->line);
        lx_rule_describe(t.rewrite, out);
        fprintf(out, "\n");
        put_caps(out, &t);
        if (t.at == LX_TRACE_AT_REWRITE)
            fprintf(out, "  -> 500 (the result is no usable path)\n");
        else
            fprintf(out, "  \"%s\" -> \"%s\"%s%.*s\n", t.path_before, r.decoded,
                    r.query.len ? " query " : "", (int)r.query.len, r.query.p);
    } else if (reached > LX_TRACE_AT_REDIRECT && r.vhost->rewrite) {
        fprintf(out, "rewrite: none of %u matched\n", r.vhost->rewrite->n);
    }

    int redirects = 0;
again: /* a try_files redirect chooses the location again */
    if (t.at == LX_TRACE_AT_ACCESS || t.at == LX_TRACE_AT_CHAIN) {
        if (t.location)
            fprintf(out, "location: \"%s\" at %s:%d (longest prefix of \"%s\")\n",
                    t.location->prefix, t.location->file, t.location->line, r.decoded);
        else
            fprintf(out, "location: none matches \"%s\" (the vhost's own settings)\n", r.decoded);
        if (!r.site->access)
            fprintf(out, "access: no rules -> allowed\n");
        else if (t.access == NULL)
            fprintf(out, "access: none of %u rules matched -> allowed\n", r.site->access->n);
        else {
            fprintf(out, "access: rule at %s:%d: ", t.access->file, t.access->line);
            lx_rule_describe(t.access, out);
            if (t.access->kind == LX_RULE_DENY)
                fprintf(out, " -> denied, %d\n", status);
            else
                fprintf(out, " -> allowed\n");
        }
    }

    if (t.at == LX_TRACE_AT_CHAIN) {
        const lx_site_t *site = r.site;
        fprintf(out, "chain:");
        for (size_t i = 0; i < site->nchain; i++)
            fprintf(out, "%s %s", i ? "," : "", site->chain[i]->name);
        fprintf(out, "%s\n", site->nchain ? "" : " (none) -> 404");
        answer = 404;
        r.handler_data = &t; /* for explain_static's owner line */
        for (size_t i = 0; i < site->nchain; i++) {
            const lx_handler_t *h = site->chain[i];
            if (h == &lx_policy_handler) {
                fprintf(out,
                        "policy: policy at %s:%d would run (not run by --explain): it may "
                        "answer, change the request or hand it to an upstream; if it goes "
                        "on:\n",
                        site->policy_file ? site->policy_file : "?", site->policy_line);
                continue;
            }
            if (h == &lx_static_handler) {
                int rc = explain_static(out, &r);
                if (rc == LX_DECLINED) continue;
                if (rc == LX_REDIRECT) {
                    if (++redirects > LX_REDIRECTS_MAX) {
                        fprintf(out, "try_files: more than %d internal redirects -> 500\n",
                                LX_REDIRECTS_MAX);
                        answer = 500;
                        break;
                    }
                    answer = status = lx_route_location_explain(&r, &t);
                    goto again;
                }
                answer = rc;
                break;
            }
            if (h == &lx_listing_handler) {
                if (!lx_listing_takes(&r)) {
                    fprintf(out, "listing: no directory without an index file -> declined\n");
                    continue;
                }
                fprintf(out, "listing: the directory is listed -> 200\n");
                answer = 200;
                break;
            }
            if (h == &lx_proxy_handler) {
                const lx_upstream_t *u = site->proxy ? site->proxy : site->fallback;
                if (u) put_upstream(out, site->proxy ? "proxy" : "fallback", u);
                answer = 0;
                break;
            }
            if (h == &lx_status_handler) {
                /* handlers/status.c: the counters to GET and HEAD, 405 to
                 * any other method; no upstream is involved. */
                answer = r.method == HTTP_GET || r.method == HTTP_HEAD ? 200 : 405;
                fprintf(out, "status: the server's counters -> %d\n", answer);
                break;
            }
            fprintf(out, "%s: answers\n", h->name);
            answer = 0;
            break;
        }
    }
    if (answer == 0)
        fprintf(out, "answer: from the upstream\n");
    else
        fprintf(out, "answer: %d%s\n", answer,
                t.at == LX_TRACE_AT_CHAIN && r.site->policy ? " (unless the policy decides)" : "");
    pcre2_match_data_free(t.md);
    lx_arena_free(&s->arena);
    free(w), free(c), free(s);
    return 0;
fail:
    lx_arena_free(&s->arena);
    free(w), free(c), free(s);
    return 2;
}
