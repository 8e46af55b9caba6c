/* ThreadSanitizer builds only (`make tsan`); an empty file otherwise.
 *
 * TSan keeps a little state per descriptor number, and clears it when it
 * sees the number closed, so that the next file to get the number starts
 * afresh. Debian's libuv is not built with TSan, and on Linux it closes
 * every descriptor it owns (uv_close of a connection or a listener,
 * uv_fs_close) with syscall(SYS_close, fd), which TSan does not intercept.
 * When the number is then handed out by a call TSan does not see either
 * (luxd's openat2 in open_beneath.c, glibc's opendir), the first close TSan
 * does see, on another thread, is compared with the last use of the old
 * socket (libuv's accept4 or epoll_ctl on a loop thread) and reported as a
 * race on "file descriptor N", although the kernel ordered the two: it
 * cannot give the number out again before the close.
 *
 * So this file interposes syscall(): libuv.so's calls bind to the
 * executable's definition, and a SYS_close is announced to TSan just before
 * it is made, exactly as libuv itself does in uv__close_nocancel when it is
 * built with TSan (__sanitizer_syscall_pre_close, then the raw close). TSan
 * then checks libuv's closes against other threads' uses of the descriptor
 * like any other close, and a reused number no longer inherits the old
 * socket's history. Every other syscall goes through unchanged.
 *
 * The opens need no announcement: the sanitizer syscall hooks cannot say
 * that a descriptor was created (compiler-rt's post-open hooks do nothing),
 * and TSan does not need to be told, as the close it now sees has cleared
 * the number's state. */
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define LX_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) /* gcc's spelling */
#define LX_TSAN 1
#endif

#ifdef LX_TSAN
#include <dlfcn.h>
#include <sanitizer/linux_syscall_hooks.h>
#include <stdarg.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef long (*syscall_fn)(long, ...);

/* glibc's syscall(), looked up once at start-up, before any thread exists.
 * The accesses are relaxed, which TSan takes for no synchronisation: an
 * acquire here would order every thread's first syscall() after the
 * thread that stored the pointer, and hide real races. */
static syscall_fn libc_syscall;

static syscall_fn real_syscall(void) {
    syscall_fn f = __atomic_load_n(&libc_syscall, __ATOMIC_RELAXED);
    if (f == NULL) { /* a call from another constructor, before ours ran */
        f = (syscall_fn)dlsym(RTLD_NEXT, "syscall");
        __atomic_store_n(&libc_syscall, f, __ATOMIC_RELAXED);
    }
    return f;
}

__attribute__((constructor)) static void find_libc_syscall(void) {
    (void)real_syscall();
}

long syscall(long number, ...) {
    /* Six arguments, however many the caller passed: what glibc's own
     * syscall() takes (its generic C version reads them the same way). */
    va_list ap;
    va_start(ap, number);
    long a[6];
    for (int i = 0; i < 6; i++)
        a[i] = va_arg(ap, long);
    va_end(ap);
    if (number == SYS_close) __sanitizer_syscall_pre_close(a[0]);
    long rc = real_syscall()(number, a[0], a[1], a[2], a[3], a[4], a[5]);
    if (number == SYS_close) __sanitizer_syscall_post_close(rc, a[0]);
    return rc;
}
#endif
