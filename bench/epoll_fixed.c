/*
 * epoll_fixed: the "bare epoll loop" floor for bench/static.sh.
 *
 * A minimal single-threaded, level-triggered epoll HTTP/1.1 server that
 * answers every request with the same 200 response carrying a fixed body
 * (the benchmark's 1 KiB file, read once at start-up). It does no routing,
 * no file system access, no date formatting and no logging: whatever a real
 * server spends per request above this is its own overhead.
 *
 * Keep-alive aware: it reads, finds "\r\n\r\n" (pipelined requests are
 * answered in order), writes the fixed answer, and closes after writing when
 * the request said "Connection: close" (or was HTTP/1.0 without keep-alive).
 * Request bodies are not expected (the benchmark only sends GET).
 *
 * Usage: epoll_fixed PORT [BODY_FILE]    (listens on 127.0.0.1:PORT)
 * Build: cc -O2 -o epoll_fixed epoll_fixed.c
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define IN_CAP     8192
#define MAX_EVENTS 256

struct conn {
    int fd;
    int close_after; /* close once out is flushed */
    size_t in_len;
    char in[IN_CAP];
    char *out; /* pending output (only when a write was partial / pipelined) */
    size_t out_len, out_off, out_cap;
};

static char *resp_ka, *resp_close;
static size_t resp_ka_len, resp_close_len;
static int ep;

static void die(const char *what) {
    perror(what);
    exit(1);
}

static char *build_response(const char *body, size_t body_len, const char *conn_hdr, size_t *len) {
    char head[256];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 200 OK\r\n"
                     "Server: epoll_fixed\r\n"
                     "Content-Type: text/html\r\n"
                     "Content-Length: %zu\r\n"
                     "Connection: %s\r\n"
                     "\r\n",
                     body_len, conn_hdr);
    char *r = malloc((size_t)n + body_len);
    if (!r) die("malloc");
    memcpy(r, head, (size_t)n);
    memcpy(r + n, body, body_len);
    *len = (size_t)n + body_len;
    return r;
}

static void conn_free(struct conn *c) {
    close(c->fd); /* also removes it from the epoll set */
    free(c->out);
    free(c);
}

/* Case-insensitive search for needle in [s, s+n). */
static const char *memcasemem(const char *s, size_t n, const char *needle) {
    size_t m = strlen(needle);
    for (size_t i = 0; i + m <= n; i++)
        if (strncasecmp(s + i, needle, m) == 0) return s + i;
    return NULL;
}

/* Does this request head (request line + headers) ask to close? */
static int wants_close(const char *h, size_t n) {
    const char *eol = memchr(h, '\r', n);
    size_t line_len = eol ? (size_t)(eol - h) : n;
    int http10 = line_len >= 8 && memcmp(h + line_len - 8, "HTTP/1.0", 8) == 0;
    const char *p = memcasemem(h, n, "\nconnection:");
    if (p) {
        const char *end = memchr(p + 1, '\n', n - (size_t)(p + 1 - h));
        size_t vlen = end ? (size_t)(end - p) : n - (size_t)(p - h);
        if (memcasemem(p, vlen, "close")) return 1;
        if (memcasemem(p, vlen, "keep-alive")) return 0;
    }
    return http10;
}

static int queue_out(struct conn *c, const char *data, size_t len) {
    if (c->out_len + len > c->out_cap) {
        size_t cap = c->out_cap ? c->out_cap : 4096;
        while (cap < c->out_len + len)
            cap *= 2;
        char *p = realloc(c->out, cap);
        if (!p) return -1;
        c->out = p;
        c->out_cap = cap;
    }
    memcpy(c->out + c->out_len, data, len);
    c->out_len += len;
    return 0;
}

/* Writes what is pending. Returns 1 when all flushed, 0 when blocked, -1 on error. */
static int flush_out(struct conn *c) {
    while (c->out_off < c->out_len) {
        ssize_t w = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
            return -1;
        }
        c->out_off += (size_t)w;
    }
    c->out_off = c->out_len = 0;
    return 1;
}

static void set_events(struct conn *c, unsigned events) {
    struct epoll_event ev = {.events = events, .data.ptr = c};
    if (epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev) < 0) die("epoll_ctl mod");
}

