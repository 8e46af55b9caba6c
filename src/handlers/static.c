/* The static file handler: index files, conditional requests, ranges and
 * pre-compressed variants, answered from the loop's file cache. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fields.h"
#include "../http/path.h"
#include "../http/precond.h"
#include "../http/range.h"
#include "../io/filecache.h"
#include "../log.h"
#include "../lx.h"
#include "../worker.h"
#include "handler.h"

void lx_static_wake(lx_waiter_t *w, int status);
#include "llhttp.h"

/* Fetches root + path (+ ".gz" variant suffix) from the cache. Returns 0 with *f set, or
 * -EAGAIN when the request must wait for the thread pool. */
static int lookup(lx_req_t *r, const char *path, size_t len, const char *suffix, lx_file_t **f) {
    const lx_site_t *s = r->site;
    size_t slen = suffix ? strlen(suffix) : 0;
    size_t n = r->root_len + len + slen;
    char *full = lx_arena_alloc(r->arena, n + 1);
    if (full == NULL) return -ENOMEM;
    memcpy(full, r->root, r->root_len);
    memcpy(full + r->root_len, path, len);
    if (slen) memcpy(full + r->root_len + len, suffix, slen);
    full[n] = '\0';
    r->wait.cb = lx_static_wake;
    int rc = lx_filecache_get(r->w->cache, r->gen, s, full, n, r->root_len, slen != 0, &r->wait, f);
    if (rc == -EAGAIN) lx_req_hold(r); /* the cache calls back: static_wake */
    return rc;
}

/* The conditional fields, in the order of lx_precond_req_t's. */
static const int cond_ids[] = {LX_H_IF_MATCH, LX_H_IF_UNMODIFIED_SINCE, LX_H_IF_NONE_MATCH,
                               LX_H_IF_MODIFIED_SINCE, LX_H_IF_RANGE};

/* Each conditional field's whole value into out[]: the line h1.c kept, or
 * for a field sent on several lines, the lines joined with "," (RFC 9110
 * 5.3). h1.c keeps a known field's last line only, and If-Match: "a" on
 * one line and "b" on the next is the list "a", "b"; for a field that
 * takes one value (a date, If-Range), the joined lines are no valid value,
 * and are treated as such. Returns 0, or -ENOMEM. */
static int whole_fields(lx_req_t *r, lx_str_t *out[]) {
    unsigned lines[LX_ARRAY_SIZE(cond_ids)] = {0};
    size_t bytes[LX_ARRAY_SIZE(cond_ids)] = {0};
    int several = 0;
    for (unsigned i = 0; i < r->nheaders; i++) {
        const lx_header_t *h = &r->headers[i];
        int id = lx_known_header(h->name.p, h->name.len);
        for (size_t k = 0; k < LX_ARRAY_SIZE(cond_ids); k++)
            if (id == cond_ids[k]) {
                several |= ++lines[k] > 1;
                bytes[k] += h->value.len + 1;
            }
    }
    for (size_t k = 0; several && k < LX_ARRAY_SIZE(cond_ids); k++) {
        if (lines[k] < 2) continue;
        char *buf = lx_arena_alloc(r->arena, bytes[k]), *o = buf;
        if (buf == NULL) return -ENOMEM;
        for (unsigned i = 0; i < r->nheaders; i++) {
            const lx_header_t *h = &r->headers[i];
            if (lx_known_header(h->name.p, h->name.len) != cond_ids[k]) continue;
            if (o > buf) *o++ = ',';
            memcpy(o, h->value.p, h->value.len);
            o += h->value.len;
        }
        *out[k] = (lx_str_t){buf, (size_t)(o - buf)};
    }
    return 0;
}

/* RFC 9110 13.2.2's preconditions (src/http/precond.c) against f, the
 * variant about to be sent (a .gz sibling has its own ETag and date).
 * range: a GET with a Range, which If-Range may turn into a 200. A request
 * without a conditional field returns at the first test. Returns
 * LX_PRECOND_*, or -ENOMEM. */
