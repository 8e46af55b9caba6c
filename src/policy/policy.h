/* Per-request Lua policies (policy = function(r) ... end on a vhost or a
 * location), run in one LuaJIT state per loop and per generation.
 *
 * A policy is a closure over the config's locals, so it cannot be copied out
 * of the state that ran the config. Each loop therefore gets its own state
 * in which the main thread runs the config once more, off the request path,
 * and binds each policy function to its slot (site->policy) by the vhost name
 * and location prefix that declared it, never by position: a run may declare
 * the vhosts in another order (pairs() over a table of sites). A run that
 * declares policies at other places than the first fails the build. */
#ifndef LX_POLICY_H
#define LX_POLICY_H

#include <lua.h>
#include <stddef.h>

#include "../config/config.h"
#include "core/request.h"

typedef struct lx_policy_vm_s lx_policy_vm_t;

/* Builds g->vms (one state per loop) when g has policies. Runs in the main
 * thread. Returns 0, or -EINVAL with err set. */
int lx_policy_build(lx_gen_t *g, const char *path, const char *prefix, int nloops, char *err,
                    size_t errlen);
void lx_policy_free(lx_gen_t *g);

/* Runs the policy in `slot` for r in loop `loop`. Returns 0 to go on, a
 * status (200..599) to answer with, -1 when the policy answered itself
 * (r:respond, r:redirect) or failed (a 500 is queued and the fault logged),
 * or -2 when it called r:proxy: *handoff is the upstream then. */
int lx_policy_run(lx_req_t *r, int loop, uint32_t slot, const lx_upstream_t **handoff);

/* Whether L is a loop's policy state running a request (not a config
 * load): what may only be done while the config loads (luxd.cidr) asks. */
int lx_policy_serving(lua_State *L);

#endif