/* Handles readability. Returns -1 when the connection must be closed. */
static int on_read(struct conn *c) {
    ssize_t r = read(c->fd, c->in + c->in_len, IN_CAP - c->in_len);
    if (r == 0) return -1;
    if (r < 0) return (errno == EAGAIN || errno == EINTR) ? 0 : -1;
    c->in_len += (size_t)r;

    size_t off = 0;
    int nreq = 0;
    const char *single =
        NULL; /* the common case: one request, answered straight from the static buffer */
    size_t single_len = 0;
    while (!c->close_after) {
        char *end = memmem(c->in + off, c->in_len - off, "\r\n\r\n", 4);
        if (!end) break;
        size_t head_len = (size_t)(end - (c->in + off)) + 4;
        int cl = wants_close(c->in + off, head_len);
        const char *resp = cl ? resp_close : resp_ka;
        size_t resp_len = cl ? resp_close_len : resp_ka_len;
        if (cl) c->close_after = 1;
        if (nreq == 0 && c->out_len == 0) {
            single = resp;
            single_len = resp_len;
        } else {
            if (single) {
                if (queue_out(c, single, single_len) < 0) return -1;
                single = NULL;
            }
            if (queue_out(c, resp, resp_len) < 0) return -1;
        }
        nreq++;
        off += head_len;
    }
    if (off) {
        memmove(c->in, c->in + off, c->in_len - off);
        c->in_len -= off;
    }
    if (c->in_len == IN_CAP) return -1; /* request head too large */

    if (single) { /* fast path: write straight from the shared response */
        ssize_t w;
        do
            w = write(c->fd, single, single_len);
        while (w < 0 && errno == EINTR);
        if (w < 0 && errno != EAGAIN) return -1;
        if (w < 0) w = 0;
        if ((size_t)w < single_len) {
            if (queue_out(c, single + w, single_len - (size_t)w) < 0) return -1;
        }
    }
    int f = flush_out(c);
    if (f < 0) return -1;
    if (f == 0) {
        set_events(c, EPOLLOUT);
        return 0;
    }
    if (c->close_after) return -1;
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s PORT [BODY_FILE]\n", argv[0]);
        return 2;
    }
    int port = atoi(argv[1]);
    char *body;
    size_t body_len;
    if (argc > 2) {
        int fd = open(argv[2], O_RDONLY);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0) die(argv[2]);
        body_len = (size_t)st.st_size;
        body = malloc(body_len ? body_len : 1);
        if (!body || read(fd, body, body_len) != (ssize_t)body_len) die("read body");
        close(fd);
    } else {
        body_len = 1024;
        body = malloc(body_len);
        if (!body) die("malloc");
        memset(body, 'x', body_len);
    }
    resp_ka = build_response(body, body_len, "keep-alive", &resp_ka_len);
    resp_close = build_response(body, body_len, "close", &resp_close_len);

    signal(SIGPIPE, SIG_IGN);

    int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (ls < 0) die("socket");
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(ls, (struct sockaddr *)&sa, sizeof sa) < 0) die("bind");
    if (listen(ls, 4096) < 0) die("listen");

    ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) die("epoll_create1");
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL}; /* NULL = listener */
    if (epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev) < 0) die("epoll_ctl add listener");

    fprintf(stderr, "epoll_fixed: listening on 127.0.0.1:%d, body %zu bytes\n", port, body_len);

    struct epoll_event evs[MAX_EVENTS];
    for (;;) {
        int n = epoll_wait(ep, evs, MAX_EVENTS, -1);
        if (n < 0) {
            if (errno == EINTR) continue;
            die("epoll_wait");
        }
        for (int i = 0; i < n; i++) {
            struct conn *c = evs[i].data.ptr;
            if (!c) {
                for (;;) {
                    int fd = accept4(ls, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                    if (fd < 0) {
                        if (errno == EINTR || errno == ECONNABORTED) continue;
                        break; /* EAGAIN, or EMFILE & co: retry on the next wakeup */
                    }
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    struct conn *nc = calloc(1, sizeof *nc);
                    if (!nc) {
                        close(fd);
                        continue;
                    }
                    nc->fd = fd;
                    struct epoll_event cev = {.events = EPOLLIN, .data.ptr = nc};
                    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &cev) < 0) {
                        close(fd);
                        free(nc);
                    }
                }
                continue;
            }
            if (evs[i].events & EPOLLOUT) {
                int f = flush_out(c);
                if (f < 0 || (f == 1 && c->close_after)) {
                    conn_free(c);
                    continue;
                }
                if (f == 1) set_events(c, EPOLLIN);
                continue;
            }
            if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
                if (on_read(c) < 0) conn_free(c);
            }
        }
    }
}
