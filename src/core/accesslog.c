/* Access log lines, gathered in a per-loop buffer and written when it fills
 * or once a second: never a write(2) per request.
 *
 * A format is compiled once, when the configuration is loaded, into pieces
 * (literal bytes and variable ids; lx_access_log_compile), so that a line is
 * one pass over the pieces with no name matched at all. The built-in
 * formats are templates like any other. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "accesslog.h"
#include "../net/transport.h"
#include "../log.h"
#include "../worker.h"
#include "llhttp.h"

/* ---- compiling a format ------------------------------------------------ */

static const char COMBINED[] = "$remote_addr - - [$time_local] \"$request\" $status "
                               "$body_bytes_sent \"$http_referer\" \"$http_user_agent\"";
static const char COMMON[] = "$remote_addr - - [$time_local] \"$request\" $status $body_bytes_sent";
/* Numbers unquoted; an absent header is "" (the JSON escaping's "-"). */
static const char JSON[] =
    "{\"remote_addr\":\"$remote_addr\",\"time\":\"$time_iso8601\",\"request\":\"$request\","
    "\"status\":$status,\"bytes\":$body_bytes_sent,\"request_time\":$request_time,"
    "\"host\":\"$http_host\",\"referer\":\"$http_referer\",\"user_agent\":\"$http_user_agent\"}";

/* The names a template may use besides $http_NAME; lua/luxd/schema_server.lua
 * (LOG_VARIABLES) checks templates against the same list for -t. */
static const struct {
    const char *name;
    uint8_t var;
} var_names[] = {
    {"remote_addr", LX_LV_REMOTE_ADDR},
    {"time_local", LX_LV_TIME_LOCAL},
    {"time_iso8601", LX_LV_TIME_ISO8601},
    {"msec", LX_LV_MSEC},
    {"request", LX_LV_REQUEST},
    {"request_method", LX_LV_REQUEST_METHOD},
    {"request_uri", LX_LV_REQUEST_URI},
    {"uri", LX_LV_URI},
    {"args", LX_LV_ARGS},
    {"server_protocol", LX_LV_SERVER_PROTOCOL},
    {"status", LX_LV_STATUS},
    {"body_bytes_sent", LX_LV_BODY_BYTES_SENT},
    {"bytes_sent", LX_LV_BYTES_SENT},
    {"request_time", LX_LV_REQUEST_TIME},
    {"request_id", LX_LV_REQUEST_ID},
    {"host", LX_LV_HOST},
    {"upstream_addr", LX_LV_UPSTREAM_ADDR},
    {"upstream_status", LX_LV_UPSTREAM_STATUS},
    {"upstream_response_time", LX_LV_UPSTREAM_RESPONSE_TIME},
    {"realip_remote_addr", LX_LV_REALIP_REMOTE_ADDR},
    {"tls_protocol", LX_LV_TLS_PROTOCOL},
    {"tls_cipher", LX_LV_TLS_CIPHER},
    {"tls_sni", LX_LV_TLS_SNI},
    {"tls_session_reused", LX_LV_TLS_SESSION_REUSED},
    {"tls_client_subject", LX_LV_TLS_CLIENT_SUBJECT},
    {"tls_client_fingerprint", LX_LV_TLS_CLIENT_FINGERPRINT},
};

_Static_assert(LX_LV_TLS_CLIENT_FINGERPRINT - LX_LV_TLS_PROTOCOL == LX_TLS_CLIENT_FINGERPRINT &&
                   LX_LV_TLS_CLIENT_SUBJECT - LX_LV_TLS_PROTOCOL == LX_TLS_CLIENT_SUBJECT &&
                   LX_LV_TLS_SESSION_REUSED - LX_LV_TLS_PROTOCOL == LX_TLS_REUSED &&
                   LX_LV_TLS_SNI - LX_LV_TLS_PROTOCOL == LX_TLS_SNI &&
                   LX_LV_TLS_CIPHER - LX_LV_TLS_PROTOCOL == LX_TLS_CIPHER && LX_TLS_PROTOCOL == 0,
               "$tls_* in the order of lx_tls_field_t");

