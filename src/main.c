/* Command line, signals, start and stop. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <luajit.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "config/config.h"
#include "explain.h"
#include "hash.h"
#include "log.h"
#include "lx.h"
#include "handlers/handler.h"
#include "llhttp.h"
#include "server.h"

/* What the Makefile built this binary with (luxd -V); a build without the
 * Makefile says so rather than failing. */
#ifndef LX_BUILD_CC
#define LX_BUILD_CC "unknown"
#endif
#ifndef LX_BUILD_CFLAGS
#define LX_BUILD_CFLAGS "unknown"
#endif
#ifndef LX_BUILD_LDFLAGS
#define LX_BUILD_LDFLAGS "unknown"
#endif
#ifndef LX_BUILD_LLHTTP
#define LX_BUILD_LLHTTP ""
#endif

#define LX_STRINGIFY_(x) #x
#define LX_STRINGIFY(x)  LX_STRINGIFY_(x)
#if defined(__clang__)
#define LX_COMPILER "clang " __clang_version__
#elif defined(__GNUC__)
#define LX_COMPILER "gcc " __VERSION__
#else
#define LX_COMPILER "unknown"
#endif

static int stopping;
static uv_async_t exited_async;
static uv_signal_t signals[6];

/* Exit status of a command line luxd cannot make sense of (as getopt
 * users do): 1 stays "the config or the server failed". */
enum { EXIT_USAGE = 2 };

/* The synopsis alone after a mistake (on stderr, below what was wrong),
 * all of it for --help. */
static void usage(FILE *out, int full) {
    fprintf(out, "usage: luxd [-c FILE] [-t | -T] [-s stop|quit|reload|reopen]\n"
                 "       luxd -t [-c FILE] --explain '[METHOD] URL' [-H 'Name: value']... "
                 "[--from ADDR]\n"
                 "       luxd -h | --help | -v | --version | -V\n");
    if (!full) {
        fprintf(out, "Try 'luxd --help' for more information.\n");
        return;
    }
    fprintf(out, "  -c FILE        config file (default conf/luxd.lua)\n"
                 "  -t             check the config and exit (0 good, 1 bad)\n"
                 "  -T             check the config and print the compiled tables\n"
                 "  --explain REQ  with -t: tell which vhost, redirect or rewrite, location,\n"
                 "                 access rule, policy, handlers and file or upstream would\n"
                 "                 answer REQ ('GET http://example.com/x', the method may be\n"
                 "                 left out), each with its file:line\n"
                 "  -H 'N: V'      a request header for --explain (repeatable; Host: overrides\n"
                 "                 the URL's host only for a path-only REQ)\n"
                 "  --from ADDR    the client address --explain's access rules see\n"
                 "                 (default 127.0.0.1)\n"
                 "  -s SIGNAL      signal the running server (pid from pid_file); reload\n"
                 "                 waits for the outcome and exits 1 if it failed\n"
                 "  -h, --help     print this help and exit\n"
                 "  -v, --version  print the version and exit\n"
                 "  -V             print the version, the libraries' versions and the\n"
                 "                 build flags, and exit\n"
                 "Exit status: 0 done, 1 the config or the server failed, 2 a usage error\n"
                 "(also a request --explain cannot parse).\n"
                 "See luxd(8) and luxd.lua(5).\n");
}

/* luxd -V, as nginx -V: what a bug report needs to say about this binary.
 * libuv and PCRE2 are shared libraries, so the version running can differ
 * from the headers it was built with; LuaJIT's is the header's (the library
 * has no run-time call for it), llhttp is compiled in. */
