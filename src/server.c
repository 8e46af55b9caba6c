#include "server.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <malloc.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "handlers/handler.h"
#include "io/logfiles.h"
#include "stats.h"
#include "worker.h"

/* One listen address and its socket in each loop. */
typedef struct {
    lx_listen_t addr; /* as configured */
    int *fds;         /* one per worker */
} slot_t;

static struct {
    const char *file; /* config file, as given */
    char *prefix;     /* directory relative paths start from */
    lx_gen_t *gen;    /* current generation (one reference) */
    lx_worker_t *workers;
    int nworkers;
    slot_t *slots;
    size_t nslots;
    char *pid_file;   /* written at start, removed at stop */
    int pid_fd;       /* pid_file, kept open: emptied at stop when it cannot be removed */
    int status_fd;    /* pid_file.reload, opened with it (before privileges drop) */
    char *user;       /* the user luxd dropped root for, or NULL when it did not */
    uint64_t reloads; /* reload attempts, for the status file */
    int *inherited;   /* LISTEN_FDS sockets not yet claimed */
    int ninherited;
} srv = {.pid_fd = -1, .status_fd = -1};

void lx_notify(const char *fmt, ...) {
    const char *path = getenv("NOTIFY_SOCKET");
    if (path == NULL || (path[0] != '/' && path[0] != '@')) return;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t len = strlen(path);
    if (len >= sizeof(sa.sun_path)) return;
    memcpy(sa.sun_path, path, len);
    if (sa.sun_path[0] == '@') sa.sun_path[0] = '\0'; /* abstract namespace */
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return;
    if (sendto(fd, msg, (size_t)n, 0, (struct sockaddr *)&sa,
               (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len)) < 0)
        lx_log_warn("sd_notify: %s", strerror(errno));
    close(fd);
}

static uint64_t monotonic_usec(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

int lx_reload_status_path(const char *pid_file, char *out, size_t len) {
    if (pid_file == NULL) return -ENOENT;
    int n = snprintf(out, len, "%s.reload", pid_file);
    return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* "SEQ ok|failed MESSAGE", written over the start of the file that was
 * opened with the pid file, before privileges dropped: once luxd runs as
 * `user` it may not create files where the pid file is (nginx's master
 * stays root for this; luxd has no master). One pwrite puts the whole line
 * in place; the ftruncate after it only cuts what followed the newline of
 * a longer line before, which readers of the first line never see. */
static void write_status(int ok, const char *msg) {
    if (srv.status_fd < 0) return;
    char line[4200];
    int n = snprintf(line, sizeof(line), "%llu %s %s\n", (unsigned long long)srv.reloads,
                     ok ? "ok" : "failed", msg);
    if (n < 0) return;
    if ((size_t)n >= sizeof(line)) {
        n = (int)sizeof(line) - 1;
        line[n - 1] = '\n';
    }
    if (pwrite(srv.status_fd, line, (size_t)n, 0) == n) {
        if (ftruncate(srv.status_fd, n) < 0) { /* the first line is right */
        }
    }
}

/* The lowest port a user other than root may bind (Linux's
 * net.ipv4.ip_unprivileged_port_start; 1024 where it cannot be read). */
static int unprivileged_port_start(void) {
    int port = 1024;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_unprivileged_port_start", "re");
    if (f) {
        if (fscanf(f, "%d", &port) != 1) port = 1024;
        fclose(f);
    }
    return port;
}

/* Why a file luxd must open after it dropped root cannot be: said with
 * what to change. `what` is "error log /x" or the like; err a negative
 * errno. */
static void explain_open(char *out, size_t len, const char *what, const char *path, int err) {
    if (srv.user == NULL || (err != -EACCES && err != -EPERM)) {
        snprintf(out, len, "%s: %s", what, lx_file_strerror(err));
        return;
    }
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *(slash == dir ? slash + 1 : slash) = '\0';
    int there = access(path, F_OK) == 0 ? 0 : errno;
    if (there == 0)
        snprintf(out, len,
                 "%s: %s: luxd runs as user \"%s\" (it dropped root at start) and that user "
                 "cannot write the file; make it writable by %s (chown %s %s)",
                 what, strerror(-err), srv.user, srv.user, srv.user, path);
    else if (there == ENOENT)
        snprintf(out, len,
                 "%s: %s: luxd runs as user \"%s\" (it dropped root at start) and that user "
                 "cannot create files in %s; make the directory writable by %s, or have the file "
                 "created for %s (logrotate: create 0640 %s adm)",
                 what, strerror(-err), srv.user, dir, srv.user, srv.user, srv.user);
    else
        snprintf(out, len,
                 "%s: %s: luxd runs as user \"%s\" (it dropped root at start) and that user "
                 "cannot reach %s (a directory on the way is not searchable by it); give %s "
                 "search permission there, or keep the logs in a directory it may use",
                 what, strerror(-err), srv.user, dir, srv.user);
}

/* Finds a socket handed over by systemd (LISTEN_FDS) bound to l. */
static int take_inherited(const lx_listen_t *l) {
    for (int i = 0; i < srv.ninherited; i++) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        int fd = srv.inherited[i];
        if (fd < 0 || getsockname(fd, (struct sockaddr *)&ss, &len) < 0) continue;
        if (len == l->addrlen && memcmp(&ss, &l->addr, len) == 0) {
            srv.inherited[i] = -1;
            return fd;
        }
    }
    return -1;
}

/* Sets the IPv6 scope of a socket for l: only the "all addresses" form is
 * dual-stack; "[::1]:80" means v6. */
static void set_v6only(int fd, const lx_listen_t *l) {
    if (l->addr.ss_family != AF_INET6) return;
    int one = 1, zero = 0;
    const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)&l->addr;
    int any = memcmp(&a6->sin6_addr, &in6addr_any, sizeof(in6addr_any)) == 0 && l->text[0] != '[';
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, any ? &zero : &one, sizeof(one));
}

