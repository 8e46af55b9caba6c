/* Command line, signals, start and stop. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <luajit.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "config/config.h"
#include "ctl.h"
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
/* The build-time defaults (the Makefile's CONF_PATH and PID_PATH, as
 * nginx's --conf-path and --pid-path): the config read without -c, and
 * the pid file luxd -s reads when neither -p nor the config's text names
 * one. A plain build keeps the source tree's conf/luxd.lua and no pid
 * file; `make install` and the Debian package build the installed ones. */
#ifndef LX_CONF_PATH
#define LX_CONF_PATH "conf/luxd.lua"
#endif
#ifndef LX_PID_PATH
#define LX_PID_PATH ""
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
    fprintf(out, "usage: luxd [-c FILE] [-t | -T]\n"
                 "       luxd [-c FILE | -p PIDFILE] -s stop|quit|reload|reopen\n"
                 "       luxd -t [-c FILE] --explain '[METHOD] URL' [-H 'Name: value']... "
                 "[--from ADDR]\n"
                 "       luxd -h | --help | -v | --version | -V\n");
    if (!full) {
        fprintf(out, "Try 'luxd --help' for more information.\n");
        return;
    }
    fprintf(out,
            "  -c FILE        config file (default %s)\n"
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
            "  -s SIGNAL      signal the running server, found by its pid file (the\n"
            "                 config's pid_file as a literal string; the config is not\n"
            "                 run); reload waits for the server's verdict and exits 1\n"
            "                 if it failed\n"
            "  -p PIDFILE     with -s: the server's pid file (default: the config's\n"
            "                 pid_file, else %s)\n"
            "  -h, --help     print this help and exit\n"
            "  -v, --version  print the version and exit\n"
            "  -V             print the version, the libraries' versions and the\n"
            "                 build flags, and exit\n"
            "Exit status: 0 done, 1 the config or the server failed, 2 a usage error\n"
            "(also a request --explain cannot parse).\n"
            "See luxd(8) and luxd.lua(5).\n",
            LX_CONF_PATH, LX_PID_PATH[0] ? LX_PID_PATH : "none built in");
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
    printf("regex prefilter: %s\n", lx_multire_version());
    /* As "%s": a '%' in a flag or path is not a conversion. */
    printf("compiler: %s (%s)\n", LX_COMPILER, LX_BUILD_CC);
    printf("CFLAGS: %s\n", LX_BUILD_CFLAGS);
    printf("LDFLAGS: %s\n", LX_BUILD_LDFLAGS);
    printf("default config (-c): %s\n", LX_CONF_PATH);
    printf("default pid file (-s): %s\n", LX_PID_PATH[0] ? LX_PID_PATH : "none");
}

/* A config that fails to load, on stderr; one that cannot be read also
 * says how another is named (a packaged luxd run in the wrong directory,
 * or without -c, reads a file that is not there). */
static void config_error(const char *err, const char *file, int given) {
    fprintf(stderr, "%s\n", err);
    size_t n = strlen(file);
    if (strncmp(err, file, n) != 0 || strncmp(err + n, ": cannot read:", 14) != 0) return;
    char cwd[4096] = "";
    if (file[0] != '/' && getcwd(cwd, sizeof(cwd)) == NULL) cwd[0] = '\0';
    fprintf(stderr, "luxd: %s is %s%s%s%s; name another with -c FILE\n", file,
            given ? "the config -c named" : "the built-in default config",
            cwd[0] ? " (relative to the working directory " : "", cwd, cwd[0] ? ")" : "");
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

int main(int argc, char **argv) {
    const char *file = LX_CONF_PATH, *pid_file = NULL;
    const char *sig = NULL;
    int file_given = 0;
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
    /* Not an option for users: the regex prefilter's compiler, a child of a
     * running server (config/prefilter.c). */
    if (argc == 4 && strcmp(argv[1], "--prefilter-compiler") == 0)
        return lx_prefilter_child_main(argv[2]);
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},          {"version", no_argument, NULL, 'v'},
        {"explain", required_argument, NULL, 'E'}, {"from", required_argument, NULL, 'F'},
        {"header", required_argument, NULL, 'H'},  {NULL, 0, NULL, 0},
    };
    while ((opt = getopt_long(argc, argv, "c:p:tTs:vVhH:", longopts, NULL)) != -1) {
        switch (opt) {
        case 'c':
            file = optarg;
            file_given = 1;
            break;
        case 'p': pid_file = optarg; break;
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
    if (pid_file && !sig) {
        fprintf(stderr, "luxd: -p goes with -s\n");
        usage(stderr, 0);
        return EXIT_USAGE;
    }
    if (sig) {
        int signo = lx_ctl_signal_number(sig);
        if (signo == 0) {
            fprintf(stderr, "luxd: unknown signal \"%s\" (stop, quit, reload, reopen)\n", sig);
            usage(stderr, 0);
            return EXIT_USAGE;
        }
        return lx_ctl_send(file, file_given, pid_file, LX_PID_PATH, signo);
    }
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
        config_error(err, file, file_given);
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

    lx_config_done();
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
