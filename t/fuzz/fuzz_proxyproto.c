/* The PROXY protocol header parser (src/http/proxyproto.c). Invariants: the
 * answer is a length within the input and the bounds (107 bytes for v1,
 * 16 + 2048 for v2), 0 or -EINVAL; every prefix answers 0 or the whole
 * input's answer (a header cut at any byte parses the same); a v2 header is
 * as long as its length field says; and a TCP4 v1 line printed again from
 * what was parsed is the line itself (nothing taken that was not there). */
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "http/proxyproto.h"

static ssize_t parse(const uint8_t *p, size_t n, lx_proxy_hdr_t *h) {
    /* A copy of exactly n bytes: ASan sees a read past the end. */
    char *b = malloc(n ? n : 1);
    memcpy(b, p, n);
    ssize_t r = lx_proxy_parse(b, n, h, NULL);
    free(b);
    return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 4 * LX_PROXY_V2_MAX_LEN) return 0;
    lx_proxy_hdr_t h, p;
    ssize_t all = parse(data, size, &h);
    assert(all == 0 || all == -EINVAL || (all > 0 && (size_t)all <= size));
    if (all > 0 && h.version == 1) assert(all <= LX_PROXY_V1_MAX);
    if (all > 0 && h.version == 2) {
        assert(all == LX_PROXY_V2_HEAD + (data[14] << 8 | data[15]));
        assert(all <= LX_PROXY_V2_HEAD + LX_PROXY_V2_MAX_LEN);
    }
    if (all > 0) assert(h.family == 0 || h.family == AF_INET || h.family == AF_INET6);
    if (all > 0 && h.version == 1 && h.family == AF_INET) {
        char s[64], d[64], line[160];
        inet_ntop(AF_INET, h.src, s, sizeof(s));
        inet_ntop(AF_INET, h.dst, d, sizeof(d));
        int n = snprintf(line, sizeof(line), "PROXY TCP4 %s %s %u %u\r\n", s, d, h.src_port,
                         h.dst_port);
        assert(n == all && memcmp(line, data, (size_t)n) == 0);
    }
    /* Every prefix of a short input, a few of a long one. */
    size_t step = size < 300 ? 1 : size / 97 + 1;
    int decided = 0;
    for (size_t k = 0; k <= size; k += step) {
        ssize_t r = parse(data, k, &p);
        if (r == 0 && !decided) continue;
        assert(r == all);
        if (r > 0) assert(p.family == h.family && memcmp(p.src, h.src, 16) == 0);
        decided = 1;
    }
    return 0;
}
