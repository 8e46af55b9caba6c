/* Why policies read the request through the Lua C API, not the FFI: in the
 * interpreter (policies run with the JIT off, so the instruction budget can
 * stop any loop) a C API call is an order of magnitude cheaper than an FFI
 * call; only compiled traces make the FFI faster.
 * Build and run: cc -O2 -rdynamic bench/lua_ffi_vs_capi.c $(pkg-config --cflags --libs luajit) -o
 * /tmp/f && /tmp/f */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>
#include <luajit.h>
static const char *path = "/some/request/path.html";
/* The FFI path: a C function returning a pointer and length. */
__attribute__((visibility("default"))) const char *lx_path(size_t *len) {
    *len = strlen(path);
    return path;
}
static int capi_path(lua_State *L) {
    lua_pushlstring(L, path, strlen(path));
    return 1;
}
static double run(lua_State *L, const char *code) {
    struct timespec a, b;
    luaL_loadstring(L, code);
    clock_gettime(CLOCK_MONOTONIC, &a);
    if (lua_pcall(L, 0, 0, 0)) printf("err %s\n", lua_tostring(L, -1));
    clock_gettime(CLOCK_MONOTONIC, &b);
    return (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
}
int main(void) {
    for (int jit = 0; jit < 2; jit++) {
        lua_State *L = luaL_newstate();
        luaL_openlibs(L);
        if (!jit) luaJIT_setmode(L, 0, LUAJIT_MODE_ENGINE | LUAJIT_MODE_OFF);
        lua_register(L, "capi_path", capi_path);
        luaL_dostring(L, "ffi = require 'ffi' ffi.cdef 'const char *lx_path(size_t *len);' C = "
                         "ffi.C len = ffi.new('size_t[1]')");
        int N = 5000000;
        char code[256];
        snprintf(code, sizeof code, "local f = capi_path for i = 1, %d do local s = f() end", N);
        double t1 = run(L, code);
        snprintf(code, sizeof code,
                 "local C, len, str = C, len, ffi.string for i = 1, %d do local p = C.lx_path(len) "
                 "local s = str(p, len[0]) end",
                 N);
        double t2 = run(L, code);
        printf("%s: C API %.1f ns/call, FFI %.1f ns/call\n", jit ? "JIT on " : "JIT off", t1 / N,
               t2 / N);
        lua_close(L);
    }
}
