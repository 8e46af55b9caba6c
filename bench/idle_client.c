/*
 * idle_client: the client of bench/idle.sh. Opens CONNS keep-alive
 * connections to 127.0.0.1:PORT, BATCH at a time, sends one
 * "GET PATH HTTP/1.1" on each, reads and checks the whole answer (status
 * 200, Content-Length equal to BODY_FILE's size, exactly BODY_FILE's bytes,
 * nothing after them), then leaves the connection open and idle and starts
 * the next batch only when every connection of this one has been answered.
 * So at most BATCH requests are ever in flight: what the server holds at the
 * end is its cost per idle connection, not the peak of a burst.
 *
 * It talks to the script on stdin/stdout, one line each way:
 *   once every connection is opened and answered it prints
 *     opened ok=N failed=M
 *   then on a line "check" from stdin it looks at every connection it kept
 *   (recv MSG_PEEK, non-blocking) and prints
 *     check open=N closed=M data=K
 *   (closed: the server closed or reset it; data: bytes arrived unasked);
 *   on end of stdin it closes everything and exits (0, or 1 on a setup error).
 * The first few failures are described on stderr; after MAX_FAILURES it stops
 * opening more (the run is not a result anyway).
 *
 * Usage: idle_client PORT PATH BODY_FILE CONNS BATCH
 * Build: cc -O2 -o idle_client idle_client.c
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define HEAD_MAX         8192 /* room for the response head */
#define BATCH_TIMEOUT_MS 10000
#define MAX_FAILURES     100
#define SHOW_FAILURES    10

enum { ST_CONNECTING, ST_READING, ST_IDLE, ST_FAILED };

struct cx {
    int fd;
    int state;
    size_t len;
    char *buf; /* the answer so far, only while reading */
};

static struct cx *cx;
static char *body;
static size_t body_len, cap;
static char req[512];
static size_t req_len;
static int ep, failed;

static void die(const char *what) {
    fprintf(stderr, "idle_client: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void fail(int i, const char *fmt, ...) {
    struct cx *c = &cx[i];
    if (++failed <= SHOW_FAILURES) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "idle_client: connection %d: ", i);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
    }
    if (c->fd >= 0) close(c->fd); /* also leaves the epoll set */
    c->fd = -1;
    free(c->buf);
    c->buf = NULL;
    c->state = ST_FAILED;
}

/* Case-insensitive search for needle in [s, s+n). */
static const char *memcasemem(const char *s, size_t n, const char *needle) {
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (strncasecmp(s + i, needle, k) == 0) return s + i;
    return NULL;
}

/* 1 when connection i holds a whole, correct answer, 0 when it needs more
 * bytes, -1 after fail(). */
static int check_answer(int i) {
    struct cx *c = &cx[i];
    const char *end = memmem(c->buf, c->len, "\r\n\r\n", 4);
    if (!end) {
        if (c->len >= HEAD_MAX) {
            fail(i, "no end of the response head in %d bytes", HEAD_MAX);
            return -1;
        }
        return 0;
    }
    size_t head = (size_t)(end - c->buf) + 4;
    if (c->len < 13 || memcmp(c->buf, "HTTP/1.", 7) != 0 || memcmp(c->buf + 8, " 200 ", 5) != 0) {
        size_t sl = strcspn(c->buf, "\r\n");
        fail(i, "status line is not 200: %.*s", (int)(sl > 80 ? 80 : sl), c->buf);
        return -1;
    }
    /* The header names are on the lines after the status line. */
    const char *cl = memcasemem(c->buf, head, "\r\ncontent-length:");
    if (!cl) {
        fail(i, "no Content-Length (chunked answers are not expected here)");
        return -1;
    }
    char *num_end;
    unsigned long long n = strtoull(cl + 17, &num_end, 10);
    if (num_end == cl + 17 || n != body_len) {
        fail(i, "Content-Length %llu, want %zu", n, body_len);
        return -1;
    }
    if (c->len < head + body_len) return 0;
    if (c->len > head + body_len) {
        fail(i, "%zu bytes after the body", c->len - head - body_len);
        return -1;
    }
    if (memcmp(c->buf + head, body, body_len) != 0) {
        fail(i, "the body differs from the file");
        return -1;
    }
    return 1;
}

/* Handles one epoll event; returns 1 when connection i is done (idle or
 * failed), 0 when it still waits for something. */
