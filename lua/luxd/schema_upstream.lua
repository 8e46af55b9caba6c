-- luxd.schema_upstream: the keys of upstream "name" { }, its defaults, and
-- its servers (the array elements, as addresses).
--
-- A part of luxd.schema, which is what callers require: it takes from the
-- table S here what it gives them, and checks the block with it.

local V = require("luxd.validate")
local T = V.T
local server = require("luxd.schema_server")

local S = {}
local fmt = string.format

local int, seconds = server.int, server.seconds

---------------------------------------------------------------------------
-- upstream "name" { }

S.UPSTREAM_ORDER = {
  "keepalive", "keepalive_timeout", "connect_timeout", "read_timeout", "send_timeout",
  "max_fails", "fail_timeout", "max_header_bytes", "tls",
}

-- What an upstream gets for a key it does not set (seconds for timeouts).
S.UPSTREAM_DEFAULTS = {
  keepalive = 32,            -- idle connections kept per worker and server
  keepalive_timeout = 60,
  connect_timeout = 5,
  read_timeout = 60,
  send_timeout = 60,
  max_fails = 1,             -- failures within fail_timeout that mark a server down
  fail_timeout = 10,
  max_header_bytes = 32768,  -- a response's status line and headers
}

-- upstream { tls = true | { verify, ca, name } }: its servers are spoken to
-- over TLS, their certificates checked against ca (the system's CAs when
-- not given) for name (each server's host as written when not given).
-- src/net/tlsctx.c reads ca at every load.
local UPSTREAM_TLS_SCHEMA = {
  keys = { verify = T.boolean(), ca = T.path(), name = T.string({ max = 253, check = function(ctx, key, v, what)
    if not V.is_hostname(v:lower()) and not V.is_ipv4(v) and not V.is_ipv6(v) then
      V.fail(ctx, key, fmt("%s must be a host name or an IP address, got %s", what, V.q(v)))
    end
  end }) },
  order = { "verify", "ca", "name" },
}

local function check_upstream_tls(ctx, key, v, what)
  if v == false then return nil end
  if v == true then v = {} end
  if type(v) ~= "table" then
    V.fail(ctx, key, fmt('%s must be true or a table such as { ca = "/etc/luxd/backend-ca.pem", ' ..
                         'name = "app.internal" }, got %s', what, V.show(v)))
  end
  local c = ctx:child("tls", ctx:key_line(key))
  local got = V.check_block(c, v, UPSTREAM_TLS_SCHEMA)
  if got.verify == false and (got.ca or got.name) then
    V.fail(c, got.ca and "ca" or "name", "verify = false checks no certificate: ca and name " ..
                                        "would not be used")
  end
  return { verify = got.verify ~= false, ca = got.ca, name = got.name, _file = c.file, _line = c:start() }
end

local UPSTREAM_KEYS = {
  tls = check_upstream_tls,
  keepalive = int(0, 10000),
  keepalive_timeout = seconds(),
  connect_timeout = seconds(),
  read_timeout = seconds(),
  send_timeout = seconds(),
  max_fails = int(0, 1000000),
  fail_timeout = seconds(),
  max_header_bytes = int(1024, 1048576),
}

local SERVER_EXAMPLE = '{ "127.0.0.1:8081", weight = 2 }'

-- A server given as a table: the address, then its own keys.
local SERVER_ITEM_SCHEMA = {
  keys = { weight = int(1, 100) }, order = { "weight" },
  items = function(ic, t, idx, o)
    if #idx ~= 1 or idx[1] ~= 1 then
      V.fail(ic, nil, fmt("a server given as a table holds one address: %s, got %d items",
                          SERVER_EXAMPLE, #idx))
    end
    o[1] = t[1]
  end,
}

-- Parses the address of a server: "host:port", "[v6]:port" or
-- "unix:/path" (a relative path is taken from the prefix, as root is).
local function server_address(ctx, v, line)
  if v:sub(1, 5) == "unix:" then
    local path = v:sub(6)
    if path == "" then
      V.fail(ctx, nil, fmt('server %s needs the socket\'s path: "unix:/run/app.sock"', V.q(v)), line)
    end
    if path:sub(-1) == "/" then
      V.fail(ctx, nil, fmt("server %s names a directory, not a socket", V.q(v)), line)
    end
    return { unix = V.abspath(ctx.st.prefix, path) }
  end
  local host, port = V.parse_server(v)
  if not host then
    V.fail(ctx, nil, fmt("server %s %s", V.q(v), port), line)
  end
  return { host = host, port = port }
end

local function upstream_items(ctx, t, idx, out)
  local servers, seen = {}, {}
  local lines = ctx.st.lines[ctx.file]
  local from = ctx:start()
  for _, i in ipairs(idx) do
    local v, weight = t[i], 1
    local line
    if type(v) == "table" then
      -- Its line: that of its address, when the address is written there.
      local addr = type(v[1]) == "string" and v[1]
      line = addr and V.item_line(lines, from, addr)
      local got = V.check_block(ctx:child(fmt("server %d", i), line or from), v, SERVER_ITEM_SCHEMA)
      if got[1] == nil then
        V.fail(ctx, nil, fmt("server %d has no address: %s", i, SERVER_EXAMPLE), line)
      end
      v, weight = got[1], got.weight or 1
    end
    if type(v) ~= "string" then
      V.fail(ctx, nil, fmt('server %d must be a string "host:port" or %s, got %s',
                           i, SERVER_EXAMPLE, type(v)), line)
    end
    if v:find("%z") then V.fail(ctx, nil, fmt("server %d must not contain a NUL byte", i), line) end
    line = line or V.item_line(lines, from, v)
    if line then from = line end
    local s = server_address(ctx, v, line)
    local id = s.unix and ("unix|" .. s.unix) or (s.host:lower() .. "|" .. s.port)
    if seen[id] then
      V.fail(ctx, nil, fmt("server %s is given twice%s", V.q(v),
                           seen[id] ~= v and fmt(" (as %s)", V.q(seen[id])) or ""), line)
    end
    seen[id] = v
    s.text, s.weight, s._file, s._line = v, weight, ctx.file, line or ctx:start()
    servers[#servers + 1] = s
  end
  out.servers = servers
end

-- What luxd.schema takes for the block and S.KEYS.
S.UPSTREAM_KEYS, S.UPSTREAM_TLS_SCHEMA, S.SERVER_ITEM_SCHEMA =
  UPSTREAM_KEYS, UPSTREAM_TLS_SCHEMA, SERVER_ITEM_SCHEMA
S.SERVER_EXAMPLE, S.upstream_items = SERVER_EXAMPLE, upstream_items

return S