/* Headers the parser keeps apart (request.h), as $http_NAME writes them. */
static const struct {
    const char *name;
    uint8_t id;
} known_names[] = {
    {"host", LX_H_HOST},
    {"connection", LX_H_CONNECTION},
    {"if-none-match", LX_H_IF_NONE_MATCH},
    {"if-modified-since", LX_H_IF_MODIFIED_SINCE},
    {"range", LX_H_RANGE},
    {"if-range", LX_H_IF_RANGE},
    {"accept-encoding", LX_H_ACCEPT_ENCODING},
    {"user-agent", LX_H_USER_AGENT},
    {"referer", LX_H_REFERER},
    {"expect", LX_H_EXPECT},
    {"transfer-encoding", LX_H_TRANSFER_ENCODING},
};

static int is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* The piece for the variable name[0, len), or -EINVAL. */
static int compile_var(lx_arena_t *a, const char *name, size_t len, lx_log_piece_t *pc) {
    for (size_t i = 0; i < LX_ARRAY_SIZE(var_names); i++) {
        if (strlen(var_names[i].name) == len && memcmp(var_names[i].name, name, len) == 0) {
            pc->var = var_names[i].var;
            return 0;
        }
    }
    if (len <= 5 || memcmp(name, "http_", 5) != 0) return -EINVAL;
    /* $http_x_forwarded_for: the header X-Forwarded-For, in any case. */
    size_t n = len - 5;
    char *h = lx_arena_alloc(a, n + 1);
    if (h == NULL) return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        char c = name[5 + i];
        h[i] = c == '_' ? '-' : (c >= 'A' && c <= 'Z') ? (char)(c | 0x20) : c;
    }
    h[n] = '\0';
    for (size_t i = 0; i < LX_ARRAY_SIZE(known_names); i++) {
        if (strcmp(known_names[i].name, h) == 0) {
            pc->var = LX_LV_HTTP_KNOWN;
            pc->known = known_names[i].id;
            return 0;
        }
    }
    pc->var = LX_LV_HTTP;
    pc->text = h;
    pc->len = (uint32_t)n;
    return 0;
}

int lx_access_log_compile(lx_arena_t *a, lx_access_log_conf_t *c, char *err, size_t errlen) {
    const char *f = c->format;
    if (strcmp(f, "combined") == 0)
        f = COMBINED;
    else if (strcmp(f, "common") == 0)
        f = COMMON;
    else if (strcmp(f, "json") == 0) {
        f = JSON;
        c->json = 1;
    }
    /* At most one piece per '$' and one literal before each, plus a tail. */
    size_t max = 1;
    for (const char *p = f; *p; p++)
        if (*p == '$') max += 2;
    lx_log_piece_t *pieces = lx_arena_calloc(a, max * sizeof(*pieces));
    if (pieces == NULL) return -ENOMEM;
    size_t n = 0;
    const char *lit = f, *p = f;
    c->uses_time = 0;
    while (*p) {
        if (*p != '$') {
            p++;
            continue;
        }
        /* The literal so far; "$$" is a '$' of it. */
        size_t llen = (size_t)(p - lit) + (p[1] == '$');
        if (llen)
            pieces[n++] = (lx_log_piece_t){.var = LX_LV_TEXT, .len = (uint32_t)llen, .text = lit};
        if (p[1] == '$') {
            lit = p += 2;
            continue;
        }
        const char *name = p + 1, *end;
        if (*name == '{') {
            name++;
            end = name;
            while (is_name_char(*end))
                end++;
            if (*end != '}' || end == name) {
                snprintf(err, errlen, "\"${\" must be followed by a variable name and \"}\"");
                return -EINVAL;
            }
            lit = p = end + 1;
        } else {
            end = name;
            while (is_name_char(*end))
                end++;
            if (end == name) {
                snprintf(err, errlen, "\"$\" must be followed by a variable name (\"$$\" is a $)");
                return -EINVAL;
            }
            lit = p = end;
        }
        lx_log_piece_t *pc = &pieces[n];
        int r = compile_var(a, name, (size_t)(end - name), pc);
        if (r == -ENOMEM) return r;
        if (r < 0) {
            snprintf(err, errlen, "unknown variable \"$%.*s\"", (int)(end - name), name);
            return r;
        }
        if (pc->var == LX_LV_REQUEST_TIME || pc->var == LX_LV_MSEC) c->uses_time = 1;
        n++;
    }
    if (p > lit)
        pieces[n++] = (lx_log_piece_t){.var = LX_LV_TEXT, .len = (uint32_t)(p - lit), .text = lit};
    c->pieces = pieces;
    c->npieces = n;
    return 0;
}