/* Whether another process listens on l's address. Our own sockets carry
 * SO_REUSEPORT, and so would a second luxd's: the kernel would let both
 * bind and split the connections between two servers. A probe bound
 * without SO_REUSEPORT fails (EADDRINUSE) when any socket listens there,
 * as nginx without `reuseport` refuses to start. SO_REUSEADDR keeps
 * connections in TIME_WAIT (a restart) from counting. Returns 0 when the
 * address is free, -EADDRINUSE when it is held, another error from bind. */
static int probe_free(const lx_listen_t *l) {
    int fd = socket(l->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    set_v6only(fd, l);
    int r = bind(fd, (const struct sockaddr *)&l->addr, l->addrlen) < 0 ? -errno : 0;
    close(fd);
    return r;
}

/* A listening address as /proc/net/tcp6 would show it: 16 bytes, an IPv4
 * address in its v4-mapped form. Kept as in memory (network order), so
 * that the kernel's hex words compare by memcmp. */
typedef struct {
    uint8_t a[16];
    uint16_t port; /* host order */
    int any4;      /* 0.0.0.0 */
    int any6;      /* ::, perhaps dual-stack */
} lx_laddr_t;

static void laddr_of(const struct sockaddr_storage *ss, lx_laddr_t *out) {
    memset(out, 0, sizeof(*out));
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *a4 = (const struct sockaddr_in *)ss;
        out->a[10] = out->a[11] = 0xff;
        memcpy(out->a + 12, &a4->sin_addr, 4);
        out->port = ntohs(a4->sin_port);
        out->any4 = a4->sin_addr.s_addr == htonl(INADDR_ANY);
    } else {
        const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)ss;
        memcpy(out->a, &a6->sin6_addr, 16);
        out->port = ntohs(a6->sin6_port);
        out->any6 = memcmp(&a6->sin6_addr, &in6addr_any, 16) == 0;
    }
}

/* Whether binding both would collide. Erring towards "yes" only matters
 * after a probe bind already failed. */
static int laddr_overlap(const lx_laddr_t *x, const lx_laddr_t *y) {
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (x->port != y->port) return 0;
    if (x->any6 || y->any6 || memcmp(x->a, y->a, 16) == 0) return 1;
    return (x->any4 && memcmp(y->a, mapped, 12) == 0) || (y->any4 && memcmp(x->a, mapped, 12) == 0);
}

/* Whether the socket with this inode is one of this process's fds. */
static int own_socket(unsigned long inode) {
    char want[64], link[64];
    int n = snprintf(want, sizeof(want), "socket:[%lu]", inode);
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL) return 0;
    int found = 0;
    for (struct dirent *e; !found && (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.') continue;
        ssize_t len = readlinkat(dirfd(d), e->d_name, link, sizeof(link));
        found = len == n && memcmp(link, want, (size_t)n) == 0;
    }
    closedir(d);
    return found;
}

/* After a probe bind failed: whether a listening socket that collides with
 * l belongs to another process. Our own sockets collide too: those of an
 * address one reload dropped and the next adds again, which a busy loop has
 * not closed yet, or a wildcard beside a specific address. The kernel's
 * tables (/proc/net/tcp, tcp6) list every listener with its inode; ours
 * are the inodes behind our fds. */
