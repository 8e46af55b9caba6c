-- luxd.schema: the keys of each config block, their types, their defaults,
-- and how each block is turned into the plain description the C side reads.
--
-- Every function here takes a context (see luxd.validate) and raises
-- failures; luxd.config turns a failure into "FILE:LINE: message".
--
-- The keys are in parts, by block: luxd.schema_server (server { }, with
-- the shorthands the parts share), luxd.schema_upstream (upstream "name"
-- { }) and luxd.schema_site (what a vhost and its locations set). This
-- module checks the blocks with them, says where a misplaced key belongs,
-- and is the one callers require.

local V = require("luxd.validate")
local server = require("luxd.schema_server")
local upstream = require("luxd.schema_upstream")
local site = require("luxd.schema_site")

local S = {}
local fmt = string.format

-- The parts' names and defaults that callers read (luxd.config, and the
-- tests that walk the schema).
S.SERVER_ORDER, S.server_defaults, S.LOG_VARIABLES =
  server.SERVER_ORDER, server.server_defaults, server.LOG_VARIABLES
S.UPSTREAM_ORDER, S.UPSTREAM_DEFAULTS = upstream.UPSTREAM_ORDER, upstream.UPSTREAM_DEFAULTS
S.RULE_ORDER, S.VHOST_ORDER, S.TRY_FILES_MAX, S.VHOST_DEFAULTS =
  site.RULE_ORDER, site.VHOST_ORDER, site.TRY_FILES_MAX, site.VHOST_DEFAULTS

local SERVER_KEYS, UPSTREAM_KEYS = server.SERVER_KEYS, upstream.UPSTREAM_KEYS
local SERVER_EXAMPLE, upstream_items = upstream.SERVER_EXAMPLE, upstream.upstream_items
local VHOST_KEYS, LOCATION_KEYS = site.VHOST_KEYS, site.LOCATION_KEYS
local LOCATION_ORDER = site.LOCATION_ORDER
local check_proxy_fallback = site.check_proxy_fallback

---------------------------------------------------------------------------
-- vhost "name" { } and its location "/prefix/" { } blocks

-- "(it belongs in ...)" for a key that is right in another block.
local function set_of(list) local s = {} for _, k in ipairs(list) do s[k] = true end return s end
local IN_SERVER, IN_VHOST = set_of(S.SERVER_ORDER), set_of(S.VHOST_ORDER)
local IN_RULE, IN_UPSTREAM = set_of(S.RULE_ORDER), set_of(S.UPSTREAM_ORDER)

local function belongs(k, here)
  if here ~= "server" and here ~= "upstream" and IN_SERVER[k] and IN_UPSTREAM[k] then
    return ' (it belongs in server { ... } or upstream "name" { ... })'
  end
  if here ~= "server" and IN_SERVER[k] then return " (it belongs in server { ... })" end
  if here ~= "vhost" and IN_VHOST[k] then return ' (it belongs in vhost "name" { ... })' end
  if here ~= "rule" and IN_RULE[k] then
    return " (it belongs in an access rule: access = { deny { " .. k .. " = ... } })"
  end
  if here ~= "upstream" and IN_UPSTREAM[k] then return ' (it belongs in upstream "name" { ... })' end
  if k == "name" then return ' (a name is given before the table: vhost "example.com" { ... })' end
  if k == "location" or k == "locations" then
    return ' (write location "/prefix/" { ... } as an element of the vhost table, without a key)'
  end
  return nil
end

-- A location object or a rule object as the value of some key is a common
-- slip; say what to write instead.
local function misplaced(ctx, k, v)
  local info = ctx.st.objs[v]
  if not info then return nil end
  if info.kind == "location" then
    info.used = true
    return fmt("location %s must be an element of the vhost table, not the value of key %s",
               V.q(info.prefix), V.q(k))
  end
  info.used = true
  return fmt("%s { ... } must be inside access = { ... }, not the value of key %s",
             info.action, V.q(k))
end

local LOCATION_SCHEMA = {
  keys = LOCATION_KEYS, order = LOCATION_ORDER,
  hint = function(k)
    if k == "aliases" or k == "default" then return " (it is only valid on the vhost itself)" end
    if k == "rewrite" or k == "redirect" then
      return " (rewrite and redirect run before a location is chosen: put them on the vhost)"
    end
    if k == "access_log" then
      return " (a request is logged where its vhost or the server says: put it on the vhost)"
    end
    if k == "tls" then
      return " (a certificate is chosen when a connection starts, before any request picks a " ..
             "location: put tls on the vhost)"
    end
    if k == "real_ip" then
      return " (the client's address is decided once per request, before a location is " ..
             "chosen: put it on the vhost or the server)"
    end
    return belongs(k, "vhost")
  end,
  unknown = misplaced,
}