static int preconditions(lx_req_t *r, const lx_file_t *f, int range) {
    const lx_str_t *k = r->known;
    if (!k[LX_H_IF_MATCH].p && !k[LX_H_IF_UNMODIFIED_SINCE].p && !k[LX_H_IF_NONE_MATCH].p &&
        !k[LX_H_IF_MODIFIED_SINCE].p && !(range && k[LX_H_IF_RANGE].p))
        return LX_PRECOND_OK;
    lx_precond_req_t q = {
        .if_match = k[LX_H_IF_MATCH],
        .if_unmodified_since = k[LX_H_IF_UNMODIFIED_SINCE],
        .if_none_match = k[LX_H_IF_NONE_MATCH],
        .if_modified_since = k[LX_H_IF_MODIFIED_SINCE],
        .if_range = k[LX_H_IF_RANGE],
        .safe = r->method == HTTP_GET || r->method == HTTP_HEAD,
        .range = range != 0,
    };
    lx_str_t *fields[] = {&q.if_match, &q.if_unmodified_since, &q.if_none_match,
                          &q.if_modified_since, &q.if_range};
    if (whole_fields(r, fields) < 0) return -ENOMEM;
    lx_precond_rep_t v = {
        .etag = f->etag,
        .has_mtime = f->last_modified[0] != '\0',
        .mtime = f->mtime.tv_sec,
    };
    if (range && q.if_range.p) {
        lx_worker_update_time(r->w); /* the Date of this answer's second */
        v.now = r->w->now;
    }
    return lx_precond_eval(&q, &v);
}

/* Does Accept-Encoding allow gzip? "gzip;q=0" says no. */
static int accepts_gzip(lx_str_t ae) {
    const char *p = ae.p, *end = ae.p + ae.len;
    int star = 0;
    while (p < end) {
        while (p < end && (*p == ' ' || *p == '\t' || *p == ','))
            p++;
        const char *tok = p;
        while (p < end && *p != ',' && *p != ';' && *p != ' ' && *p != '\t')
            p++;
        lx_str_t name = {tok, (size_t)(p - tok)};
        int q0 = 0;
        while (p < end && *p != ',') {
            if (*p == 'q' && p + 1 < end && p[1] == '=') {
                const char *v = p + 2;
                q0 = v < end && *v == '0';
                for (v++; q0 && v < end && *v != ',' && *v != ';' && *v != ' '; v++)
                    if (*v != '.' && *v != '0') q0 = 0;
            }
            p++;
        }
        if (lx_str_ieq(name, "gzip", 4) || lx_str_ieq(name, "x-gzip", 6)) return !q0;
        if (lx_str_eq(name, "*", 1)) star = !q0;
    }
    return star;
}

static void queue_body(lx_req_t *r, lx_file_t *f, uint64_t off, uint64_t len) {
    lx_resp_body_file(r, f, off, len);
}

/* Headers shared by 206 and 304: validators and the site's own headers. */
static void validators(lx_req_t *r, const lx_file_t *f) {
    if (f->last_modified[0]) lx_resp_headerf(r, "Last-Modified: %s\r\n", f->last_modified);
    if (f->etag[0]) lx_resp_headerf(r, "ETag: %s\r\n", f->etag);
    if (r->site->gzip_static) lx_resp_header(r, "Vary: Accept-Encoding\r\n", 23);
    if (f->site_id & 1) lx_resp_header(r, "Content-Encoding: gzip\r\n", 24);
    lx_resp_header(r, r->site->headers, r->site->headers_len);
}

/* multipart/byteranges (RFC 9110 14.6). Each part's head is the fixed
 * text below, the file's Content-Type, then a Content-Range line. The type
 * has no length limit (mime { } takes any), so it is never formatted into a
 * fixed buffer: only the numbers are, and their text has a known bound. */
