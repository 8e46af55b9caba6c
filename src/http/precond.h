/* Conditional requests (RFC 9110 section 13): the preconditions of a GET or
 * HEAD, evaluated in the order of 13.2.2 against the validators of the
 * representation the server would send. Pure: no request, no file, no
 * clock; the static handler (src/handlers/static.c) passes the fields and
 * the validators of the variant it chose. */
#ifndef LX_HTTP_PRECOND_H
#define LX_HTTP_PRECOND_H

#include <stddef.h>
#include <time.h>

#include "lx.h"

/* The request's conditional fields, each its whole value (a field sent on
 * several lines joined with ","); p == NULL when the request has none: an
 * empty value is a field that is there (an empty list, which no tag
 * matches). */
typedef struct {
    lx_str_t if_match;
    lx_str_t if_unmodified_since;
    lx_str_t if_none_match;
    lx_str_t if_modified_since;
    lx_str_t if_range;
    unsigned safe : 1;  /**< GET or HEAD: a matching If-None-Match is 304 (else 412) */
    unsigned range : 1; /**< a GET with a Range field: If-Range decides whether it is used */
} lx_precond_req_t;

/* The validators of an existing representation, as its response sends
 * them: a date the response does not send (last_modified = false) is not
 * compared with, as if the file had none (13.1.3, 13.1.4). */
typedef struct {
    const char *etag; /**< the ETag field value, NUL-terminated; "" when none is sent */
    int has_mtime;    /**< a Last-Modified is sent */
    time_t mtime;     /**< its second */
    time_t now;       /**< the request's second (If-Range's date only) */
} lx_precond_rep_t;

/* What lx_precond_eval says to do. */
enum {
    LX_PRECOND_OK = 0,    /**< serve as asked, with the Range if there is one */
    LX_PRECOND_FULL = 1,  /**< If-Range is false: 200 with the whole body, Range ignored */
    LX_PRECOND_304 = 304, /**< 304 Not Modified */
    LX_PRECOND_412 = 412, /**< 412 Precondition Failed */
};

/* RFC 9110 13.2.2, steps 1 to 5:
 *   1. If-Match: false (no listed tag is the ETag by strong comparison; "*"
 *      matches any existing representation) -> 412; a value that is not
 *      the field's grammar is false too: what the client meant to protect
 *      is not served.
 *   2. else If-Unmodified-Since, a valid date: modified after it -> 412.
 *   3. If-None-Match: a tag matches by weak comparison, or "*" -> 304 for
 *      GET and HEAD, 412 otherwise; a malformed value matches nothing
 *      (serving the body is always safe).
 *   4. else, for GET and HEAD, If-Modified-Since, a valid date: not
 *      modified since -> 304.
 *   5. a GET with a Range: If-Range, a strong ETag equal to the ETag, or
 *      a date equal to Last-Modified that is a strong validator (below);
 *      anything else -> LX_PRECOND_FULL.
 * A date is a strong validator (8.8.2.2) only once its second is over: a
 * file modified in the current second (or stamped in the future) may
 * still change within the second its Last-Modified names. */
int lx_precond_eval(const lx_precond_req_t *q, const lx_precond_rep_t *v);

/* Whether etag (an ETag field value, "" for none) is in a field value of
 * If-Match or If-None-Match ("*" or a list of entity-tags, RFC 9110
 * 13.1.1): strong comparison, or weak (W/ ignored on both sides) when
 * weak is set. "*" matches: the representation exists. Returns 1, 0, or
 * -EINVAL when the value is not that grammar (a bare token, a missing
 * quote, "*" within a list, a lower-case "w/"). */
int lx_etag_match(const char *list, size_t len, const char *etag, int weak);

#endif