/* ---- writing ------------------------------------------------------------ */

static void write_all(int fd, const char *p, size_t len) {
    size_t off = 0;
    while (off < len) {
        ssize_t n = write(fd, p + off, len - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            lx_log_error("access log: write failed: %s", strerror(errno));
            break;
        }
        off += (size_t)n;
    }
}

static void flush_one(lx_alog_buf_t *b) {
    if (b->len) write_all(b->fd, b->buf, b->len);
    b->len = 0;
}

void lx_access_log_flush(lx_worker_t *w) {
    for (size_t i = 0; i < w->nalogs; i++)
        flush_one(&w->alogs[i]);
}

/* The loop's buffer for the file of al, made on first use. Slots are
 * small numbers (io/logfiles.c hands out the lowest free one). */
static lx_alog_buf_t *buffer_for(lx_worker_t *w, const lx_access_log_conf_t *al) {
    size_t i = (size_t)al->slot;
    if (i >= w->nalogs) {
        size_t n = i + 1 > w->nalogs * 2 ? i + 1 : w->nalogs * 2;
        lx_alog_buf_t *a = realloc(w->alogs, n * sizeof(*a));
        if (a == NULL) return NULL;
        memset(a + w->nalogs, 0, (n - w->nalogs) * sizeof(*a));
        w->alogs = a;
        w->nalogs = n;
    }
    lx_alog_buf_t *b = &w->alogs[i];
    if (b->buf == NULL && (b->buf = malloc(w->alog_cap)) == NULL) return NULL;
    /* A slot given back and handed out again is another file; whatever
     * this loop buffered for it was written before it let go of the
     * generations holding it (lx_worker_gen_release), but say it here too. */
    if (b->fd != al->fd) flush_one(b);
    b->fd = al->fd;
    return b;
}

/* Where a line is assembled; a line that does not fit sets `full` and is
 * assembled again in more room. */
typedef struct {
    char *p, *end;
    int full;
    int json;
} sink_t;

static void put(sink_t *s, const char *p, size_t n) {
    if ((size_t)(s->end - s->p) < n) {
        s->full = 1;
        return;
    }
    memcpy(s->p, p, n);
    s->p += n;
}

/* The length of the valid UTF-8 sequence at p (RFC 3629: no overlong
 * forms, no surrogates, nothing above U+10FFFF), or 0. */
static size_t utf8_len(const unsigned char *p, size_t n) {
    unsigned char c = p[0];
    size_t k;
    unsigned char lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf)
        k = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        k = 3;
        if (c == 0xe0) lo = 0xa0;
        if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        k = 4;
        if (c == 0xf0) lo = 0x90;
        if (c == 0xf4) hi = 0x8f;
    } else
        return 0;
    if (n < k || p[1] < lo || p[1] > hi) return 0;
    for (size_t i = 2; i < k; i++)
        if (p[i] < 0x80 || p[i] > 0xbf) return 0;
    return k;
}

#define ESC_LOWER 1 /* ASCII letters in lower case ($host) */

/* The bytes both escapings write as they are: printable ASCII but the quote
 * and the backslash. */
#define R16(x) x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x
/* clang-format off */
static const uint8_t plain[256] = {
    R16(0), R16(0),
    1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x20..: '"' is escaped */
    R16(1), R16(1),
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, /* 0x50..: '\\' is escaped */
    R16(1),
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, /* 0x70..: DEL is escaped */
    R16(0), R16(0), R16(0), R16(0), R16(0), R16(0), R16(0), R16(0),
};
/* clang-format on */
#undef R16

