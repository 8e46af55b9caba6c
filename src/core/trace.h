/* A trace of the request path's routing, for --explain (explain.c): the
 * routing in request.c (vhost, path, redirect, rewrite, location, access) is
 * one function compiled twice, for the request path with no trace (the
 * compiler drops every trace branch) and for lx_route_explain with one,
 * which it fills as it goes. */
#ifndef LX_TRACE_H
#define LX_TRACE_H

#include "request.h"

/* How the vhost was chosen. */
typedef enum {
    LX_TRACE_VHOST_NONE,     /**< no vhost: no name matched and there is no default */
    LX_TRACE_VHOST_EXACT,    /**< a name or alias, exactly */
    LX_TRACE_VHOST_WILDCARD, /**< "*.suffix" */
    LX_TRACE_VHOST_DIR,      /**< a directory under vhost_dir */
    LX_TRACE_VHOST_DEFAULT,  /**< default = true: no name matched */
} lx_trace_vhost_t;

/* Where routing stopped when it did not reach the handler chain. */
typedef enum {
    LX_TRACE_AT_CHAIN,    /**< it reached the chain */
    LX_TRACE_AT_TARGET,   /**< the request target is not origin- or absolute-form */
    LX_TRACE_AT_HOST,     /**< the Host value is no host name */
    LX_TRACE_AT_VHOST,    /**< no vhost answers */
    LX_TRACE_AT_PATH,     /**< the path does not normalise (".." above the root) */
    LX_TRACE_AT_REDIRECT, /**< a redirect answers */
    LX_TRACE_AT_REWRITE,  /**< a rewrite gave an unusable path */
    LX_TRACE_AT_ACCESS,   /**< an access rule denies */
    LX_TRACE_AT_ERROR,    /**< out of memory */
} lx_trace_at_t;

#define LX_TRACE_CAPS 10

typedef struct lx_trace_s {
    /* In: what the request path asks the connection for. */
    lx_addr_t addr;       /**< the client's address, for `from` */
    pcre2_match_data *md; /**< match data (the request path uses the loop's) */
    /* Out. */
    lx_trace_at_t at;                /**< where it stopped */
    int status;                      /**< the answer when it stopped before the chain */
    lx_trace_vhost_t vhost_how;      /**< how r->vhost was chosen */
    const lx_host_slot_t *vhost_key; /**< the name that matched (EXACT, WILDCARD) */
    const lx_rule_t *redirect;       /**< the redirect that answers, or NULL */
    const char *location_hdr;        /**< its "Location: ...\r\n" line */
    const lx_rule_t *rewrite;        /**< the rewrite that applied, or NULL */
    const char *path_before;         /**< the path the rewrite was given */
    lx_str_t caps[LX_TRACE_CAPS];    /**< $0..$9 of the redirect's or rewrite's regex (p NULL:
                                        unset) */
    uint32_t ncaps;                  /**< entries set in caps */
    const lx_location_t *location;   /**< the location chosen, or NULL: the vhost's own */
    const lx_rule_t *access;         /**< the access rule that decided, or NULL: none matched */
} lx_trace_t;

/* The routing of lx_request_run for r (target, known headers, method, gen
 * and arena set; no connection), recording each decision in t. Returns 0
 * when the request reaches r->site's handler chain, otherwise the status it
 * is answered with (t->at says why). */
int lx_route_explain(lx_req_t *r, lx_trace_t *t);
/* After an internal redirect (try_files) changed r->decoded: its location
 * and access rules, as the request path chooses them again. Returns 0, or
 * the status of a deny (t->location, t->access, t->at say which). */
int lx_route_location_explain(lx_req_t *r, lx_trace_t *t);

#endif