static void print_versions(void) {
    char pcre[64] = "unknown";
    pcre2_config(PCRE2_CONFIG_VERSION, pcre);
    printf("luxd " LX_VERSION "\n");
    printf("libuv %s (built with %d.%d.%d)\n", uv_version_string(), UV_VERSION_MAJOR,
           UV_VERSION_MINOR, UV_VERSION_PATCH);
    printf("%s\n", LUAJIT_VERSION);
    printf("PCRE2 %s (built with " LX_STRINGIFY(PCRE2_MAJOR) "." LX_STRINGIFY(PCRE2_MINOR) ")\n",
           pcre);
    printf("llhttp %d.%d.%d (compiled in%s%s)\n", LLHTTP_VERSION_MAJOR, LLHTTP_VERSION_MINOR,
           LLHTTP_VERSION_PATCH, LX_BUILD_LLHTTP[0] ? " with " : "", LX_BUILD_LLHTTP);
    printf("compiler: " LX_COMPILER " (" LX_BUILD_CC ")\n");
    printf("CFLAGS: " LX_BUILD_CFLAGS "\n");
    printf("LDFLAGS: " LX_BUILD_LDFLAGS "\n");
}

static void raise_fd_limit(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static void on_signal(uv_signal_t *h, int sig) {
    (void)h;
    switch (sig) {
    case SIGTERM:
    case SIGINT:
        /* A second one while draining means: now. */
        lx_log_info("%s: %s stop", strsignal(sig), stopping ? "immediate" : "graceful");
        stopping = stopping ? 2 : 1;
        lx_server_stop(stopping);
        break;
    case SIGQUIT:
        lx_log_info("SIGQUIT: immediate stop");
        stopping = 2;
        lx_server_stop(2);
        break;
    case SIGUSR1: lx_server_reopen(); break;
    case SIGHUP:
        if (!stopping) lx_server_reload();
        break;
    }
}

static void on_worker_exited(uv_async_t *a) {
    (void)a;
    /* uv_async_send coalesces, so count the flags, not the callbacks. */
    if (!lx_server_all_exited()) return;
    /* The watchers stay open but stop holding the loop. Closing them would
     * give each signal back its default action (libuv restores SIG_DFL),
     * and a SIGTERM or SIGHUP in the moment between that and any SIG_IGN
     * would kill a server that is stopping cleanly. Left installed, libuv's
     * handler only notes the signal in a pipe nobody reads from here on:
     * past this point there is nothing for a signal to do. */
    for (size_t i = 0; i < LX_ARRAY_SIZE(signals); i++)
        uv_unref((uv_handle_t *)&signals[i]);
    uv_close((uv_handle_t *)&exited_async, NULL);
}

/* The reload status file, opened as the pid file is: whoever may write its
 * directory could put a FIFO (a read that never returns) or a link there.
 * Returns a stream, or NULL. */
static FILE *open_status(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK);
    struct stat st;
    if (fd < 0) return NULL;
    FILE *f =
        fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1 ? fdopen(fd, "r") : NULL;
    if (f == NULL) close(fd);
    return f;
}

static long read_reload_seq(const char *path, char *msg, size_t len) {
    FILE *f = open_status(path);
    if (f == NULL) return 0;
    long seq = 0;
    char line[2048] = "";
    if (fgets(line, sizeof(line), f)) sscanf(line, "%ld", &seq);
    fclose(f);
    if (msg) {
        char *sp = strchr(line, ' ');
        snprintf(msg, len, "%s", sp ? sp + 1 : line);
        msg[strcspn(msg, "\n")] = '\0';
    }
    return seq;
}

/* Whether process pid has the file open on fd among its fds (as
 * /proc/PID/fd shows them): the lock on a pid file is an open file
 * description's (F_OFD_SETLK), which F_OFD_GETLK reports with no pid.
 * Returns 1, 0, or -errno when the directory cannot be read (another
 * user's process; root without CAP_SYS_PTRACE after luxd's user= drop). */