local LOC = {}   -- private key for the locations found among the array elements

-- _error_page_lines = { [404] = line, ... }: where each error_pages entry
-- is written (searched from the error_pages key, so a location's own table
-- written earlier in the vhost is not taken for the vhost's), for the
-- warning about a page its location's access rules or policy guard
-- (src/config/load_site.c ld_check_error_pages).
local function error_page_lines(ctx, got)
  if not got.error_pages or next(got.error_pages) == nil then return end
  local lines, from = {}, ctx:key_line("error_pages")
  for status in pairs(got.error_pages) do
    lines[status] = V.key_line(ctx.st.lines[ctx.file], from, status)
  end
  got._error_page_lines = lines
end

local function location(ctx, info, seen)
  local c = ctx:child("location " .. V.q(info.prefix), info.line, info.file)
  if info.prefix:sub(1, 1) ~= "/" then
    V.fail(c, nil, 'the prefix must start with "/"')
  end
  -- luxd matches and binds a location by its prefix as a C string, which
  -- ends at the first NUL: "/a\0x" would become "/a", another location's
  -- prefix or a wider one than written, and take its policy along.
  if info.prefix:find("%z") then
    V.fail(c, nil, "the prefix must not contain a NUL byte")
  end
  local prev = seen[info.prefix]
  if prev then
    V.fail(c, nil, fmt("the prefix is already used by another location of this vhost (%s:%d)",
                       prev.file, prev.line))
  end
  seen[info.prefix] = info
  local loc = V.check_block(c, info.t, LOCATION_SCHEMA)
  check_proxy_fallback(c, loc)
  loc.prefix, loc._file, loc._line = info.prefix, info.file, info.line
  if loc.root then loc._root_line = c:key_line("root") end
  error_page_lines(c, loc)
  return loc
end

local function vhost_items(ctx, t, idx, out)
  local locs, seen = {}, {}
  for _, i in ipairs(idx) do
    local v = t[i]
    local info = ctx.st.objs[v]
    if info and info.kind == "location" then
      info.used = true
      locs[#locs + 1] = location(ctx, info, seen)
    elseif info then
      info.used = true
      V.fail(ctx, nil, fmt("%s { ... } must be inside access = { ... }", info.action), info.line)
    elseif ctx.st.closures[v] then
      local p = ctx.st.closures[v]
      V.fail(ctx:child(p.kind .. " " .. V.q(p.name), p.line, p.file), nil,
             fmt("missing { ... } after the prefix: %s %s { ... }", p.kind, V.q(p.name)))
    else
      V.fail(ctx, nil, fmt('unexpected array element %d (%s); only location "/prefix/" { ... } ' ..
                           'goes without a key', i, V.show(v)))
    end
  end
  out[LOC] = locs
end

-- Checks the table of vhost "name" { }. Returns the keys the user set,
-- and the locations.
local VHOST_SCHEMA = {
  slots = 16, -- a few keys, and what S.vhost and St:add_vhost add
  keys = VHOST_KEYS, order = S.VHOST_ORDER, items = vhost_items,
  hint = function(k) return belongs(k, "vhost") end,
  unknown = misplaced,
}

-- Every block's keys and their checkers, for tools and tests that walk the
-- schema (t/61-schema-keys.t proves each key works or is refused, and
-- t/110-reference.t that doc/luxd.lua.5 documents each one).
-- (upstream_server: one server of an upstream given as a table.)
S.KEYS = {
  server = SERVER_KEYS, access_log = server.ACCESS_LOG_SCHEMA.keys, upstream = UPSTREAM_KEYS,
  upstream_server = upstream.SERVER_ITEM_SCHEMA.keys,
  rule = site.RULE_KEYS, vhost = VHOST_KEYS, location = LOCATION_KEYS,
  redirect = site.REDIRECT_KEYS,
  listen = server.LISTEN_ITEM_SCHEMA.keys, real_ip = server.REAL_IP_SCHEMA.keys,
  tls = site.TLS_KEYS,
  server_tls = server.SERVER_TLS_SCHEMA.keys, upstream_tls = upstream.UPSTREAM_TLS_SCHEMA.keys,
}

function S.vhost(ctx, t)
  local got = V.check_block(ctx, t, VHOST_SCHEMA)
  check_proxy_fallback(ctx, got)
  if got.real_ip and not got.real_ip.header then
    V.fail(ctx, "real_ip", 'real_ip in a vhost needs header = "X-Forwarded-For" (or another ' ..
                           "name): the PROXY protocol is the listener's, trusted by server " ..
                           "{ real_ip }")
  end
  local locs = got[LOC] or {}
  got[LOC] = nil
  -- Where these are written, for what only the running server can check
  -- (a root it cannot read, a log it cannot open).
  if got.root then got._root_line = ctx:key_line("root") end
  if got.access_log ~= nil then got._access_log_line = ctx:key_line("access_log") end
  error_page_lines(ctx, got)
  return got, locs
end

---------------------------------------------------------------------------
-- server, upstream, mime

function S.server(ctx, t)
  local out = S.server_defaults(ctx.st)
  local got = V.check_block(ctx, t, {
    keys = SERVER_KEYS, order = S.SERVER_ORDER,
    hint = function(k) return belongs(k, "server") end,
  })
  for k, v in pairs(got) do out[k] = v end
  -- A PROXY protocol header is taken from the addresses real_ip trusts; a
  -- listener that expects one with nobody trusted would ignore every one.
  for _, l in ipairs(out.listen) do
    if l.proxy_protocol and not out.real_ip then
      V.fail(ctx, "listen", 'proxy_protocol = true needs real_ip = { from = { ... } } in ' ..
                            "server { ... }: the balancers whose PROXY header is believed")
    end
  end
  out._file, out._line = ctx.file, ctx.line
  -- Where each key is written, for errors only the running server can see
  -- (a log file that cannot be opened): "file:line" of that key.
  out._lines = {}
  for k in pairs(got) do out._lines[k] = ctx:key_line(k) end
  return out
end

function S.upstream(ctx, name, t)
  local got = V.check_block(ctx, t, {
    keys = UPSTREAM_KEYS, order = S.UPSTREAM_ORDER, items = upstream_items,
    hint = function(k)
      if k == "servers" or k == "server" then
        return ' (list the servers without a key: upstream "name" { "127.0.0.1:8081", ... })'
      end
      if k == "weight" then
        return " (a weight belongs to one server: upstream \"name\" { " .. SERVER_EXAMPLE .. " })"
      end
      return belongs(k, "upstream")
    end,
  })
  if not got.servers then
    V.fail(ctx, nil, 'needs at least one server: upstream "name" { "127.0.0.1:8081" }')
  end
  if got.tls then
    for _, sv in ipairs(got.servers) do
      if sv.unix then
        V.fail(ctx, "tls", fmt("tls to a unix: socket (server %s) is not supported: a local " ..
                               "socket needs no encryption", V.q(sv.text)))
      end
    end
  end
  local u = { name = name, servers = got.servers, _file = ctx.file, _line = ctx.line }
  for _, k in ipairs(S.UPSTREAM_ORDER) do
    if got[k] ~= nil then u[k] = got[k] else u[k] = S.UPSTREAM_DEFAULTS[k] end
  end
  return u
end

-- Adds the entries of mime { } to `into`.
function S.mime(ctx, t, into)
  local fails, add = {}, {}
  for ext, typ in pairs(t) do
    V.try(fails, function()
      if type(ext) ~= "string" then
        V.fail(ctx, ext, fmt('key %s is not an extension; write { [".ext"] = "type/subtype" }',
                             V.show(ext)))
      end
      if ext:sub(1, 1) ~= "." then
        V.fail(ctx, ext, fmt('extension %s must start with "." (did you mean %s?)',
                             V.q(ext), V.q("." .. ext)))
      end
      if #ext < 2 or ext:find("[/\\%s%c]") then
        V.fail(ctx, ext, fmt("extension %s is not a file name extension", V.q(ext)))
      end
      if ext:find(".", 2, true) then
        -- Lookups use the part after the last dot, so ".tar.gz" could never match.
        V.fail(ctx, ext, fmt('extension %s must be a single extension like %s',
                             V.q(ext), V.q(ext:match("%.[^.]*$"))))
      end
      if type(typ) ~= "string" then
        V.fail(ctx, ext, fmt("type of %s must be a string, got %s", V.q(ext), type(typ)))
      end
      if not typ:match("^[%w!#$&^_.+%-]+/[%w!#$&^_.+%-]+") or typ:find("[%c]") then
        V.fail(ctx, ext, fmt('type of %s must look like "type/subtype", got %s', V.q(ext), V.q(typ)))
      end
      V.check_len(ctx, ext, typ, fmt("type of %s", V.q(ext)), V.MAX_VALUE)
      add[ext:lower()] = typ
    end)
  end
  V.raise_first(fails)
  for k, v in pairs(add) do into[k] = v end
end

return S
