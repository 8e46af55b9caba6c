/* Something that waits for the file cache or the thread pool, in the style of
 * uv_work_t: a small struct with a callback and a status, embedded in whoever
 * waits (a request). io/ and handlers/ see this, never a connection. */
#ifndef LX_WAITER_H
#define LX_WAITER_H

typedef struct lx_waiter_s lx_waiter_t;

struct lx_waiter_s {
    void (*cb)(lx_waiter_t *w, int status); /**< called once, on the loop */
    lx_waiter_t *next;                      /**< in a list of waiters (the file cache's) */
};

#endif
