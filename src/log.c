#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *const level_names[] = {"debug", "info", "notice", "warn",
                                          "error", "crit", "alert",  "emerg"};

/* Writers read the fd without a lock; open/reopen serialise on log_lock. */
static int log_fd = 2;
static int log_level = LX_LOG_INFO;
static char *log_path;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

int lx_log_level_parse(const char *name) {
    for (int i = 0; i < (int)(sizeof(level_names) / sizeof(level_names[0])); i++)
        if (strcmp(name, level_names[i]) == 0) return i;
    return -EINVAL;
}

/* Who gets the log files luxd creates while it is still root (-1: leave
 * them to whoever creates them). */
static uid_t owner_uid = (uid_t)-1;
static gid_t owner_gid = (gid_t)-1;

void lx_log_set_file_owner(uid_t uid, gid_t gid) {
    owner_uid = uid;
    owner_gid = gid;
}

int lx_log_open_file(const char *path) {
    int flags = O_WRONLY | O_APPEND | O_CLOEXEC | O_NOCTTY;
    for (int tries = 0; tries < 8; tries++) {
        int fd = open(path, flags);
        if (fd >= 0 || errno != ENOENT) return fd < 0 ? -errno : fd;
        /* Created here: when luxd is about to drop root for `user`, the
         * file becomes that user's, as nginx's are after a reopen, so that
         * a reopen after the drop (logrotate's copytruncate, or a file
         * nobody moved) can open it again. A file that was there already
         * keeps its owner. */
        fd = open(path, flags | O_CREAT | O_EXCL, 0644);
        if (fd >= 0) {
            if (owner_uid != (uid_t)-1 && fchown(fd, owner_uid, owner_gid) < 0) {
                /* Still a working log: only a later reopen may fail. */
            }
            return fd;
        }
        if (errno != EEXIST) return -errno;
        /* Made by someone else between the two opens: open that one. */
    }
    return -EEXIST;
}

static int open_path(const char *path) {
    if (strcmp(path, "stderr") == 0) return 2;
    return lx_log_open_file(path);
}

int lx_log_open(const char *path, int level) {
    int fd = open_path(path);
    if (fd < 0) return fd;
    char *copy = strdup(path);
    if (copy == NULL) {
        if (fd != 2) close(fd);
        return -ENOMEM;
    }
    pthread_mutex_lock(&log_lock);
    /* dup2 swaps the file behind the descriptor atomically, so a thread
     * writing a line at this moment writes it whole to the old or new file,
     * never to a closed or reused descriptor. */
    if (fd != 2 && log_fd != 2) {
        dup2(fd, log_fd);
        close(fd);
    } else {
        __atomic_store_n(&log_fd, fd, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&log_level, level, __ATOMIC_RELAXED);
    free(log_path);
    log_path = copy;
    pthread_mutex_unlock(&log_lock);
    return 0;
}

int lx_log_reopen(void) {
    pthread_mutex_lock(&log_lock);
    char *path = log_path ? strdup(log_path) : NULL;
    int level = log_level;
    pthread_mutex_unlock(&log_lock);
    if (path == NULL) return 0;
    int r = lx_log_open(path, level);
    free(path);
    return r;
}

void lx_log_set_level(int level) {
    __atomic_store_n(&log_level, level, __ATOMIC_RELAXED);
}

int lx_log_enabled(int level) {
    return level >= __atomic_load_n(&log_level, __ATOMIC_RELAXED);
}

void lx_log(int level, const char *fmt, ...) {
    if (!lx_log_enabled(level)) return;
    char line[2048];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    size_t n = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%SZ ", &tm);
    n += (size_t)snprintf(line + n, sizeof(line) - n, "[%s] ", level_names[level]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
    va_end(ap);
    if (m < 0) m = 0;
    n += (size_t)m;
    if (n > sizeof(line) - 2) n = sizeof(line) - 2;
    line[n++] = '\n';
    ssize_t w = write(__atomic_load_n(&log_fd, __ATOMIC_ACQUIRE), line, n);
    (void)w; /* Nowhere left to report a failing error log. */
}
