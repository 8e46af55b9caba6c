#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

const char *lx_log_level_name(int level) {
    if (level < 0 || level >= (int)(sizeof(level_names) / sizeof(level_names[0]))) return "?";
    return level_names[level];
}

/* Who gets the log files luxd creates while it is still root (-1: leave
 * them to whoever creates them). */
static uid_t owner_uid = (uid_t)-1;
static gid_t owner_gid = (gid_t)-1;

void lx_log_set_file_owner(uid_t uid, gid_t gid) {
    owner_uid = uid;
    owner_gid = gid;
}

int lx_log_std_fd(const char *path) {
    if (strcmp(path, "stdout") == 0 || strcmp(path, "/dev/stdout") == 0) return 1;
    if (strcmp(path, "stderr") == 0 || strcmp(path, "/dev/stderr") == 0) return 2;
    return -1;
}

/* What is open on fd must be a log: a regular file, or a character device
 * such as /dev/null or a terminal. O_NONBLOCK (against a FIFO planted to
 * hang the open) is cleared again for the writes. */
static int check_log_fd(int fd) {
    struct stat st;
    if (fstat(fd, &st) < 0) return -errno;
    if (!S_ISREG(st.st_mode) && !S_ISCHR(st.st_mode)) return LX_ENOTFILE;
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) return -errno;
    return 0;
}

int lx_log_open_file(const char *path) {
    /* Logs are opened as root, in directories (/var/log/luxd, a package's
     * /var/log/luxd) that may belong to the user luxd serves as: a link
     * that user planted must not make root append to a file of its
     * choosing (nginx's CVE-2016-1247), so the last component is never
     * followed, and only a regular file or a device is written to. */
    int flags = O_WRONLY | O_APPEND | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK;
    for (int tries = 0; tries < 8; tries++) {
        int fd = open(path, flags);
        if (fd < 0 && errno == ELOOP) return LX_ESYMLINK;
        if (fd < 0 && errno == ENXIO) {
            /* A FIFO no one reads (O_NONBLOCK), or a socket. */
            struct stat st;
            if (lstat(path, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)))
                return LX_ENOTFILE;
            return -ENXIO;
        }
        if (fd < 0 && errno != ENOENT) return -errno;
        if (fd < 0) {
            /* Created here, mode 0640 as Debian's servers create theirs
             * (logrotate: create 0640 www-data adm): a log tells who asked
             * for what, which is not everyone's to read. When luxd is about
             * to drop root for `user`, the file becomes that user's, as
             * nginx's are after a reopen, so that a reopen after the drop
             * (logrotate's copytruncate, or a file nobody moved) can open
             * it again. Its group stays the directory's when the directory
             * gives its own (set-group-ID, as the package's /var/log/luxd,
             * group adm), else the user's. A file that was there already
             * keeps its owner. */
            fd = open(path, flags | O_CREAT | O_EXCL, 0640);
            if (fd < 0 && errno == EEXIST) continue; /* made by someone else meanwhile */
            if (fd < 0) return -errno;
            struct stat st;
            gid_t gid = owner_gid;
            if (fstat(fd, &st) == 0 && st.st_gid != getegid()) gid = (gid_t)-1;
            if (owner_uid != (uid_t)-1 && fchown(fd, owner_uid, gid) < 0) {
                /* Still a working log: only a later reopen may fail. */
            }
        }
        int r = check_log_fd(fd);
        if (r < 0) {
            close(fd);
            return r;
        }
        return fd;
    }
    return -EEXIST;
}

const char *lx_file_strerror(int err) {
    switch (err) {
    case LX_ESYMLINK:
        return "it is a symbolic link, which luxd does not follow there (it opens the file as "
               "root, in a directory another user may write); name the file itself";
    case LX_ENOTFILE: return "not a regular file (nor, for a log, a device such as /dev/null)";
    case LX_ENOTOWNER:
        return "the file is not luxd's own (its owner is neither the user luxd runs as nor "
               "root); remove it";
    case LX_ELINKED:
        return "the file has other hard links, so it may be another file's name; remove it";
    case LX_ELOCKED:
        return "another process holds its lock: a luxd with this pid_file is running already";
    default: return strerror(-err);
    }
}

static int open_path(const char *path) {
    int fd = lx_log_std_fd(path);
    return fd >= 0 ? fd : lx_log_open_file(path);
}

int lx_log_open(const char *path, int level) {
    int fd = open_path(path);
    if (fd < 0) return fd;
    char *copy = strdup(path);
    if (copy == NULL) {
        if (fd > 2) close(fd);
        return -ENOMEM;
    }
    pthread_mutex_lock(&log_lock);
    /* dup3 swaps the file behind the descriptor atomically, so a thread
     * writing a line at this moment writes it whole to the old or new file,
     * never to a closed or reused descriptor. fds 1 and 2 are luxd's own
     * (a journal's socket, a terminal) and are never replaced or closed:
     * a switch from a file to one of them makes the file's descriptor a
     * copy of it, so the file is let go (t/177). */
    if (log_fd > 2) {
        dup3(fd, log_fd, O_CLOEXEC); /* as dup2, but keeps close-on-exec (t/180) */
        if (fd > 2) close(fd);
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
    /* stdout and stderr are luxd's own fds: nothing to reopen. */
    if (path == NULL || lx_log_std_fd(path) >= 0) {
        free(path);
        return 0;
    }
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