static int held_by_other(const lx_listen_t *l) {
    static const char *const tables[] = {"/proc/net/tcp", "/proc/net/tcp6"};
    lx_laddr_t want;
    laddr_of(&l->addr, &want);
    int other = 0;
    for (size_t t = 0; t < 2 && !other; t++) {
        FILE *f = fopen(tables[t], "re");
        if (f == NULL) continue;
        char line[512], hex[40];
        unsigned port, state;
        unsigned long inode;
        while (!other && fgets(line, sizeof(line), f)) {
            if (sscanf(line, " %*u: %39[0-9A-Fa-f]:%x %*s %x %*s %*s %*s %*s %*s %lu", hex, &port,
                       &state, &inode) != 4 ||
                state != 0x0A /* TCP_LISTEN */)
                continue;
            lx_laddr_t have = {.port = (uint16_t)port};
            uint32_t w[4] = {0};
            if (t == 0) {
                sscanf(hex, "%8x", &w[3]);
                have.a[10] = have.a[11] = 0xff;
                memcpy(have.a + 12, &w[3], 4);
                have.any4 = w[3] == 0;
            } else {
                sscanf(hex, "%8x%8x%8x%8x", &w[0], &w[1], &w[2], &w[3]);
                memcpy(have.a, w, 16);
                have.any6 = (w[0] | w[1] | w[2] | w[3]) == 0;
            }
            if (laddr_overlap(&want, &have) && !own_socket(inode)) other = 1;
        }
        fclose(f);
    }
    return other;
}

/* Opens one listening socket. Each loop gets its own, bound with
 * SO_REUSEPORT, so the kernel spreads connections without a shared lock. */
