/* The rule sets' prefilters (dispatch/multire.c) are compiled off the loops,
 * and out of the process: the engine's compile of a large set takes seconds
 * (10,000 patterns: 7-9 s here) and cannot be interrupted from inside, so a
 * child process does it (dispatch/multire_wire.c) and this process can end
 * it at once. One thread serves every generation in turn, the newest only.
 * Answers are kept by their set's exact bytes, so a reload compiles only
 * the sets it changed; a reload kills a compile only when the set it is
 * compiling is not in the new generation, so reloads in a row, however
 * often, still finish the sets they share. A stop kills the child and never
 * waits for a compile. Each set's prefilter is published as its answer
 * comes; until then, loops test its regex rules each (correct, just
 * slower): a start or a reload never waits for the engine. -t, -T and
 * --explain never start one. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include "../log.h"
#include "../lx.h"
#include "config.h"

extern char **environ;

/* Compiles that may fail in one generation before the rest of its sets are
 * given up: a compiler that crashes on every set is not started for each of
 * 10,000 vhosts. */
#define LX_PREFILTER_MAX_FAILED 3

/* All under mu. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static pthread_t thread;
static int thread_up, stopping;
static uint64_t latest;   /* the newest generation started: only it is compiled for */
static lx_gen_t *pending; /* waiting for the thread, a reference held; or NULL */
static uint32_t pending_nloops;
static pid_t child; /* the compiling child, or 0; reaped only after it is cleared */
/* The request the child is compiling (the thread's bytes), or NULL. */
static const char *inflight;
static size_t inflight_len;

/* An answer kept for later generations, by its request's bytes (the set's
 * patterns and ids, in order: they name it exactly). The thread's alone;
 * pruned at the start of each generation to what that one can use and what
 * the last generation compiled to its end used (a rollback to it, during a
 * compile of other rules, compiles nothing). */
typedef struct {
    uint64_t hash; /* lx_hash of req: most lookups end there */
    char *req, *ans;
    size_t reqlen, anslen;
    uint64_t seen; /* the latest generation that used it */
    uint64_t done; /* the latest generation compiled to its end that used it */
} kept_t;
static kept_t *kept;
static size_t nkept, capkept;
static uint64_t last_done; /* the latest generation compiled to its end */

/* Tests only: LUXD_TEST_PREFILTER_HOLD=FIFO makes the thread wait for a
 * byte on the FIFO before it compiles a generation, so that a test can
 * serve requests while the prefilter is not there yet without racing it;
 * LUXD_TEST_PREFILTER_CHILD_HOLD=FIFO makes each child wait so, before it
 * reads a request: a compile that never ends, for the tests of reload and
 * stop (and the byte 'k' makes it exit 1: a compiler that fails). Only
 * luxd-test (the binary with the test handler) heeds them: in luxd, a stray
 * variable would stop every compile. Returns the byte read, or 0. */
static char test_hold(const char *var) {
    char c = 0;
    if (!lx_config_test_handlers) return c;
    const char *fifo = getenv(var);
    if (fifo == NULL || *fifo == '\0') return c;
    int fd = open(fifo, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return c;
    while (read(fd, &c, 1) < 0 && errno == EINTR) {
    }
    close(fd);
    return c;
}

/* Whether g's compile is no longer wanted: stopping, a newer generation
 * started, or nothing serves g (the thread's reference the only one). */
static int give_up(const lx_gen_t *g) {
    if (__atomic_load_n(&g->refs, __ATOMIC_ACQUIRE) == 1) return 1;
    pthread_mutex_lock(&mu);
    int s = stopping || latest != g->id;
    pthread_mutex_unlock(&mu);
    return s;
}

/* A child of this binary serving compiles on *fd (multire_wire.c), unless
 * g is given up: then -ECANCELED. Spawned under mu, so that a stop or a
 * reload either sees it in child or comes before it and is seen here. */
static int spawn_child(const lx_gen_t *g, int *fd) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) return -errno;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    sigset_t none;
    char ppid[32], gen[32];
    snprintf(ppid, sizeof(ppid), "%ld", (long)getpid());
    snprintf(gen, sizeof(gen), "%llu", (unsigned long long)g->id); /* for ps: whose compile */
    char *argv[] = {"luxd", "--prefilter-compiler", ppid, gen, NULL};
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, sv[1], 0);
    posix_spawn_file_actions_adddup2(&fa, sv[1], 1);
    posix_spawnattr_init(&attr);
    sigemptyset(&none); /* this thread blocks all; the child must not */
    posix_spawnattr_setsigmask(&attr, &none);
    /* A group of its own: a terminal's ^C or a kill of the server's group
     * is the server's to act on (it kills the child), not the child's. */
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
    pid_t pid = 0;
    int rc = -ECANCELED;
    pthread_mutex_lock(&mu);
    if (!stopping && latest == g->id) {
        /* The running image, wherever its file went since. */
        rc = -posix_spawn(&pid, "/proc/self/exe", &fa, &attr, argv, environ);
        if (rc == 0) child = pid;
    }
    pthread_mutex_unlock(&mu);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(sv[1]);
    if (rc < 0) {
        close(sv[0]);
        return rc;
    }
    *fd = sv[0];
    return 0;
}

