/* Unit tests for lx_open_beneath (src/io/open_beneath.c): each follow_symlinks
 * mode against links inside the root, out of it, in a directory component,
 * dangling, with and without trailing slashes, through openat2 and through
 * the component walk that replaces it on kernels without openat2. */
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "io/open_beneath.h"
#include "tap.h"

static char root[256], outside[300];

static void mk(const char *rel, const char *data) {
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", root, rel);
    FILE *f = fopen(p, "w");
    if (f == NULL || fputs(data, f) < 0 || fclose(f) != 0) {
        perror(p);
        exit(1);
    }
}

/* A link owned by someone other than its target's owner: as root, the link
 * is given to uid 65534; otherwise the target is a root-owned one. */
static void link_other_owner(const char *target, const char *rel) {
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", root, rel);
    if (symlink(target, p) < 0 || (geteuid() == 0 && lchown(p, 65534, (gid_t)-1) < 0)) {
        perror(p);
        exit(1);
    }
}

static void ln(const char *target, const char *rel) {
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", root, rel);
    if (symlink(target, p) < 0) {
        perror(p);
        exit(1);
    }
}

static const char *errname(int e) {
    switch (e) {
    case EACCES: return "EACCES";
    case ENOENT: return "ENOENT";
    case ENOTDIR: return "ENOTDIR";
    case ELOOP: return "ELOOP";
    case ENAMETOOLONG: return "ENAMETOOLONG";
    case EPERM: return "EPERM";
    default: return "other";
    }
}

/* Opens root + rel and renders the outcome: "dir", the file's first line,
 * or the errno's name. */
static const char *open_as(const char *base, const char *rel, lx_symlinks_t mode) {
    static char res[64];
    char p[1024];
    size_t blen = strlen(base);
    snprintf(p, sizeof(p), "%s%s", base, rel);
    int fd = lx_open_beneath(p, blen, mode);
    if (fd < 0) return errname(-fd);
    struct stat st;
    if (fstat(fd, &st) < 0) {
        close(fd);
        return "fstat failed";
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return "dir";
    }
    if (S_ISFIFO(st.st_mode)) {
        close(fd);
        return "fifo";
    }
    ssize_t n = read(fd, res, sizeof(res) - 1);
    close(fd);
    if (n < 0) return "read failed";
    res[n] = '\0';
    char *nl = strchr(res, '\n');
    if (nl) *nl = '\0';
    if (strncmp(res, "root:", 5) == 0) return "passwd";
    return res;
}

static const char *mode_name(lx_symlinks_t m) {
    return m == LX_SYMLINKS_FOLLOW ? "true" : m == LX_SYMLINKS_REFUSE ? "false" : "owner";
}

static void t(const char *rel, const char *follow, const char *owner, const char *refuse) {
    const char *exp[3] = {follow, owner, refuse};
    const lx_symlinks_t modes[3] = {LX_SYMLINKS_FOLLOW, LX_SYMLINKS_OWNER, LX_SYMLINKS_REFUSE};
    for (int i = 0; i < 3; i++)
        is_str(open_as(root, rel, modes[i]), exp[i], "%-18s follow_symlinks = %-5s -> %s", rel,
               mode_name(modes[i]), exp[i]);
}

