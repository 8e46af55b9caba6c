/* Command line, start-up, signals and stop. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "config/config.h"
#include "log.h"
#include "lx.h"
#include "worker.h"

static lx_worker_t *workers;
static int nworkers;
static int stopping;
static uv_async_t exited_async;
static uv_signal_t signals[6];
static const char *pid_file;

static void usage(FILE *out) {
    fprintf(out, "usage: luxd [-c FILE] [-t | -T] [-s stop|quit|reopen] [-V]\n"
                 "  -c FILE   config file (default conf/luxd.lua)\n"
                 "  -t        check the config and exit (0 good, 1 bad)\n"
                 "  -T        check the config and print the compiled tables\n"
                 "  -s SIG    send a signal to the running server (pid from pid_file)\n"
                 "  -V        print the version\n");
}

/* Opens one listening socket. Each loop gets its own, bound with
 * SO_REUSEPORT, so the kernel spreads connections without a shared lock. */
static int open_listener(const lx_listen_t *l, const lx_server_conf_t *s) {
    int fd = socket(l->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1, zero = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
    if (l->addr.ss_family == AF_INET6) {
        /* Only the "all addresses" form is dual-stack; "[::1]:80" means v6. */
        const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)&l->addr;
        int any = memcmp(&a6->sin6_addr, &in6addr_any, sizeof(in6addr_any)) == 0 &&
                  strncmp(l->text, "[", 1) != 0;
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, any ? &zero : &one, sizeof(one));
    }
    /* Accepted sockets inherit TCP_NODELAY on Linux: one call here instead
     * of one per connection. */
    if (s->tcp_nodelay)
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
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

static int drop_privileges(const char *user) {
    if (user == NULL || geteuid() != 0)
        return 0;
    struct passwd *pw = getpwnam(user);
    if (pw == NULL)
        return -ENOENT;
    if (setgroups(0, NULL) < 0 || setgid(pw->pw_gid) < 0 || setuid(pw->pw_uid) < 0)
        return -errno;
    return 0;
}

