#!/usr/bin/env luajit
-- Tests of the config DSL (lua/luxd/config.lua), printing TAP.
-- Run: luajit t/lua/config_test.lua (from the repository root, or give the
-- script's path from anywhere).
local root = (arg and arg[0] or ""):match("^(.*)/t/lua/[^/]*$") or "."
package.path = root .. "/lua/?.lua;" .. package.path
local config = require("luxd.config")

local fmt = string.format
local ntest, nfail = 0, 0

local function ok(cond, name, diag)
  ntest = ntest + 1
  if cond then
    print(fmt("ok %d - %s", ntest, name))
  else
    nfail = nfail + 1
    print(fmt("not ok %d - %s", ntest, name))
    if diag then print("# " .. tostring(diag):gsub("\n", "\n# ")) end
  end
end

local function show(v)
  if type(v) == "string" then return fmt("%q", v) end
  return tostring(v)
end

local function is(got, want, name)
  ok(got == want, name, fmt("got:  %s\nwant: %s", show(got), show(want)))
end

-- Deep comparison; returns nil or a description of the first difference.
local function diff(a, b, path)
  path = path or "$"
  if type(a) ~= type(b) then return fmt("%s: %s vs %s", path, show(a), show(b)) end
  if type(a) ~= "table" then
    if a ~= b then return fmt("%s: %s vs %s", path, show(a), show(b)) end
    return nil
  end
  for k, v in pairs(a) do
    local d = diff(v, b[k], path .. "." .. tostring(k))
    if d then return d end
  end
  for k, v in pairs(b) do
    if a[k] == nil then return fmt("%s.%s: missing (want %s)", path, tostring(k), show(v)) end
  end
  return nil
end

local function same(got, want, name)
  local d = diff(got, want)
  ok(d == nil, name, d)
end

-- A fresh directory per test, used as the server's prefix.
local base = os.tmpname()
os.remove(base)
assert(os.execute("mkdir -p '" .. base .. "'") == 0)
local ndir = 0
local prefix

local function glob(pattern)
  local p = io.popen("ls -1d " .. pattern .. " 2>/dev/null")
  local out = {}
  for line in p:lines() do out[#out + 1] = line end
  p:close()
  table.sort(out)
  return out
end

local function write(rel, text)
  local dir = (prefix .. "/" .. rel):match("^(.*)/[^/]*$")
  assert(os.execute("mkdir -p '" .. dir .. "'") == 0)
  local f = assert(io.open(prefix .. "/" .. rel, "w"))
  f:write(text)
  f:close()
end

-- host.where, as src/config/load.c's: the file and line of the innermost
-- frame from `level` up that runs a known user file.
local function where(known, level)
  for l = level + 1, 251 do -- + 1: this function's own frame
    local info = debug.getinfo(l, "Sl")
    if not info then return end
    local src = info.source
    if src:sub(1, 1) == "@" and known[src:sub(2)] then return src:sub(2), info.currentline end
  end
end

-- Writes `files` ({ [relpath] = text }, the main one at "conf/luxd.lua"
-- unless `main` is given) into a new prefix and loads the main one.
local function try_load(files, main)
  ndir = ndir + 1
  prefix = fmt("%s/p%d", base, ndir)
  if type(files) == "string" then files = { ["conf/luxd.lua"] = files } end
  for rel, text in pairs(files) do write(rel, text) end
  return pcall(config.load, main or "conf/luxd.lua", { prefix = prefix, glob = glob, where = where })
end

local function load_ok(files, name, main)
  local good, desc = try_load(files, main)
  ok(good, name .. " (loads)", not good and desc or nil)
  return good and desc or nil
end

local function load_err(files, want, name, main)
  local good, err = try_load(files, main)
  if good then
    ok(false, name, "loaded without error; want: " .. want)
  else
    is(err, want, name)
  end
end

---------------------------------------------------------------------------
print("# a full config")

local d = load_ok([==[
server {
  listen = { "127.0.0.1:8080", "[::1]:8080", ":9090" },
  workers = "auto",
  error_log = "logs/error.log",
  keepalive_timeout = 15,
  pid_file = "logs/luxd.pid",
  user = "www-data",
}
mime { [".WASM"] = "application/wasm" }
-- upstream, proxy and fallback: see "# upstreams"
vhost "Example.com" {
  aliases = { "WWW.example.com", "*.example.org" },
  root = "www/example.com",
  headers = { ["X-Frame-Options"] = "DENY", ["a-b"] = "x", ["X-Num"] = 5 },
  access = {
    deny { suffix = { "~", ".inc" } },
    allow { prefix = "/admin/", from = { "127.0.0.1", "10.0.0.0/8", "::1" } },
    deny { method = "TRACE", status = 405 },
    deny { regex = [[\.(bak|swp)$]] },
  },
  rewrite = { { [[^/old/(.*)$]], "/new/$1" } },
  redirect = { { "^/home$", "/", status = 301 }, { "^/x$", "/y" } },
  location "/static/" { cache_control = "public, max-age=86400", gzip_static = true },
  location "/app/" { dir_listing = true },
  -- (no fallback: see "# upstreams")
  policy = function(r) return nil end,
}
]==], "full config")
if d then
  local s = d.server
  same(s.listen, {
    { host = "127.0.0.1", port = 8080, _file = "conf/luxd.lua", _line = 2 },
    { host = "::1", port = 8080, _file = "conf/luxd.lua", _line = 2 },
    { host = "", port = 9090, _file = "conf/luxd.lua", _line = 2 },
  }, "listen entries parsed")
  is(s.workers, 0, "workers auto -> 0")
  is(s.error_log, prefix .. "/logs/error.log", "error_log made absolute")
  is(s.pid_file, prefix .. "/logs/luxd.pid", "pid_file made absolute")
  is(s.user, "www-data", "user")
  is(s.keepalive_timeout, 15, "keepalive_timeout set")
  is(s.keepalive_requests, 1000, "keepalive_requests default")
  same(s.access_log, { path = prefix .. "/logs/access.log", format = "combined" },
       "access_log on by default")
  is(s._file .. ":" .. s._line, "conf/luxd.lua:1", "server _file/_line")
  same(d.mime, { [".wasm"] = "application/wasm" }, "mime extension lower-cased")
  same(d.upstreams, {}, "no upstream")
  local v = d.vhosts[1]
  is(#d.vhosts, 1, "one vhost")
  is(v.name, "example.com", "vhost name lower-cased")
  same(v.aliases, { "www.example.com", "*.example.org" }, "aliases lower-cased")
  is(v.root, prefix .. "/www/example.com", "root made absolute")
  -- A vhost holds what its config gave; the defaults come beside it.
  is(v.index, nil, "index not given")
  is(v.etag, nil, "etag not given")
  is(v.default, nil, "default not given")
  local vd = d.vhost_defaults
  same(vd.index, { "index.html" }, "index default")
  is(vd.etag, true, "etag default")
  is(vd.dir_listing, false, "dir_listing default")
  is(vd.default, false, "default false")
  same(v.headers, { { "a-b", "x" }, { "X-Frame-Options", "DENY" }, { "X-Num", "5" } },
       "headers: sorted pairs, numbers as strings")
  same(v.access, {
    { action = "deny", suffix = { "~", ".inc" }, status = 403, _file = "conf/luxd.lua", _line = 16 },
    { action = "allow", prefix = "/admin/", from = { "127.0.0.1", "10.0.0.0/8", "::1" },
      _file = "conf/luxd.lua", _line = 17 },
    { action = "deny", method = { "TRACE" }, status = 405, _file = "conf/luxd.lua", _line = 18 },
    { action = "deny", regex = [[\.(bak|swp)$]], status = 403, _file = "conf/luxd.lua", _line = 19 },
  }, "access rules")
  same(v.rewrite, { { regex = "^/old/(.*)$", target = "/new/$1", _file = "conf/luxd.lua", _line = 21 } },
       "rewrite")
  same(v.redirect, {
    { regex = "^/home$", target = "/", status = 301, _file = "conf/luxd.lua", _line = 22 },
    { regex = "^/x$", target = "/y", status = 302, _file = "conf/luxd.lua", _line = 22 },
  }, "redirect, status 302 by default")
  same(v.locations, {
    { prefix = "/static/", cache_control = "public, max-age=86400", gzip_static = true,
      _file = "conf/luxd.lua", _line = 23 },
    { prefix = "/app/", dir_listing = true, _file = "conf/luxd.lua", _line = 24 },
  }, "locations hold only the keys they set")
  is(v.fallback, nil, "no fallback")
  is(type(v.policy), "function", "policy kept as a function")
  is(v._file .. ":" .. v._line, "conf/luxd.lua:11", "vhost _file/_line")
  same(d.files, { "conf/luxd.lua" }, "files")
end

print("# defaults")
d = load_ok("-- nothing\n", "empty config")
if d then
  local s = d.server
  same(s.listen, { { host = "", port = 8080, _file = "conf/luxd.lua", _line = 0 } }, "default listen")
  is(s.error_log, "stderr", "default error_log")
  is(s.error_log_level, "info", "default error_log_level")
  same(s.access_log, { path = prefix .. "/logs/access.log", format = "combined" }, "default access_log")
  is(s.workers, 0, "default workers")
  is(s.tcp_nodelay, true, "default tcp_nodelay")
  is(s.defer_accept, true, "default defer_accept")
  is(s.header_timeout, 10, "default header_timeout")
  is(s.max_body_bytes, 1048576, "default max_body_bytes")
  is(s.drain_timeout, 30, "default drain_timeout")
  is(s.access_log_buffer, 65536, "default access_log_buffer")
  is(s.pid_file, nil, "no pid_file")
  same(d.vhosts, {}, "no vhosts")
  same(d.upstreams, {}, "no upstreams")
  same(d.mime, {}, "no mime")
end

d = load_ok([[
server { access_log = false, workers = 4, listen = 8081 }
vhost "a.example" { root = "/srv/a/", index = "index.htm", default = true }
]], "access_log off")
if d then
  is(d.server.access_log, false, "access_log = false")
  is(d.server.workers, 4, "workers = 4")
  is(d.server.listen[1].port, 8081, "listen = 8081 (a number)")
  is(d.server.listen[1].host, "", "listen number: all addresses")
  is(d.vhosts[1].root, "/srv/a", "absolute root kept, trailing slash dropped")
  same(d.vhosts[1].index, { "index.htm" }, "index as a single string")
  is(d.vhosts[1].default, true, "default = true")
end

d = load_ok([[server { access_log = "off", listen = { "*:80", "8080", "0.0.0.0:81" } }]], "access_log off string")
if d then
  is(d.server.access_log, false, 'access_log = "off"')
  same({ d.server.listen[1].host, d.server.listen[1].port, d.server.listen[2].host,
         d.server.listen[2].port, d.server.listen[3].host },
       { "", 80, "", 8080, "0.0.0.0" }, "listen *:80, 8080, 0.0.0.0:81")
end

d = load_ok([[server { access_log = { path = "/var/log/a.log", format = "json" }, vhost_dir = "sites" }]],
            "access_log table")
if d then
  same(d.server.access_log, { path = "/var/log/a.log", format = "json", escape = "default" }, "access_log table")
  is(d.server.vhost_dir, prefix .. "/sites", "vhost_dir made absolute")
end
d = load_ok([[server { access_log = { path = "stdout", format = "$remote_addr $status" } }]], "access_log template")
if d then
  same(d.server.access_log, { path = "/dev/stdout", format = "$remote_addr $status", escape = "default" }, "template format, stdout")
end

load_err([[
server {
  access_log = { path = "a.log", format = "combine" },
}
]], 'conf/luxd.lua:2: server: access_log: "format" must be "combined", "common", "json" or a template with ' ..
    '$variables, got "combine" (did you mean "combined"?)', "bad access log format")
load_err([[
server {
  access_log = { format = "common" },
}
]], 'conf/luxd.lua:2: server: access_log: "path" is missing', "access_log table without path")
load_err([[
server {
  access_log = { path = "x", fromat = "common" },
}
]], 'conf/luxd.lua:2: server: access_log: unknown key "fromat" (did you mean "format"?)', "access_log unknown key")

---------------------------------------------------------------------------
print("# unknown keys and types")

load_err([[
server {
  listen = ":8080",
}

vhost "example.com" {
  root = "www",
  index = { "index.html" },
  rooot = "www2",
}
]], 'conf/luxd.lua:8: vhost "example.com": unknown key "rooot" (did you mean "root"?)', "unknown key, did you mean")

load_err([[
server {
  listen = ":8080",
  keepalive_timeout = "30",
}
]], 'conf/luxd.lua:3: server: "keepalive_timeout" must be a number, got string', "wrong type in server")

load_err([[
server { listen = ":8080", keepalive_timeout = "30" }
]], 'conf/luxd.lua:1: server: "keepalive_timeout" must be a number, got string', "wrong type, one-line block")

load_err([[
vhost "a.example" {
  root = "www",
  access = {
    deny { suffix = "~" },
    deny {
      prefx = "/.git/",
    },
  },
}
]], 'conf/luxd.lua:6: vhost "a.example": access rule 2: unknown key "prefx" (did you mean "prefix"?)',
   "unknown key in an access rule")

load_err([[
vhost "a.example" {
  root = "www",
  listen = ":80",
}
]], 'conf/luxd.lua:3: vhost "a.example": unknown key "listen" (it belongs in server { ... })',
   "server key in a vhost")

load_err([[
server {
  root = "www",
}
]], 'conf/luxd.lua:2: server: unknown key "root" (it belongs in vhost "name" { ... })', "vhost key in server")

load_err([[
vhost "a.example" {
  prefix = "/x/",
}
]], 'conf/luxd.lua:2: vhost "a.example": unknown key "prefix" (it belongs in an access rule: ' ..
    'access = { deny { prefix = ... } })', "rule key in a vhost")

load_err([[
vhost "a.example" {
  zzzzzzzz = 1,
}
]], 'conf/luxd.lua:2: vhost "a.example": unknown key "zzzzzzzz"', "unknown key without suggestion")

load_err([[
vhost "a.example" {
  ["root "] = "www",
}
]], 'conf/luxd.lua:2: vhost "a.example": unknown key "root " (did you mean "root"?)', "bracketed unknown key")

load_err([[
vhost "a.example" {
  etag = true,
  -- dir_listing = "yes",
  dir_listing = "yes",
}
]], 'conf/luxd.lua:4: vhost "a.example": "dir_listing" must be true or false, got string',
   "a key in a comment is not the key's line")

load_err([[
vhost "a.example" {
  index = { "index.html", 3 },
}
]], 'conf/luxd.lua:2: vhost "a.example": "index"[2] must be a string, got number', "array item type")

load_err([[
vhost "a.example" {
  index = { first = "index.html" },
}
]], 'conf/luxd.lua:2: vhost "a.example": "index" must be a string or an array of strings, but has key "first"',
   "array with a string key")

load_err([[
vhost "a.example" {
  policy = "allow",
}
]], 'conf/luxd.lua:2: vhost "a.example": "policy" must be a function, got string', "policy must be a function")

load_err([[
server {
  workers = 0,
}
]], 'conf/luxd.lua:2: server: "workers" must be "auto" or an integer >= 1, got 0', "workers 0")
load_err([[
server {
  workers = "many",
}
]], 'conf/luxd.lua:2: server: "workers" must be "auto" or an integer >= 1, got "many"', "workers string")
load_err([[
server {
  max_connections = 1.5,
}
]], 'conf/luxd.lua:2: server: "max_connections" must be an integer, got 1.5', "integer key with a fraction")
load_err([[
server {
  max_body_bytes = -1,
}
]], 'conf/luxd.lua:2: server: "max_body_bytes" must be >= 0, got -1', "negative byte count")
load_err([[
server {
  header_timeout = 0,
}
]], 'conf/luxd.lua:2: server: "header_timeout" must be > 0, got 0', "zero timeout")
load_err([[
server {
  send_timeout = 0/0,
}
]], 'conf/luxd.lua:2: server: "send_timeout" must be a finite number, got nan', "NaN")
load_err([[
server {
  max_header_bytes = "8k",
}
]], 'conf/luxd.lua:2: server: "max_header_bytes" must be an integer, got string', "integer key, string value")
-- access_log_buffer: at most 16 MiB (one buffer per log file and worker).
do
  local dl = load_ok('server { access_log_buffer = 16777216 }\nvhost "a" { root = "/srv" }\n',
                     "access_log_buffer at its limit")
  is(dl and dl.server.access_log_buffer, 16777216, "access_log_buffer at its limit: kept")
end
load_err([[
server {
  access_log_buffer = 16777217,
}
]], 'conf/luxd.lua:2: server: "access_log_buffer" must be between 0 and 16777216, got 16777217',
    "access_log_buffer one past its limit")
load_err([[
server {
  error_log_level = "warning",
}
]], 'conf/luxd.lua:2: server: "error_log_level" must be one of "debug", "info", "notice", "warn", "error", ' ..
    'got "warning"', "bad enum value")
load_err([[
server {
  error_log_level = "eror",
}
]], 'conf/luxd.lua:2: server: "error_log_level" must be one of "debug", "info", "notice", "warn", "error", ' ..
    'got "eror" (did you mean "error"?)', "enum with did-you-mean")
load_err([[
server {
  tcp_nodelay = 1,
}
]], 'conf/luxd.lua:2: server: "tcp_nodelay" must be true or false, got number', "boolean key")
load_err([[
vhost "a.example" {
  headers = { ["X-A"] = "1", ["x-a"] = "2" },
}
]], 'conf/luxd.lua:2: vhost "a.example": "headers": header "x-a" is given twice (as "X-A")',
   "duplicate header, any case")
load_err([[
vhost "a.example" {
  headers = {
    ["X-Ok"] = "fine",
    ["X-Bad"] = "a\r\nSet-Cookie: x",
  },
}
]], 'conf/luxd.lua:4: vhost "a.example": "headers"["X-Bad"] must not contain a line break',
   "header value with a line break, at the header's line")
load_err([[
vhost "a.example" {
  headers = { "X-Frame-Options: DENY" },
}
]], 'conf/luxd.lua:2: vhost "a.example": "headers": 1 is not a header name; write { ["X-Name"] = "value" }',
   "headers as a list")
load_err([[
vhost "a.example" {
  root = "www",
  "index.html",
}
]], 'conf/luxd.lua:1: vhost "a.example": unexpected array element 1 ("index.html"); ' ..
    'only location "/prefix/" { ... } goes without a key', "stray array element in a vhost")

load_err([[
vhost "a.example" {
  root = 1,
  index = 2,
  etag = 3,
}
]], 'conf/luxd.lua:2: vhost "a.example": "root" must be a string, got number',
   "several errors: the first in the file is reported")

for i = 1, 5 do
  load_err([[
server { workers = "x", keepalive_timeout = "y", tcp_nodelay = "z", backlog = "w" }
]], 'conf/luxd.lua:1: server: "workers" must be "auto" or an integer >= 1, got "x"',
     "several errors on one line: the leftmost, every time (" .. i .. ")")
end

---------------------------------------------------------------------------
print("# vhost names")

load_err([[
vhost "a.example" { root = "a" }
vhost "c.example" { root = "c" }
vhost "a.example" { root = "b" }
]], 'conf/luxd.lua:3: vhost "a.example": name "a.example" is already used by vhost "a.example" (conf/luxd.lua:1)',
   "duplicate vhost name")

load_err([[
vhost "a.example" { root = "a" }




vhost "B.example" {
  root = "b",
  aliases = { "A.EXAMPLE" },
}
]], 'conf/luxd.lua:8: vhost "b.example": name "a.example" is already used by vhost "a.example" (conf/luxd.lua:1)',
   "alias clashes with a name (case-insensitive)")

load_err([[
vhost "a.example" {
  aliases = { "www.example", "*.a.example" },
}
vhost "www.example" { root = "b" }
]], 'conf/luxd.lua:4: vhost "www.example": name "www.example" is already used by vhost "a.example" (conf/luxd.lua:2)',
   "name clashes with an earlier alias, naming the alias line")

load_err([[
vhost "a.example" { aliases = "x.example" }
vhost "b.example" { aliases = { "y.example", "x.example" } }
]], 'conf/luxd.lua:2: vhost "b.example": name "x.example" is already used by vhost "a.example" (conf/luxd.lua:1)',
   "alias clashes with an alias")

load_err([[
vhost "a.example" { aliases = { "a.example" } }
]], 'conf/luxd.lua:1: vhost "a.example": alias "a.example" is the vhost\'s own name', "alias repeats the name")

load_err([[
vhost "foo bar" { root = "x" }
]], 'conf/luxd.lua:1: vhost "foo bar": "foo bar" is not a valid host name (letters, digits, "-" and "." only; ' ..
    '"*.example.com" for a wildcard)', "invalid vhost name")
load_err([[
vhost "*" { root = "x" }
]], 'conf/luxd.lua:1: vhost "*": "*" is not a valid host name; to serve every other host, use default = true',
   "vhost * hint")
load_err([[
vhost "a.example" {
  aliases = { "ok.example", "-bad.example" },
}
]], 'conf/luxd.lua:2: vhost "a.example": alias "-bad.example" is not a valid host name (letters, digits, "-" and "." only; ' ..
    '"*.example.com" for a wildcard)', "invalid alias")
load_err([[
vhost "a.*.example" { }
]], 'conf/luxd.lua:1: vhost "a.*.example": "a.*.example" is not a valid host name (letters, digits, "-" and "." only; ' ..
    '"*.example.com" for a wildcard)', "star in the middle")
d = load_ok([[
vhost "*.Example.ORG" { }
vhost "example.org." { }
vhost "127.0.0.1" { }
vhost "[::1]" { }
]], "wildcard, trailing dot, IP names")
if d then
  same({ d.vhosts[1].name, d.vhosts[2].name, d.vhosts[3].name, d.vhosts[4].name },
       { "*.example.org", "example.org", "127.0.0.1", "[::1]" }, "names normalized")
end

load_err([[
vhost "a.example" { default = true }
vhost "b.example" {
  root = "b",
  default = true,
}
]], 'conf/luxd.lua:4: vhost "b.example": "default = true" is already set by vhost "a.example" (conf/luxd.lua:1)',
   "two default vhosts")

load_err([[
vhost { root = "www" }
]], 'conf/luxd.lua:1: vhost needs a name: vhost "example.com" { ... }, got table', "vhost without a name")
load_err([[
vhost "a.example"
vhost "b.example" { }
]], 'conf/luxd.lua:1: vhost "a.example": missing { ... } after the name: vhost "a.example" { ... }',
   "vhost name without a table")
load_err([[
vhost "a.example" "www"
]], 'conf/luxd.lua:1: vhost "a.example": expected a table: vhost "a.example" { ... }, got string',
   "vhost with a string body")

---------------------------------------------------------------------------
print("# listen")

local function listen_err(entry, want, name)
  load_err("server {\n  listen = { " .. entry .. " },\n}\n", "conf/luxd.lua:2: server: " .. want, name)
end
listen_err('"8080x"', 'listen entry "8080x" is not "host:port", ":port" or "[IPv6]:port"', "listen garbage")
listen_err('"127.0.0.1:0"', 'listen entry "127.0.0.1:0" has a port outside 1..65535', "listen port 0")
listen_err('":65536"', 'listen entry ":65536" has a port outside 1..65535', "listen port 65536")
listen_err('"127.0.0.1:"', 'listen entry "127.0.0.1:" has a port outside 1..65535', "listen without port")
listen_err('"localhost:80"', 'listen entry "localhost:80" must name an IP address ("127.0.0.1:8080", ' ..
           '"[::1]:8080") or none (":8080" for all addresses)', "listen host name")
listen_err('"300.1.1.1:80"', 'listen entry "300.1.1.1:80" must name an IP address ("127.0.0.1:8080", ' ..
           '"[::1]:8080") or none (":8080" for all addresses)', "listen bad IPv4")
listen_err('"[zz]:80"', 'listen entry "[zz]:80" has an invalid IPv6 address', "listen bad IPv6")
listen_err('"::1:80"', 'listen entry "::1:80" is not "host:port", ":port" or "[IPv6]:port"', "IPv6 without brackets")
listen_err('":80", ":80"', 'listen entry ":80" is given twice', "listen twice")
listen_err('70000', 'listen entry 70000 has a port outside 1..65535', "listen number out of range")
listen_err('":80", true', '"listen"[2] must be a string, got boolean', "listen entry of a wrong type")
load_err("server {\n  listen = {},\n}\n", 'conf/luxd.lua:2: server: "listen" must not be empty', "empty listen")

---------------------------------------------------------------------------
print("# access rules")

local function rule_err(rule, want, name)
  load_err('vhost "a.example" {\n  access = {\n    ' .. rule .. ',\n  },\n}\n',
           'conf/luxd.lua:3: vhost "a.example": access rule 1: ' .. want, name)
end
rule_err('deny { status = 99, prefix = "/x/" }', '"status" must be between 100 and 599, got 99', "status 99")
rule_err('deny { status = 600, prefix = "/x/" }', '"status" must be between 100 and 599, got 600', "status 600")
rule_err('deny { status = 403.5, prefix = "/x/" }', '"status" must be an integer, got 403.5', "fractional status")
rule_err('deny { status = "403", prefix = "/x/" }', '"status" must be an integer, got string', "string status")
rule_err('allow { status = 200, prefix = "/x/" }', 'unknown key "status" (only deny { ... } takes a status)',
         "status on allow")
rule_err('deny { }', 'deny { } has no condition (prefix, suffix, regex, method or from); ' ..
         'write deny { all = true } to match every request', "deny without a condition")
rule_err('allow { all = false }', 'allow { } has no condition (prefix, suffix, regex, method or from); ' ..
         'write allow { all = true } to match every request', "all = false is no condition")
rule_err('deny { all = true, prefix = "/x/" }', '"all = true" matches every request and cannot be combined ' ..
         'with prefix, suffix, regex, method or from', "all with a condition")
rule_err('deny { method = "get" }', '"method" must be an upper-case method name like "GET", got "get" ' ..
         '(did you mean "GET"?)', "lower-case method")
rule_err('deny { method = { "GET", "BAD METHOD" } }', '"method"[2] must be an upper-case method name like ' ..
         '"GET", got "BAD METHOD"', "method with a space")
rule_err('deny { from = "localhost" }', '"from" must be an IP address or a CIDR like "10.0.0.0/8", got "localhost"',
         "from not an address")
rule_err('deny { from = { "10.0.0.0/33" } }', '"from"[1] must be an IP address or a CIDR like "10.0.0.0/8", ' ..
         'got "10.0.0.0/33"', "bad CIDR length")
rule_err('deny { suffix = {} }', '"suffix" must not be empty', "empty suffix list")
rule_err('deny { prefix = "admin/" }', '"prefix" must start with "/", got "admin/"', "prefix without a slash")
rule_err('deny { regex = 5 }', '"regex" must be a string, got number', "regex not a string")

d = load_ok([[
vhost "a.example" {
  access = {
    allow { from = "127.0.0.1" },
    deny { all = true, status = 404 },
    allow { all = true },
  },
}
]], "catch-all rules")
if d then
  same(d.vhosts[1].access[2], { action = "deny", all = true, status = 404, _file = "conf/luxd.lua", _line = 4 },
       "deny { all = true }")
  same(d.vhosts[1].access[1].from, { "127.0.0.1" }, "from as a single string")
end

load_err([[
vhost "a.example" {
  access = deny { prefix = "/x/" },
}
]], 'conf/luxd.lua:2: vhost "a.example": "access" must be a list of rules: access = { deny { ... } }',
   "access as a single rule")
load_err([[
vhost "a.example" {
  access = {
    deny { prefix = "/x/" },
    { prefix = "/y/" },
  },
}
]], 'conf/luxd.lua:2: vhost "a.example": access rule 2 must be allow { ... } or deny { ... }, got table',
   "plain table in access")
load_err([[
vhost "a.example" {
  access = { deny = { prefix = "/y/" } },
}
]], 'conf/luxd.lua:2: vhost "a.example": "access" must be a list of allow { ... } / deny { ... } rules, ' ..
    'but has key "deny"', "access as a map")
load_err([[
deny { prefix = "/x/" }
vhost "a.example" { }
]], 'conf/luxd.lua:1: deny { ... } must be inside the access list of a vhost or location: access = { deny { ... } }',
   "deny outside a vhost")
load_err([[
vhost "a.example" {
  deny { prefix = "/x/" },
}
]], 'conf/luxd.lua:2: vhost "a.example": deny { ... } must be inside access = { ... }', "deny as a vhost element")
load_err([[
allow "everyone"
]], 'conf/luxd.lua:1: allow needs a table: allow { prefix = "/private/" }, got string', "allow with a string")

d = load_ok([[
local common = {
  deny { prefix = "/.git/" },
  deny { suffix = "~" },
}
vhost "a.example" { access = common }
vhost "b.example" { access = common }
]], "rules shared by two vhosts")
if d then is(#d.vhosts[2].access, 2, "shared rules in the second vhost") end

---------------------------------------------------------------------------
print("# rewrite and redirect")

load_err([[
vhost "a.example" {
  rewrite = { "^/a$", "/b" },
}
]], 'conf/luxd.lua:2: vhost "a.example": rewrite 1: expected { "^/old/(.*)$", "/new/$1" }, got string; ' ..
    'write rewrite = { { "^/old/(.*)$", "/new/$1" } }', "rewrite as a flat pair")
load_err([[
vhost "a.example" {
  rewrite = {
    { "^/a$", "/b" },
    { "^/c$", "/d", status = 301 },
  },
}
]], 'conf/luxd.lua:4: vhost "a.example": rewrite 2: unknown key "status" (only a redirect has a status; ' ..
    'a rewrite is internal)', "status on a rewrite")
load_err([[
vhost "a.example" {
  redirect = {
    { "^/a$", "/b", status = 305 },
  },
}
]], 'conf/luxd.lua:3: vhost "a.example": redirect 1: "status" must be 301, 302, 303, 307 or 308, got 305',
   "bad redirect status")
load_err([[
vhost "a.example" {
  redirect = { { "^/a$" } },
}
]], 'conf/luxd.lua:2: vhost "a.example": redirect 1: expected { "^/old$", "/new", status = 301 }, got 1 item(s)',
   "redirect without a target")
load_err([[
vhost "a.example" {
  redirect = { { "^/a$", 5 } },
}
]], 'conf/luxd.lua:2: vhost "a.example": redirect 1: the target must be a string, got number',
   "redirect target not a string")
load_err([[
vhost "a.example" {
  redirect = { { "^/a$", "/b", stauts = 301 } },
}
]], 'conf/luxd.lua:2: vhost "a.example": redirect 1: unknown key "stauts" (did you mean "status"?)',
   "redirect unknown key")

---------------------------------------------------------------------------
print("# locations")

load_err([[
vhost "a.example" {
  location "static/" { },
}
]], 'conf/luxd.lua:2: vhost "a.example": location "static/": the prefix must start with "/"', "location prefix without /")
load_err([[
vhost "a.example" {
  location "/s/" { },
  location "/t/" { },
  location "/s/" { },
}
]], 'conf/luxd.lua:4: vhost "a.example": location "/s/": the prefix is already used by another location of ' ..
    'this vhost (conf/luxd.lua:2)', "duplicate location")
load_err([[
vhost "a.example" {
  root = "www",
  location "/s/" {
    cache_control = "public",
    cach_control = "x",
  },
}
]], 'conf/luxd.lua:5: vhost "a.example": location "/s/": unknown key "cach_control" (did you mean "cache_control"?)',
   "unknown key in a location")
load_err([[
vhost "a.example" {
  location "/s/" {
    aliases = { "b.example" },
  },
}
]], 'conf/luxd.lua:3: vhost "a.example": location "/s/": unknown key "aliases" (it is only valid on the vhost itself)',
   "aliases in a location")
load_err([[
vhost "a.example" {
  location "/s/" {
    access = { deny { prefx = "/x" } },
  },
}
]], 'conf/luxd.lua:3: vhost "a.example": location "/s/": access rule 1: unknown key "prefx" (did you mean "prefix"?)',
   "rule in a location's access list")
load_err([[
location "/s/" { root = "x" }
vhost "a.example" { }
]], 'conf/luxd.lua:1: location "/s/": must be an element of a vhost table: vhost "name" { location "/s/" { ... } }',
   "location outside a vhost")
load_err([[
vhost "a.example" {
  static = location "/s/" { },
}
]], 'conf/luxd.lua:2: vhost "a.example": location "/s/" must be an element of the vhost table, not the value of key "static"',
   "location as a key's value")
load_err([[
vhost "a.example" {
  location "/s/",
}
]], 'conf/luxd.lua:2: vhost "a.example": location "/s/": missing { ... } after the prefix: location "/s/" { ... }',
   "location without a table")
d = load_ok([[
vhost "a.example" {
  location "/s/" { root = "static", index = "i.html", headers = { ["X-A"] = "1" },
                   access = { deny { suffix = ".php" } } },
}
]], "location keys normalized")
if d then
  same(d.vhosts[1].locations[1], {
    prefix = "/s/", root = prefix .. "/static", index = { "i.html" }, headers = { { "X-A", "1" } },
    access = { { action = "deny", suffix = { ".php" }, status = 403, _file = "conf/luxd.lua", _line = 3 } },
    _file = "conf/luxd.lua", _line = 2, _root_line = 2,
  }, "location normalized like the vhost")
end

---------------------------------------------------------------------------
print("# upstreams")

d = load_ok({ ["conf/luxd.lua"] = [[
vhost "a.example" {
  root = "www",
  fallback = "app",                       -- declared below
  proxy_headers = { ["X-B"] = "2", ["x-a"] = 1, ["X-Gone"] = "" },
  location "/api/" { proxy = "app", proxy_host = "api.internal:8080", proxy_via = false },
  location "/static/" { fallback = false, proxy_host = false },
  location "/other/" { proxy = "other" },  -- declared in an included file
}
upstream "app" {
  "127.0.0.1:8081",
  { "[::1]:8082", weight = 3 },
  "unix:run/app.sock",
  "App.Internal:8080",
  keepalive = 0, read_timeout = 2.5,
}
include "conf.d/*.lua"
]], ["conf/conf.d/u.lua"] = [[
upstream "other" { "unix:/run/other.sock" }
upstream "spare" { "localhost:9" }
]] }, "upstreams, proxy and fallback")
if d then
  is(#d.upstreams, 3, "three upstreams")
  local u = d.upstreams[1]
  same(u, {
    name = "app", _file = "conf/luxd.lua", _line = 9,
    servers = {
      { text = "127.0.0.1:8081", host = "127.0.0.1", port = 8081, weight = 1, _file = "conf/luxd.lua", _line = 10 },
      { text = "[::1]:8082", host = "::1", port = 8082, weight = 3, _file = "conf/luxd.lua", _line = 11 },
      { text = "unix:run/app.sock", unix = prefix .. "/run/app.sock", weight = 1, _file = "conf/luxd.lua", _line = 12 },
      { text = "App.Internal:8080", host = "App.Internal", port = 8080, weight = 1, _file = "conf/luxd.lua", _line = 13 },
    },
    keepalive = 0, keepalive_timeout = 60, connect_timeout = 5, read_timeout = 2.5, send_timeout = 60,
    max_fails = 1, fail_timeout = 10, max_header_bytes = 32768,
  }, "servers in order with their lines, unix path made absolute, defaults filled")
  same(d.upstreams[2].servers, { { text = "unix:/run/other.sock", unix = "/run/other.sock", weight = 1,
                                   _file = "conf/conf.d/u.lua", _line = 1 } }, "upstream in an included file")
  local v = d.vhosts[1]
  is(v.fallback, "app", "fallback names the upstream")
  is(v.proxy, nil, "no proxy on the vhost")
  is(v.proxy_via, nil, "proxy_via not given")
  is(d.vhost_defaults.proxy_via, true, "proxy_via on by default")
  is(v.proxy_host, nil, "no proxy_host by default")
  same(v.proxy_headers, { { "x-a", "1" }, { "X-B", "2" }, { "X-Gone", "" } },
       "proxy_headers: sorted pairs, numbers as strings, \"\" kept (remove)")
  same(v.locations[1], { prefix = "/api/", proxy = "app", proxy_host = "api.internal:8080", proxy_via = false,
                         _file = "conf/luxd.lua", _line = 5 }, "location proxy keys")
  same(v.locations[2], { prefix = "/static/", fallback = false, proxy_host = false,
                         _file = "conf/luxd.lua", _line = 6 }, "false turns off what the vhost set")
  same(d.warnings, { 'conf/conf.d/u.lua:2: upstream "spare" is not used by any proxy or fallback ' ..
                     '(only a policy can send requests to it, with return r:proxy("spare"))' },
       "an unused upstream is a warning")
end
d = load_ok('upstream "u" { "127.0.0.1:1", keepalive = 10000, max_header_bytes = 1048576, max_fails = 0, ' ..
            '{ "127.0.0.1:2", weight = 100 }, { "127.0.0.1:3", weight = 1 }, "127.0.0.1:65535" }\n', "limits at the limit")
if d then
  local u = d.upstreams[1]
  same({ u.keepalive, u.max_header_bytes, u.max_fails, u.servers[2].weight, u.servers[4].port },
       { 10000, 1048576, 0, 100, 65535 }, "limits kept")
end

load_err([[
vhost "a.example" {
  root = "www",
  fallback = "ap",
}
upstream "app" { "127.0.0.1:8081" }
]], 'conf/luxd.lua:3: vhost "a.example": "fallback" names upstream "ap", which is not declared ' ..
    '(did you mean "app"?)', "unknown fallback, did you mean")
load_err([[
vhost "a.example" {
  location "/app/" {
    proxy = "backend",
  },
}
]], 'conf/luxd.lua:3: vhost "a.example": location "/app/": "proxy" names upstream "backend", but there ' ..
    'is none; declare it: upstream "backend" { "127.0.0.1:8081" }', "proxy with no upstream at all")
load_err([[
vhost "a.example" { proxy = "x" }
vhost "b.example" {
  location "/l/" { proxy = "y" },
  fallback = "z",
}
upstream "queue" { "127.0.0.1:1" }
]], 'conf/luxd.lua:1: vhost "a.example": "proxy" names upstream "x", which is not declared',
   "the first unknown name in the file is reported")
load_err([[
upstream "app" { "127.0.0.1:8081" }
vhost "a.example" {
  proxy = "app",
  fallback = "app",
}
]], 'conf/luxd.lua:4: vhost "a.example": "fallback" would never be used: "proxy" sends every request ' ..
    'here to upstream "app"; set one of them', "proxy and fallback in one block")
load_err([[
upstream "app" { "127.0.0.1:8081" }
upstream "app" { "127.0.0.1:8082" }
]], 'conf/luxd.lua:2: upstream "app": the name is already used by upstream "app" (conf/luxd.lua:1)',
   "duplicate upstream")
load_err([[
upstream "app" { keepalive = 4 }
]], 'conf/luxd.lua:1: upstream "app": needs at least one server: upstream "name" { "127.0.0.1:8081" }',
   "upstream without servers")
load_err([[
upstream "app" {
  servers = { "127.0.0.1:8081" },
}
]], 'conf/luxd.lua:2: upstream "app": unknown key "servers" (list the servers without a key: ' ..
    'upstream "name" { "127.0.0.1:8081", ... })', "upstream servers key")
load_err([[
upstream "app" {
  "127.0.0.1:8081",
  "127.0.0.1",
}
]], 'conf/luxd.lua:3: upstream "app": server "127.0.0.1" is not "host:port", "[IPv6]:port" or "unix:/path"',
   "upstream server without port, at its line")
load_err([[
upstream "app" { "127.0.0.1:0" }
]], 'conf/luxd.lua:1: upstream "app": server "127.0.0.1:0" has a port outside 1..65535', "upstream server port 0")
load_err([[
upstream "app" { "127.0.0.1:80", keepalive = -1 }
]], 'conf/luxd.lua:1: upstream "app": "keepalive" must be between 0 and 10000, got -1', "negative keepalive")
load_err([[
upstream "my app" { "127.0.0.1:80" }
]], 'conf/luxd.lua:1: upstream "my app": the name may only hold letters, digits, "_", "-" and "."', "bad upstream name")
load_err([[
upstream "app"
]], 'conf/luxd.lua:1: upstream "app": missing { ... } after the name: upstream "app" { "127.0.0.1:8081" }',
   "upstream without a table")

---------------------------------------------------------------------------
print("# server, mime, error pages")

load_err([[
server { listen = ":80" }

server { listen = ":81" }
]], 'conf/luxd.lua:3: server: only one server { ... } is allowed; the first is at conf/luxd.lua:1', "two servers")
load_err([[
server "main"
]], 'conf/luxd.lua:1: server: expected a table: server { listen = ... }, got string', "server with a string")

d = load_ok([[
mime { [".wasm"] = "application/wasm", [".MD"] = "text/markdown" }
mime { [".md"] = "text/x-markdown" }
]], "mime merges")
if d then same(d.mime, { [".wasm"] = "application/wasm", [".md"] = "text/x-markdown" }, "later mime wins") end
load_err([[
mime {
  [".a"] = "x/y",
  ["wasm"] = "application/wasm",
}
]], 'conf/luxd.lua:3: mime: extension "wasm" must start with "." (did you mean ".wasm"?)', "mime without a dot")
load_err([[
mime {
  [".wasm"] = "wasm",
}
]], 'conf/luxd.lua:2: mime: type of ".wasm" must look like "type/subtype", got "wasm"', "bad mime type")
load_err([[
mime {
  [".tar.gz"] = "application/gzip",
}
]], 'conf/luxd.lua:2: mime: extension ".tar.gz" must be a single extension like ".gz"', "double extension")

d = load_ok([[
vhost "a.example" { error_pages = { [404] = "/404.html", [503] = "/busy.html" } }
]], "error_pages")
if d then same(d.vhosts[1].error_pages, { [404] = "/404.html", [503] = "/busy.html" }, "error_pages map") end
load_err([[
vhost "a.example" {
  error_pages = {
    [404] = "/404.html",
    [500] = "500.html",
  },
}
]], 'conf/luxd.lua:4: vhost "a.example": "error_pages"[500] must be a path in this vhost starting with "/", got "500.html"',
   "error page not a path")
load_err([[
vhost "a.example" {
  error_pages = { ["404"] = "/404.html" },
}
]], 'conf/luxd.lua:2: vhost "a.example": "error_pages": key "404" is not a status 400..599', "error page string key")

---------------------------------------------------------------------------
print("# Lua errors")

load_err([[
server {
  listen = ":80"
  workers = 2,
}
]], "conf/luxd.lua:3: '}' expected (to close '{' at line 1) near 'workers'", "syntax error")
load_err([[
local x = nil
vhost "a.example" {
  root = x.dir,
}
]], "conf/luxd.lua:3: attempt to index local 'x' (a nil value)", "runtime error")
load_err([[
error("stop here")
]], "conf/luxd.lua:1: stop here", "error() in the config")
load_err([[

error("no position", 0)
]], "conf/luxd.lua:2: no position", "error(msg, 0) gets the line")
load_err([[
local function check(v) if not v then error("need v", 2) end end
check(false)
]], "conf/luxd.lua:2: need v", "error(msg, 2) names the caller")
load_err([[
error({ code = 1 })
]], "conf/luxd.lua:1: (error object is a table value)", "error with a table")
load_err([[
vhots "a.example" { }
]], "conf/luxd.lua:1: attempt to call global 'vhots' (a nil value) (did you mean \"vhost\"?)", "misspelt DSL function")
load_err([[
local s = ("x"):rep()
]], "conf/luxd.lua:1: bad argument #1 to 'rep' (number expected, got no value)", "error in a library call")
load_err([[
io.write("x")
]], "conf/luxd.lua:1: attempt to index global 'io' (a nil value)", "no io in the environment")
load_err([[
os.execute("true")
]], "conf/luxd.lua:1: attempt to call field 'execute' (a nil value)", "no os.execute")

d = load_ok("#!/usr/bin/env luxd\nvhost \"a.example\" { }\nprint = nil\n", "#! line")
if d then is(d.vhosts[1]._line, 2, "#! line keeps line numbers") end
d = load_ok("\239\187\191vhost \"a.example\" { root = os.getenv(\"HOME\") and \"h\" or \"n\" }\n", "byte order mark")
if d then is(d.vhosts[1].name, "a.example", "BOM skipped; os.getenv available") end

local good, err = pcall(config.load, "conf/none.lua", { prefix = base, glob = glob, where = where })
is(not good and err, "conf/none.lua: cannot read: No such file or directory", "missing main file")
good, err = pcall(config.load, "conf/none.lua", { prefix = base, glob = glob })
is(not good and err, "luxd.config.load: host.where must be a function", "a host without where")

---------------------------------------------------------------------------
print("# include")

-- Relative patterns resolve against the including file's directory (here
-- conf/), not against the prefix the server was started in.
d = load_ok({
  ["conf/luxd.lua"] = [[
SITES = {}
include "conf.d/*.lua"
include "conf.d/none-*.lua"
vhost "main.example" { aliases = SITES }
]],
  ["conf/conf.d/b.lua"] = 'SITES[#SITES + 1] = "b.example"\nvhost "site-b.example" { }\n',
  ["conf/conf.d/a.lua"] = 'SITES[#SITES + 1] = "a.example"\nvhost "site-a.example" { }\n',
  ["conf.d/a.lua"] = 'vhost "wrong-dir.example" { }\n',
}, "include a glob")
if d then
  same({ d.vhosts[1].name, d.vhosts[2].name, d.vhosts[3].name },
       { "site-a.example", "site-b.example", "main.example" }, "included files run in sorted order")
  is(#d.vhosts, 3, "the prefix's own conf.d/ is not the including file's")
  same(d.vhosts[3].aliases, { "a.example", "b.example" }, "included files share the environment")
  same(d.files, { "conf/luxd.lua", "conf/conf.d/a.lua", "conf/conf.d/b.lua" }, "files run")
  is(d.vhosts[1]._file .. ":" .. d.vhosts[1]._line, "conf/conf.d/a.lua:2", "_file of an included vhost")
  same(d.warnings, { 'conf/luxd.lua:3: include "conf.d/none-*.lua" matches no file (' .. prefix ..
                     '/conf/conf.d/none-*.lua)' }, "a glob that matches nothing is a warning")
end
d = load_ok({
  ["etc/luxd/main.lua"] = 'include "sites/*.lua"\ninclude "more.lua"\n',
  ["etc/luxd/sites/x.lua"] = 'vhost "x.example" { }\ninclude "../inner/y.lua"\n',
  ["etc/luxd/inner/y.lua"] = 'vhost "y.example" { }\n',
  ["etc/luxd/more.lua"] = 'vhost "more.example" { }\n',
}, "nested includes, each relative to its own file", "etc/luxd/main.lua")
if d then
  same({ d.vhosts[1].name, d.vhosts[2].name, d.vhosts[3].name },
       { "x.example", "y.example", "more.example" }, "every level found")
  same(d.warnings, {}, "no warnings")
end

load_err({
  ["conf/luxd.lua"] = 'include "conf.d/*.lua"\n',
  ["conf/conf.d/x.lua"] = '\n\nvhost "x.example" {\n  root = "x",\n  rooot = "y",\n}\n',
}, 'conf/conf.d/x.lua:5: vhost "x.example": unknown key "rooot" (did you mean "root"?)', "error in an included file")
load_err({
  ["conf/luxd.lua"] = 'vhost "x.example" { }\ninclude "conf.d/*.lua"\n',
  ["conf/conf.d/x.lua"] = '-- x\nvhost "X.example" { }\n',
}, 'conf/conf.d/x.lua:2: vhost "x.example": name "x.example" is already used by vhost "x.example" (conf/luxd.lua:1)',
   "duplicate across files")
load_err({
  ["conf/luxd.lua"] = 'include "conf.d/*.lua"\n',
  ["conf/conf.d/x.lua"] = 'vhost "x.example" {\n  root = = 1,\n}\n',
}, "conf/conf.d/x.lua:2: unexpected symbol near '='", "syntax error in an included file")
load_err({
  ["conf/luxd.lua"] = 'include "conf.d/*.lua"\n',
  ["conf/conf.d/x.lua"] = 'local t\n\nlocal y = t.x\n',
}, "conf/conf.d/x.lua:3: attempt to index local 't' (a nil value)", "runtime error in an included file")
do
  local good, err = try_load({ ["conf/luxd.lua"] = '\ninclude "conf.d/x.lua"\n', ["conf.d/x.lua"] = "" })
  is(not good and err, 'conf/luxd.lua:2: include "conf.d/x.lua": no such file (' .. prefix .. '/conf/conf.d/x.lua)',
     "missing literal include: an error naming the path looked for")
end
load_err({
  ["conf/luxd.lua"] = 'include "conf.d/*.lua"\n',
  ["conf/conf.d/a.lua"] = 'include "b.lua"\n',
  ["conf/conf.d/b.lua"] = '\ninclude "a.lua"\n',
}, 'conf/conf.d/b.lua:2: include "a.lua": "conf/conf.d/a.lua" is already being run (an include cycle)', "include cycle")
load_err({
  ["conf/luxd.lua"] = 'include(42)\n',
}, 'conf/luxd.lua:1: include needs a file name or pattern: include "conf.d/*.lua", got number', "include a number")
d = load_ok({
  ["conf/luxd.lua"] = 'include "conf.d/one.lua"\n',
  ["conf/conf.d/one.lua"] = 'vhost "one.example" { root = "one" }\n',
}, "include a literal file")
if d then is(d.vhosts[1]._file, "conf/conf.d/one.lua", "literal include: file name relative to the prefix") end

-- An absolute pattern: file names are shown absolute, even long ones that Lua
-- itself would shorten to ".../tail".
do
  ndir = ndir + 1
  prefix = fmt("%s/p%d", base, ndir)
  local deep = "conf.d/" .. string.rep("very-long-directory-name/", 4)
  write(deep .. "x.lua", '\nlocal t = nil\nlocal y = t.x\n')
  write("conf/luxd.lua", 'include "' .. prefix .. "/" .. deep .. '*.lua"\n')
  local good2, err2 = pcall(config.load, "conf/luxd.lua", { prefix = prefix, glob = glob, where = where })
  is(not good2 and err2, prefix .. "/" .. deep .. "x.lua:3: attempt to index local 't' (a nil value)",
     "long absolute include name in a runtime error")
  write(deep .. "x.lua", '\n\nlocal y = = 1\n')
  good2, err2 = pcall(config.load, "conf/luxd.lua", { prefix = prefix, glob = glob, where = where })
  is(not good2 and err2, prefix .. "/" .. deep .. "x.lua:3: unexpected symbol near '='",
     "long absolute include name in a syntax error")
  write(deep .. "x.lua", '\n\nvhost "a.example" { rooot = 1 }\n')
  good2, err2 = pcall(config.load, "conf/luxd.lua", { prefix = prefix, glob = glob, where = where })
  is(not good2 and err2, prefix .. "/" .. deep .. 'x.lua:3: vhost "a.example": unknown key "rooot" (did you mean "root"?)',
     "long absolute include name in a DSL error")
end

---------------------------------------------------------------------------
print("# generated vhosts")

d = load_ok([[
local sites = {
  { name = "a.example", dir = "a" },
  { name = "b.example", dir = "b", gzip = true },
}
local function site(s)
  vhost(s.name) {
    root = "sites/" .. s.dir,
    gzip_static = s.gzip or false,
  }
end
for _, s in ipairs(sites) do site(s) end
for i = 1, 500 do
  vhost("host" .. i .. ".example") { root = "x/" .. i, access = { deny { prefix = "/p" .. i .. "/" } } }
end
]], "vhosts generated in a loop")
if d then
  is(#d.vhosts, 502, "502 vhosts")
  is(d.vhosts[2].gzip_static, true, "generated values")
  is(d.vhosts[1]._line, 6, "line of a vhost made in a helper")
  is(d.vhosts[502].access[1].prefix, "/p500/", "generated rule")
end
load_err([[
local sites = { "a.example", "b.example", "a.example" }
for _, s in ipairs(sites) do
  vhost(s) {
    root = "www",
  }
end
]], 'conf/luxd.lua:3: vhost "a.example": name "a.example" is already used by vhost "a.example" (conf/luxd.lua:3)',
   "duplicate from a loop")
load_err([[
for _, s in ipairs({ "a.example" }) do
  vhost(s) {
    root = "www",
    gzip_static = "yes",
  }
end
]], 'conf/luxd.lua:4: vhost "a.example": "gzip_static" must be true or false, got string', "wrong type in a loop")

load_err([[
local t = {
  rooot = "www",
}

vhost "a.example" (t)
]], 'conf/luxd.lua:5: vhost "a.example": unknown key "rooot" (did you mean "root"?)',
   "key not written after the block: the block's line")

---------------------------------------------------------------------------
print("# more accepted forms")

d = load_ok([[
_G.shared = "www"
local v = require("luxd.validate")
vhost "a.example" {
  root = shared,
  index = {},
  aliases = {},
  access = {
    allow { from = { "::1", "2001:db8::/32", "192.168.0.0/16" }, method = { "GET", "HEAD" } },
    deny { suffix = ".php", regex = "^/x", prefix = "/y", status = 451 },
  },
  redirect = { { "^/a$", "/b", status = 308 }, { "^/c$", "/d", status = 303 } },
  location "/x/" { default_type = nil, etag = false, index = { "a.html", "b.html" } },
}
]], "more accepted forms")
if d then
  local v = d.vhosts[1]
  is(v.root, prefix .. "/www", "_G is the config's environment; require works")
  same(v.index, {}, "empty index list")
  same(v.access[1].method, { "GET", "HEAD" }, "method list")
  same(v.access[2], { action = "deny", suffix = { ".php" }, regex = "^/x", prefix = "/y", status = 451,
                      _file = "conf/luxd.lua", _line = 9 }, "rule with several conditions")
  is(v.redirect[1].status, 308, "redirect 308")
  same(v.locations[1], { prefix = "/x/", etag = false, index = { "a.html", "b.html" },
                         _file = "conf/luxd.lua", _line = 12 }, "location with false values")
end

load_err([[
vhost "a.example" {
  location "/x/" {
    root = "x",
    etag = "no",
  },
}
]], 'conf/luxd.lua:4: vhost "a.example": location "/x/": "etag" must be true or false, got string',
   "wrong type in a location")
load_err([[
vhost "a.example" {
  default = "yes",
}
]], 'conf/luxd.lua:2: vhost "a.example": "default" must be true or false, got string', "default not a boolean")
load_err([[
vhost "a.example" {
  aliases = "b.example",
  location "/app/" { proxy = 5 },
}
]], 'conf/luxd.lua:3: vhost "a.example": location "/app/": "proxy" must be the name of an upstream ' ..
    '("app") or false, got 5', "proxy = 5 refused")

-- Two loads are independent.
local d1 = load_ok('vhost "a.example" { }\n', "first load")
local d2 = load_ok('vhost "a.example" { }\n', "second load, same names")
ok(d1 and d2 and d1.vhosts[1] ~= d2.vhosts[1], "separate descriptions")

---------------------------------------------------------------------------
print("# shipped configs")

-- The server hands configs luxd.shared (C, process-wide) and luxd.cidr
-- (address sets built at load); stand-ins here, since examples may capture
-- them while they load.
local shared_stub = {}
for _, k in ipairs({ "get", "set", "incr", "ttl", "delete" }) do shared_stub[k] = function() end end
local function cidr_stub(list)
  assert(type(list) == "table", "luxd.cidr takes a table of prefixes")
  return { contains = function() return false end }
end
local repo_host = { prefix = io.popen("cd '" .. root .. "' && pwd"):read("*l"), glob = glob, where = where,
                    luxd = { shared = shared_stub, cidr = cidr_stub } }
local shipped = glob(repo_host.prefix .. "/conf/luxd.lua " .. repo_host.prefix .. "/conf/examples/*.lua")
for i, f in ipairs(shipped) do shipped[i] = f:sub(#repo_host.prefix + 2) end
ok(#shipped >= 5, "conf/luxd.lua and the examples exist", #shipped .. " files")
for _, f in ipairs(shipped) do
  local good3, res = pcall(config.load, f, repo_host)
  ok(good3, f .. " loads", not good3 and res or nil)
end
do
  local good3, res = pcall(config.load, "conf/luxd.lua", repo_host)
  if good3 then
    local v = res.vhosts[1]
    is(v and v.name, "localhost", "default config: vhost localhost")
    is(v and v.root, repo_host.prefix .. "/www", "default config: root www")
    is(v and v.default, true, "default config: localhost is the default vhost")
    same(res.server.listen, { { host = "127.0.0.1", port = 8080, _file = "conf/luxd.lua",
                                _line = res.server.listen[1]._line } }, "default config: listen")
  end
end

-- The host name check against its definition written plainly (labels of
-- [a-z0-9_-], 1 to 63 bytes, no "-" at either end, 253 bytes at most), on
-- random strings over the bytes that matter, near both length limits.
do
  local V = require("luxd.validate")
  local function reference(s)
    if #s == 0 or #s > 253 then return false end
    for label in (s .. "."):gmatch("([^.]*)%.") do
      if #label == 0 or #label > 63 then return false end
      if not label:match("^[a-z0-9_][a-z0-9_%-]*$") or label:sub(-1) == "-" then return false end
    end
    return true
  end
  local alpha = { "a", "b", "-", ".", "_", "0", "Z", " ", "\195\169", "*", ":", "\0" }
  local seed = 11
  local function rnd(n) seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n + 1 end
  local differ, first = 0, nil
  for _ = 1, 100000 do
    local t = {}
    for k = 1, rnd(13) - 1 do t[k] = alpha[rnd(#alpha)] end
    local s = table.concat(t)
    if rnd(40) == 1 then s = ("a"):rep(60 + rnd(6)) .. "." .. s end
    if rnd(40) == 1 then s = ("ab."):rep(80 + rnd(6)) .. s end
    if reference(s) ~= V.is_hostname(s) then differ = differ + 1; first = first or s end
  end
  is(differ, 0, "is_hostname agrees with its definition on 100,000 random names" ..
     (first and (": first " .. show(first)) or ""))
  is(V.is_hostname(("a"):rep(63) .. ".b"), true, "a 63-byte label is a host name")
  is(V.is_hostname(("a"):rep(64) .. ".b"), false, "a 64-byte label is not")
  local n253 = ("abc."):rep(63) .. "a"
  is(#n253, 253, "a 253-byte name")
  is(V.is_hostname(n253), true, "253 bytes is a host name")
  is(V.is_hostname(n253 .. "b"), false, "254 bytes is not")
end

os.execute("rm -rf '" .. base .. "'")
print("1.." .. ntest)
if nfail > 0 then
  print(fmt("# %d of %d failed", nfail, ntest))
  os.exit(1)
end