static void all_cases(void) {
    /*  path                 true        "owner"     false */
    t("/real.txt", "real", "real", "real");
    t("/d/f.txt", "sub", "sub", "sub");
    t("/d//f.txt", "sub", "sub", "sub");
    t("/", "dir", "dir", "dir");
    t("", "dir", "dir", "dir");
    t("/d/", "dir", "dir", "dir");
    t("/nope.txt", "ENOENT", "ENOENT", "ENOENT");
    t("/nope/f.txt", "ENOENT", "ENOENT", "ENOENT");
    t("/real.txt/x", "ENOTDIR", "ENOTDIR", "ENOTDIR");
    t("/real.txt/", "ENOTDIR", "ENOTDIR", "ENOTDIR");
    t("/fifo", "fifo", "fifo", "fifo");
    /* A link inside the root, with the target's owner. */
    t("/in.txt", "real", "real", "EACCES");
    /* A link to a file of another owner out of the root. */
    t("/pw", "passwd", "EACCES", "EACCES");
    /* A link in a directory component: same owner, and another owner. */
    t("/dl/f.txt", "sub", "sub", "EACCES");
    t("/dl/", "dir", "dir", "EACCES");
    t("/etc/passwd", "passwd", "EACCES", "EACCES");
    t("/d/up/real.txt", "real", "real", "EACCES");
    /* Out of the root but with the link's owner: "owner" is about owners. */
    t("/ext/e.txt", "outside", "outside", "EACCES");
    /* Links to links: the owner compared is the final object's. */
    t("/in2.txt", "real", "real", "EACCES");
    t("/pw2", "passwd", "EACCES", "EACCES");
    /* Dangling. */
    t("/dangling", "ENOENT", "ENOENT", "EACCES");
    /* ".." never comes from a request (its path is normalised) but can from
     * a config path (an error page): below the root it is refused in every
     * mode that keeps to the root, whether it would leave the root or not,
     * so openat2 and the walk agree. true is a plain open and keeps to
     * nothing. */
    char up[400];
    snprintf(up, sizeof(up), "/../%s/e.txt", strrchr(outside, '/') + 1);
    t(up, "outside", "EACCES", "EACCES");
    t("/d/../real.txt", "real", "EACCES", "EACCES");
    t("/d/..", "dir", "EACCES", "EACCES");
    t("/..", "dir", "EACCES", "EACCES");
    t("/..x", "ENOENT", "ENOENT", "ENOENT");
    t("/d/...", "ENOENT", "ENOENT", "ENOENT");
    /* The root itself may be a link: the operator chose it. */
    char lroot[512];
    snprintf(lroot, sizeof(lroot), "%s-link", root);
    is_str(open_as(lroot, "/real.txt", LX_SYMLINKS_REFUSE), "real",
           "a root that is a link: false still serves below it");
    is_str(open_as(lroot, "/in.txt", LX_SYMLINKS_REFUSE), "EACCES",
           "a root that is a link: false still refuses links below it");
}

/* Makes openat2 fail with EPERM, as systemd-nspawn's and some container
 * runtimes' seccomp filters do (they cannot inspect its flags), so the
 * fallback to the walk is what runs. Every other system call is allowed. */
static int deny_openat2(void) {
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat2, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof(f) / sizeof(f[0]), .filter = f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) return -1;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

int main(void) {
    snprintf(root, sizeof(root), "/tmp/lx-open-beneath-XXXXXX");
    if (mkdtemp(root) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(outside, sizeof(outside), "%s-outside", root);
    char p[512];
    if (mkdir(outside, 0755) < 0) return 1;
    snprintf(p, sizeof(p), "%s/e.txt", outside);
    FILE *f = fopen(p, "w");
    if (!f) return 1;
    fputs("outside\n", f);
    fclose(f);
    snprintf(p, sizeof(p), "%s/d", root);
    if (mkdir(p, 0755) < 0) return 1;
    snprintf(p, sizeof(p), "%s/fifo", root);
    if (mkfifo(p, 0644) < 0) return 1;
    snprintf(p, sizeof(p), "%s-link", root);
    if (symlink(root, p) < 0) return 1;
    mk("real.txt", "real\n");
    mk("d/f.txt", "sub\n");
    ln("real.txt", "in.txt");
    ln("in.txt", "in2.txt");
    ln("d", "dl");
    ln("..", "d/up");
    ln(outside, "ext");
    ln("nope", "dangling");
    link_other_owner("/etc/passwd", "pw");
    link_other_owner("/etc", "etc");
    link_other_owner("pw", "pw2");

    printf("# through openat2 where the kernel has it\n");
    all_cases();
    lx_open_beneath_force_walk(1);
    printf("# through the component walk\n");
    all_cases();
    lx_open_beneath_force_walk(0);

    /* Last, as the filter cannot be removed. The architecture is not
     * checked: the test runs the native one. */
    if (deny_openat2() == 0) {
        printf("# with openat2 refused by a seccomp filter (EPERM)\n");
        struct open_how how = {.flags = O_RDONLY | O_PATH};
        long fd = syscall(SYS_openat2, AT_FDCWD, "/", &how, sizeof(how));
        ok(fd < 0 && errno == EPERM, "the filter makes openat2 fail with EPERM");
        if (fd >= 0) close((int)fd);
        all_cases();
    } else {
        ok(0, "installing a seccomp filter: %s", strerror(errno));
    }

    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s' '%s-link'", root, outside, root);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", root);
    return done_testing();
}
