#include "spares.h"

#include <stddef.h>

void lx_spares_trim(lx_spares_t *l, int all, void (*free_one)(lx_spare_t *s)) {
    if (!all && l->low == 0) { /* every spare was needed: nothing to walk */
        l->low = l->n;
        return;
    }
    unsigned keep = all ? 0 : l->n - l->low;
    lx_spare_t **at = &l->head;
    for (unsigned i = 0; i < keep; i++)
        at = &(*at)->next;
    lx_spare_t *s = *at;
    *at = NULL;
    while (s) {
        lx_spare_t *next = s->next;
        free_one(s);
        s = next;
    }
    l->n = l->low = keep;
}
