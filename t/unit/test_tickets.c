/* The rotation of the process's own ticket keys (net/tickets.c): a key
 * seals for LX_TICKET_PERIOD seconds, is then the previous one and still
 * opens for as long again, then is gone; a clock that jumps (forwards past
 * two periods, or back by a period) starts a new ring, since nothing
 * sealed before may be opened then; one a little behind changes nothing. */
#include <string.h>

#include "net/tickets.h"
#include "tap.h"

int main(void) {
    const int64_t P = LX_TICKET_PERIOD, t0 = 1000000;
    unsigned char c0[16], c1[16], c2[16], x[16];
    is_int(lx_ticket_ring_find(t0, NULL, c0), 0, "at the start, a current key seals");
    is_int(lx_ticket_ring_find(t0, c0, NULL), 0, "and opens");
    is_int(lx_ticket_ring_find(t0 + P - 1, NULL, x), 0, "a second before its period ends");
    ok(memcmp(c0, x, 16) == 0, "the same key still seals");
    is_int(lx_ticket_ring_find(t0 + P, NULL, c1), 0, "when the period ends");
    ok(memcmp(c0, c1, 16) != 0, "another key seals");
    is_int(lx_ticket_ring_find(t0 + P, c0, NULL), 2, "the first is the previous key: it opens");
    is_int(lx_ticket_ring_find(t0 + 2 * P - 1, c0, NULL), 2, "until the second period ends");
    is_int(lx_ticket_ring_find(t0 + 2 * P, NULL, c2), 0, "two periods after the start");
    ok(memcmp(c2, c1, 16) != 0 && memcmp(c2, c0, 16) != 0, "a third key seals");
    is_int(lx_ticket_ring_find(t0 + 2 * P, c0, NULL), -1, "the first key is gone");
    is_int(lx_ticket_ring_find(t0 + 2 * P, c1, NULL), 2, "the second is the previous");
    memset(x, 0, sizeof(x));
    is_int(lx_ticket_ring_find(t0 + 2 * P, x, NULL), -1, "a name no key has: -1");
    /* A second back (another thread read the clock before this one took
     * the lock, or a small step): the same keys, not a new ring, which
     * would lose every ticket sealed so far (a break review). */
    is_int(lx_ticket_ring_find(t0 + 2 * P - 1, c2, NULL), 0, "a second behind: the same key seals");
    is_int(lx_ticket_ring_find(t0 + 2 * P - 1, c1, NULL), 2, "and the same previous one");
    /* A period back: everything is new. */
    is_int(lx_ticket_ring_find(t0 + P, c2, NULL), -1, "a clock a period back: the keys are new");
    is_int(lx_ticket_ring_find(t0 + P, NULL, c0), 0, "and one seals");
    /* Forward by two periods at once: everything is new too. */
    is_int(lx_ticket_ring_find(t0 + 3 * P, c0, NULL), -1, "two periods skipped: the keys are new");
    return done_testing();
}
