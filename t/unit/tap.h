/* A minimal TAP producer for the C unit tests in t/unit/. Each test program
 * includes this header once, calls the macros, and ends with
 * `return done_testing();`, which prints the plan last (as Perl's Test::More
 * done_testing does) so tests need not be counted by hand. prove accepts a
 * trailing plan. */
#ifndef LX_TAP_H
#define LX_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int tap_run;
static int tap_failed;

static inline int tap_vok(int cond, const char *file, int line, const char *fmt, va_list ap) {
    tap_run++;
    printf("%sok %d - ", cond ? "" : "not ", tap_run);
    vprintf(fmt, ap);
    printf("\n");
    if (!cond) {
        tap_failed++;
        printf("#   Failed test at %s line %d.\n", file, line);
    }
    return cond;
}

static inline int tap_ok(int cond, const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cond = tap_vok(cond, file, line, fmt, ap);
    va_end(ap);
    return cond;
}

static inline int tap_is_str(const char *got, const char *exp, const char *file, int line,
                             const char *fmt, ...) {
    va_list ap;
    int cond;

    /* Two NULLs are equal; one NULL never equals a string. */
    if (got == NULL || exp == NULL)
        cond = got == exp;
    else
        cond = strcmp(got, exp) == 0;
    va_start(ap, fmt);
    tap_vok(cond, file, line, fmt, ap);
    va_end(ap);
    if (!cond) {
        printf("#          got: %s%s%s\n", got ? "'" : "", got ? got : "NULL", got ? "'" : "");
        printf("#     expected: %s%s%s\n", exp ? "'" : "", exp ? exp : "NULL", exp ? "'" : "");
    }
    return cond;
}

static inline int tap_is_int(long long got, long long exp, const char *file, int line,
                             const char *fmt, ...) {
    va_list ap;
    int cond = got == exp;

    va_start(ap, fmt);
    tap_vok(cond, file, line, fmt, ap);
    va_end(ap);
    if (!cond) {
        printf("#          got: %lld\n", got);
        printf("#     expected: %lld\n", exp);
    }
    return cond;
}

static inline void tap_diag(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("# ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
}

/* Prints the plan and gives main() its exit status: non-zero if any test
 * failed, so a plain `./test_x && ...` also notices a failure. */
static inline int tap_done(void) {
    printf("1..%d\n", tap_run);
    if (tap_failed) printf("# Looks like you failed %d test(s) of %d.\n", tap_failed, tap_run);
    fflush(stdout);
    return tap_failed ? 1 : 0;
}

#define ok(cond, ...)         tap_ok(!!(cond), __FILE__, __LINE__, __VA_ARGS__)
#define is_str(got, exp, ...) tap_is_str((got), (exp), __FILE__, __LINE__, __VA_ARGS__)
#define is_int(got, exp, ...)                                                                      \
    tap_is_int((long long)(got), (long long)(exp), __FILE__, __LINE__, __VA_ARGS__)
#define diag(...)      tap_diag(__VA_ARGS__)
#define done_testing() tap_done()

#endif