static void raise_fd_limit(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static void stop_all(int how) {
    stopping = how;
    for (int i = 0; i < nworkers; i++)
        lx_worker_stop(&workers[i], how);
}

static void on_signal(uv_signal_t *h, int sig) {
    (void)h;
    switch (sig) {
    case SIGTERM:
    case SIGINT:
        /* A second one while draining means: now. */
        lx_log_info("%s: %s stop", strsignal(sig), stopping ? "immediate" : "graceful");
        stop_all(stopping ? 2 : 1);
        break;
    case SIGQUIT:
        lx_log_info("SIGQUIT: immediate stop");
        stop_all(2);
        break;
    case SIGUSR1:
        if (lx_log_reopen() < 0)
            lx_log_error("reopen: cannot reopen the error log");
        else
            lx_log_info("logs reopened");
        break;
    case SIGHUP:
        lx_log_warn("SIGHUP: in-process reload is not available in this build; "
                    "restart luxd to apply a new config");
        break;
    }
}

static void on_worker_exited(uv_async_t *a) {
    (void)a;
    /* uv_async_send coalesces, so count the flags, not the callbacks. */
    for (int i = 0; i < nworkers; i++)
        if (!__atomic_load_n(&workers[i].done, __ATOMIC_ACQUIRE))
            return;
    for (size_t i = 0; i < LX_ARRAY_SIZE(signals); i++)
        uv_close((uv_handle_t *)&signals[i], NULL);
    uv_close((uv_handle_t *)&exited_async, NULL);
}

static int send_signal(const char *file, const char *what) {
    static const struct {
        const char *name;
        int sig;
    } sigs[] = {{"stop", SIGTERM}, {"quit", SIGQUIT}, {"reopen", SIGUSR1}, {"reload", SIGHUP}};
    int sig = 0;
    for (size_t i = 0; i < LX_ARRAY_SIZE(sigs); i++)
        if (strcmp(what, sigs[i].name) == 0)
            sig = sigs[i].sig;
    if (sig == 0) {
        fprintf(stderr, "luxd: unknown signal \"%s\" (stop, quit, reopen, reload)\n", what);
        return 1;
    }
    char prefix[4096];
    if (getcwd(prefix, sizeof(prefix)) == NULL)
        return 1;
    lx_gen_t *g;
    char err[1024];
    if (lx_config_load(file, prefix, 0, &g, err, sizeof(err)) < 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    int rc = 1;
    FILE *f = g->srv.pid_file ? fopen(g->srv.pid_file, "r") : NULL;
    long pid = 0;
    if (f == NULL)
        fprintf(stderr, "luxd: cannot read the pid file %s\n",
                g->srv.pid_file ? g->srv.pid_file : "(none configured)");
    else if (fscanf(f, "%ld", &pid) != 1 || pid <= 0)
        fprintf(stderr, "luxd: no pid in %s\n", g->srv.pid_file);
    else if (kill((pid_t)pid, sig) < 0)
        fprintf(stderr, "luxd: kill %ld: %s\n", pid, strerror(errno));
    else
        rc = 0;
    if (f)
        fclose(f);
    lx_gen_unref(g);
    return rc;
}

int main(int argc, char **argv) {
    const char *file = "conf/luxd.lua";
    const char *sig = NULL;
    int test = 0, dump = 0, opt;
    while ((opt = getopt(argc, argv, "c:tTs:Vh")) != -1) {
        switch (opt) {
        case 'c': file = optarg; break;
        case 't': test = 1; break;
        case 'T': dump = 1; break;
        case 's': sig = optarg; break;
        case 'V': printf("luxd " LX_VERSION "\n"); return 0;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (sig)
        return send_signal(file, sig);

    char prefix[4096];
    if (getcwd(prefix, sizeof(prefix)) == NULL) {
        perror("luxd: getcwd");
        return 1;
    }
    lx_gen_t *g;
    char err[2048];
    if (lx_config_load(file, prefix, 1, &g, err, sizeof(err)) < 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    if (test || dump) {
        if (dump)
            lx_gen_dump(g, stdout);
        fprintf(stderr, "luxd: configuration %s is ok\n", file);
        lx_gen_unref(g);
        return 0;
    }

    const lx_server_conf_t *s = &g->srv;
    signal(SIGPIPE, SIG_IGN);
    raise_fd_limit();
    int r = lx_log_open(s->error_log, s->error_log_level);
    if (r < 0) {
        fprintf(stderr, "luxd: error_log %s: %s\n", s->error_log, strerror(-r));
        return 1;
    }
    int alog_fd = -1;
    if (s->access_log.path) {
        alog_fd = open(s->access_log.path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (alog_fd < 0) {
            lx_log(LX_LOG_EMERG, "access_log %s: %s", s->access_log.path, strerror(errno));
            return 1;
        }
    }

    nworkers = s->workers;
    size_t nl = s->nlisten;
    int *fds = calloc((size_t)nworkers * nl, sizeof(int));
    for (int i = 0; i < nworkers; i++) {
        for (size_t j = 0; j < nl; j++) {
            int fd = open_listener(&s->listen[j], s);
            if (fd < 0) {
                lx_log(LX_LOG_EMERG, "listen %s: %s", s->listen[j].text, strerror(-fd));
                return 1;
            }
            fds[(size_t)i * nl + j] = fd;
        }
    }
    if ((r = drop_privileges(s->user)) < 0) {
        lx_log(LX_LOG_EMERG, "user %s: %s", s->user, strerror(-r));
        return 1;
    }
    pid_file = s->pid_file;
    if (pid_file) {
        FILE *f = fopen(pid_file, "w");
        if (f == NULL) {
            lx_log(LX_LOG_EMERG, "pid_file %s: %s", pid_file, strerror(errno));
            return 1;
        }
        fprintf(f, "%ld\n", (long)getpid());
        fclose(f);
    }

    uv_loop_t *loop = uv_default_loop();
    static const int sigs[] = {SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGUSR1, SIGUSR2};
    for (size_t i = 0; i < LX_ARRAY_SIZE(signals); i++) {
        uv_signal_init(loop, &signals[i]);
        uv_signal_start(&signals[i], on_signal, sigs[i]);
    }
    uv_async_init(loop, &exited_async, on_worker_exited);

    workers = calloc((size_t)nworkers, sizeof(*workers));
    for (int i = 0; i < nworkers; i++) {
        workers[i].exited = &exited_async;
        r = lx_worker_start(&workers[i], i, g, fds + (size_t)i * nl, nl, alog_fd);
        if (r < 0) {
            lx_log(LX_LOG_EMERG, "worker %d: %s", i, uv_strerror(r));
            return 1;
        }
    }
    free(fds);
    lx_log_info("luxd " LX_VERSION " started: %d worker%s, %zu listen address%s, config %s", nworkers,
                nworkers == 1 ? "" : "s", nl, nl == 1 ? "" : "es", file);
    for (size_t j = 0; j < nl; j++)
        lx_log_info("listening on %s", s->listen[j].text);

    uv_run(loop, UV_RUN_DEFAULT);
    for (int i = 0; i < nworkers; i++)
        lx_worker_join(&workers[i]);
    free(workers);
    if (pid_file)
        unlink(pid_file);
    if (alog_fd >= 0)
        close(alog_fd);
    lx_log_info("stopped");
    lx_gen_unref(g);
    uv_loop_close(loop);
    return 0;
}