static int open_listener(const lx_listen_t *l, const lx_server_conf_t *s) {
    int fd = socket(l->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
    set_v6only(fd, l);
    /* Accepted sockets inherit TCP_NODELAY on Linux: one call here instead
     * of one per connection. */
    if (s->tcp_nodelay) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (bind(fd, (const struct sockaddr *)&l->addr, l->addrlen) < 0 || listen(fd, s->backlog) < 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    if (s->defer_accept) {
        /* Wake the loop only when the request's first bytes are there. */
        int secs = (int)(s->header_timeout / 1000) > 0 ? (int)(s->header_timeout / 1000) : 1;
        setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &secs, sizeof(secs));
    }
    return fd;
}

static void close_slot(slot_t *sl, int nworkers) {
    for (int i = 0; i < nworkers; i++)
        if (sl->fds[i] >= 0) close(sl->fds[i]);
    free(sl->fds);
}

static const slot_t *find_slot(const slot_t *slots, size_t n, const lx_listen_t *l) {
    for (size_t i = 0; i < n; i++)
        if (slots[i].addr.addrlen == l->addrlen &&
            memcmp(&slots[i].addr.addr, &l->addr, l->addrlen) == 0 &&
            strcmp(slots[i].addr.text, l->text) == 0)
            return &slots[i];
    return NULL;
}

/* "file:line: listen ADDR: why"; a port only root may bind, asked for
 * after luxd dropped root, is said to be that. */
static void listen_error(char *err, size_t errlen, const lx_listen_t *l, int r) {
    int port =
        ntohs(l->addr.ss_family == AF_INET6 ? ((const struct sockaddr_in6 *)&l->addr)->sin6_port
                                            : ((const struct sockaddr_in *)&l->addr)->sin_port);
    if (r == -EACCES && srv.user && port < unprivileged_port_start())
        snprintf(err, errlen,
                 "%s:%d: listen %s: %s: port %d needs root, and luxd dropped root for user "
                 "\"%s\" when it started; restart luxd to listen on it",
                 l->file, l->line, l->text, strerror(-r), port, srv.user);
    else
        snprintf(err, errlen, "%s:%d: listen %s: %s", l->file, l->line, l->text, strerror(-r));
}

/* The listener table for g: unchanged addresses keep their sockets, new
 * ones are opened (or taken from LISTEN_FDS). On failure nothing is kept
 * open and err says which address failed. */
static int build_slots(const lx_gen_t *g, int nworkers, slot_t **out, size_t *nout, char *err,
                       size_t errlen) {
    const lx_server_conf_t *s = &g->srv;
    slot_t *slots = calloc(s->nlisten ? s->nlisten : 1, sizeof(*slots));
    size_t n = 0;
    int r = slots ? 0 : -ENOMEM;
    for (size_t j = 0; r == 0 && j < s->nlisten; j++) {
        const lx_listen_t *l = &s->listen[j];
        slot_t *sl = &slots[n];
        sl->addr = *l;
        sl->fds = malloc((size_t)nworkers * sizeof(int));
        if (sl->fds == NULL) {
            r = -ENOMEM;
            break;
        }
        const slot_t *old = find_slot(srv.slots, srv.nslots, l);
        if (old) {
            memcpy(sl->fds, old->fds, (size_t)nworkers * sizeof(int));
            n++;
            continue;
        }
        int inherited = take_inherited(l);
        /* A probe that fails on sockets of our own (see held_by_other) is
         * no reason to refuse; the kernel's SO_REUSEPORT check (same user)
         * still applies to the binds that follow. */
        if (inherited < 0 && (r = probe_free(l)) == -EADDRINUSE && !held_by_other(l)) r = 0;
        if (r < 0) {
            free(sl->fds);
            if (r == -EADDRINUSE)
                snprintf(err, errlen,
                         "%s:%d: listen %s: %s by another process (is another luxd running?)",
                         l->file, l->line, l->text, strerror(EADDRINUSE));
            else
                listen_error(err, errlen, l, r);
            break;
        }
        for (int i = 0; i < nworkers; i++) {
            /* Loops share an inherited socket, each through its own fd. */
            int fd = inherited >= 0 ? (i == 0 ? inherited : dup(inherited)) : open_listener(l, s);
            if (fd < 0) {
                r = inherited >= 0 ? -errno : fd;
                while (i-- > 0)
                    close(sl->fds[i]);
                free(sl->fds);
                listen_error(err, errlen, l, r);
                break;
            }
            sl->fds[i] = fd;
        }
        if (r == 0) n++;
    }
    if (r < 0) {
        /* Close only what this call opened; the running slots stay. */
        for (size_t i = 0; i < n; i++) {
            if (find_slot(srv.slots, srv.nslots, &slots[i].addr))
                free(slots[i].fds);
            else
                close_slot(&slots[i], nworkers);
        }
        free(slots);
        if (r == -ENOMEM && err[0] == '\0') snprintf(err, errlen, "out of memory");
        return r;
    }
    *out = slots;
    *nout = n;
    return 0;
}

static void free_slots(slot_t *slots, size_t n) {
    for (size_t i = 0; i < n; i++)
        free(slots[i].fds);
    free(slots);
}

static void release_logs(lx_gen_t *g) {
    for (size_t i = 0; i < g->nlog_slots; i++)
        lx_logfiles_release(g->log_slots[i]);
    free(g->log_slots);
    g->log_slots = NULL;
    g->nlog_slots = 0;
}

static int open_one_log(lx_gen_t *g, lx_access_log_conf_t *al, char *err, size_t errlen) {
    int fd, slot = lx_logfiles_acquire(al->path, &fd);
    if (slot < 0) {
        char what[4200];
        snprintf(what, sizeof(what), "%s:%d: access_log %s", al->file, al->line, al->path);
        explain_open(err, errlen, what, al->path, slot);
        return slot;
    }
    g->log_slots[g->nlog_slots++] = slot;
    al->slot = slot;
    al->fd = fd;
    return 0;
}

/* Opens (or shares, when a path is open already) every access log g
 * names: the server's and each vhost's own. A generation that fails here
 * is never published; what it opened is closed with it. */
static int open_gen_logs(lx_gen_t *g, char *err, size_t errlen) {
    g->log_slots = malloc((g->nvhosts + 1) * sizeof(int));
    if (g->log_slots == NULL) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    g->release_logs = release_logs;
    int r = 0;
    if (g->srv.access_log.path) r = open_one_log(g, &g->srv.access_log, err, errlen);
    for (size_t i = 0; r == 0 && i < g->nvhosts; i++) {
        lx_access_log_conf_t *al = g->vhosts[i].access_log;
        if (al && al != &g->srv.access_log) r = open_one_log(g, al, err, errlen);
    }
    return r;
}

/* Whether path can be opened for appending (a log the config names). */
static int can_append(const char *path) {
    if (lx_log_std_fd(path) >= 0) return 0;
    int fd = lx_log_open_file(path);
    if (fd < 0) return fd;
    close(fd);
    return 0;
}

/* Opens (creating it 0644) a file of luxd's own beside the pid file, as
 * root, in a directory (RuntimeDirectory=) the serving user may write: a
 * link planted there is not followed (O_NOFOLLOW), nor truncated through
 * (no O_TRUNC: only once fstat shows a regular file with one name, owned
 * by luxd's user or root, is it emptied). */
static int open_own_file(const char *path, int lock) {
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK, 0644);
    if (fd < 0) return errno == ELOOP ? LX_ESYMLINK : -errno;
    struct stat st;
    struct flock lk = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    int r = 0;
    if (fstat(fd, &st) < 0)
        r = -errno;
    else if (!S_ISREG(st.st_mode))
        r = LX_ENOTFILE;
    else if (st.st_uid != geteuid() && st.st_uid != 0)
        r = LX_ENOTOWNER;
    else if (st.st_nlink > 1)
        r = LX_ELINKED;
    /* Locked before it is emptied: another luxd's pid file stays whole. */
    /* An open file description's lock (F_OFD_SETLK): a process-owned one
     * (F_SETLK) is dropped when any fd on the file is closed, and a worker
     * serving the pid file (a GET of it under a root) would close one. */
    else if (lock && fcntl(fd, F_OFD_SETLK, &lk) < 0)
        r = errno == EACCES || errno == EAGAIN ? LX_ELOCKED : -errno;
    else if (ftruncate(fd, 0) < 0)
        r = -errno;
    if (r < 0) {
        close(fd);
        return r;
    }
    return fd;
}