static int on_event(int i, uint32_t ev) {
    struct cx *c = &cx[i];
    if (c->state == ST_CONNECTING) {
        int err = 0;
        socklen_t el = sizeof err;
        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0) err = errno;
        if (err) {
            fail(i, "connect: %s", strerror(err));
            return 1;
        }
        if (!(ev & EPOLLOUT)) return 0;
        /* 60-odd bytes into an empty socket buffer: all or an error. */
        ssize_t w = send(c->fd, req, req_len, MSG_NOSIGNAL);
        if (w != (ssize_t)req_len) {
            fail(i, "send: %s", w < 0 ? strerror(errno) : "short write");
            return 1;
        }
        struct epoll_event e = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        if (epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &e) < 0) die("epoll_ctl MOD");
        c->state = ST_READING;
        return 0;
    }
    for (;;) {
        ssize_t r = recv(c->fd, c->buf + c->len, cap - c->len, 0);
        if (r < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
            if (errno == EINTR) continue;
            fail(i, "recv after %zu bytes: %s", c->len, strerror(errno));
            return 1;
        }
        if (r == 0) {
            fail(i, "closed by the server after %zu bytes of the answer", c->len);
            return 1;
        }
        c->len += (size_t)r;
        int ok = check_answer(i);
        if (ok < 0) return 1;
        if (ok > 0) {
            /* Answered: from now on nobody watches it; it just stays open. */
            if (epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL) < 0) die("epoll_ctl DEL");
            free(c->buf);
            c->buf = NULL;
            c->state = ST_IDLE;
            return 1;
        }
        if (c->len == cap) {
            fail(i, "answer longer than %zu bytes", cap);
            return 1;
        }
    }
}

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void read_body(const char *file) {
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) die(file);
    body_len = (size_t)st.st_size;
    body = malloc(body_len ? body_len : 1);
    if (!body) die("malloc");
    for (size_t got = 0; got < body_len;) {
        ssize_t r = read(fd, body + got, body_len - got);
        if (r <= 0) die(file);
        got += (size_t)r;
    }
    close(fd);
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: idle_client PORT PATH BODY_FILE CONNS BATCH\n");
        return 1;
    }
    int port = atoi(argv[1]), conns = atoi(argv[4]), batch = atoi(argv[5]);
    if (port < 1 || port > 65535 || conns < 1 || batch < 1) {
        fprintf(stderr, "idle_client: bad PORT, CONNS or BATCH\n");
        return 1;
    }
    read_body(argv[3]);
    cap = HEAD_MAX + body_len;
    int n = snprintf(req, sizeof req,
                     "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUser-Agent: idle_client\r\n\r\n",
                     argv[2], port);
    if (n < 0 || (size_t)n >= sizeof req) {
        fprintf(stderr, "idle_client: PATH too long\n");
        return 1;
    }
    req_len = (size_t)n;

    /* One descriptor per connection plus a few: say so now, not at 9,990. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0) die("getrlimit");
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (rlim_t)conns + 16) {
        fprintf(stderr,
                "idle_client: open files limit %llu is below CONNS %d + 16 (raise ulimit -n)\n",
                (unsigned long long)rl.rlim_cur, conns);
        return 1;
    }

    cx = calloc((size_t)conns, sizeof *cx);
    if (!cx) die("calloc");
    for (int i = 0; i < conns; i++)
        cx[i].fd = -1;
    ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) die("epoll_create1");

    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    long long t0 = now_ms();
    int opened = 0;
    for (int first = 0; first < conns && failed < MAX_FAILURES; first += batch) {
        int last = first + batch < conns ? first + batch : conns, pending = 0;
        for (int i = first; i < last; i++) {
            struct cx *c = &cx[i];
            c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
            if (c->fd < 0) {
                fail(i, "socket: %s", strerror(errno));
                continue;
            }
            c->buf = malloc(cap);
            if (!c->buf) die("malloc");
            c->len = 0;
            c->state = ST_CONNECTING;
            if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa) < 0 && errno != EINPROGRESS) {
                fail(i, "connect: %s", strerror(errno));
                continue;
            }
            struct epoll_event e = {.events = EPOLLOUT, .data.u32 = (uint32_t)i};
            if (epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &e) < 0) die("epoll_ctl ADD");
            pending++;
        }
        long long deadline = now_ms() + BATCH_TIMEOUT_MS;
        while (pending > 0) {
            struct epoll_event evs[64];
            long long left = deadline - now_ms();
            int k = left > 0 ? epoll_wait(ep, evs, 64, (int)left) : 0;
            if (k < 0) {
                if (errno == EINTR) continue;
                die("epoll_wait");
            }
            if (k == 0) { /* whatever is still pending timed out */
                for (int i = first; i < last; i++)
                    if (cx[i].state == ST_CONNECTING || cx[i].state == ST_READING) {
                        fail(i, "no full answer within %d ms", BATCH_TIMEOUT_MS);
                        pending--;
                    }
                break;
            }
            for (int j = 0; j < k; j++)
                pending -= on_event((int)evs[j].data.u32, evs[j].events);
        }
        for (int i = first; i < last; i++)
            opened += cx[i].state == ST_IDLE;
    }
    if (failed >= MAX_FAILURES)
        fprintf(stderr, "idle_client: stopped opening after %d failures\n", failed);
    fprintf(stderr, "idle_client: %d connections answered and idle, %d failed, in %lld ms\n",
            opened, failed, now_ms() - t0);
    printf("opened ok=%d failed=%d\n", opened, failed);
    fflush(stdout);

    char line[64];
    while (fgets(line, sizeof line, stdin)) {
        if (strncmp(line, "check", 5) != 0) continue;
        int open_n = 0, closed = 0, data = 0;
        for (int i = 0; i < conns; i++) {
            if (cx[i].state != ST_IDLE) continue;
            char b;
            ssize_t r = recv(cx[i].fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
            if (r > 0)
                data++;
            else if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                open_n++;
            else
                closed++;
        }
        printf("check open=%d closed=%d data=%d\n", open_n, closed, data);
        fflush(stdout);
    }
    for (int i = 0; i < conns; i++)
        if (cx[i].fd >= 0) close(cx[i].fd);
    return 0;
}
