/* A prefilter compiled in another process (config/prefilter.c starts it):
 * the engine's compile of thousands of patterns takes seconds and cannot be
 * interrupted from inside, so it runs in a child that a stop or a newer
 * generation kills at once, its memory going with it. Both ends are this
 * binary, so words are in native byte order:
 *
 *   request  u32 n, then n times: u32 id, u32 len, len bytes (the pattern)
 *   answer   u32 status: 0, or a positive errno and nothing follows;
 *            u32 held, u32 nleft, nleft u32 ids (the ones not held,
 *            ascending), u64 dblen, dblen bytes (lx_multire_serialize's)
 *
 * A request's bytes name its set exactly, so the parent can keep answers
 * by request and give a later generation's identical set its prefilter
 * without a compile. The parent checks an answer against its request
 * before it loads it: a child that died half-way, or a stream out of step,
 * gives an error, never a prefilter that could miss a rule. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "multire.h"

/* 0, -EPIPE at the end of the stream, or -errno. */
static int read_full(int fd, void *buf, size_t len) {
    char *p = buf;
    while (len > 0) {
        ssize_t r = read(fd, p, len);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -errno;
        if (r == 0) return -EPIPE;
        p += r;
        len -= (size_t)r;
    }
    return 0;
}

/* send, not write: a peer gone must be -EPIPE here, never a SIGPIPE. */
int lx_multire_write(int fd, const void *buf, size_t len) {
    const char *p = buf;
    while (len > 0) {
        ssize_t r = send(fd, p, len, MSG_NOSIGNAL);
        if (r < 0 && errno == ENOTSOCK) r = write(fd, p, len);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -errno;
        p += r;
        len -= (size_t)r;
    }
    return 0;
}

static int put_u32(int fd, uint32_t v) {
    return lx_multire_write(fd, &v, sizeof(v));
}

/* One request read and answered. 0, 1 at a clean end of the stream (before
 * a request), or -errno. */
static int serve_one(int fd) {
    uint32_t n;
    int rc = read_full(fd, &n, sizeof(n));
    if (rc == -EPIPE) return 1;
    if (rc < 0) return rc;
    char **pats = calloc(n ? n : 1, sizeof(*pats));
    uint32_t *ids = malloc((n ? n : 1) * sizeof(*ids));
    lx_multire_t *m = NULL;
    char *db = NULL;
    size_t dblen = 0;
    if (pats == NULL || ids == NULL) {
        rc = -ENOMEM;
        goto out;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t len;
        if ((rc = read_full(fd, &ids[i], sizeof(ids[i]))) < 0 ||
            (rc = read_full(fd, &len, sizeof(len))) < 0)
            goto out;
        if ((pats[i] = malloc((size_t)len + 1)) == NULL) {
            rc = -ENOMEM;
            goto out;
        }
        if ((rc = read_full(fd, pats[i], len)) < 0) goto out;
        pats[i][len] = '\0';
    }
    int st = lx_multire_build((const char *const *)pats, ids, n, 1, &m);
    if (st == 0) st = lx_multire_serialize(m, &db, &dblen);
    if (st < 0) {
        rc = put_u32(fd, (uint32_t)-st);
        goto out;
    }
    uint32_t nleft = n;
    const uint32_t *left = ids; /* nothing compiled: every id is left */
    if (m) left = lx_multire_left(m, &nleft);
    uint64_t len64 = dblen;
    if ((rc = put_u32(fd, 0)) < 0 || (rc = put_u32(fd, lx_multire_count(m))) < 0 ||
        (rc = put_u32(fd, nleft)) < 0 ||
        (rc = lx_multire_write(fd, left, nleft * sizeof(*left))) < 0 ||
        (rc = lx_multire_write(fd, &len64, sizeof(len64))) < 0 ||
        (rc = lx_multire_write(fd, db, dblen)) < 0)
        goto out;
out:
    if (pats)
        for (uint32_t i = 0; i < n; i++)
            free(pats[i]);
    free(pats);
    free(ids);
    free(db);
    lx_multire_free(m);
    return rc;
}

int lx_multire_serve(int fd) {
    int rc;
    while ((rc = serve_one(fd)) == 0) {
    }
    return rc == 1 ? 0 : rc;
}