/* Whether path names the file open on fd. */
static int is_open_file(const char *path, int fd) {
    struct stat a, b;
    return fd >= 0 && lstat(path, &a) == 0 && fstat(fd, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

/* Writes the pid file and opens the reload status file beside it, both
 * kept open (see write_status and lx_server_cleanup). The pid file stays
 * write-locked (fcntl F_OFD_SETLK, whole file) for the life of the
 * process: `luxd -s` signals only a process that holds the locked file
 * open and is the pid it names (main.c), so a file someone rewrote or
 * replaced cannot aim it at another process. The lock is this open file
 * description's: another fd on the file closed (a GET of it, if it lies
 * under a root) does not drop it; a reload naming the same file keeps
 * this fd. */
static int open_pid_file(const char *path, int *pid_fd, int *status_fd) {
    char status[4200];
    int fd = open_own_file(path, 1);
    if (fd < 0) return fd;
    char line[32];
    int n = snprintf(line, sizeof(line), "%ld\n", (long)getpid());
    if (write(fd, line, (size_t)n) != n) {
        int e = errno ? -errno : -EIO;
        close(fd);
        return e;
    }
    int sfd = -1;
    if (lx_reload_status_path(path, status, sizeof(status)) == 0) {
        sfd = open_own_file(status, 0);
        if (sfd < 0)
            lx_log_warn("pid_file %s: reload status file %s: %s; luxd -s reload will not learn "
                        "the outcome",
                        path, status, lx_file_strerror(sfd));
    }
    *pid_fd = fd;
    *status_fd = sfd < 0 ? -1 : sfd;
    return 0;
}

/* The user to drop root for, looked up before anything is opened. */
typedef struct {
    const char *name;
    uid_t uid;
    gid_t gid;
} target_user_t;

static int lookup_user(const char *user, target_user_t *t) {
    errno = 0;
    struct passwd *pw = getpwnam(user);
    if (pw == NULL) return errno ? -errno : -ENOENT;
    t->name = user;
    t->uid = pw->pw_uid;
    t->gid = pw->pw_gid;
    return 0;
}

/* As nginx: the user's supplementary groups (initgroups, so that a group
 * that gives it a document root counts), then its group, then the user;
 * then a check that root cannot be had back. */
static int drop_privileges(const target_user_t *t, char *err, size_t errlen) {
    if (initgroups(t->name, t->gid) < 0) {
        snprintf(err, errlen, "user %s: initgroups: %s", t->name, strerror(errno));
        return -errno;
    }
    if (setgid(t->gid) < 0 || setuid(t->uid) < 0) {
        snprintf(err, errlen, "user %s: %s", t->name, strerror(errno));
        return -errno;
    }
    if (t->uid != 0 && (setuid(0) == 0 || geteuid() == 0)) {
        snprintf(err, errlen, "user %s: root could be regained after setuid; refusing to run",
                 t->name);
        return -EPERM;
    }
    return 0;
}

/* Sockets systemd passed (LISTEN_PID/LISTEN_FDS, from fd 3 on). */
static void collect_inherited(void) {
    const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
    if (pid == NULL || fds == NULL || atol(pid) != (long)getpid()) return;
    int n = atoi(fds);
    if (n <= 0 || (srv.inherited = malloc((size_t)n * sizeof(int))) == NULL) return;
    for (int i = 0; i < n; i++) {
        srv.inherited[i] = 3 + i;
        fcntl(3 + i, F_SETFD, FD_CLOEXEC);
        fcntl(3 + i, F_SETFL, fcntl(3 + i, F_GETFL) | O_NONBLOCK);
    }
    srv.ninherited = n;
    unsetenv("LISTEN_PID");
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_FDNAMES");
}

/* glibc's defaults suit a program that allocates in waves: each free that
 * leaves 128 KiB free at the top of a loop thread's heap hands the pages
 * back (madvise), and the next TLS handshake (60 KiB of OpenSSL's state)
 * faults them in again, zeroed: some 15% of a full handshake's CPU. A
 * heap keeps up to 8 MiB free at its top, and blocks up to 1 MiB (a file
 * piece's records over TLS) come from the heap, not an mmap each (fixed
 * thresholds stop glibc's sliding one). An operator's GLIBC_TUNABLES for
 * malloc win. */
static void tune_malloc(void) {
    const char *t = getenv("GLIBC_TUNABLES");
    if (t && strstr(t, "glibc.malloc.")) return;
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
    mallopt(M_TRIM_THRESHOLD, 8 << 20);
}

int lx_server_start(const char *file, const char *prefix, lx_gen_t *gen, uv_async_t *exited) {
    tune_malloc();
    const lx_server_conf_t *s = &gen->srv;
    char err[4600] = "";
    srv.file = file;
    srv.prefix = strdup(prefix);
    srv.gen = gen;
    srv.nworkers = s->workers;
    target_user_t user = {0};
    int drop = s->user && geteuid() == 0;
    int r;
    if (drop && (r = lookup_user(s->user, &user)) < 0) {
        fprintf(stderr, "%s:%d: user \"%s\": %s\n", s->file, s->line, s->user,
                r == -ENOENT ? "no such user" : strerror(-r));
        return r;
    }
    /* Every file is opened while luxd is still root, as nginx's master
     * opens them; the logs it creates become the user's (log.c). */
    if (drop) lx_log_set_file_owner(user.uid, user.gid);
    r = lx_log_open(s->error_log, s->error_log_level);
    if (r < 0) {
        fprintf(stderr, "%s:%d: error_log %s: %s\n", s->file, s->error_log_line, s->error_log,
                lx_file_strerror(r));
        return r;
    }
    for (size_t i = 0; i < gen->nwarnings; i++)
        lx_log_warn("%s", gen->warnings[i]);
    if (s->user && !drop)
        lx_log_warn("%s:%d: user = \"%s\" ignored: luxd was not started as root (it runs as uid "
                    "%ld)",
                    s->file, s->line, s->user, (long)geteuid());
    if ((r = open_gen_logs(gen, err, sizeof(err))) < 0) {
        lx_log(LX_LOG_EMERG, "%s", err);
        if (strcmp(s->error_log, "stderr") != 0) fprintf(stderr, "luxd: %s\n", err);
        return r;
    }
    if ((r = lx_handlers_gen_init(gen, file, prefix, srv.nworkers, err, sizeof(err))) < 0) {
        lx_log(LX_LOG_EMERG, "%s", err);
        return r;
    }
    collect_inherited();
    if ((r = build_slots(gen, srv.nworkers, &srv.slots, &srv.nslots, err, sizeof(err))) < 0) {
        lx_log(LX_LOG_EMERG, "%s", err);
        /* Whoever started us (a terminal, a unit's journal) learns why,
         * not only the error log. */
        if (strcmp(s->error_log, "stderr") != 0) fprintf(stderr, "luxd: %s\n", err);
        return r;
    }
    for (int i = 0; i < srv.ninherited; i++)
        if (srv.inherited[i] >= 0)
            lx_log_warn("LISTEN_FDS: fd %d matches no listen address; ignored", srv.inherited[i]);
    if (s->pid_file) {
        if ((r = open_pid_file(s->pid_file, &srv.pid_fd, &srv.status_fd)) < 0) {
            lx_log(LX_LOG_EMERG, "pid_file %s: %s", s->pid_file, lx_file_strerror(r));
            if (lx_log_std_fd(s->error_log) != 2)
                fprintf(stderr, "luxd: pid_file %s: %s\n", s->pid_file, lx_file_strerror(r));
            return r;
        }
        srv.pid_file = strdup(s->pid_file);
    }
    if (drop) {
        if ((r = drop_privileges(&user, err, sizeof(err))) < 0) {
            lx_log(LX_LOG_EMERG, "%s", err);
            return r;
        }
        srv.user = strdup(user.name);
        lx_log_set_file_owner((uid_t)-1, (gid_t)-1);
    }
    srv.workers = calloc((size_t)srv.nworkers, sizeof(*srv.workers));
    if (srv.workers == NULL || lx_stats_init(srv.nworkers) < 0) return -ENOMEM;
    for (int i = 0; i < srv.nworkers; i++)
        srv.workers[i].stats = lx_stats_loop(i);
    lx_stats_gen_live(gen);
    for (int i = 0; i < srv.nworkers; i++) {
        int *fds = malloc((srv.nslots ? srv.nslots : 1) * sizeof(int));
        for (size_t j = 0; fds && j < srv.nslots; j++)
            fds[j] = srv.slots[j].fds[i];
        srv.workers[i].exited = exited;
        r = fds ? lx_worker_start(&srv.workers[i], i, gen, fds, srv.nslots) : -ENOMEM;
        free(fds);
        if (r < 0) {
            lx_log(LX_LOG_EMERG, "worker %d: %s", i, uv_strerror(r));
            return r;
        }
    }
    lx_gen_prefilter_start(gen, srv.nworkers); /* off the loops: start never waits for it */
    lx_log_info("luxd " LX_VERSION " started: generation %llu, %d worker%s, config %s%s%s",
                (unsigned long long)gen->id, srv.nworkers, srv.nworkers == 1 ? "" : "s", file,
                srv.user ? ", running as user " : "", srv.user ? srv.user : "");
    for (size_t j = 0; j < srv.nslots; j++)
        lx_log_info("listening on %s", srv.slots[j].addr.text);
    lx_notify("READY=1\nMAINPID=%ld\nSTATUS=serving generation %llu", (long)getpid(),
              (unsigned long long)gen->id);
    return 0;
}

/* Settings a running process cannot change; said clearly, not ignored. */
static void keep_restart_only(lx_gen_t *g) {
    lx_server_conf_t *n = &g->srv;
    const lx_server_conf_t *o = &srv.gen->srv;
    if (n->workers != o->workers) {
        lx_log_warn("reload: workers %d -> %d needs a restart; keeping %d", o->workers, n->workers,
                    o->workers);
        n->workers = o->workers;
    }
    if ((n->user == NULL) != (o->user == NULL) ||
        (n->user && o->user && strcmp(n->user, o->user) != 0))
        lx_log_warn("reload: user needs a restart; still running as before");
}

/* Removes the pid file and its reload status file. After privileges
 * dropped the directory may be root's: then the files are emptied through
 * the fds kept open, so that no later `luxd -s` signals a pid that is gone
 * (and maybe reused). */
static void remove_pid_file(void) {
    if (srv.pid_file) {
        char path[4200];
        if (unlink(srv.pid_file) < 0 && errno != ENOENT) {
            int e = errno;
            if (srv.pid_fd >= 0 && ftruncate(srv.pid_fd, 0) == 0)
                lx_log_info("pid_file %s: cannot remove it as user %s (%s); emptied it instead",
                            srv.pid_file, srv.user ? srv.user : "?", strerror(e));
        }
        if (lx_reload_status_path(srv.pid_file, path, sizeof(path)) == 0 && unlink(path) < 0 &&
            srv.status_fd >= 0 && ftruncate(srv.status_fd, 0) < 0) {
            /* Nothing else to do: a stale outcome is ignored by seq. */
        }
    }
    if (srv.pid_fd >= 0) close(srv.pid_fd);
    if (srv.status_fd >= 0) close(srv.status_fd);
    srv.pid_fd = srv.status_fd = -1;
    free(srv.pid_file);
    srv.pid_file = NULL;
}

int lx_server_reload(void) {
    uint64_t t0 = uv_hrtime();
    char err[2048] = "";
    srv.reloads++;
    lx_notify("RELOADING=1\nMONOTONIC_USEC=%llu", (unsigned long long)monotonic_usec());
    lx_gen_t *g;
    int r = lx_config_load(srv.file, srv.prefix, srv.gen->id + 1, &g, err, sizeof(err));
    slot_t *slots = NULL;
    size_t nslots = 0;
    if (r == 0) {
        keep_restart_only(g);
        /* As the user this process serves as: a new `user` waits for a
         * restart, so the roots are the running user's concern. */
        lx_config_check_roots(g, srv.user);
        r = lx_handlers_gen_init(g, srv.file, srv.prefix, srv.nworkers, err, sizeof(err));
        if (r == 0) r = build_slots(g, srv.nworkers, &slots, &nslots, err, sizeof(err));
        if (r < 0) lx_gen_unref(g);
    }
    /* Files the new config names must open before anything is published. */
    int opened = r == 0;
    /* The error log open now stays (a reopen is SIGUSR1's job): only a new
     * path must prove it can be opened, by the user luxd runs as. */
    if (r == 0 && strcmp(g->srv.error_log, srv.gen->srv.error_log) != 0 &&
        (r = can_append(g->srv.error_log)) < 0) {
        char what[4200];
        snprintf(what, sizeof(what), "%s:%d: error_log %s", g->srv.file, g->srv.error_log_line,
                 g->srv.error_log);
        explain_open(err, sizeof(err), what, g->srv.error_log, r);
    }
    if (r == 0) r = open_gen_logs(g, err, sizeof(err));
    if (r < 0 && opened) {
        for (size_t i = 0; i < nslots; i++)
            if (!find_slot(srv.slots, srv.nslots, &slots[i].addr))
                close_slot(&slots[i], srv.nworkers), slots[i].fds = NULL;
        free_slots(slots, nslots);
        lx_gen_unref(g); /* closes what open_gen_logs opened for it alone */
    }
    if (r < 0) {
        lx_log_error("reload failed, still serving generation %llu: %s",
                     (unsigned long long)srv.gen->id, err);
        /* Counted before the status is written: whoever the status file
         * wakes (luxd -s reload, a test) may scrape the count at once. */
        lx_st_add(&lx_stats_server.reloads_failed, 1);
        write_status(0, err);
        lx_notify("READY=1\nSTATUS=reload failed: %s", err);
        lx_config_done();
        return r;
    }

    /* Past this point nothing can fail: publish. */
    lx_stats_gen_live(g);
    if (strcmp(g->srv.error_log, srv.gen->srv.error_log) != 0 ||
        g->srv.error_log_level != srv.gen->srv.error_log_level) {
        if ((r = lx_log_open(g->srv.error_log, g->srv.error_log_level)) < 0)
            lx_log_error("reload: error_log %s: %s; keeping the old one", g->srv.error_log,
                         lx_file_strerror(r));
    }
    for (size_t i = 0; i < g->nwarnings; i++)
        lx_log_warn("reload: %s", g->warnings[i]);
    if (g->srv.pid_file && (!srv.pid_file || strcmp(g->srv.pid_file, srv.pid_file) != 0)) {
        int pfd, sfd;
        if (is_open_file(g->srv.pid_file, srv.pid_fd)) {
            /* Another name of the file open now: opening it again would
             * find it locked (by our own fd's OFD lock) and fail, so keep
             * the fd and take the name. */
            free(srv.pid_file);
            srv.pid_file = strdup(g->srv.pid_file);
        } else if ((r = open_pid_file(g->srv.pid_file, &pfd, &sfd)) == 0) {
            remove_pid_file();
            srv.pid_file = strdup(g->srv.pid_file);
            srv.pid_fd = pfd;
            srv.status_fd = sfd;
        } else {
            char what[4200], why[4600];
            snprintf(what, sizeof(what), "reload: pid_file %s", g->srv.pid_file);
            explain_open(why, sizeof(why), what, g->srv.pid_file, r);
            lx_log_error("%s; the pid is still in %s", why,
                         srv.pid_file ? srv.pid_file : "no file");
        }
    }
    for (int i = 0; i < srv.nworkers; i++) {
        int *fds = malloc((nslots ? nslots : 1) * sizeof(int));
        if (fds == NULL) continue; /* that loop keeps the old generation */
        for (size_t j = 0; j < nslots; j++)
            fds[j] = slots[j].fds[i];
        lx_gen_ref(g);
        lx_worker_publish(&srv.workers[i], g, fds, nslots);
    }
    /* Loops close the sockets of dropped addresses themselves. */
    for (size_t i = 0; i < srv.nslots; i++)
        if (!find_slot(slots, nslots, &srv.slots[i].addr))
            lx_log_info("reload: no longer listening on %s", srv.slots[i].addr.text);
    for (size_t i = 0; i < nslots; i++)
        if (!find_slot(srv.slots, srv.nslots, &slots[i].addr))
            lx_log_info("reload: now listening on %s", slots[i].addr.text);
    free_slots(srv.slots, srv.nslots);
    srv.slots = slots;
    srv.nslots = nslots;
    lx_gen_unref(srv.gen);
    srv.gen = g;
    double ms = (double)(uv_hrtime() - t0) / 1e6;
    lx_log_info("reload: generation %llu in %.1f ms (%zu vhosts)", (unsigned long long)g->id, ms,
                g->nvhosts);
    char msg[128];
    snprintf(msg, sizeof(msg), "generation %llu in %.1f ms", (unsigned long long)g->id, ms);
    /* Counted before the status is written, as above. */
    lx_st_add(&lx_stats_server.reloads_ok, 1);
    write_status(1, msg);
    lx_notify("READY=1\nSTATUS=serving generation %llu", (unsigned long long)g->id);
    /* Only now: the loops need not wait for the Lua state to be freed. */
    lx_config_done();
    /* The regex prefilters compile off the loops, after all of the above;
     * until each is there, its rules are tested each, as without one. */
    lx_gen_prefilter_start(g, srv.nworkers);
    return 0;
}

static void report_reopen(const char *path, int err) {
    char what[4200], why[4600];
    snprintf(what, sizeof(what), "reopen: access log %s", path);
    explain_open(why, sizeof(why), what, path, err);
    lx_log_error("%s; still writing to the file open before", why);
}

void lx_server_reopen(void) {
    int r = lx_log_reopen();
    if (r < 0) {
        char what[4200], why[4600];
        snprintf(what, sizeof(what), "reopen: error log %s", srv.gen->srv.error_log);
        explain_open(why, sizeof(why), what, srv.gen->srv.error_log, r);
        lx_log_error("%s; still writing to the file open before", why);
    }
    lx_logfiles_reopen(report_reopen);
    lx_log_info("logs reopened");
}

void lx_server_stop(int how) {
    lx_notify("STOPPING=1");
    /* No compile for the loops to drain with: the plain path answers. */
    lx_gen_prefilter_cancel();
    for (int i = 0; i < srv.nworkers; i++)
        lx_worker_stop(&srv.workers[i], how);
}

int lx_server_all_exited(void) {
    for (int i = 0; i < srv.nworkers; i++)
        if (!__atomic_load_n(&srv.workers[i].done, __ATOMIC_ACQUIRE)) return 0;
    return 1;
}

void lx_server_cleanup(void) {
    lx_gen_prefilter_stop();
    for (int i = 0; i < srv.nworkers; i++)
        lx_worker_join(&srv.workers[i]);
    free(srv.workers);
    free_slots(srv.slots, srv.nslots); /* the loops closed the sockets */
    remove_pid_file();
    free(srv.user);
    free(srv.prefix);
    free(srv.inherited);
    lx_gen_unref(srv.gen);
    lx_stats_free();
}
