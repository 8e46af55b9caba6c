/* The prefilter's compile in another process (dispatch/multire_wire.c): a
 * child serving requests on a socket gives back what a compile in this
 * process gives (the same candidates for every path), serves several
 * requests in turn, and lists what the engine refused; and the parent takes
 * no answer that does not fit its request: cut at every byte, out of step,
 * naming ids it never sent, or with database bytes spoiled, it is an error,
 * never a prefilter that could miss a rule. Without the engine the child
 * answers ENOTSUP. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dispatch/multire.h"
#include "tap.h"

static pid_t child;

static int start_child(void) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) return -1;
    child = fork();
    if (child == 0) {
        close(sv[0]);
        _exit(lx_multire_serve(sv[1]) == 0 ? 0 : 1);
    }
    close(sv[1]);
    return sv[0];
}

static int end_child(int fd) {
    int st = -1;
    close(fd);
    waitpid(child, &st, 0);
    return st;
}

static int send_request(int fd, const char *const *pats, const uint32_t *ids, uint32_t n) {
    char *req;
    size_t len;
    int rc = lx_multire_request(pats, ids, n, &req, &len);
    if (rc == 0) rc = lx_multire_write(fd, req, len);
    free(req);
    return rc;
}

static int recv_answer(int fd, const uint32_t *ids, uint32_t n, lx_multire_t **out) {
    char *a;
    size_t len;
    *out = NULL;
    int rc = lx_multire_read_answer(fd, &a, &len);
    if (rc < 0) return rc;
    rc = lx_multire_parse_answer(a, len, ids, n, 2, out);
    free(a);
    return rc;
}

/* An answer from bytes: written to a pipe (whole, then its end), read back
 * and parsed. */
static int answer_from(const void *bytes, size_t len, const uint32_t *ids, uint32_t n,
                       lx_multire_t **out) {
    int p[2];
    if (pipe(p) < 0) return -999;
    if (len && write(p[1], bytes, len) != (ssize_t)len) return -998;
    close(p[1]);
    int rc = recv_answer(p[0], ids, n, out);
    close(p[0]);
    return rc;
}

/* The answer bytes, as the child sent them, for a request. */
static size_t raw_answer(const char *const *pats, const uint32_t *ids, uint32_t n, char *buf,
                         size_t cap) {
    int fd = start_child();
    size_t got = 0;
    if (send_request(fd, pats, ids, n) == 0) {
        shutdown(fd, SHUT_WR); /* the child answers, then meets the end */
        ssize_t r;
        while (got < cap && (r = read(fd, buf + got, cap - got)) > 0)
            got += (size_t)r;
    }
    end_child(fd);
    return got;
}

static int same_candidates(const lx_multire_t *a, const lx_multire_t *b, const char *path) {
    uint32_t ca[64], cb[64];
    lx_multire_scratch_t sa = {0}, sb = {0};
    int na = lx_multire_scan(a, &sa, path, strlen(path), ca, 64);
    int nb = lx_multire_scan(b, &sb, path, strlen(path), cb, 64);
    lx_multire_scratch_free(&sa);
    lx_multire_scratch_free(&sb);
    return na == nb && (na <= 0 || memcmp(ca, cb, (size_t)na * sizeof(*ca)) == 0);
}

