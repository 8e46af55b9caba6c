/* luxd.cidr{ "10.0.0.0/8", "2001:db8::/32" }: an address set for policies,
 * compiled when the config runs (dispatch/cidr.c, the sets access rules
 * use), tested per request with set:contains(r.remote_addr). */
#ifndef LX_ADDRSET_H
#define LX_ADDRSET_H

#include <lua.h>

/* Pushes the luxd.cidr function. */
void lx_addrset_push(lua_State *L);

#endif