#define BOUNDARY    "LUXD_BYTERANGES_7c1f3a9e5d2b"
#define PART_OPEN   "\r\n--" BOUNDARY "\r\nContent-Type: "
#define PARTS_CLOSE "\r\n--" BOUNDARY "--\r\n"

/* "\r\nContent-Range: bytes A-B/SIZE\r\n\r\n": 23 + 3 * 20 + 2 + 4 bytes at
 * most. Returns the length written, clamped to what the buffer holds, so a
 * caller never trusts a would-be length. */
static size_t part_range_line(char *buf, size_t cap, const lx_range_t *rg, uint64_t size) {
    int n =
        snprintf(buf, cap, "\r\nContent-Range: bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64 "\r\n\r\n",
                 rg->first, rg->last, size);
    if (n < 0) return 0;
    return (size_t)n < cap ? (size_t)n : cap - 1;
}

/* The multipart body's length for these ranges. */
static uint64_t multipart_length(const lx_file_t *f, const lx_range_t *rg, int n) {
    char line[96];
    size_t ctype_len = strlen(f->ctype);
    uint64_t total = sizeof(PARTS_CLOSE) - 1;
    for (int i = 0; i < n; i++)
        total += sizeof(PART_OPEN) - 1 + ctype_len +
                 part_range_line(line, sizeof(line), &rg[i], f->size) +
                 (rg[i].last - rg[i].first + 1);
    return total;
}

static void serve_single_range(lx_req_t *r, lx_file_t *f, const lx_range_t *rg) {
    lx_resp_init(r, 206);
    r->resp.length = (int64_t)(rg->last - rg->first + 1);
    lx_resp_headerf(
        r, "Content-Type: %s\r\nContent-Range: bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64 "\r\n",
        f->ctype, rg->first, rg->last, f->size);
    validators(r, f);
    lx_resp_send_headers(r);
    queue_body(r, f, rg->first, rg->last - rg->first + 1);
}

static void serve_multipart(lx_req_t *r, lx_file_t *f, const lx_range_t *rg, int n,
                            uint64_t total) {
    lx_resp_init(r, 206);
    r->resp.length = (int64_t)total;
    lx_resp_headerf(r, "Content-Type: multipart/byteranges; boundary=%s\r\n", BOUNDARY);
    validators(r, f);
    lx_resp_send_headers(r);
    if (r->resp.no_body) return;
    size_t ctype_len = strlen(f->ctype);
    char line[96];
    for (int i = 0; i < n; i++) {
        lx_resp_body_copy(r, PART_OPEN, sizeof(PART_OPEN) - 1);
        lx_resp_body_copy(r, f->ctype, ctype_len);
        lx_resp_body_copy(r, line, part_range_line(line, sizeof(line), &rg[i], f->size));
        queue_body(r, f, rg[i].first, rg[i].last - rg[i].first + 1);
    }
    lx_resp_body_copy(r, PARTS_CLOSE, sizeof(PARTS_CLOSE) - 1);
}

/* Answers a satisfiable range set with 206, or returns 0 when the whole file
 * is the better answer. Overlapping and adjacent ranges are merged first;
 * when the parts with their headers would still be longer than the file,
 * the file itself is sent with 200, as Apache and nginx do, so no Range
 * header makes a response larger than the whole file plus its headers. */
static int serve_ranges(lx_req_t *r, lx_file_t *f, lx_range_t *rg, int n) {
    n = lx_range_coalesce(rg, n);
    if (n == 1) {
        serve_single_range(r, f, &rg[0]);
        return 1;
    }
    uint64_t total = multipart_length(f, rg, n);
    if (total > f->size) return 0;
    serve_multipart(r, f, rg, n, total);
    return 1;
}