int main(void) {
    static char src[1000][32];
    static const char *pats[1000];
    static uint32_t ids[1000];
    for (int i = 0; i < 1000; i++) {
        snprintf(src[i], sizeof(src[i]), "(a|b)%05d\\d+", i);
        pats[i] = src[i];
        ids[i] = (uint32_t)(3 * i + 1); /* rule ids: ascending, with gaps */
    }
    signal(SIGPIPE, SIG_IGN);

    if (!lx_multire_available()) {
        int fd = start_child();
        lx_multire_t *m = (lx_multire_t *)1;
        ok(send_request(fd, pats, ids, 10) == 0, "a request sent");
        ok(recv_answer(fd, ids, 10, &m) == -ENOTSUP && m == NULL,
           "no engine in this build: the child says ENOTSUP");
        ok(end_child(fd) == 0, "and ends at the end of its stream");
        return done_testing();
    }

    /* 1. The child's answer is the local compile's. */
    lx_multire_t *local = NULL, *remote = NULL;
    ok(lx_multire_build(pats, ids, 1000, 2, &local) == 0 && local, "1000 compiled here");
    int fd = start_child();
    ok(send_request(fd, pats, ids, 1000) == 0, "the same 1000 sent to a child");
    ok(recv_answer(fd, ids, 1000, &remote) == 0 && remote, "its answer loaded");
    ok(lx_multire_count(remote) == 1000, "it holds all 1000");
    int differ = 0;
    char path[64];
    for (int i = 0; i < 2000; i++) {
        snprintf(path, sizeof(path), "/%c%05d%d/x", i & 1 ? 'a' : 'b', (i * 7919) % 1100, i % 10);
        differ += !same_candidates(local, remote, path);
    }
    differ += !same_candidates(local, remote, "/index.html");
    ok(differ == 0, "2001 paths: the same candidates both ways (%d differ)", differ);

    /* 2. A second request on the same stream, with what the engine cannot
     * parse among it: listed as left, ascending, the rest held. */
    const char *mixed[] = {"(a|b)1\\d+", "(unbalanced", "x\\d+y", "[z", "q(r|s)t"};
    const uint32_t mids[] = {2, 5, 9, 11, 40};
    lx_multire_t *m2 = NULL;
    ok(send_request(fd, mixed, mids, 5) == 0 && recv_answer(fd, mids, 5, &m2) == 0 && m2,
       "a second request, same child");
    uint32_t nleft = 0;
    const uint32_t *left = lx_multire_left(m2, &nleft);
    ok(lx_multire_count(m2) == 3 && nleft == 2 && left[0] == 5 && left[1] == 11,
       "3 held, ids 5 and 11 left (held %u, left %u)", lx_multire_count(m2), nleft);
    const char *none[] = {"(", "[", ")"};
    lx_multire_t *m3 = (lx_multire_t *)1;
    ok(send_request(fd, none, mids, 3) == 0 && recv_answer(fd, mids, 3, &m3) == 0 && m3 == NULL,
       "a set the engine holds none of: no prefilter, no error");
    ok(end_child(fd) == 0, "the child ends cleanly at the end of its stream");

    /* 3. Answers that do not fit. A small set's answer, cut at every byte. */
    static char buf[1 << 16];
    const char *small[] = {"(a|b)1\\d+", "x\\d+y", "q(r|s)t"};
    const uint32_t sids[] = {4, 6, 8};
    size_t len = raw_answer(small, sids, 3, buf, sizeof(buf));
    ok(len > 24 && len < sizeof(buf), "a small set's answer: %zu bytes", len);
    lx_multire_t *m = NULL;
    ok(answer_from(buf, len, sids, 3, &m) == 0 && m && lx_multire_count(m) == 3, "whole, it loads");
    lx_multire_free(m);
    int cut_bad = 0;
    for (size_t k = 0; k < len; k++) {
        m = (lx_multire_t *)1;
        int rc = answer_from(buf, k, sids, 3, &m);
        cut_bad += !(rc == -EPIPE && m == NULL);
        if (rc == 0) lx_multire_free(m);
    }
    ok(cut_bad == 0, "cut at each of %zu bytes: -EPIPE and nothing loaded (%d not)", len, cut_bad);
    /* The bytes alone (as kept for a later generation): short or long by
     * any amount is no answer. */
    int parse_bad = 0;
    for (size_t k = 0; k < len + 9; k++) {
        static char grown[1 << 16];
        memcpy(grown, buf, len);
        memset(grown + len, 0, 9);
        m = (lx_multire_t *)1;
        int rc = lx_multire_parse_answer(grown, k, sids, 3, 2, &m);
        if (k == len) {
            parse_bad += !(rc == 0 && m);
            lx_multire_free(m);
        } else {
            parse_bad += !(rc == -EPROTO && m == NULL);
        }
    }
    ok(parse_bad == 0, "parsed from bytes: only its exact length loads (%d not)", parse_bad);

    /* The same answer against other requests, and with words changed. */
    uint32_t w[4];
    memcpy(w, buf, sizeof(w)); /* status, held, nleft, (dblen's low word) */
    ok(w[0] == 0 && w[1] == 3 && w[2] == 0, "it reads: status 0, 3 held, none left");
    const uint32_t other[] = {4, 6, 8, 9};
    ok(answer_from(buf, len, other, 4, &m) == -EPROTO, "for a request of 4: -EPROTO");
    ok(answer_from(buf, len, sids, 2, &m) == -EPROTO, "for a request of 2: -EPROTO");
    static char bad[1 << 16];
    memcpy(bad, buf, len);
    uint32_t st = ENOMEM;
    memcpy(bad, &st, 4);
    ok(answer_from(bad, len, sids, 3, &m) == -ENOMEM, "status ENOMEM: that error");
    st = 70000;
    memcpy(bad, &st, 4);
    ok(answer_from(bad, len, sids, 3, &m) == -EPROTO, "status not an errno: -EPROTO");
    /* held 2, left 1 naming an id: the ids come after nleft, then dblen. */
    size_t hdr = 12;
    char *mk = bad;
    uint32_t h2[3] = {0, 2, 1};
    uint64_t dbl;
    memcpy(&dbl, buf + hdr, 8);
    for (uint32_t id = 3; id <= 9; id++) {
        memcpy(mk, h2, 12);
        memcpy(mk + 12, &id, 4);
        memcpy(mk + 16, buf + hdr, len - hdr);
        int rc = answer_from(mk, len + 4, sids, 3, &m);
        int want_ok = id == 4 || id == 6 || id == 8;
        if (want_ok) {
            ok(rc == 0 && m && lx_multire_count(m) == 2, "left id %u, one of the request's: taken",
               id);
            lx_multire_free(m);
        } else {
            ok(rc == -EPROTO, "left id %u, never sent: -EPROTO", id);
        }
    }
    uint32_t h3[5] = {0, 1, 2, 8, 6}; /* left 8 then 6: not ascending */
    memcpy(mk, h3, 20);
    memcpy(mk + 20, buf + hdr, len - hdr);
    ok(answer_from(mk, len + 8, sids, 3, &m) == -EPROTO, "left ids out of order: -EPROTO");
    uint32_t h4[6] = {0, 0, 3, 4, 6, 8}; /* none held, yet a database follows */
    memcpy(mk, h4, 24);
    memcpy(mk + 24, buf + hdr, len - hdr);
    ok(answer_from(mk, len + 12, sids, 3, &m) == -EPROTO, "none held with a database: -EPROTO");
    uint64_t zero = 0;
    memcpy(mk, buf, hdr);
    memcpy(mk + hdr, &zero, 8);
    ok(answer_from(mk, hdr + 8, sids, 3, &m) == -EPROTO, "3 held with no database: -EPROTO");
    int spoiled = 0;
    for (size_t at = hdr + 8; at < len; at += (len - hdr) / 40 + 1) {
        memcpy(bad, buf, len);
        bad[at] ^= 0x5a;
        m = NULL;
        int rc = answer_from(bad, len, sids, 3, &m);
        if (rc == 0) { /* a byte the engine does not check: the set must still work */
            spoiled += !same_candidates(m, m, "/a1234");
            lx_multire_free(m);
        } else {
            spoiled += rc != -EINVAL;
        }
    }
    ok(spoiled == 0, "database bytes spoiled here and there: -EINVAL (%d not)", spoiled);
    (void)dbl;

    lx_multire_free(local);
    lx_multire_free(remote);
    lx_multire_free(m2);
    return done_testing();
}
