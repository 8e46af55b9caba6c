/*
 * slow_client: the client of bench/proxy_mem.sh. Opens CONNS connections to
 * 127.0.0.1:PORT (BATCH at a time, a short pause between batches so no
 * listen backlog overflows), each with a small receive buffer (RCVBUF, set
 * before connect so the TCP window stays small), sends one
 * "GET PATH HTTP/1.1" on each and then reads every connection slowly: at
 * most RATE bytes per second each, in ticks of 100 ms. So a server in front
 * of a fast backend holds CONNS responses that drain at RATE: what it keeps
 * per response is what bench/proxy_mem.sh measures.
 *
 * It talks to the script on stdout, one line at a time:
 *   once every connection has its response head (or failed, or 30 s passed)
 *     ready ok=N failed=M
 *   where ok counts heads with status 200; then it keeps reading slowly for
 *   HOLD seconds and prints
 *     done open=N closed=M bytes=B
 *   (open: connections still receiving; closed: ended by the server before
 *   the body was complete; bytes: body bytes read in all), closes every
 *   connection, and exits at the end of its stdin (0, or 1 on a setup
 *   error; staying until then lets the script read the line before the
 *   coprocess is gone). The first failures are described on stderr.
 *
 * Usage: slow_client PORT PATH CONNS RATE HOLD [RCVBUF [BATCH]]
 * Build: cc -O2 -o slow_client slow_client.c
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define TICK_MS       100
#define HEAD_MAX      8192
#define READY_TIMEOUT 30.0
#define SHOW_FAILURES 10

enum { ST_HEAD, ST_BODY, ST_DONE, ST_FAILED };

struct cx {
    int fd, state;
    size_t head_len;
    char head[HEAD_MAX];
};

static int failures;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void fail(struct cx *c, int i, const char *what) {
    if (++failures <= SHOW_FAILURES) fprintf(stderr, "slow_client: connection %d: %s\n", i, what);
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    c->state = ST_FAILED;
}

int main(int argc, char **argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: slow_client PORT PATH CONNS RATE HOLD [RCVBUF [BATCH]]\n");
        return 1;
    }
    int port = atoi(argv[1]), conns = atoi(argv[3]), rate = atoi(argv[4]);
    double hold = atof(argv[5]);
    int rcvbuf = argc > 6 ? atoi(argv[6]) : 4096, batch = argc > 7 ? atoi(argv[7]) : 50;
    if (port <= 0 || conns <= 0 || rate <= 0 || batch <= 0) {
        fprintf(stderr, "slow_client: bad arguments\n");
        return 1;
    }
    struct rlimit rl = {conns + 64, conns + 64};
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
        fprintf(stderr, "slow_client: setrlimit(%d): %s\n", conns + 64, strerror(errno));
        return 1;
    }
    char req[1024];
    int req_len =
        snprintf(req, sizeof req,
                 "GET %s HTTP/1.1\r\nHost: bench\r\nUser-Agent: slow_client\r\n\r\n", argv[2]);
    struct cx *cx = calloc(conns, sizeof *cx);
    if (!cx) return 1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);

    /* Blocking connects (loopback: the handshake needs no accept), then
     * the request; reading is all non-blocking (MSG_DONTWAIT). */
    for (int i = 0; i < conns; i++) {
        struct cx *c = &cx[i];
        c->fd = socket(AF_INET, SOCK_STREAM, 0);
        if (c->fd < 0) {
            fail(c, i, strerror(errno));
            continue;
        }
        setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
        if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
            fail(c, i, strerror(errno));
            continue;
        }
        if (send(c->fd, req, req_len, MSG_NOSIGNAL) != req_len) {
            fail(c, i, "send");
            continue;
        }
        if ((i + 1) % batch == 0) usleep(10000);
    }

    long long bytes = 0;
    size_t per_tick = (size_t)rate * TICK_MS / 1000;
    if (per_tick == 0) per_tick = 1;
    char *buf = malloc(per_tick > HEAD_MAX ? per_tick : HEAD_MAX);
    if (!buf) return 1;
    double start = now(), end = 0, next = start;
    int ready = 0;
    for (;;) {
        int heads = 0, ok = 0, bad = 0;
        for (int i = 0; i < conns; i++) {
            struct cx *c = &cx[i];
            if (c->state == ST_HEAD) {
                ssize_t n = recv(c->fd, c->head + c->head_len, sizeof c->head - 1 - c->head_len,
                                 MSG_PEEK | MSG_DONTWAIT);
                if (n == 0 || (n < 0 && errno != EAGAIN)) {
                    fail(c, i, n ? strerror(errno) : "closed before the head");
                    continue;
                }
                if (n > 0) {
                    /* Peeked: take only the head off the socket, so the
                     * body is read at RATE like the rest. */
                    c->head[c->head_len + n] = 0;
                    char *e = strstr(c->head, "\r\n\r\n");
                    size_t take = e ? (size_t)(e + 4 - c->head) - c->head_len : (size_t)n;
                    if (recv(c->fd, c->head + c->head_len, take, MSG_DONTWAIT) != (ssize_t)take) {
                        fail(c, i, "recv");
                        continue;
                    }
                    c->head_len += take;
                    c->head[c->head_len] = 0;
                    if (e) {
                        if (strncmp(c->head, "HTTP/1.1 200 ", 13) != 0 &&
                            strncmp(c->head, "HTTP/1.0 200 ", 13) != 0) {
                            fail(c, i, "status is not 200");
                            continue;
                        }
                        c->state = ST_BODY;
                    } else if (c->head_len >= sizeof c->head - 1) {
                        fail(c, i, "head too long");
                        continue;
                    }
                }
            } else if (c->state == ST_BODY && ready) {
                ssize_t n = recv(c->fd, buf, per_tick, MSG_DONTWAIT);
                if (n > 0)
                    bytes += n;
                else if (n == 0 || errno != EAGAIN) {
                    c->state = ST_DONE;
                    close(c->fd);
                    c->fd = -1;
                }
            }
            if (c->state == ST_HEAD) heads++;
            if (c->state == ST_BODY) ok++;
            if (c->state == ST_FAILED) bad++;
        }
        double t = now();
        if (!ready && (heads == 0 || t - start > READY_TIMEOUT)) {
            printf("ready ok=%d failed=%d\n", ok, conns - ok);
            fflush(stdout);
            ready = 1;
            end = t + hold;
        }
        if (ready && t >= end) {
            int open = 0, closed = 0;
            for (int i = 0; i < conns; i++) {
                if (cx[i].state == ST_BODY) open++;
                if (cx[i].state == ST_DONE) closed++;
            }
            printf("done open=%d closed=%d bytes=%lld\n", open, closed, bytes);
            fflush(stdout);
            for (int i = 0; i < conns; i++)
                if (cx[i].fd >= 0) close(cx[i].fd);
            char ch;
            while (read(0, &ch, 1) > 0) {
            }
            return 0;
        }
        /* Heads are polled every 10 ms; the body once per tick. */
        next += ready ? TICK_MS / 1000.0 : 0.01;
        double wait = next - now();
        if (wait > 0)
            usleep((useconds_t)(wait * 1e6));
        else
            next = now();
    }
}