static int holds_open(long pid, int fd) {
    struct stat want, st;
    char dir[64], path[352];
    if (fstat(fd, &want) < 0) return -errno;
    snprintf(dir, sizeof(dir), "/proc/%ld/fd", pid);
    DIR *d = opendir(dir);
    if (d == NULL) return -errno;
    int found = 0, denied = 0;
    struct dirent *e;
    while (!found && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (stat(path, &st) < 0) {
            /* The list can be readable and its links not (ptrace rules). */
            if (errno == EACCES || errno == EPERM) denied = -errno;
            continue;
        }
        found = st.st_dev == want.st_dev && st.st_ino == want.st_ino;
    }
    closedir(d);
    return found ? 1 : denied ? denied : 0;
}

/* Whether the locked pid file's word on the pid can be taken: when pid is
 * seen holding the file open, or, when that cannot be looked at, when the
 * file is root's and no one else may write it (luxd started as root wrote
 * it before any user= drop, and only root could have changed it since).
 * Says why not on stderr. */
static int pid_trusted(const char *pf, long pid, int fd) {
    int h = holds_open(pid, fd);
    if (h == 1) return 1;
    struct stat st;
    if (h < 0 && h != -ENOENT && fstat(fd, &st) == 0 && st.st_uid == 0 && (st.st_mode & 022) == 0)
        return 1;
    if (h == 0 || h == -ENOENT)
        fprintf(stderr,
                "luxd: %s says pid %ld, but that process does not hold the file open; the file "
                "was rewritten or replaced: refusing to signal\n",
                pf, pid);
    else
        fprintf(stderr,
                "luxd: cannot confirm that pid %ld holds %s (/proc/%ld/fd: %s) and the file is "
                "not root's alone: refusing to signal; run luxd -s as root or as the server's "
                "user\n",
                pid, pf, pid, strerror(-h));
    return 0;
}

