/* The parent's reading of a prefilter compile's answer (src/dispatch/
 * multire_wire.c), from the fuzzer's bytes: whatever they are, it returns an
 * error or a prefilter that holds what it says and scans without fault. The
 * request it answers: ids 1, 3, 5, 7, 9. The bytes are read from a pipe
 * as from a child, and parsed as read and as they are (as kept for a later
 * generation); the seed is a real answer (3 patterns held, 2 left). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dispatch/multire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const uint32_t ids[] = {1, 3, 5, 7, 9};
    int p[2];
    if (size > 60000) size = 60000; /* all of it fits the pipe: no writer thread */
    if (pipe(p) < 0) abort();
    if (size && write(p[1], data, size) != (ssize_t)size) abort();
    close(p[1]);
    char *a = NULL;
    size_t len = 0;
    lx_multire_t *m = NULL;
    int rc = lx_multire_read_answer(p[0], &a, &len);
    close(p[0]);
    if (rc == 0 && len > size) abort(); /* more than was sent */
    /* Read whole or not, the bytes themselves go to the parser too. */
    for (int i = 0; i < 2; i++) {
        const char *b = i == 0 ? a : (const char *)data;
        size_t n = i == 0 ? len : size;
        if (b == NULL) continue;
        rc = lx_multire_parse_answer(b, n, ids, 5, 1, &m);
        if (rc < 0 && m != NULL) abort();
        if (rc == 0 && m != NULL) {
            uint32_t nleft = 0, out[8];
            lx_multire_left(m, &nleft);
            if (lx_multire_count(m) + nleft != 5) abort();
            lx_multire_scratch_t s = {0};
            lx_multire_scan(m, &s, "/a1b22c333", 10, out, 8);
            lx_multire_scratch_free(&s);
            lx_multire_free(m);
            m = NULL;
        }
    }
    free(a);
    return 0;
}