static int serve(lx_req_t *r, lx_file_t *f) {
    if (r->error_status) {
        /* An error page: its own status, no validators or ranges apply.
         * It may still be the page's .gz sibling, and the client must be
         * told so, or it shows the compressed bytes as the page. */
        lx_resp_init(r, r->error_status);
        r->resp.length = (int64_t)f->size;
        lx_resp_headerf(r, "Content-Type: %s\r\n", f->ctype);
        if (r->site->gzip_static) lx_resp_header(r, "Vary: Accept-Encoding\r\n", 23);
        if (f->site_id & 1) lx_resp_header(r, "Content-Encoding: gzip\r\n", 24);
        lx_resp_header(r, r->site->headers, r->site->headers_len);
        lx_resp_send_headers(r);
        queue_body(r, f, 0, f->size);
        return LX_DONE;
    }
    lx_str_t range = r->known[LX_H_RANGE];
    int ranged = range.len && r->method == HTTP_GET;
    int pc = preconditions(r, f, ranged);
    if (pc < 0) return 500;
    /* 412 is an error like any: the site's error page or the built-in one. */
    if (pc == LX_PRECOND_412) return 412;
    if (pc == LX_PRECOND_304) {
        lx_resp_init(r, 304);
        validators(r, f);
        lx_resp_send_headers(r);
        return LX_DONE;
    }
    if (ranged && pc == LX_PRECOND_OK) {
        lx_range_t rg[LX_RANGE_MAX];
        int n = lx_range_parse(range.p, range.len, f->size, rg, LX_RANGE_MAX);
        if (n == -ERANGE) {
            char cr[64];
            snprintf(cr, sizeof(cr), "Content-Range: bytes */%" PRIu64 "\r\n", f->size);
            lx_resp_simple(r, 416, cr);
            return LX_DONE;
        }
        if (n > 0 && serve_ranges(r, f, rg, n)) return LX_DONE;
    }
    /* The common case: the pre-built headers, borrowed (one copy, into the
     * output). */
    lx_resp_init(r, 200);
    r->resp.block = f->hdr;
    r->resp.block_len = f->hdr_len;
    r->resp.length = (int64_t)f->size;
    lx_resp_send_headers(r);
    queue_body(r, f, 0, f->size);
    return LX_DONE;
}

/* Says in the error log why a file of a request could not be served, as
 * nginx's `open() "/path" failed (13: Permission denied), client: ...`.
 * A file that is not there is the everyday 404 and goes at info; anything
 * else (permissions, a refused link, a device) is the site's or the
 * operator's to fix and goes at error. The entry may be a cached negative
 * one: each request that meets it is logged, as nginx does. */
/* Bytes a client chose, as printable ASCII only ('"', '\\', controls and
 * 8-bit bytes as \xHH), so that no error-log line can be forged or split:
 * the decoded path can hold any byte the client percent-encoded. */
static void printable(char *out, size_t cap, const char *p, size_t len) {
    size_t n = 0;
    for (size_t i = 0; i < len && n + 5 < cap; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c > 0x20 && c < 0x7f && c != '"' && c != '\\')
            out[n++] = (char)c;
        else
            n += (size_t)snprintf(out + n, cap - n, "\\x%02X", c);
    }
    out[n] = '\0';
}

static void log_open_failure(lx_req_t *r, const lx_file_t *f) {
    int err = -f->err;
    int missing = !f->refused && (err == ENOENT || err == ENOTDIR || err == ENAMETOOLONG);
    int level = missing ? LX_LOG_INFO : LX_LOG_ERROR;
    if (r->open_logged || !lx_log_enabled(level)) return;
    r->open_logged = 1;
    char peer[48], path[1200], target[600], why[160];
    lx_req_peer(r, peer);
    printable(path, sizeof(path), f->path, f->path_len);
    printable(target, sizeof(target), r->target.p, r->target.len);
    if (f->refused == LX_FILE_REFUSED_LINK)
        snprintf(why, sizeof(why),
                 "refused by follow_symlinks = %s (a symbolic link or \"..\" on the way)",
                 r->site->follow_symlinks == LX_SYMLINKS_REFUSE ? "false" : "\"owner\"");
    else if (f->refused == LX_FILE_REFUSED_TYPE)
        snprintf(why, sizeof(why),
                 "refused: not a regular file (devices, sockets and FIFOs are never served)");
    else
        snprintf(why, sizeof(why), "failed (%d: %s)", err, strerror(err));
    lx_log(level, "open() \"%s\" %s, client: %s, vhost: %s, request: \"%s %s\"", path, why, peer,
           r->vhost && r->vhost->name ? r->vhost->name : "-",
           llhttp_method_name((llhttp_method_t)r->method), target);
}