/* luxd -s: signal the server named by the config's pid_file. */
static int send_signal(const char *file, const char *what) {
    static const struct {
        const char *name;
        int sig;
    } sigs[] = {{"stop", SIGTERM}, {"quit", SIGQUIT}, {"reopen", SIGUSR1}, {"reload", SIGHUP}};
    int sig = 0;
    for (size_t i = 0; i < LX_ARRAY_SIZE(sigs); i++)
        if (strcmp(what, sigs[i].name) == 0) sig = sigs[i].sig;
    if (sig == 0) {
        fprintf(stderr, "luxd: unknown signal \"%s\" (stop, quit, reload, reopen)\n", what);
        usage(stderr, 0);
        return EXIT_USAGE;
    }
    char prefix[4096], err[2048];
    if (getcwd(prefix, sizeof(prefix)) == NULL) return 1;
    lx_gen_t *g;
    if (lx_config_load(file, prefix, 0, &g, err, sizeof(err)) < 0) {
        /* A reload of a broken file would fail anyway: say why right here. */
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    int rc = 1;
    char status[4200];
    long pid = 0, before = 0;
    const char *pf = g->srv.pid_file;
    int fd = pf ? open(pf, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK) : -1;
    FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
    /* The running luxd holds a write lock on its pid file (server.c): the
     * pid signalled must be of a process that holds the file open while
     * it is locked. A stale file, or one rewritten or replaced by whoever
     * may write its directory, would otherwise aim root's kill anywhere. */
    struct flock lk = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    if (f == NULL) {
        if (fd >= 0) close(fd);
        fprintf(stderr, "luxd: cannot read the pid file %s%s%s\n",
                pf ? pf : "(no pid_file in the config)", pf ? ": " : "",
                pf ? (errno == ELOOP ? "it is a symbolic link" : strerror(errno)) : "");
    } else if (fscanf(f, "%ld", &pid) != 1 || pid <= 0)
        fprintf(stderr, "luxd: no pid in %s\n", pf);
    else if (fcntl(fd, F_OFD_GETLK, &lk) < 0)
        fprintf(stderr, "luxd: %s: cannot query its lock: %s\n", pf, strerror(errno));
    else if (lk.l_type == F_UNLCK)
        fprintf(stderr, "luxd: no luxd holds %s (stale pid file?); not signalling pid %ld\n", pf,
                pid);
    else if (!pid_trusted(pf, pid, fd))
        ; /* it said why */
    else {
        int have_status = lx_reload_status_path(g->srv.pid_file, status, sizeof(status)) == 0;
        if (have_status && sig == SIGHUP) {
            FILE *sf = open_status(status);
            if (sf == NULL) {
                /* luxd writes it through the fd it opened at start: a
                 * name that is now something else never shows the outcome. */
                fprintf(stderr,
                        "luxd: %s is not the regular file luxd writes (replaced?): the reload "
                        "is sent, and its outcome is in the error log only\n",
                        status);
                have_status = 0;
                rc = -1; /* sent, outcome unknown: exit 1 below */
            } else {
                fclose(sf);
            }
        }
        if (have_status) before = read_reload_seq(status, NULL, 0);
        if (kill((pid_t)pid, sig) < 0)
            fprintf(stderr, "luxd: kill %ld: %s\n", pid, strerror(errno));
        else if (rc == -1)
            rc = 1; /* sent; its outcome cannot be read */
        else if (sig != SIGHUP || !have_status)
            rc = 0;
        else {
            /* Wait for the server to write the outcome of this reload. */
            char msg[2048];
            for (int i = 0; i < 1200; i++) {
                struct timespec ts = {0, 50 * 1000 * 1000};
                nanosleep(&ts, NULL);
                if (read_reload_seq(status, msg, sizeof(msg)) > before) {
                    int ok = strncmp(msg, "ok ", 3) == 0;
                    fprintf(ok ? stdout : stderr, "luxd: reload %s\n", msg);
                    rc = ok ? 0 : 1;
                    break;
                }
                if (i == 1199) fprintf(stderr, "luxd: no answer from pid %ld within 60 s\n", pid);
            }
        }
    }
    if (f) fclose(f);
    lx_gen_unref(g);
    return rc;
}

int main(int argc, char **argv) {
    const char *file = "conf/luxd.lua";
    const char *sig = NULL;
    int test = 0, dump = 0, opt;
    const char *explain = NULL, *from = NULL;
    /* Started with fd 0, 1 or 2 closed, the loop's or a log's fd would take
     * that number, and "stdout"/"stderr" logs (fds 1, 2) would write into
     * it: they are held by /dev/null first. */
    int nfd;
    while ((nfd = open("/dev/null", O_RDWR)) >= 0 && nfd <= 2)
        ;
    if (nfd > 2) close(nfd);
    /* Static: the early returns below leave it to the exit, reachable. */
    static const char **headers = NULL;
    static size_t nheaders = 0;
    lx_config_test_handlers = lx_handlers_have_test();
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},          {"version", no_argument, NULL, 'v'},
        {"explain", required_argument, NULL, 'E'}, {"from", required_argument, NULL, 'F'},
        {"header", required_argument, NULL, 'H'},  {NULL, 0, NULL, 0},
    };
    while ((opt = getopt_long(argc, argv, "c:tTs:vVhH:", longopts, NULL)) != -1) {
        switch (opt) {
        case 'c': file = optarg; break;
        case 't': test = 1; break;
        case 'T': dump = 1; break;
        case 's': sig = optarg; break;
        case 'E': explain = optarg; break;
        case 'F': from = optarg; break;
        case 'H': {
            const char **h = realloc(headers, (nheaders + 1) * sizeof(*h));
            if (h == NULL) return 1;
            headers = h;
            headers[nheaders++] = optarg;
            break;
        }
        case 'v': printf("luxd " LX_VERSION "\n"); return 0;
        case 'V': print_versions(); return 0;
        case 'h': usage(stdout, 1); return 0;
        default: usage(stderr, 0); return EXIT_USAGE; /* getopt said what was wrong */
        }
    }
    if (optind < argc) {
        /* "luxd conf/luxd.lua" would otherwise start with the default
         * config, not the one named. */
        fprintf(stderr, "luxd: unexpected argument \"%s\" (the config is given with -c)\n",
                argv[optind]);
        usage(stderr, 0);
        return EXIT_USAGE;
    }
    if (sig && (test || dump || explain)) {
        fprintf(stderr, "luxd: -s cannot be combined with -t or -T (nor with --explain)\n");
        usage(stderr, 0);
        return EXIT_USAGE;
    }
    if (sig) return send_signal(file, sig);
    if ((nheaders || from) && !explain) {
        fprintf(stderr, "luxd: -H and --from go with --explain\n");
        usage(stderr, 0);
        return EXIT_USAGE;
    }
    if (explain && dump) {
        fprintf(stderr, "luxd: --explain cannot be combined with -T\n");
        usage(stderr, 0);
        return EXIT_USAGE;
    }
    if (explain) test = 1; /* an explanation never starts the server */
    /* Before any table is built: the host table and luxd.shared hash with
     * this process's key, so clients cannot choose keys that collide. */
    int hr = lx_hash_seed();
    if (hr < 0) {
        fprintf(stderr, "luxd: getrandom: %s (no key for the hash tables)\n", strerror(-hr));
        return 1;
    }

    char prefix[4096];
    if (getcwd(prefix, sizeof(prefix)) == NULL) {
        perror("luxd: getcwd");
        return 1;
    }
    lx_gen_t *g;
    char err[2048];
    uint64_t t0 = uv_hrtime();
    if (lx_config_load(file, prefix, 1, &g, err, sizeof(err)) < 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    /* The user luxd will serve as: `user` only when root drops to it; not
     * root, luxd ignores `user` (lx_server_start says so) and serves as
     * itself. */
    lx_config_check_roots(g, geteuid() == 0 ? g->srv.user : NULL);
    if (test || dump) {
        /* Bind the policies once, as each worker will: a config whose second
         * run declares them at other vhosts or locations than its first is
         * refused here, not only when it is started or reloaded. */
        int r = lx_handlers_gen_init(g, file, prefix, 1, err, sizeof(err));
        if (r < 0) {
            if (r == -ENOMEM) snprintf(err, sizeof(err), "%s: out of memory", file);
            fprintf(stderr, "%s\n", err);
            lx_gen_unref(g);
            return 1;
        }
        for (size_t i = 0; i < g->nwarnings; i++)
            fprintf(stderr, "luxd: warning: %s\n", g->warnings[i]);
        if (dump) lx_gen_dump(g, stdout);
        if (explain) {
            int rc = lx_explain(g, explain, headers, nheaders, from, stdout);
            lx_gen_unref(g);
            free(headers);
            return rc;
        }
        fprintf(stderr,
                "luxd: configuration %s is ok (%zu vhosts, %zu upstreams, compiled in %.1f ms)\n",
                file, g->nvhosts, g->nupstreams, (double)(uv_hrtime() - t0) / 1e6);
        lx_gen_unref(g);
        return 0;
    }

    signal(SIGPIPE, SIG_IGN);
    raise_fd_limit();
    uv_loop_t *loop = uv_default_loop();
    static const int sigs[] = {SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGUSR1, SIGUSR2};
    for (size_t i = 0; i < LX_ARRAY_SIZE(signals); i++) {
        uv_signal_init(loop, &signals[i]);
        uv_signal_start(&signals[i], on_signal, sigs[i]);
    }
    uv_async_init(loop, &exited_async, on_worker_exited);
    if (lx_server_start(file, prefix, g, &exited_async) < 0) return 1;
    uv_run(loop, UV_RUN_DEFAULT);
    lx_server_cleanup();
    lx_log_info("stopped");
    /* The signal watchers are still open (on_worker_exited), so this frees
     * nothing and the process exits with the handlers in place. */
    uv_loop_close(loop);
    return 0;
}
