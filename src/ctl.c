/* luxd -s: finds the running server through its pid file and signals it.
 *
 * The config is not run for this. Running it (as luxd -s once did) makes
 * signalling depend on everything the config does: a typo saved but not
 * reloaded, an upstream name that does not resolve at that moment, or
 * 10,000 vhosts to compile made logrotate's `luxd -s reopen` signal
 * nothing, and the server went on writing into the rotated file. The pid
 * file is, in this order: -p FILE; the config file's pid_file when the
 * file assigns it as a plain string literal (found by reading its tokens,
 * so that nothing else in the file, broken or not, matters); the pid file
 * built in as the package's default (PID_PATH in the Makefile). */
#include "ctl.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lx.h"
#include "server.h"

int lx_ctl_signal_number(const char *name) {
    static const struct {
        const char *name;
        int sig;
    } sigs[] = {{"stop", SIGTERM}, {"quit", SIGQUIT}, {"reopen", SIGUSR1}, {"reload", SIGHUP}};
    for (size_t i = 0; i < LX_ARRAY_SIZE(sigs); i++)
        if (strcmp(name, sigs[i].name) == 0) return sigs[i].sig;
    return 0;
}

/* --- the literal pid_file of a config file ------------------------------ */

/* At '[': the length of a long bracket "[==[" minus one (its level + 1),
 * or 0 when this '[' opens none. */
static size_t long_open(const char *p, const char *end) {
    const char *q = p + 1;
    while (q < end && *q == '=')
        q++;
    return q < end && *q == '[' ? (size_t)(q - p) : 0;
}

/* From just past a long bracket of level lvl: its closing "]==]"; *after
 * is past it (end when it is not closed). */
static const char *long_close(const char *p, const char *end, size_t lvl, const char **after) {
    for (; p < end; p++) {
        if (*p != ']') continue;
        const char *q = p + 1;
        while (q < end && *q == '=')
            q++;
        if ((size_t)(q - p - 1) == lvl && q < end && *q == ']') {
            *after = q + 1;
            return p;
        }
    }
    *after = end;
    return end;
}

/* Skips white space and comments (`--` to the end of the line, or a long
 * comment `--[[ ... ]]`). */
static const char *skip_space(const char *p, const char *end) {
    for (;;) {
        while (p < end && isspace((unsigned char)*p))
            p++;
        if (end - p < 2 || p[0] != '-' || p[1] != '-') return p;
        p += 2;
        size_t n = p < end && *p == '[' ? long_open(p, end) : 0;
        if (n) {
            long_close(p + n + 1, end, n - 1, &p);
        } else {
            while (p < end && *p != '\n')
                p++;
        }
    }
}

/* At a quote: past the short string it opens; *plain is whether it was
 * closed on its line with no escape in it. */
static const char *skip_short(const char *p, const char *end, int *plain) {
    char q = *p++;
    *plain = 1;
    for (; p < end && *p != '\n'; p++) {
        if (*p == '\\') {
            *plain = 0;
            if (++p == end) break;
        } else if (*p == q) {
            return p + 1;
        }
    }
    *plain = 0; /* not closed: Lua refuses it */
    return p;
}

static int ident_start(char c) {
    return isalpha((unsigned char)c) || c == '_';
}

static const char *skip_ident(const char *p, const char *end) {
    while (p < end && (isalnum((unsigned char)*p) || *p == '_'))
        p++;
    return p;
}

/* Whether what follows a string literal ends the value: a separator, the
 * end, or the next statement (a name other than `and`, `or`). */
static int value_ends(const char *p, const char *end) {
    if (p == end || *p == ',' || *p == ';' || *p == '}' || *p == ')') return 1;
    if (!ident_start(*p)) return 0;
    const char *q = skip_ident(p, end);
    return !((q - p == 2 && memcmp(p, "or", 2) == 0) || (q - p == 3 && memcmp(p, "and", 3) == 0));
}

