/* Rule sets' prefilter (src/dispatch/multire.c) against the plain PCRE2
 * path: the fuzzer's bytes choose the rules (regexes strung together from
 * the pieces in common/multire_diff.h), the paths (up to 8 KiB, each matched
 * from every buffer alignment 0..63) and the methods; the first matching
 * rule and its captures must be the same both ways. */
#include <stdint.h>
#include <stdlib.h>

#include "common/multire_diff.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static pcre2_match_data *md1, *md2;
    if (md1 == NULL) {
        md1 = pcre2_match_data_create(10, NULL); /* as worker.c */
        md2 = pcre2_match_data_create(10, NULL);
        lx_rules_prefilter_min = 1; /* a prefilter for sets of any size */
    }
    md_src_t s = {.p = data, .end = data + size, .from_bytes = 1};
    int used;
    /* The first byte says how long paths may be: most inputs short. */
    size_t maxpath = size && data[0] % 4 == 0 ? MD_MAX_PATH : 64;
    if (md_check(&s, 4, maxpath, &used, md1, md2) != 0) abort();
    return 0;
}
