/* The error log: one line per event, written with a single write(2) so lines
 * from several worker threads never interleave. */
#ifndef LX_LOG_H
#define LX_LOG_H

#include <sys/types.h>

enum {
    LX_LOG_DEBUG,
    LX_LOG_INFO,
    LX_LOG_NOTICE,
    LX_LOG_WARN,
    LX_LOG_ERROR,
    LX_LOG_CRIT,
    LX_LOG_ALERT,
    LX_LOG_EMERG,
};

/* Returns the level for a name ("info"), or -EINVAL. */
int lx_log_level_parse(const char *name);
/* The name of a level ("info"), for luxd -T. */
const char *lx_log_level_name(int level);

/* Opens `path` (or "stderr", "stdout") for appending and makes it the error
 * log; the old one is closed. Returns 0 or a negative errno, leaving the old
 * log in place. */
int lx_log_open(const char *path, int level);
/* Opens a log file for appending, creating it (mode 0644) when it is not
 * there; a file created gets the owner set with lx_log_set_file_owner. A
 * last component that is a symbolic link is refused (LX_ESYMLINK), and so
 * is anything but a regular file or a character device (LX_ENOTFILE).
 * Returns the fd or a negative errno. */
int lx_log_open_file(const char *path);
/* 1 for "stdout" or "/dev/stdout", 2 for "stderr" or "/dev/stderr": the fds
 * luxd was started with, written to as they are (a journal's socket cannot
 * be opened by name) and never reopened or closed. -1 for anything else. */
int lx_log_std_fd(const char *path);
/* Why a file luxd opens as root was refused, beyond errno's codes. */
enum {
    LX_ESYMLINK = -20001,  /* the last component is a symbolic link */
    LX_ENOTFILE = -20002,  /* not a regular file (nor a device, for a log) */
    LX_ENOTOWNER = -20003, /* owned by someone other than luxd's user or root */
    LX_ELINKED = -20004,   /* a regular file with more than one name */
    LX_ELOCKED = -20005,   /* a pid file another process holds locked */
};
/* strerror for errno codes and the LX_E* above (err negative). */
const char *lx_file_strerror(int err);
void lx_log_set_file_owner(uid_t uid, gid_t gid);
/* Reopens the current path (SIGUSR1, after logrotate moved the file). */
int lx_log_reopen(void);
void lx_log_set_level(int level);
int lx_log_enabled(int level);

void lx_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define lx_log_error(...) lx_log(LX_LOG_ERROR, __VA_ARGS__)
#define lx_log_warn(...)  lx_log(LX_LOG_WARN, __VA_ARGS__)
#define lx_log_info(...)  lx_log(LX_LOG_INFO, __VA_ARGS__)
#define lx_log_debug(...)                                                                          \
    do {                                                                                           \
        if (lx_log_enabled(LX_LOG_DEBUG)) lx_log(LX_LOG_DEBUG, __VA_ARGS__);                       \
    } while (0)

#endif