/* Copies client-supplied bytes so that a line can never be forged or
 * split. Plain logs (nginx's default escaping): quotes, backslashes,
 * control and 8-bit bytes become \xHH. JSON: a string's content, with
 * valid UTF-8 as it is, quote and backslash as \" and \\, control bytes
 * and DEL as \u00HH, and every byte that is not part of valid UTF-8 as
 * \u00HH too; so \u0080..\u00ff in a line always stands for such a byte,
 * never for a character the client sent (that one comes out as itself).
 * No input byte becomes more than 6 bytes, so the room is checked once
 * for as many bytes as surely fit, not byte by byte. Inlined into the two
 * below, so that the lower-casing of one costs the other nothing. */
static inline __attribute__((always_inline)) void escape(sink_t *s, const char *src, size_t n,
                                                         int flags) {
    static const char hex[] = "0123456789ABCDEF";
    const unsigned char *p = (const unsigned char *)src;
    size_t i = 0;
    while (i < n) {
        size_t fit = (size_t)(s->end - s->p) / 6;
        if (fit == 0) {
            s->full = 1;
            return;
        }
        size_t stop = n - i < fit ? n : i + fit;
        char *o = s->p;
        /* A UTF-8 sequence begun before stop may end past it: it writes
         * no more bytes than it takes, at most 4 of the 6 its first byte
         * was given room for. */
        while (i < stop) {
            unsigned char c = p[i];
            if ((flags & ESC_LOWER) && c >= 'A' && c <= 'Z') c |= 0x20;
            if (plain[c]) {
                *o++ = (char)c;
                i++;
                continue;
            }
            if (!s->json) {
                o[0] = '\\';
                o[1] = 'x';
                o[2] = hex[c >> 4];
                o[3] = hex[c & 15];
                o += 4;
                i++;
                continue;
            }
            if (c == '"' || c == '\\') {
                o[0] = '\\';
                o[1] = (char)c;
                o += 2;
                i++;
                continue;
            }
            size_t k = c >= 0x80 ? utf8_len(p + i, n - i) : 0;
            if (k) {
                memcpy(o, p + i, k);
                o += k;
                i += k;
                continue;
            }
            memcpy(o, "\\u00", 4);
            o[4] = hex[c >> 4];
            o[5] = hex[c & 15];
            o += 6;
            i++;
        }
        s->p = o;
    }
}

static void put_escaped(sink_t *s, const char *src, size_t n) {
    escape(s, src, n, 0);
}

static void put_escaped_lower(sink_t *s, const char *src, size_t n) {
    escape(s, src, n, ESC_LOWER);
}

/* What a variable without a value prints: "-", or nothing inside a JSON
 * string (as nginx's escape=json). */
static void put_none(sink_t *s) {
    if (!s->json) put(s, "-", 1);
}

static void put_field(sink_t *s, lx_str_t v) {
    if (v.len == 0)
        put_none(s);
    else
        put_escaped(s, v.p, v.len);
}

/* Decimal by hand: snprintf took some 700 instructions a number, more
 * than all the rest of a combined line. */
