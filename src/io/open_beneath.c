#include "open_beneath.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* O_NONBLOCK: opening a FIFO someone put in the root must not hang. */
#define OPEN_FLAGS (O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)

/* openat2 is tried until the kernel says it has none (ENOSYS: before 5.6, or
 * a seccomp filter that does not know it); then the walk does all. Pool
 * threads share the answer, hence the atomics. */
enum { OPENAT2_UNKNOWN, OPENAT2_WORKS, OPENAT2_MISSING };
static int openat2_state = OPENAT2_UNKNOWN;

/* Whether the last lx_open_beneath of this thread failed because the
 * policy refused the path (its -EACCES is then no errno of the kernel's). */
static __thread int policy_refused;

static int refuse(void) {
    policy_refused = 1;
    return -EACCES;
}

int lx_open_beneath_refused(void) {
    return policy_refused;
}

void lx_open_beneath_force_walk(int on) {
    __atomic_store_n(&openat2_state, on ? OPENAT2_MISSING : OPENAT2_UNKNOWN, __ATOMIC_RELAXED);
}

/* Follows the link `name` in dir (whose own stat is *link) with `flags`,
 * when the policy allows: in owner mode, only when what it resolves to has
 * the link's owner. The owner compared is that of the object opened, read
 * from its fd, so a target swapped after the link was looked at is caught.
 * Returns the fd (and its stat in *st), or a negative errno. */
static int follow_link(int dir, const char *name, lx_symlinks_t mode, const struct stat *link,
                       int flags, struct stat *st) {
    if (mode != LX_SYMLINKS_OWNER) return refuse();
    int fd = openat(dir, name, flags);
    if (fd < 0) return -errno;
    if (fstat(fd, st) < 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    if (st->st_uid != link->st_uid) {
        close(fd);
        return refuse();
    }
    return fd;
}

/* Opens the last component for reading. O_NOFOLLOW makes a link fail with
 * ELOOP, which is the cue to look at it as a link; a plain file is opened in
 * one call, so no swap can slip in between a check and the open. */
static int open_last(int dir, const char *name, lx_symlinks_t mode) {
    int fd = openat(dir, name, OPEN_FLAGS | O_NOFOLLOW);
    if (fd >= 0) return fd;
    if (errno != ELOOP) return -errno;
    struct stat link, st;
    if (fstatat(dir, name, &link, AT_SYMLINK_NOFOLLOW) < 0) return -errno;
    if (!S_ISLNK(link.st_mode)) return refuse(); /* swapped while we looked */
    return follow_link(dir, name, mode, &link, OPEN_FLAGS, &st);
}

/* The component-by-component walk: each directory is opened relative to the
 * previous one's fd, with O_NOFOLLOW, and its type read from that fd. */
static int walk(int root, const char *rel, lx_symlinks_t mode) {
    int cur = root, rc;
    const char *p = rel;
    for (;;) {
        while (*p == '/')
            p++;
        const char *end = p;
        while (*end && *end != '/')
            end++;
        size_t n = (size_t)(end - p);
        const char *rest = end;
        while (*rest == '/')
            rest++;
        if (n == 0) { /* the root itself, or a directory ending in '/' */
            rc = openat(cur, ".", OPEN_FLAGS);
            rc = rc < 0 ? -errno : rc;
            break;
        }
        char name[NAME_MAX + 1];
        if (n > NAME_MAX) {
            rc = -ENAMETOOLONG;
            break;
        }
        memcpy(name, p, n);
        name[n] = '\0';
        if (*rest == '\0' && *end == '\0') {
            rc = open_last(cur, name, mode);
            break;
        }
        /* A directory on the way (or the last component, written with a
         * trailing slash, which must be a directory too). */
        int fd = openat(cur, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0) {
            rc = -errno;
            if (fd >= 0) close(fd);
            break;
        }
        if (S_ISLNK(st.st_mode)) {
            struct stat link = st;
            int t = follow_link(cur, name, mode, &link, O_PATH | O_CLOEXEC, &st);
            close(fd);
            if (t < 0) {
                rc = t;
                break;
            }
            fd = t;
        }
        if (!S_ISDIR(st.st_mode)) {
            close(fd);
            rc = -ENOTDIR;
            break;
        }
        if (cur != root) close(cur);
        cur = fd;
        p = end;
    }
    if (cur != root) close(cur);
    return rc;
}

/* Has rel a ".." component? A request's path is normalised before it gets
 * here, so only a path from the config (an error page) can have one. The
 * walk below would simply open ".." and so climb out of the root, which
 * openat2's RESOLVE_BENEATH refuses only when it does leave it: refusing
 * every ".." keeps the root the boundary and both ways in agreement. */
static int has_dotdot(const char *rel) {
    for (const char *p = rel; (p = strstr(p, "..")) != NULL; p += 2)
        if ((p == rel || p[-1] == '/') && (p[2] == '\0' || p[2] == '/')) return 1;
    return 0;
}

int lx_open_beneath(const char *path, size_t root_len, lx_symlinks_t mode) {
    policy_refused = 0;
    if (mode == LX_SYMLINKS_FOLLOW) {
        int fd = open(path, OPEN_FLAGS);
        return fd < 0 ? -errno : fd;
    }
    char rootpath[PATH_MAX];
    if (root_len == 0 || root_len >= sizeof(rootpath)) return -ENAMETOOLONG;
    const char *rel = path + root_len;
    while (*rel == '/')
        rel++;
    if (has_dotdot(rel)) return refuse();
    memcpy(rootpath, path, root_len);
    rootpath[root_len] = '\0';
    int root = open(rootpath, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root < 0) return -errno;

    int fd = -ENOSYS;
    if (__atomic_load_n(&openat2_state, __ATOMIC_RELAXED) != OPENAT2_MISSING) {
        /* No link anywhere below the root is the common case: one call. */
        struct open_how how = {
            .flags = OPEN_FLAGS,
            .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH,
        };
        long r = syscall(SYS_openat2, root, *rel ? rel : ".", &how, sizeof(how));
        fd = r < 0 ? -errno : (int)r;
        /* systemd-nspawn's seccomp filter, and some container runtimes',
         * make openat2 fail with EPERM rather than ENOSYS, as they cannot
         * look into its flags. Opening for reading has no EPERM of its own
         * here (no O_NOATIME, nothing written), so EPERM means the same:
         * taken for ENOSYS, or every file would be answered 403. Should it
         * ever be a real one, the walk meets it again and returns it; that
         * openat2 is not tried again then costs speed only, as the walk is
         * as safe. */
        if (fd == -EPERM) fd = -ENOSYS;
        if (fd == -ENOSYS)
            __atomic_store_n(&openat2_state, OPENAT2_MISSING, __ATOMIC_RELAXED);
        else if (fd == -ELOOP || fd == -EXDEV)
            /* A link on the way: refused, or looked at by the walk. */
            fd = mode == LX_SYMLINKS_REFUSE ? refuse() : -ENOSYS;
    }
    if (fd == -ENOSYS) fd = walk(root, rel, mode);
    close(root);
    return fd;
}