/* Maps a cache entry's error to a status. A link loop (ELOOP) is the
 * site's own doing, as a refused link is, and nginx answers it 403 too; a
 * Unix socket in the root fails to open with ENXIO and is one of the files
 * never served. Neither is the server's error. */
int lx_static_status(int err) {
    return err == -ENOENT || err == -ENOTDIR || err == -ENAMETOOLONG           ? 404
           : err == -EACCES || err == -EPERM || err == -ELOOP || err == -ENXIO ? 403
                                                                               : 500;
}

/* Serves a regular file entry, or its .gz sibling when the client takes it. */
static int serve_file(lx_req_t *r, lx_file_t *f, const char *path, size_t len) {
    if (r->site->gzip_static && accepts_gzip(r->known[LX_H_ACCEPT_ENCODING])) {
        lx_file_t *gz;
        int rc = lookup(r, path, len, ".gz", &gz);
        if (rc == -EAGAIN) return LX_ASYNC;
        if (rc == 0) {
            if (gz->err == 0 && !gz->is_dir) {
                int res = serve(r, gz);
                lx_file_unref(gz);
                return res;
            }
            lx_file_unref(gz);
        }
    }
    return serve(r, f);
}

static int static_serve(lx_req_t *r, const char *path, size_t len);
static int try_files(lx_req_t *r);

/* With fallback = "upstream", what no file answers is the backend's: a
 * method other than GET and HEAD (before its body is dropped: the backend
 * reads it), and a path no file is at. An error page is served from files
 * only. With try_files, its last entry answers what no file does (a path
 * or a status), so only the other methods reach the backend. */
static int static_handle(lx_req_t *r) {
    int fallback = r->site->fallback && !r->error_status;
    if (fallback && r->method != HTTP_GET && r->method != HTTP_HEAD) return LX_DECLINED;
    if (r->site->ntry_files && !r->error_status) return try_files(r);
    int rc = static_serve(r, r->decoded, r->decoded_len);
    return fallback && rc == 404 ? LX_DECLINED : rc;
}

/* The n bytes of a try_files entry at e with $uri (and, in the last
 * entry's query, $args) put in: the text in the arena, or NULL when out of
 * memory. */
char *lx_static_try_expand(lx_req_t *r, const char *e, size_t n, size_t *outlen) {
    char *out = NULL, *o = NULL;
    for (int pass = 0; pass < 2; pass++) {
        size_t len = 0;
        for (size_t i = 0; i < n;) {
            const char *v = NULL;
            size_t vlen = 0;
            if (n - i >= 4 && memcmp(e + i, "$uri", 4) == 0) {
                v = r->decoded, vlen = r->decoded_len;
                i += 4;
            } else if (n - i >= 5 && memcmp(e + i, "$args", 5) == 0) {
                v = r->query.p, vlen = r->query.len;
                i += 5;
            } else {
                if (o) o[len] = e[i];
                len++, i++;
                continue;
            }
            if (o && vlen) memcpy(o + len, v, vlen);
            len += vlen;
        }
        if (pass == 0) {
            if ((out = o = lx_arena_alloc(r->arena, len + 1)) == NULL) return NULL;
        } else {
            o[len] = '\0';
            *outlen = len;
        }
    }
    return out;
}