int lx_ctl_scan_pid_file(const char *text, size_t len, char *out, size_t outlen, const char **why) {
    const char *p = text, *end = text + len;
    int found = 0, bad = 0, include = 0;
    if (p < end && *p == '#') /* a #! line */
        while (p < end && *p != '\n')
            p++;
    while ((p = skip_space(p, end)) < end) {
        size_t n;
        int plain;
        if (*p == '"' || *p == '\'') {
            p = skip_short(p, end, &plain);
        } else if (*p == '[' && (n = long_open(p, end)) != 0) {
            long_close(p + n + 1, end, n - 1, &p);
        } else if (ident_start(*p)) {
            const char *q = skip_ident(p, end);
            int is_key = q - p == 8 && memcmp(p, "pid_file", 8) == 0;
            if (q - p == 7 && memcmp(p, "include", 7) == 0) include = 1;
            p = q;
            if (!is_key) continue;
            q = skip_space(q, end);
            if (q == end || *q != '=' || (q + 1 < end && q[1] == '=')) continue; /* a read */
            p = q = skip_space(q + 1, end);
            const char *v = NULL, *ve = NULL, *after = NULL;
            if (q < end && (*q == '"' || *q == '\'')) {
                after = skip_short(q, end, &plain);
                if (plain) v = q + 1, ve = after - 1;
            } else if (q < end && *q == '[' && (n = long_open(q, end)) != 0) {
                v = q + n + 1;
                if (v < end && *v == '\n') v++; /* as Lua: a first newline is dropped */
                ve = long_close(v, end, n - 1, &after);
                if (ve == end) v = NULL;
            }
            if (v == NULL || !value_ends(skip_space(after, end), end) || ve == v ||
                memchr(v, '\0', (size_t)(ve - v)) || memchr(v, '\n', (size_t)(ve - v))) {
                bad = 1;
                continue;
            }
            size_t vl = (size_t)(ve - v);
            if (found && (strlen(out) != vl || memcmp(out, v, vl) != 0)) {
                *why = "pid_file is given more than one value";
                return -EINVAL;
            }
            if (vl >= outlen) return -ENAMETOOLONG;
            memcpy(out, v, vl);
            out[vl] = '\0';
            found = 1;
        } else if (isdigit((unsigned char)*p)) {
            while (p < end && (isalnum((unsigned char)*p) || *p == '.' || *p == '_'))
                p++;
        } else {
            p++;
        }
    }
    if (bad) {
        *why = "pid_file is not set to a plain string literal (pid_file = \"/run/luxd/luxd.pid\")";
        return -EINVAL;
    }
    /* An included file may set it, and is not read here: the built-in
     * pid file could then be another server's (the packaged luxd's). */
    if (!found && include) {
        *why = "pid_file may be set in an included file, which -s does not read";
        return -ENOENT;
    }
    return found;
}

/* The config file's text, whole; NULL with errno. */
static char *read_text(const char *path, size_t *len) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) return NULL;
    struct stat st;
    char *buf = NULL;
    if (fstat(fd, &st) < 0) goto out;
    if (!S_ISREG(st.st_mode)) {
        errno = EINVAL;
        goto out;
    }
    buf = malloc((size_t)st.st_size + 1);
    size_t got = 0;
    while (buf && got < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += (size_t)n;
    }
    if (buf) *len = got;
out:
    close(fd);
    return buf;
}

/* The pid file's path, as the config would make it absolute (relative to
 * the working directory, as luxd started here would resolve it). */
static int absolute(const char *p, char *out, size_t len) {
    char cwd[4096];
    int n;
    while (p[0] == '.' && p[1] == '/')
        for (p += 2; *p == '/'; p++)
            ;
    if (p[0] == '/')
        n = snprintf(out, len, "%s", p);
    else if (getcwd(cwd, sizeof(cwd)) == NULL)
        return -errno;
    else
        n = snprintf(out, len, "%s%s%s", cwd, strcmp(cwd, "/") == 0 ? "" : "/", p);
    if (n < 0 || (size_t)n >= len) return -ENAMETOOLONG;
    for (size_t l = strlen(out); l > 1 && out[l - 1] == '/'; l--)
        out[l - 1] = '\0';
    return 0;
}

/* absolute(), saying on stderr why not. */
static int absolute_or_say(const char *p, char *out, size_t len) {
    int r = absolute(p, out, len);
    if (r < 0) fprintf(stderr, "luxd: pid file %s: %s\n", p, strerror(-r));
    return r < 0 ? -1 : 0;
}

/* Which pid file to read, into out; what names it into from (for the
 * messages). Says why on stderr and returns -1 when there is none. */
static int locate(const char *conf, int conf_given, const char *pid_opt, const char *def, char *out,
                  size_t len, char *from, size_t fromlen) {
    if (pid_opt) {
        snprintf(from, fromlen, "-p");
        return absolute_or_say(pid_opt, out, len);
    }
    char lit[4096];
    const char *why = NULL;
    size_t tlen = 0;
    char *text = read_text(conf, &tlen);
    int e = errno, r = 0;
    if (text) {
        r = lx_ctl_scan_pid_file(text, tlen, lit, sizeof(lit), &why);
        free(text);
        if (r == 1) {
            snprintf(from, fromlen, "the pid_file of %s", conf);
            return absolute_or_say(lit, out, len);
        }
        if (r == -ENAMETOOLONG) why = "pid_file is too long";
    }
    char reason[4400];
    if (text == NULL)
        snprintf(reason, sizeof(reason), "%s: cannot read: %s%s", conf, strerror(e),
                 conf_given ? "" : " (the default config; another is named with -c FILE)");
    else if (r == 0)
        snprintf(reason, sizeof(reason), "no pid_file in the config %s", conf);
    else
        snprintf(reason, sizeof(reason), "%s: %s", conf, why);
    /* A config that assigns pid_file in a way not read here names some
     * pid file, likely not the built-in one: that one may be another
     * server's (the packaged luxd's), which the lock check cannot tell
     * from this one. Only a config that names none falls back. */
    if (text && r < 0) {
        fprintf(stderr,
                "luxd: %s; not falling back to the built-in pid file: name it with -p PIDFILE\n",
                reason);
        return -1;
    }
    if (def && def[0]) {
        snprintf(from, fromlen, "the built-in default, as %s", reason);
        return absolute_or_say(def, out, len);
    }
    fprintf(stderr,
            "luxd: no pid file to read (%s, and none is built in): name it with -p PIDFILE\n",
            reason);
    return -1;
}