/* Ends the child (kill_it: at once; else at the end of its stream it
 * exits, or was killed). Its wait status, or -1 when there was none. */
static int end_child(int fd, int kill_it) {
    int st = -1;
    if (fd < 0) return st;
    close(fd);
    pthread_mutex_lock(&mu);
    pid_t pid = child;
    if (kill_it && pid > 0) kill(pid, SIGKILL);
    pthread_mutex_unlock(&mu);
    if (pid <= 0) return st;
    /* Waited for, not reaped, while it is still in child: a stop or a
     * reload can kill it meanwhile (one stopped by an outsider would
     * otherwise hold the stop for good), and its pid is not reused. */
    siginfo_t si;
    while (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT) < 0 && errno == EINTR) {
    }
    pthread_mutex_lock(&mu);
    child = 0;
    pthread_mutex_unlock(&mu);
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    return st;
}

/* "exit 1", "killed by signal 9": how a child that failed ended. */
static const char *describe(int st, char *buf, size_t cap) {
    if (st == -1)
        snprintf(buf, cap, "not waited for");
    else if (WIFSIGNALED(st))
        snprintf(buf, cap, "killed by signal %d", WTERMSIG(st));
    else
        snprintf(buf, cap, "exit %d", WEXITSTATUS(st));
    return buf;
}

static void free_kept(kept_t *k) {
    free(k->req);
    free(k->ans);
}

/* The request of each of g's sets, by set (req NULL where it has no free
 * regexes), or NULL when out of memory. */
static kept_t *requests_of(const lx_gen_t *g) {
    kept_t *w = calloc(g->nrulesets ? g->nrulesets : 1, sizeof(*w));
    for (size_t i = 0; w && i < g->nrulesets; i++) {
        const lx_ruleset_t *rs = g->rulesets[i];
        if (rs->nfree == 0) continue;
        int rc = lx_ruleset_prefilter_request(rs, &w[i].req, &w[i].reqlen);
        if (rc == 0) w[i].hash = lx_hash(w[i].req, w[i].reqlen, 0);
        if (rc < 0) {
            for (size_t j = 0; j < i; j++)
                free(w[j].req);
            free(w);
            w = NULL;
        }
    }
    return w;
}

static int same_request(const kept_t *a, const kept_t *b) {
    return a->hash == b->hash && a->reqlen == b->reqlen && memcmp(a->req, b->req, a->reqlen) == 0;
}

static kept_t *find_kept(const kept_t *want) {
    for (size_t i = 0; i < nkept; i++)
        if (same_request(&kept[i], want)) return &kept[i];
    return NULL;
}

/* What is kept becomes what g's sets w[0..n) can use (none when w is
 * NULL) and what the last generation compiled to its end used: never more
 * than two generations' answers. */
static void prune_kept(const kept_t *w, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < nkept; i++) {
        int used = last_done && kept[i].done == last_done;
        for (size_t j = 0; !used && w && j < n; j++)
            used = w[j].req && same_request(&w[j], &kept[i]);
        if (used)
            kept[k++] = kept[i];
        else
            free_kept(&kept[i]);
    }
    nkept = k;
}

/* Keeps want's request (taken from it) with its answer. */
static kept_t *keep(kept_t *want, char *ans, size_t anslen) {
    if (nkept == capkept) {
        size_t ncap = capkept ? 2 * capkept : 8;
        kept_t *nk = realloc(kept, ncap * sizeof(*nk));
        if (nk == NULL) return NULL;
        kept = nk;
        capkept = ncap;
    }
    kept[nkept] = (kept_t){want->hash, want->req, ans, want->reqlen, anslen, 0, 0};
    want->req = NULL;
    return &kept[nkept++];
}

/* One set's answer from the child on *fd (spawned when there is none;
 * *spawn_err is posix_spawn's if that failed). 0, -ECANCELED when g is
 * given up first, or another -errno (the child, if any, is then in
 * doubt). */
