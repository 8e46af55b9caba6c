/* The rule sets' prefilters (dispatch/multire.c) are compiled off the loops:
 * one thread per generation started to serve, holding a reference on it,
 * compiles its sets in turn and publishes each (lx_ruleset_prefilter_build).
 * Until a set's is there, loops test its regex rules each (correct, just
 * slower): a start or a reload never waits for the engine. -t, -T and
 * --explain never start one. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <uv.h>

#include "../log.h"
#include "config.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle = PTHREAD_COND_INITIALIZER;
static int running, stopping;

typedef struct {
    lx_gen_t *g;
    uint32_t nloops;
} job_t;

/* Tests only: the thread waits for a byte on this FIFO before it compiles,
 * so that a test can serve requests while the prefilter is not there yet
 * without racing it. Only luxd-test (the binary with the test handler)
 * heeds it: in luxd, a stray variable would stop every compile, and a
 * stop would wait on the FIFO. */
static void test_hold(void) {
    if (!lx_config_test_handlers) return;
    const char *fifo = getenv("LUXD_TEST_PREFILTER_HOLD");
    if (fifo == NULL || *fifo == '\0') return;
    int fd = open(fifo, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    char c;
    while (read(fd, &c, 1) < 0 && errno == EINTR) {
    }
    close(fd);
}

static int stop_asked(const lx_gen_t *g) {
    /* The thread's own reference the only one left: nothing serves g. */
    if (__atomic_load_n(&g->refs, __ATOMIC_ACQUIRE) == 1) return 1;
    pthread_mutex_lock(&mu);
    int s = stopping;
    pthread_mutex_unlock(&mu);
    return s;
}

static void *compile_main(void *arg) {
    job_t *j = arg;
    lx_gen_t *g = j->g;
    /* Below the loops: a compile of seconds must not take CPU from the
     * requests it is meant to speed up (Linux: nice is per thread). */
    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10);
    test_hold();
    static int said;
    if (!lx_multire_selftest()) {
        if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
            lx_log_error("rules: the regex prefilter engine failed its self-test (it missed a "
                         "match); every regex rule is tested on its own");
        goto out;
    }
    uint64_t t0 = uv_hrtime();
    size_t sets = 0, held = 0, left = 0;
    int stopped = 0;
    for (size_t i = 0; i < g->nrulesets; i++) {
        lx_ruleset_t *rs = g->rulesets[i];
        if (rs->nfree == 0) continue;
        if ((stopped = stop_asked(g)) != 0) break;
        if (lx_ruleset_prefilter_build(rs, j->nloops) < 0) {
            lx_log_error("rules: out of memory for a regex prefilter; its rules are tested each");
            continue;
        }
        const lx_multire_t *m = __atomic_load_n(&rs->multi, __ATOMIC_ACQUIRE);
        uint32_t nl = rs->nfree;
        if (m) lx_multire_left(m, &nl);
        sets++;
        held += rs->nfree - nl;
        left += nl;
    }
    if (!stopped)
        lx_log_info("generation %llu: regex prefilter of %zu rule set%s compiled in %.1f ms "
                    "(%zu regexes held, %zu tested each)",
                    (unsigned long long)g->id, sets, sets == 1 ? "" : "s",
                    (double)(uv_hrtime() - t0) / 1e6, held, left);
out:
    lx_gen_unref(g);
    free(j);
    pthread_mutex_lock(&mu);
    running--;
    pthread_cond_broadcast(&idle);
    pthread_mutex_unlock(&mu);
    return NULL;
}

void lx_gen_prefilter_start(lx_gen_t *g, int nloops) {
    if (!lx_multire_available()) return;
    size_t i = 0;
    while (i < g->nrulesets && g->rulesets[i]->nfree == 0)
        i++;
    if (i == g->nrulesets) return;
    job_t *j = malloc(sizeof(*j));
    if (j == NULL) goto fail;
    j->g = g;
    j->nloops = nloops > 0 ? (uint32_t)nloops : 1;
    lx_gen_ref(g);
    pthread_mutex_lock(&mu);
    running++;
    pthread_mutex_unlock(&mu);
    /* Signals stay the main loop's; and a detached thread: lx_gen_prefilter
     * _stop waits for them all by the count. */
    pthread_attr_t attr;
    sigset_t all, old;
    sigfillset(&all);
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t t;
    int r = pthread_create(&t, &attr, compile_main, j);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (r == 0) return;
    pthread_mutex_lock(&mu);
    running--;
    pthread_mutex_unlock(&mu);
    lx_gen_unref(g);
    free(j);
fail:
    lx_log_error("rules: cannot start the regex prefilter's compile; every regex rule is tested "
                 "on its own");
}

void lx_gen_prefilter_stop(void) {
    pthread_mutex_lock(&mu);
    stopping = 1;
    while (running > 0)
        pthread_cond_wait(&idle, &mu);
    pthread_mutex_unlock(&mu);
}