/* --- signalling -------------------------------------------------------- */

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

/* A process's ids and capabilities as /proc/PID/status shows them (to
 * anyone). */
typedef struct {
    long uid[3]; /* real, effective, saved */
    unsigned long long cap_prm, cap_eff;
} proc_ids_t;

static int proc_ids(const char *pid, proc_ids_t *ids) {
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%s/status", pid);
    FILE *f = fopen(path, "re");
    if (f == NULL) return -errno;
    int got = 0;
    while (fgets(line, sizeof(line), f)) {
        if (sscanf(line, "Uid: %ld %ld %ld", &ids->uid[0], &ids->uid[1], &ids->uid[2]) == 3)
            got |= 1;
        else if (sscanf(line, "CapPrm: %llx", &ids->cap_prm) == 1)
            got |= 2;
        else if (sscanf(line, "CapEff: %llx", &ids->cap_eff) == 1)
            got |= 4;
    }
    fclose(f);
    return got == 7 ? 0 : -EIO;
}

static const char *user_name(long uid, char *buf, size_t len) {
    struct passwd *pw = getpwuid((uid_t)uid);
    snprintf(buf, len, "uid %ld%s%s%s", uid, pw ? " (" : "", pw ? pw->pw_name : "", pw ? ")" : "");
    return buf;
}

/* Why the kernel keeps pid's open files from this process: its ptrace
 * read check (the uids, the target's dumpable flag, its capabilities), as
 * far as /proc/PID/status, which anyone may read, tells. */
static void why_denied(long pid, char *out, size_t len) {
    char spid[32], a[96], b[96];
    proc_ids_t them, me;
    struct stat st;
    snprintf(spid, sizeof(spid), "%ld", pid);
    if (proc_ids(spid, &them) < 0 || proc_ids("self", &me) < 0) {
        snprintf(out, len, "its /proc/%ld/status cannot be read either", pid);
        return;
    }
    const unsigned long long sys_ptrace = 1ull << 19;
    long my = (long)geteuid();
    int mine = them.uid[0] == my && them.uid[1] == my && them.uid[2] == my;
    /* A process that is not dumpable (it changed its uid) has its /proc
     * entries owned by root; /proc/PID itself is not among them. */
    snprintf(spid, sizeof(spid), "/proc/%ld/fd", pid);
    if (me.cap_eff & sys_ptrace)
        snprintf(out, len, "refused by a security module (this process has CAP_SYS_PTRACE)");
    else if (!mine)
        snprintf(out, len, "pid %ld runs as %s, luxd -s as %s", pid,
                 user_name(them.uid[1], a, sizeof(a)), user_name(my, b, sizeof(b)));
    else if (stat(spid, &st) == 0 && st.st_uid == 0 && my != 0)
        snprintf(out, len,
                 "pid %ld changed its user when it started (user =), so the kernel keeps its "
                 "/proc entries root's",
                 pid);
    else if ((them.cap_prm & ~me.cap_eff) != 0)
        snprintf(out, len,
                 "pid %ld runs as the same user but holds capabilities this process lacks "
                 "(CapPrm %llx; luxd -s has CapEff %llx, e.g. systemd's "
                 "AmbientCapabilities=CAP_NET_BIND_SERVICE), and the kernel shows a process's "
                 "open files only to one with all of its capabilities",
                 pid, them.cap_prm, me.cap_eff);
    else if (my == 0)
        snprintf(out, len,
                 "pid %ld changed its user when it started (user =) and this root lacks "
                 "CAP_SYS_PTRACE (a container's default set)",
                 pid);
    else
        snprintf(out, len, "refused by the kernel's ptrace rules or a security module");
}

/* Whether the locked pid file's word on the pid can be taken: when pid is
 * seen holding the file open, or, when that cannot be looked at, when no
 * one but root and this process's user may write the file: root's
 * (luxd started as root wrote it before any user= drop) or this user's
 * own (then the signal can only reach what this user could signal
 * anyway). Says why not on stderr. */