static int compile_one(const lx_gen_t *g, const kept_t *want, int *fd, char **ans, size_t *anslen,
                       int *spawn_err) {
    int rc;
    *ans = NULL;
    if (*fd < 0 && (rc = spawn_child(g, fd)) < 0) {
        *spawn_err = rc;
        return rc;
    }
    pthread_mutex_lock(&mu);
    rc = -ECANCELED; /* g given up: a reload killed the child, or will not */
    if (!stopping && latest == g->id) {
        inflight = want->req;
        inflight_len = want->reqlen;
        rc = 0;
    }
    pthread_mutex_unlock(&mu);
    if (rc == 0 && (rc = lx_multire_write(*fd, want->req, want->reqlen)) == 0)
        rc = lx_multire_read_answer(*fd, ans, anslen);
    pthread_mutex_lock(&mu);
    inflight = NULL;
    pthread_mutex_unlock(&mu);
    return rc;
}

static void compile_gen(lx_gen_t *g, uint32_t nloops) {
    static int said;
    size_t all = 0;
    for (size_t i = 0; i < g->nrulesets; i++)
        all += g->rulesets[i]->nfree;
    if (all == 0) { /* queued so that what is kept goes: compiled to its end */
        last_done = g->id;
        prune_kept(NULL, 0);
        return;
    }
    test_hold("LUXD_TEST_PREFILTER_HOLD");
    if (!lx_multire_selftest()) {
        if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
            lx_log_error("rules: the regex prefilter engine failed its self-test (it missed a "
                         "match); every regex rule is tested on its own");
        return;
    }
    uint64_t t0 = uv_hrtime();
    size_t sets = 0, held = 0, reused = 0;
    kept_t *w = requests_of(g);
    prune_kept(w, g->nrulesets);
    int fd = -1, dropped = 0, failed = 0;
    for (size_t i = 0; w && i < g->nrulesets && !dropped; i++) {
        lx_ruleset_t *rs = g->rulesets[i];
        if (rs->nfree == 0) continue;
        if ((dropped = give_up(g)) != 0) break;
        /* Kept from before, or from a set of g with the same content. */
        kept_t *k = find_kept(&w[i]);
        int rc = 0, spawn_err = 0, from_kept = k != NULL;
        if (k == NULL) {
            char *ans;
            size_t anslen;
            if ((rc = compile_one(g, &w[i], &fd, &ans, &anslen, &spawn_err)) == 0 &&
                (k = keep(&w[i], ans, anslen)) == NULL) {
                free(ans);
                rc = -ENOMEM;
            }
        }
        lx_multire_t *m = NULL;
        if (rc == 0 && (rc = lx_multire_parse_answer(k->ans, k->anslen, rs->free_re, rs->nfree,
                                                     nloops, &m)) == 0) {
            lx_ruleset_prefilter_publish(rs, m);
            k->seen = g->id;
            uint32_t nl = rs->nfree;
            if (m) lx_multire_left(m, &nl);
            sets++;
            reused += from_kept;
            held += rs->nfree - nl;
            continue;
        }
        if (k) { /* an answer that does not load is not kept */
            free_kept(k);
            *k = kept[--nkept];
        }
        if ((dropped = give_up(g)) != 0) break; /* killed on purpose: not a failure */
        if (spawn_err) {
            lx_log_error("rules: cannot start the regex prefilter's compiler (/proc/self/exe: "
                         "%s); every regex rule of generation %llu is tested on its own",
                         strerror(-rc), (unsigned long long)g->id);
            dropped = 1;
            break;
        }
        /* The stream is in doubt: the next set gets a new child, and a
         * compiler that keeps failing is not started for every set. */
        char how[64] = "";
        if (fd >= 0) {
            memcpy(how, "; the compiler ", 16);
            describe(end_child(fd, 0), how + 15, sizeof(how) - 15);
            fd = -1;
        }
        lx_log_error("rules: the regex prefilter's compile of a set of %u regex rules "
                     "failed (%s%s); they are tested each",
                     rs->nfree, strerror(-rc), how);
        if (++failed == LX_PREFILTER_MAX_FAILED) {
            lx_log_error("rules: %d regex prefilter compiles failed; the rest of generation "
                         "%llu's regex rules are tested each",
                         failed, (unsigned long long)g->id);
            dropped = 1;
        }
    }
    end_child(fd, 1);
    if (w && !dropped) {
        last_done = g->id;
        for (size_t i = 0; i < nkept; i++)
            if (kept[i].seen == g->id) kept[i].done = g->id;
    }
    int nomem = w == NULL;
    for (size_t i = 0; w && i < g->nrulesets; i++)
        free(w[i].req); /* those not kept */
    free(w);
    if (nomem) {
        lx_log_error("rules: out of memory for the regex prefilters; every regex rule of "
                     "generation %llu is tested on its own",
                     (unsigned long long)g->id);
    } else if (!dropped || failed == LX_PREFILTER_MAX_FAILED) {
        lx_log_info("generation %llu: regex prefilter of %zu rule set%s compiled in %.1f ms "
                    "(%zu regexes held, %zu tested each; %zu set%s as before)",
                    (unsigned long long)g->id, sets, sets == 1 ? "" : "s",
                    (double)(uv_hrtime() - t0) / 1e6, held, all - held, reused,
                    reused == 1 ? "" : "s");
    }
}