static void put_num(sink_t *s, uint64_t v) {
    char b[20], *e = b + sizeof(b), *q = e;
    do {
        *--q = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    put(s, q, (size_t)(e - q));
}

/* Seconds with millisecond precision: "1.005". */
static void put_ms(sink_t *s, uint64_t ms) {
    char b[24], *e = b + sizeof(b), *q = e;
    unsigned frac = (unsigned)(ms % 1000);
    for (int i = 0; i < 3; i++) {
        *--q = (char)('0' + frac % 10);
        frac /= 10;
    }
    *--q = '.';
    uint64_t v = ms / 1000;
    do {
        *--q = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    put(s, q, (size_t)(e - q));
}

static void put_protocol(sink_t *s, const lx_req_t *r) {
    char b[9] = "HTTP/1.0";
    if (r->http_major == 2) b[5] = '2';
    b[7] = (char)('0' + (r->http_minor % 10));
    put(s, b, 8);
}

static void put_method(sink_t *s, const lx_req_t *r) {
    const char *m =
        llhttp_method_name((llhttp_method_t)(r->method_changed ? r->method_sent : r->method));
    put(s, m, strlen(m));
}

/* "GET /a HTTP/1.1" as received; for a request refused before its head was
 * parsed, what came of its first line (or "-" when nothing did). */
static void put_request(sink_t *s, const lx_req_t *r) {
    if (r->unparsed) {
        put_field(s, r->target);
        return;
    }
    put_method(s, r);
    put(s, " ", 1);
    put_escaped(s, r->target.p, r->target.len);
    put(s, " ", 1);
    put_protocol(s, r);
}

/* Same name, ASCII case and '-' against '_' aside (the compiled name is
 * lower case with '-'). */
static int header_is(lx_str_t n, const lx_log_piece_t *pc) {
    if (n.len != pc->len) return 0;
    for (size_t i = 0; i < n.len; i++) {
        unsigned char c = (unsigned char)n.p[i];
        if (c >= 'A' && c <= 'Z') c |= 0x20;
        if (c == '_') c = '-';
        if (c != (unsigned char)pc->text[i]) return 0;
    }
    return 1;
}

/* $http_NAME: every field of that name, joined with ", " as RFC 9110 5.3
 * allows. */
static void put_header(sink_t *s, const lx_req_t *r, const lx_log_piece_t *pc) {
    int any = 0;
    for (unsigned i = 0; i < r->nheaders; i++) {
        const lx_header_t *h = &r->headers[i];
        if (h->value.len == 0 || !header_is(h->name, pc)) continue;
        if (any) put(s, ", ", 2);
        put_escaped(s, h->value.p, h->value.len);
        any = 1;
    }
    if (!any) put_none(s);
}

static void put_var(sink_t *s, lx_worker_t *w, lx_req_t *r, const lx_log_piece_t *pc) {
    char b[48];
    switch ((lx_logvar_t)pc->var) {
    case LX_LV_TEXT: put(s, pc->text, pc->len); break;
    case LX_LV_REMOTE_ADDR:
        lx_req_peer(r, b);
        put(s, b, strlen(b));
        break;
    case LX_LV_REALIP_REMOTE_ADDR:
        lx_req_conn_peer(r, b);
        put(s, b, strlen(b));
        break;
    case LX_LV_TLS_PROTOCOL:
    case LX_LV_TLS_CIPHER:
    case LX_LV_TLS_SNI:
    case LX_LV_TLS_SESSION_REUSED:
    case LX_LV_TLS_CLIENT_SUBJECT:
    case LX_LV_TLS_CLIENT_FINGERPRINT: {
        const char *v = lx_req_tls(r, pc->var - LX_LV_TLS_PROTOCOL);
        if (v)
            put_escaped(s, v, strlen(v));
        else
            put_none(s);
        break;
    }
    case LX_LV_TIME_LOCAL: put(s, w->clf_time, w->clf_time_len); break;
    case LX_LV_TIME_ISO8601: put(s, w->iso_time, w->iso_time_len); break;
    case LX_LV_MSEC: {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        put_ms(s, (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000);
        break;
    }
    case LX_LV_REQUEST: put_request(s, r); break;
    case LX_LV_REQUEST_METHOD:
        if (!r->unparsed)
            put_method(s, r);
        else
            put_none(s);
        break;
    case LX_LV_REQUEST_URI: put_field(s, r->unparsed ? (lx_str_t){0} : r->target); break;
    case LX_LV_URI:
        /* As nginx: the path decoded and normalised, after a rewrite or an
         * error page; as sent when it never was. */
        put_field(s, r->decoded ? (lx_str_t){r->decoded, r->decoded_len} : r->path);
        break;
    case LX_LV_ARGS: put_field(s, r->query); break;
    case LX_LV_SERVER_PROTOCOL:
        if (!r->unparsed)
            put_protocol(s, r);
        else
            put_none(s);
        break;
    case LX_LV_STATUS: put_num(s, (uint64_t)r->status); break;
    case LX_LV_BODY_BYTES_SENT: put_num(s, r->body_bytes); break;
    case LX_LV_BYTES_SENT: put_num(s, r->head_bytes + r->body_bytes); break;
    case LX_LV_REQUEST_TIME: {
        /* From the loop time the request's first byte was read at (the
         * loop's clock, brought up to date: lx_access_log). */
        uint64_t start = r->started, now = uv_now(&w->loop);
        put_ms(s, now > start ? now - start : 0);
        break;
    }
    case LX_LV_REQUEST_ID: put(s, lx_req_id(r), 32); break;
    case LX_LV_HOST:
        /* As nginx: the name the vhost was chosen by, lower case, no port. */
        if (r->host.len)
            put_escaped_lower(s, r->host.p, r->host.len);
        else if (r->vhost && r->vhost->name)
            put_escaped(s, r->vhost->name, strlen(r->vhost->name));
        else
            put_none(s);
        break;
    case LX_LV_HTTP_KNOWN: put_field(s, r->known[pc->known]); break;
    case LX_LV_HTTP: put_header(s, r, pc); break;
    case LX_LV_UPSTREAM_ADDR:
        if (r->upstream_addr)
            put(s, r->upstream_addr, strlen(r->upstream_addr));
        else
            put_none(s);
        break;
    case LX_LV_UPSTREAM_STATUS:
        if (r->upstream_status)
            put_num(s, (uint64_t)r->upstream_status);
        else
            put_none(s);
        break;
    case LX_LV_UPSTREAM_RESPONSE_TIME:
        if (r->upstream_addr)
            put_ms(s, r->upstream_ms);
        else
            put_none(s);
        break;
    }
}

/* Assembles the line, newline included, in [p, end); returns its length,
 * or 0 when it does not fit. */
static size_t render(lx_worker_t *w, lx_req_t *r, const lx_access_log_conf_t *al, char *p,
                     char *end) {
    if (end - p < 1) return 0;
    sink_t s = {p, end - 1, 0, al->json};
    for (size_t i = 0; i < al->npieces && !s.full; i++)
        put_var(&s, w, r, &al->pieces[i]);
    if (s.full) return 0;
    *s.p++ = '\n';
    return (size_t)(s.p - p);
}

/* Lines longer than the loop's buffer (JSON escapes of long headers can
 * be 6 bytes a byte) are assembled apart and written at once. */
#define LONG_LINE_MAX (64u << 20)

void lx_access_log(lx_worker_t *w, lx_req_t *r, const lx_access_log_conf_t *al) {
    const lx_server_conf_t *srv = &r->gen->srv;
    if (al->slot < 0) return; /* not opened: cannot happen in a started server */
    lx_alog_buf_t *b = buffer_for(w, al);
    if (b == NULL) {
        lx_log_error("access log %s: out of memory; a line not logged", al->path);
        return;
    }
    lx_worker_update_time(w);
    if (al->uses_time) uv_update_time(&w->loop);
    size_t n = render(w, r, al, b->buf + b->len, b->buf + w->alog_cap);
    if (n == 0 && b->len) {
        flush_one(b);
        n = render(w, r, al, b->buf, b->buf + w->alog_cap);
    }
    if (n == 0) {
        for (size_t cap = w->alog_cap * 2; cap <= LONG_LINE_MAX; cap *= 2) {
            char *big = malloc(cap);
            if (big == NULL) break;
            n = render(w, r, al, big, big + cap);
            if (n) write_all(b->fd, big, n);
            free(big);
            if (n) return;
        }
        lx_log_error("access log: a line of a request answered %d is over %u bytes; not logged",
                     r->status, LONG_LINE_MAX);
        return;
    }
    b->len += n;
    if (srv->access_log_unbuffered) flush_one(b);
}

/* Where r is logged: its vhost's choice, or the server's log for a request
 * refused before a vhost was chosen (a malformed head, a bad Host). */
const lx_access_log_conf_t *lx_access_log_of(const lx_req_t *r) {
    if (r->vhost) return r->vhost->access_log;
    return r->gen->srv.access_log.path ? &r->gen->srv.access_log : NULL;
}
