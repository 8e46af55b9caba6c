/* luxd.shared: one store of counters and strings shared by every loop, with
 * expiry, so a per-IP rate limit holds across loops (OpenResty's
 * lua_shared_dict). */
#ifndef LX_SHARED_H
#define LX_SHARED_H

#include <lua.h>

/* Pushes the luxd.shared table (get, set, incr, ttl, delete) onto L. The
 * store itself is process-wide and survives reloads. No function of it calls
 * the Lua API while holding the store's lock: a Lua error there (out of
 * memory at policy_memory) would leave the lock held and block every loop. */
void lx_shared_push(lua_State *L);

#endif
