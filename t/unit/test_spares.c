/* Unit tests for the spares list (src/spares.c): a put is kept up to the
 * cap exactly and refused one past it, a take hands back the last one put,
 * and a tick's trim frees just the spares no take needed since the tick
 * before (the low-water mark), the coldest ones, so a list shrinks to what
 * the load of the last second used and no further. */
#include <stdlib.h>

#include "spares.h"
#include "tap.h"

typedef struct {
    lx_spare_t spare;
    int id;
} obj_t;

static int freed;
static int freed_ids[64];

static void free_one(lx_spare_t *s) {
    obj_t *o = (obj_t *)s;
    if (freed < 64) freed_ids[freed] = o->id;
    freed++;
    free(o);
}

static obj_t *mk(int id) {
    obj_t *o = calloc(1, sizeof(*o));
    o->id = id;
    return o;
}

int main(void) {
    lx_spares_t l;
    lx_spares_init(&l, 4);
    ok(lx_spares_take(&l) == NULL, "an empty list gives nothing");

    /* At the cap exactly, and one past it. */
    obj_t *o[6];
    for (int i = 0; i < 5; i++)
        o[i] = mk(i);
    for (int i = 0; i < 4; i++)
        ok(lx_spares_put(&l, &o[i]->spare), "put %d of 4: kept", i + 1);
    is_int(l.n, 4, "four on the list");
    ok(!lx_spares_put(&l, &o[4]->spare), "the fifth, one past the cap: refused");
    is_int(l.n, 4, "still four");
    free(o[4]);

    /* Last put, first taken (the warmest). */
    obj_t *t = (obj_t *)lx_spares_take(&l);
    is_int(t->id, 3, "take gives the last one put");
    ok(lx_spares_put(&l, &t->spare), "and it goes back");

    /* A tick after a second in which the list never went below 3: one spare
     * was not needed; the coldest (put first) is freed. */
    freed = 0;
    lx_spares_trim(&l, 0, free_one);
    is_int(freed, 0, "the first tick frees none: the list was empty at the start");
    is_int(l.low, 4, "and the mark starts again at four");
    t = (obj_t *)lx_spares_take(&l);
    ok(lx_spares_put(&l, &t->spare), "one taken and put back");
    is_int(l.low, 3, "the low-water mark is 3");
    freed = 0;
    lx_spares_trim(&l, 0, free_one);
    is_int(freed, 3, "the trim frees the three no take needed");
    is_int(l.n, 1, "one left: what the last second used");
    is_int(((obj_t *)l.head)->id, 3, "the one kept is the warmest");
    ok(freed_ids[0] == 2 && freed_ids[1] == 1 && freed_ids[2] == 0,
       "the freed ones are the colder three");
    is_int(l.low, 1, "the mark restarts at what is left");

    /* A second in which every spare was taken at some point: nothing freed. */
    t = (obj_t *)lx_spares_take(&l);
    ok(lx_spares_take(&l) == NULL, "empty now");
    ok(lx_spares_put(&l, &t->spare), "put back");
    freed = 0;
    lx_spares_trim(&l, 0, free_one);
    is_int(freed, 0, "a spare that was used in the last second is kept");
    is_int(l.n, 1, "still one");

    /* A second with no use at all: everything goes. */
    lx_spares_trim(&l, 0, free_one);
    is_int(freed, 1, "a second unused: freed");
    is_int(l.n, 0, "the list is empty");

    /* All (the loop's end), and a cap of 0 (ASan builds) keeping nothing. */
    for (int i = 0; i < 3; i++)
        lx_spares_put(&l, &mk(10 + i)->spare);
    freed = 0;
    lx_spares_trim(&l, 1, free_one);
    is_int(freed, 3, "trim(all) frees every spare");
    ok(l.head == NULL && l.n == 0 && l.low == 0, "and leaves the list empty");
    lx_spares_init(&l, 0);
    o[5] = mk(20);
    ok(!lx_spares_put(&l, &o[5]->spare), "a cap of 0 keeps nothing");
    free(o[5]);
    return done_testing();
}
