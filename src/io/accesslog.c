/* Access log lines, gathered in a per-loop buffer and written when it fills
 * or once a second: never a write(2) per request. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "accesslog.h"
#include "../log.h"
#include "../worker.h"
#include "llhttp.h"

void lx_access_log_flush(lx_worker_t *w) {
    size_t off = 0;
    while (off < w->alog_len) {
        ssize_t n = write(w->alog_fd, w->alog + off, w->alog_len - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            lx_log_error("access log: write failed: %s", strerror(errno));
            break;
        }
        off += (size_t)n;
    }
    w->alog_len = 0;
}

typedef struct {
    char *p, *end;
} sink_t;

static void put(sink_t *s, const char *p, size_t n) {
    if ((size_t)(s->end - s->p) < n) n = (size_t)(s->end - s->p);
    memcpy(s->p, p, n);
    s->p += n;
}

/* Copies client-supplied bytes; quotes, backslashes and control or 8-bit
 * bytes become \xHH so a line can never be forged or split. */
static void put_escaped(sink_t *s, const char *p, size_t n, int json) {
    static const char hex[] = "0123456789ABCDEF";
    for (size_t i = 0; i < n && s->p + 6 < s->end; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') {
            if (json) {
                memcpy(s->p, "\\u00", 4);
                s->p += 4;
            } else {
                *s->p++ = '\\';
                *s->p++ = 'x';
            }
            *s->p++ = hex[c >> 4];
            *s->p++ = hex[c & 15];
        } else {
            *s->p++ = (char)c;
        }
    }
}

static void put_field(sink_t *s, lx_str_t v, int json) {
    if (v.len == 0)
        put(s, "-", 1);
    else
        put_escaped(s, v.p, v.len, json);
}

static void put_request(sink_t *s, const lx_req_t *r, int json) {
    const char *m = llhttp_method_name((llhttp_method_t)r->method);
    put(s, m, strlen(m));
    put(s, " ", 1);
    put_escaped(s, r->target.p, r->target.len, json);
    put(s, r->http_minor ? " HTTP/1.1" : " HTTP/1.0", 9);
}

static void put_num(sink_t *s, uint64_t v) {
    char b[24];
    int n = snprintf(b, sizeof(b), "%" PRIu64, v);
    put(s, b, (size_t)n);
}

/* One variable of a template ("$status"); returns the bytes consumed. */
static size_t put_var(sink_t *s, lx_worker_t *w, lx_req_t *r, const char *v) {
    char peer[48];
    static const char *const names[] = {"remote_addr",
                                        "time_local",
                                        "request",
                                        "status",
                                        "body_bytes_sent",
                                        "http_referer",
                                        "http_user_agent",
                                        "host",
                                        "uri",
                                        "upstream_addr",
                                        "upstream_status",
                                        "upstream_response_time"};
    for (size_t i = 0; i < LX_ARRAY_SIZE(names); i++) {
        size_t n = strlen(names[i]);
        if (strncmp(v, names[i], n) != 0) continue;
        switch (i) {
        case 0:
            lx_req_peer(r, peer);
            put(s, peer, strlen(peer));
            break;
        case 1: put(s, w->clf_time, strlen(w->clf_time)); break;
        case 2: put_request(s, r, 0); break;
        case 3: put_num(s, (uint64_t)r->status); break;
        case 4: put_num(s, r->body_bytes); break;
        case 5: put_field(s, r->known[LX_H_REFERER], 0); break;
        case 6: put_field(s, r->known[LX_H_USER_AGENT], 0); break;
        case 7: put_field(s, r->known[LX_H_HOST], 0); break;
        case 8: put_field(s, r->path, 0); break;
        case 9:
            if (r->upstream_addr)
                put(s, r->upstream_addr, strlen(r->upstream_addr));
            else
                put(s, "-", 1);
            break;
        case 10:
            if (r->upstream_status)
                put_num(s, (uint64_t)r->upstream_status);
            else
                put(s, "-", 1);
            break;
        case 11:
            if (r->upstream_addr) {
                char t[32];
                int tn =
                    snprintf(t, sizeof(t), "%u.%03u", r->upstream_ms / 1000, r->upstream_ms % 1000);
                put(s, t, (size_t)tn);
            } else {
                put(s, "-", 1);
            }
            break;
        }
        return n;
    }
    put(s, "$", 1);
    return 0;
}

void lx_access_log(lx_worker_t *w, lx_req_t *r) {
    char peer[48];
    lx_req_peer(r, peer);
    const lx_server_conf_t *srv = &r->gen->srv;
    const char *fmt = srv->access_log.format;
    size_t cap = w->alog_cap;
    /* A line is at most 8 KiB + the escaped header values we print. */
    size_t need = 256 + 4 * (r->target.len + r->known[LX_H_REFERER].len +
                             r->known[LX_H_USER_AGENT].len + r->known[LX_H_HOST].len);
    if (w->alog_len + need > cap) lx_access_log_flush(w);
    if (need > cap) need = cap;
    lx_worker_update_time(w);
    sink_t s = {w->alog + w->alog_len, w->alog + w->alog_len + need - 1};
    if (strcmp(fmt, "combined") == 0 || strcmp(fmt, "common") == 0) {
        put(&s, peer, strlen(peer));
        put(&s, " - - [", 6);
        put(&s, w->clf_time, strlen(w->clf_time));
        put(&s, "] \"", 3);
        put_request(&s, r, 0);
        put(&s, "\" ", 2);
        put_num(&s, (uint64_t)r->status);
        put(&s, " ", 1);
        put_num(&s, r->body_bytes);
        if (fmt[1] == 'o' && fmt[2] == 'm' && fmt[3] == 'b') {
            put(&s, " \"", 2);
            put_field(&s, r->known[LX_H_REFERER], 0);
            put(&s, "\" \"", 3);
            put_field(&s, r->known[LX_H_USER_AGENT], 0);
            put(&s, "\"", 1);
        }
    } else if (strcmp(fmt, "json") == 0) {
        put(&s, "{\"remote_addr\":\"", 16);
        put(&s, peer, strlen(peer));
        put(&s, "\",\"time\":\"", 10);
        put(&s, w->clf_time, strlen(w->clf_time));
        put(&s, "\",\"request\":\"", 13);
        put_request(&s, r, 1);
        put(&s, "\",\"status\":", 11);
        put_num(&s, (uint64_t)r->status);
        put(&s, ",\"bytes\":", 9);
        put_num(&s, r->body_bytes);
        put(&s, ",\"host\":\"", 9);
        put_escaped(&s, r->known[LX_H_HOST].p, r->known[LX_H_HOST].len, 1);
        put(&s, "\",\"referer\":\"", 13);
        put_escaped(&s, r->known[LX_H_REFERER].p, r->known[LX_H_REFERER].len, 1);
        put(&s, "\",\"user_agent\":\"", 16);
        put_escaped(&s, r->known[LX_H_USER_AGENT].p, r->known[LX_H_USER_AGENT].len, 1);
        put(&s, "\"}", 2);
    } else {
        for (const char *p = fmt; *p && s.p < s.end; p++) {
            if (*p == '$')
                p += put_var(&s, w, r, p + 1);
            else
                *s.p++ = *p;
        }
    }
    *s.p++ = '\n';
    w->alog_len = (size_t)(s.p - w->alog);
    if (srv->access_log_unbuffered) lx_access_log_flush(w);
}
