/* The handler vtable: what answers a request once vhost, rules and location
 * are settled. Handlers are tried in the order of the array in request.c,
 * as lighttpd's modules answer GO_ON/FINISHED/WAIT. */
#ifndef LX_HANDLER_H
#define LX_HANDLER_H

#include "../request.h"

typedef enum {
    LX_DECLINED, /**< not mine: try the next handler */
    LX_DONE,     /**< a complete response is queued */
    LX_ASYNC,    /**< waiting on the thread pool; the handler runs again on resume */
    LX_ERROR,    /**< failed before queuing anything: answer 500 */
} lx_rc_t;

typedef struct {
    const char *name;               /**< for logs and -T */
    int (*create)(lx_gen_t *g);     /**< per generation set-up, or NULL */
    void (*destroy)(lx_gen_t *g);   /**< undoes create, or NULL */
    lx_rc_t (*handle)(lx_req_t *r); /**< answers, declines or waits */
} lx_handler_t;

extern const lx_handler_t lx_static_handler;

#endif