static void *compile_main(void *arg) {
    (void)arg;
    /* Below the loops: the parent's share of a compile (reading, loading)
     * must not take CPU from the requests (Linux: nice is per thread). */
    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10);
    pthread_mutex_lock(&mu);
    while (!stopping) {
        if (pending == NULL) {
            pthread_cond_wait(&wake, &mu);
            continue;
        }
        lx_gen_t *g = pending;
        uint32_t nloops = pending_nloops;
        pending = NULL;
        pthread_mutex_unlock(&mu);
        compile_gen(g, nloops);
        lx_gen_unref(g);
        pthread_mutex_lock(&mu);
    }
    pthread_mutex_unlock(&mu);
    for (size_t i = 0; i < nkept; i++)
        free_kept(&kept[i]);
    free(kept);
    kept = NULL;
    nkept = capkept = 0;
    return NULL;
}

/* Under mu. Signals stay the main loop's. */
static int start_thread(void) {
    if (thread_up) return 0;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int r = pthread_create(&thread, NULL, compile_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (r == 0) thread_up = 1;
    return -r;
}

/* Whether g has the set the child is compiling (under mu). */
static int has_inflight(const lx_gen_t *g) {
    for (size_t i = 0; i < g->nrulesets; i++) {
        char *req;
        size_t len;
        if (g->rulesets[i]->nfree == 0 || lx_ruleset_prefilter_request(g->rulesets[i], &req, &len))
            continue;
        int same = len == inflight_len && memcmp(req, inflight, len) == 0;
        free(req);
        if (same) return 1;
    }
    return 0;
}

void lx_gen_prefilter_start(lx_gen_t *g, int nloops) {
    if (!lx_multire_available()) return;
    int any = 0;
    for (size_t i = 0; !any && i < g->nrulesets; i++)
        any = g->rulesets[i]->nfree != 0;
    lx_gen_t *old;
    int rc = 0;
    pthread_mutex_lock(&mu);
    if (stopping) {
        pthread_mutex_unlock(&mu);
        return;
    }
    latest = g->id;
    /* A compile of a set g has goes on (g takes its answer); of any other,
     * it is killed. */
    if (child > 0 && inflight && !has_inflight(g)) kill(child, SIGKILL);
    old = pending;
    pending = NULL;
    /* One with nothing to compile is queued too, once there is a thread:
     * what is kept for older ones goes. */
    if ((any || thread_up) && (rc = start_thread()) == 0) {
        lx_gen_ref(g);
        pending = g;
        pending_nloops = nloops > 0 ? (uint32_t)nloops : 1;
        pthread_cond_signal(&wake);
    }
    pthread_mutex_unlock(&mu);
    if (old) lx_gen_unref(old);
    if (rc < 0)
        lx_log_error("rules: cannot start the regex prefilter's compile (%s); every regex rule "
                     "is tested on its own",
                     strerror(-rc));
}

void lx_gen_prefilter_cancel(void) {
    pthread_mutex_lock(&mu);
    stopping = 1;
    if (child > 0) kill(child, SIGKILL);
    pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&mu);
}

void lx_gen_prefilter_stop(void) {
    lx_gen_prefilter_cancel();
    pthread_mutex_lock(&mu);
    lx_gen_t *old = pending;
    pending = NULL;
    int up = thread_up;
    thread_up = 0;
    pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&mu);
    if (up) pthread_join(thread, NULL);
    if (old) lx_gen_unref(old);
}

int lx_prefilter_child_main(const char *parent) {
    /* Dies with the thread that started it: a server that stops or crashes
     * leaves no compile running. The parent may have gone before that. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != (pid_t)atol(parent)) return 1;
    prctl(PR_SET_NAME, "luxd-prefilter"); /* for ps -C, top: not "exe" */
    /* What the server itself inherited without close-on-exec (a shell's
     * pipe, say) is not the compiler's to hold for seconds. */
    close_range(3, ~0U, 0);
    setpriority(PRIO_PROCESS, 0, 10);
    if (test_hold("LUXD_TEST_PREFILTER_CHILD_HOLD") == 'k') return 1;
    return lx_multire_serve(0) == 0 ? 0 : 1;
}