int lx_multire_request(const char *const *pats, const uint32_t *ids, uint32_t n, char **out,
                       size_t *outlen) {
    size_t size = sizeof(uint32_t);
    for (uint32_t i = 0; i < n; i++)
        size += 2 * sizeof(uint32_t) + strlen(pats[i]);
    char *buf = malloc(size), *p = buf;
    *out = NULL;
    if (buf == NULL) return -ENOMEM;
    memcpy(p, &n, sizeof(n));
    p += sizeof(n);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t len = (uint32_t)strlen(pats[i]);
        memcpy(p, &ids[i], sizeof(ids[i]));
        memcpy(p + sizeof(ids[i]), &len, sizeof(len));
        memcpy(p + 2 * sizeof(len), pats[i], len);
        p += 2 * sizeof(len) + len;
    }
    *out = buf;
    *outlen = size;
    return 0;
}

/* Appends len bytes from fd to *buf (*len long, *cap allocated). The
 * buffer grows with what arrives, so that a length out of step with the
 * stream costs what was sent, not what it says. */
static int read_more(int fd, uint64_t len, char **buf, size_t *got, size_t *cap) {
    if (len > SIZE_MAX / 4 - *got) return -ENOMEM;
    size_t end = *got + (size_t)len;
    while (*got < end) {
        size_t want = end - *got < (size_t)1 << 20 ? end - *got : (size_t)1 << 20;
        if (*got + want > *cap) {
            size_t ncap = *cap ? *cap : 64;
            while (ncap < *got + want)
                ncap *= 2;
            char *nb = realloc(*buf, ncap);
            if (nb == NULL) return -ENOMEM;
            *buf = nb;
            *cap = ncap;
        }
        int rc = read_full(fd, *buf + *got, want);
        if (rc < 0) return rc;
        *got += want;
    }
    return 0;
}

int lx_multire_read_answer(int fd, char **out, size_t *outlen) {
    char *b = NULL;
    size_t got = 0, cap = 0;
    uint32_t w[3];
    uint64_t dblen;
    int rc = read_more(fd, sizeof(w[0]), &b, &got, &cap);
    if (rc < 0) goto fail;
    memcpy(w, b, sizeof(w[0]));
    if (w[0] == 0) { /* else the status is all */
        if ((rc = read_more(fd, 2 * sizeof(w[0]), &b, &got, &cap)) < 0) goto fail;
        memcpy(w, b, sizeof(w));
        if ((rc = read_more(fd, (uint64_t)w[2] * sizeof(uint32_t), &b, &got, &cap)) < 0 ||
            (rc = read_more(fd, sizeof(dblen), &b, &got, &cap)) < 0)
            goto fail;
        memcpy(&dblen, b + got - sizeof(dblen), sizeof(dblen));
        if ((rc = read_more(fd, dblen, &b, &got, &cap)) < 0) goto fail;
    }
    *out = b;
    *outlen = got;
    return 0;
fail:
    free(b);
    return rc;
}

int lx_multire_parse_answer(const char *a, size_t len, const uint32_t *ids, uint32_t n,
                            uint32_t nloops, lx_multire_t **out) {
    *out = NULL;
    uint32_t w[3];
    if (len < sizeof(w[0])) return -EPROTO;
    memcpy(w, a, sizeof(w[0]));
    if (w[0] != 0) return len == sizeof(w[0]) && w[0] < 4096 ? -(int)w[0] : -EPROTO;
    if (len < sizeof(w)) return -EPROTO;
    memcpy(w, a, sizeof(w));
    uint32_t held = w[1], nleft = w[2];
    if ((uint64_t)held + nleft != n) return -EPROTO; /* every id either held or left */
    size_t at = sizeof(w), lbytes = (size_t)nleft * sizeof(uint32_t);
    uint64_t dblen;
    if (len - at < lbytes + sizeof(dblen)) return -EPROTO;
    memcpy(&dblen, a + at + lbytes, sizeof(dblen));
    if (dblen != len - at - lbytes - sizeof(dblen) || (held == 0) != (dblen == 0)) return -EPROTO;
    uint32_t *left = malloc(lbytes ? lbytes : 1);
    if (left == NULL) return -ENOMEM;
    memcpy(left, a + at, lbytes);
    /* Each left id one of the request's, ascending (ids are): one walk. */
    int rc = 0;
    for (uint32_t i = 0, j = 0; rc == 0 && i < nleft; i++, j++) {
        while (j < n && ids[j] < left[i])
            j++;
        if (j == n || ids[j] != left[i]) rc = -EPROTO;
    }
    if (rc == 0)
        rc = lx_multire_load(a + at + lbytes + sizeof(dblen), (size_t)dblen, held, left, nleft,
                             nloops, out);
    free(left);
    return rc;
}
