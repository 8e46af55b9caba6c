/* The config language's Lua modules, compiled into the binary by embed.sh. */
#ifndef LX_LUA_EMBED_H
#define LX_LUA_EMBED_H

#include <stddef.h>

typedef struct {
    const char *name;          /**< module name for require(), e.g. "luxd.config" */
    const unsigned char *code; /**< LuaJIT bytecode */
    size_t size;               /**< bytes of code */
} lx_lua_module_t;

/* Terminated by an entry whose name is NULL. */
extern const lx_lua_module_t lx_lua_modules[];

#endif