static int pid_trusted(const char *pf, long pid, int fd) {
    int h = holds_open(pid, fd);
    if (h == 1) return 1;
    struct stat st;
    if (fstat(fd, &st) < 0) memset(&st, 0xff, sizeof(st)); /* trusted by no one */
    if (h < 0 && h != -ENOENT && (st.st_uid == 0 || st.st_uid == geteuid()) &&
        (st.st_mode & 022) == 0)
        return 1;
    if (h == 0 || h == -ENOENT) {
        fprintf(stderr,
                "luxd: %s says pid %ld, but that process does not hold the file open; the file "
                "was rewritten or replaced: refusing to signal\n",
                pf, pid);
        return 0;
    }
    char why[512], a[96];
    why_denied(pid, why, sizeof(why));
    fprintf(stderr,
            "luxd: cannot confirm that pid %ld holds %s: /proc/%ld/fd: %s: %s; and the pid file "
            "may be written by others than root and %s (owner uid %ld, mode %03o): refusing to "
            "signal\n",
            pid, pf, pid, strerror(-h), why, user_name((long)geteuid(), a, sizeof(a)),
            (long)st.st_uid, (unsigned)(st.st_mode & 07777));
    return 0;
}

/* kill() refused: say whose process it is and who asked. */
static void report_kill(long pid, int err) {
    char spid[32], why[256] = "", a[96], b[96];
    proc_ids_t them;
    snprintf(spid, sizeof(spid), "%ld", pid);
    if (err == EPERM && proc_ids(spid, &them) == 0)
        snprintf(why, sizeof(why),
                 ": pid %ld runs as %s and luxd -s as %s; only root or that user may signal it",
                 pid, user_name(them.uid[0], a, sizeof(a)),
                 user_name((long)geteuid(), b, sizeof(b)));
    fprintf(stderr, "luxd: kill %ld: %s%s\n", pid, strerror(err), why);
}

int lx_ctl_send(const char *conf, int conf_given, const char *pid_opt, const char *def, int sig) {
    char pf[4096], from[4600], status[4200];
    if (locate(conf, conf_given, pid_opt, def, pf, sizeof(pf), from, sizeof(from)) < 0) return 1;
    int rc = 1;
    long pid = 0, before = 0;
    int fd = open(pf, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK);
    FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
    /* The running luxd holds a write lock on its pid file (server.c): the
     * pid signalled must be of a process that holds the file open while
     * it is locked. A stale file, or one rewritten or replaced by whoever
     * may write its directory, would otherwise aim root's kill anywhere. */
    struct flock lk = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    if (f == NULL) {
        if (fd >= 0) close(fd);
        fprintf(stderr, "luxd: cannot read the pid file %s (%s): %s\n", pf, from,
                errno == ELOOP ? "it is a symbolic link" : strerror(errno));
    } else if (fscanf(f, "%ld", &pid) != 1 || pid <= 0)
        fprintf(stderr, "luxd: no pid in %s (%s)\n", pf, from);
    else if (fcntl(fd, F_OFD_GETLK, &lk) < 0)
        fprintf(stderr, "luxd: %s: cannot query its lock: %s\n", pf, strerror(errno));
    else if (lk.l_type == F_UNLCK)
        fprintf(stderr, "luxd: no luxd holds %s (stale pid file?); not signalling pid %ld\n", pf,
                pid);
    else if (!pid_trusted(pf, pid, fd))
        ; /* it said why */
    else {
        int have_status = lx_reload_status_path(pf, status, sizeof(status)) == 0;
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
            report_kill(pid, errno);
        else if (rc == -1)
            rc = 1; /* sent; its outcome cannot be read */
        else if (sig != SIGHUP || !have_status)
            rc = 0;
        else {
            /* The server runs the config, judges it, logs and counts the
             * outcome, and writes it here: this process only reports it. */
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
                /* The server writes its verdict while it holds the pid
                 * file: once the lock is gone (it died, or the reload gave
                 * it another pid_file and it wrote the verdict there) none
                 * will come here. */
                struct flock now = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
                if (fcntl(fd, F_OFD_GETLK, &now) == 0 && now.l_type == F_UNLCK) {
                    fprintf(stderr,
                            "luxd: pid %ld no longer holds %s (%s): no verdict to read; the "
                            "outcome of the reload is in its error log\n",
                            pid, pf,
                            kill((pid_t)pid, 0) == 0 || errno == EPERM
                                ? "a process by that pid runs: the reload may have moved "
                                  "its pid_file"
                                : "it exited");
                    break;
                }
                if (i == 1199) fprintf(stderr, "luxd: no answer from pid %ld within 60 s\n", pid);
            }
        }
    }
    if (f) fclose(f);
    return rc;
}