/* The path of an expanded entry, normalised as a request's is ("//" from
 * "$uri/" for "/" becomes "/"), or NULL: a ".." that $uri cannot hold and
 * the schema refuses in the entry, or no memory; either way the entry
 * names no file below the root. */
char *lx_static_try_clean(lx_req_t *r, const char *p, size_t n, size_t *outlen) {
    char *out = lx_arena_alloc(r->arena, n + 1);
    if (out == NULL || n == 0 || p[0] != '/' || lx_path_clean(p, n, out, outlen) < 0) return NULL;
    return out;
}

/* try_files = { "$uri", "$uri/", "/index.html" }, as nginx's: each entry
 * but the last names a file (or, ending in "/", a directory, served by its
 * index as static_serve serves one) looked up through the file cache, so
 * the checks run on the thread pool as every open does, below the root and
 * under the site's follow_symlinks. A file that is not there (or a
 * directory where a file was asked for, and the other way round) passes to
 * the next entry; one that is there but refused (a link follow_symlinks
 * does not follow: 403) or failing (500) answers so, as the static handler
 * would: unlike nginx, which logs those and tries on, so that a refused
 * link is not hidden behind the SPA's index page. The last entry is
 * "=CODE" (that status, with the site's error page) or a path: an internal
 * redirect, after which the location is chosen again for it. Run again
 * from the start after an LX_ASYNC wait; the entries then hit the cache. */
static int try_files(lx_req_t *r) {
    const lx_site_t *s = r->site;
    size_t last = s->ntry_files - 1;
    for (size_t i = 0; r->root != NULL && i < last; i++) {
        const char *e = s->try_files[i];
        size_t elen = strlen(e), xlen, len;
        int want_dir = e[elen - 1] == '/';
        char *x = lx_static_try_expand(r, e, elen, &xlen);
        if (x == NULL) return 500;
        char *path = lx_static_try_clean(r, x, xlen, &len);
        if (path == NULL || (!want_dir && path[len - 1] == '/')) continue;
        lx_file_t *f;
        int rc = lookup(r, path, len, NULL, &f);
        if (rc == -EAGAIN) return LX_ASYNC;
        if (rc < 0) return 500;
        int err = f->err, is_dir = f->is_dir;
        if (err) {
            lx_file_unref(f);
            int st = lx_static_status(err);
            if (st == 404) continue;
            return st;
        }
        if (is_dir != want_dir) {
            lx_file_unref(f);
            continue;
        }
        if (want_dir) {
            lx_file_unref(f);
            return static_serve(r, path, len);
        }
        int res;
        if (lx_body_discard(r) == LX_ASYNC)
            res = LX_ASYNC;
        else if (r->method != HTTP_GET && r->method != HTTP_HEAD)
            res = 405;
        else
            res = serve_file(r, f, path, len);
        lx_file_unref(f);
        return res;
    }
    if (s->try_status) return s->try_status;
    if (++r->redirects > LX_REDIRECTS_MAX) {
        lx_log_error("%s: try_files: more than %d internal redirects (a cycle?), last to %s",
                     r->vhost->name, LX_REDIRECTS_MAX, s->try_files[last]);
        return 500;
    }
    /* The query starts at the entry's own '?' (a "?" that $uri brings in
     * is a decoded %3F, part of the path); without one the client's stays,
     * as in nginx. */
    const char *e = s->try_files[last], *q = strchr(e, '?');
    size_t plen, len;
    char *x = lx_static_try_expand(r, e, q ? (size_t)(q - e) : strlen(e), &plen);
    if (x == NULL) return 500;
    if (q) {
        size_t qlen;
        char *qx = lx_static_try_expand(r, q + 1, strlen(q + 1), &qlen);
        if (qx == NULL) return 500;
        r->query = (lx_str_t){qx, qlen};
    }
    char *path = lx_static_try_clean(r, x, plen, &len);
    if (path == NULL) {
        lx_log_error("%s: try_files: \"%s\" gave an unusable path", r->vhost->name,
                     s->try_files[last]);
        return 500;
    }
    r->decoded = path;
    r->decoded_len = len;
    return LX_REDIRECT;
}

/* Serves path (the request's, or a try_files entry's) below the root. */
static int static_serve(lx_req_t *r, const char *path, size_t len) {
    const lx_site_t *s = r->site;
    if (r->root == NULL) return LX_DECLINED;
    /* A body nobody reads is dropped before the answer, so that one over
     * max_body_bytes still gets its 413. */
    if (lx_body_discard(r) == LX_ASYNC) return LX_ASYNC;
    if (r->method != HTTP_GET && r->method != HTTP_HEAD && !r->error_status) return 405;
    lx_file_t *f;
    int res = LX_DONE;
    int rc;

    if (path[len - 1] == '/') {
        for (size_t i = 0; i < s->nindex; i++) {
            char *ipath = lx_arena_alloc(r->arena, len + strlen(s->index[i]) + 1);
            if (ipath == NULL) return 500;
            memcpy(ipath, path, len);
            strcpy(ipath + len, s->index[i]);
            size_t ilen = len + strlen(s->index[i]);
            if ((rc = lookup(r, ipath, ilen, NULL, &f)) == -EAGAIN) return LX_ASYNC;
            if (rc < 0) return 500;
            if (f->err == 0 && !f->is_dir) {
                res = serve_file(r, f, ipath, ilen);
                lx_file_unref(f);
                return res;
            }
            /* A missing index file is why there are several to try. */
            if (f->err && f->err != -ENOENT) log_open_failure(r, f);
            lx_file_unref(f);
        }
        /* No index: the directory itself decides between 403 and 404. */
        if ((rc = lookup(r, path, len, NULL, &f)) == -EAGAIN) return LX_ASYNC;
        if (rc < 0) return 500;
        /* A directory without an index: the listing handler's, if the
         * chain has one. A listing is no error page: it would answer 200
         * for a request that earned a 404 or 403. */
        if (f->err) log_open_failure(r, f);
        res = f->err ? lx_static_status(f->err) : f->is_dir ? 403 : 404;
        if (f->err == 0 && f->is_dir && s->dir_listing && !r->error_status) {
            r->dir_unindexed = 1;
            res = LX_DECLINED;
            /* The listing handler lists r->decoded: a try_files "$uri/" entry's
             * directory is the one to list. */
            r->decoded = (char *)path;
            r->decoded_len = len;
        }
        lx_file_unref(f);
        return res;
    }

    if ((rc = lookup(r, path, len, NULL, &f)) == -EAGAIN) return LX_ASYNC;
    if (rc < 0) return 500;
    if (f->err) {
        log_open_failure(r, f);
        res = lx_static_status(f->err);
    } else if (f->is_dir) {
        /* "/dir" -> "/dir/": the path being served (after any rewrite),
         * encoded again, with the query. */
        size_t n = 3 * len + r->query.len + 32;
        char *loc = lx_arena_alloc(r->arena, n);
        if (loc == NULL) {
            lx_file_unref(f);
            return 500;
        }
        memcpy(loc, "Location: ", 10);
        int e = lx_path_encode(path, len, loc + 10, n - 10);
        if (e < 0) {
            lx_file_unref(f);
            return 500;
        }
        snprintf(loc + 10 + e, n - 10 - (size_t)e, "/%s%.*s\r\n", r->query.len ? "?" : "",
                 (int)r->query.len, r->query.p);
        lx_resp_simple(r, 301, loc);
    } else {
        res = serve_file(r, f, path, len);
    }
    lx_file_unref(f);
    return res;
}

const lx_handler_t lx_static_handler = {
    .name = "static",
    .handle = static_handle,
    .methods = LX_METHODS_GET_HEAD,
};

/* The file cache calls back when a load this request waits for is done. */
void lx_static_wake(lx_waiter_t *w, int status) {
    lx_req_wake(container_of(w, lx_req_t, wait), status);
}
