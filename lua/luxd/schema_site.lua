-- luxd.schema_site: a site's keys, those a vhost and its locations set
-- (root, headers, try_files, proxy, tls, ...), the access rules and the
-- rewrite and redirect lists among them; and a vhost's defaults.
--
-- A part of luxd.schema, which is what callers require: it takes from the
-- table S here what it gives them, and checks the vhost and location
-- blocks with it.

local V = require("luxd.validate")
local T = V.T
local server = require("luxd.schema_server")

local S = {}
local fmt, sort, find = string.format, table.sort, string.find

local STR, BOOL, int = server.STR, server.BOOL, server.int
-- What a vhost shares with the server: real_ip and access_log are keys of
-- both, and access rules take addresses as real_ip's from does.
local check_from, check_real_ip = server.check_from, server.check_real_ip
local check_access_log, SERVER_TLS_SCHEMA = server.check_access_log, server.SERVER_TLS_SCHEMA

---------------------------------------------------------------------------
-- Access rules: allow { } and deny { }

S.RULE_ORDER = { "prefix", "suffix", "regex", "method", "from", "all", "status" }
local CONDITIONS = { "prefix", "suffix", "regex", "method", "from" }

local function check_prefix(ctx, key, v, what)
  if v:sub(1, 1) ~= "/" then
    V.fail(ctx, key, fmt('%s must start with "/", got %s', what, V.q(v)))
  end
end

local function check_method(ctx, key, v, what)
  if type(v) ~= "string" then V.fail(ctx, key, fmt("%s must be a string, got %s", what, type(v))) end
  if not V.is_token(v) or v:find("%l") then
    local up = v:upper()
    local dym = V.is_token(up) and fmt(" (did you mean %s?)", V.q(up)) or ""
    V.fail(ctx, key, fmt('%s must be an upper-case method name like "GET", got %s%s',
                         what, V.q(v), dym))
  end
  return v
end

local function check_all(ctx, key, v, what)
  BOOL(ctx, key, v, what)
  return v or nil   -- all = false is the same as leaving it out
end

local RULE_KEYS = {
  prefix = T.string({ check = check_prefix }),
  suffix = T.array(T.string(), { single = true, nonempty = true }),
  regex = T.string(),
  method = T.array(check_method, { single = true, nonempty = true }),
  from = T.array(check_from, { single = true, nonempty = true }),
  all = check_all,
  status = int(100, 599),
}

local ALLOW_KEYS = {}
for k, c in pairs(RULE_KEYS) do if k ~= "status" then ALLOW_KEYS[k] = c end end

-- slots: a condition or two, and what rule() adds.
local DENY_SCHEMA = { keys = RULE_KEYS, order = S.RULE_ORDER, slots = 8 }
local ALLOW_SCHEMA = {
  slots = 8,
  keys = ALLOW_KEYS, order = S.RULE_ORDER,
  hint = function(k)
    if k == "status" then return " (only deny { ... } takes a status)" end
  end,
}

-- Normalizes one rule object (made by allow/deny) for access rule number i.
local function rule(ctx, info, i)
  local c = ctx:child("access rule", info.line, info.file, i)
  local deny = info.action == "deny"
  local got = V.check_block(c, info.t, deny and DENY_SCHEMA or ALLOW_SCHEMA)
  local conds = 0
  for _, k in ipairs(CONDITIONS) do if got[k] ~= nil then conds = conds + 1 end end
  if got.all and conds > 0 then
    V.fail(c, "all", '"all = true" matches every request and cannot be combined with ' ..
                     'prefix, suffix, regex, method or from')
  end
  if not got.all and conds == 0 then
    V.fail(c, nil, fmt("%s { } has no condition (prefix, suffix, regex, method or from); " ..
                       "write %s { all = true } to match every request", info.action, info.action))
  end
  -- got holds only RULE_KEYS: the rule is got and where it was written.
  got.action, got._file, got._line = info.action, info.file, info.line
  got.status = deny and (got.status or 403) or nil
  return got
end

local function check_access(ctx, key, v, what)
  local objs = ctx.st.objs
  if type(v) ~= "table" then
    V.fail(ctx, key, fmt("%s must be a list of allow { ... } / deny { ... } rules, got %s",
                         what, type(v)))
  end
  local info = objs[v]
  if info and info.kind == "rule" then
    V.fail(ctx, key, fmt("%s must be a list of rules: access = { %s { ... } }", what, info.action))
  end
  local n, badk = V.array_len(v)
  if not n then
    V.fail(ctx, key, fmt("%s must be a list of allow { ... } / deny { ... } rules, but has key %s",
                         what, V.show(badk)))
  end
  local out = {}
  for i = 1, n do
    local r = objs[v[i]]
    if not r or r.kind ~= "rule" then
      V.fail(ctx, key, fmt("access rule %d must be allow { ... } or deny { ... }, got %s",
                           i, r and r.kind or type(v[i])))
    end
    r.used = true
    out[i] = rule(ctx, r, i)
  end
  return out
end

---------------------------------------------------------------------------
-- rewrite = { { regex, target } }, redirect = { { regex, target, status = 301 } }

local REDIRECT_STATUS = { [301] = true, [302] = true, [303] = true, [307] = true, [308] = true }

local function check_redirect_status(ctx, key, v, what)
  if type(v) ~= "number" or not REDIRECT_STATUS[v] then
    V.fail(ctx, key, fmt("%s must be 301, 302, 303, 307 or 308, got %s", what, V.show(v)))
  end
  return v
end

-- The keys of one redirect entry (a rewrite entry has none).
local REDIRECT_KEYS = { status = check_redirect_status }

local function rewrites(is_redirect)
  local example = is_redirect and '{ "^/old$", "/new", status = 301 }' or '{ "^/old/(.*)$", "/new/$1" }'
  local schema = {
    keys = is_redirect and REDIRECT_KEYS or {},
    order = is_redirect and { "status" } or {},
    hint = (not is_redirect) and function(k)
      if k == "status" then return " (only a redirect has a status; a rewrite is internal)" end
    end or nil,
    items = function(ic, t, idx, o)
      if #idx ~= 2 or idx[1] ~= 1 or idx[2] ~= 2 then
        V.fail(ic, nil, fmt("expected %s, got %d item(s)", example, #idx))
      end
      o.regex = STR(ic, nil, t[1], "the regex")
      o.target = T.string({ max = V.MAX_PATH })(ic, nil, t[2], "the target")
    end,
  }
  return function(ctx, key, v, what)
    if type(v) ~= "table" then
      V.fail(ctx, key, fmt("%s must be a list of %s entries, got %s", what, example, type(v)))
    end
    local n, badk = V.array_len(v)
    if not n then
      V.fail(ctx, key, fmt("%s must be a list of %s entries, but has key %s", what, example,
                           V.show(badk)))
    end
    local out = {}
    local lines, from = ctx.st.lines[ctx.file], nil
    for i = 1, n do
      local e = v[i]
      local c = ctx:child_at_key(key, key, i)
      from = from or c:start()
      if type(e) ~= "table" then
        V.fail(c, nil, fmt("expected %s, got %s; write %s = { %s }", example, type(e), key, example))
      end
      local got = V.check_block(c, e, schema)
      if not got.regex then V.fail(c, nil, fmt("expected %s, got an empty table", example)) end
      -- Its own line (for -T and --explain): where its regex is written,
      -- searched from the rule before; the key's line when it is not found
      -- as written (a regex spelt with escapes).
      local line = V.item_line(lines, from, got.regex)
      if line then from = line end
      out[i] = { regex = got.regex, target = got.target, _file = c.file, _line = line or c:start() }
      if is_redirect then out[i].status = got.status or 302 end
    end
    return out
  end
end

---------------------------------------------------------------------------
-- vhost "name" { } and location "/prefix/" { }

S.VHOST_ORDER = {
  "aliases", "default", "root", "index", "try_files", "etag", "last_modified", "cache_control",
  "headers", "gzip_static", "dir_listing", "follow_symlinks", "access", "rewrite", "redirect",
  "fallback", "proxy", "proxy_host", "proxy_headers", "proxy_via",
  "proxy_underscores", "policy", "error_pages",
  "status", "test_handler", "real_ip", "access_log", "tls",
}

local function check_alias(ctx, key, v, what)
  STR(ctx, key, v, what)
  local n, why = V.vhost_name(v)
  if not n then V.fail(ctx, key, fmt("alias %s %s", V.q(v), why)) end
  return n
end

-- Headers that frame the message or manage the connection: the server
-- writes them from what it actually sends, and a configured one would make
-- clients read bodies and pipelined responses at the wrong place.
local FRAMING = {
  ["content-length"] = true, ["transfer-encoding"] = true, connection = true,
  ["keep-alive"] = true, ["proxy-connection"] = true, upgrade = true,
  trailer = true, te = true,
}

-- The names of a headers table, checked as HTTP tokens, in a stable
-- order (case-blind, then as written); list and seen start empty.
-- Names are checked in that order too, keys that are not strings last: in
-- table order, which LuaJIT seeds at random per run, a table with two bad
-- names was reported by either from one run to the next.
-- At module level: a closure made per call stops LuaJIT's compiler (FNEW
-- is not compiled).
local function by_lower_name(a, b)
  local sa, sb = type(a) == "string", type(b) == "string"
  if not (sa and sb) then
    if sa ~= sb then return sa end
    return V.show(a) < V.show(b)
  end
  local la, lb = a:lower(), b:lower()
  if la ~= lb then return la < lb end
  return a < b
end

local function header_names(ctx, key, v, what, example)
  if type(v) ~= "table" then
    V.fail(ctx, key, fmt('%s must be a table like %s, got %s', what, example, type(v)))
  end
  local names = {}
  for name in pairs(v) do names[#names + 1] = name end
  sort(names, by_lower_name)
  for _, name in ipairs(names) do
    if type(name) ~= "string" or not V.is_token(name) then
      V.fail(ctx, key, fmt('%s: %s is not a header name; write { ["X-Name"] = "value" }',
                           what, V.show(name)))
    end
    if #name > V.MAX_NAME then
      V.check_len(ctx, key, name, fmt("%s: the header name %s...", what, V.q(name:sub(1, 16))),
                  V.MAX_NAME)
    end
  end
  return names, {}, {}
end

local HEADER_VALUE = T.string({ line = true, empty = true, max = V.MAX_VALUE })

local function check_headers(ctx, key, v, what)
  local names, list, seen = header_names(ctx, key, v, what, '{ ["X-Frame-Options"] = "DENY" }')
  for _, name in ipairs(names) do
    local value = v[name]
    local lname = name:lower()
    if seen[lname] then
      V.fail(ctx, name, fmt("%s: header %s is given twice (as %s)", what, V.q(name), V.q(seen[lname])))
    end
    seen[lname] = name
    if FRAMING[lname] then
      V.fail(ctx, name, fmt("%s: %s is set by the server from what it sends, not by the config",
                            what, V.q(name)))
    end
    if type(value) == "number" then value = V.show(value) end
    -- The message's name for the value is only built for a message.
    if type(value) ~= "string" or #value > V.MAX_VALUE or find(value, "\0", 1, true) or
       find(value, "\r", 1, true) or find(value, "\n", 1, true) then
      HEADER_VALUE(ctx, name, value, fmt("%s[%s]", what, V.q(name)))
    end
    list[#list + 1] = { name, value }
  end
  return list
end

local function check_error_pages(ctx, key, v, what)
  if type(v) ~= "table" then
    V.fail(ctx, key, fmt('%s must be a table like { [404] = "/404.html" }, got %s', what, type(v)))
  end
  local out = {}
  for status, uri in pairs(v) do
    if type(status) ~= "number" or status % 1 ~= 0 or status < 400 or status > 599 then
      V.fail(ctx, key, fmt("%s: key %s is not a status 400..599", what, V.show(status)))
    end
    local w = fmt("%s[%d]", what, status)
    T.string({ max = V.MAX_PATH })(ctx, status, uri, w)
    if uri:sub(1, 1) ~= "/" then
      V.fail(ctx, status, fmt('%s must be a path in this vhost starting with "/", got %s', w, V.q(uri)))
    end
    -- The page is opened as it is written, not normalised as a request's
    -- path is: a ".." in it would climb out of the document root.
    if ("/" .. uri .. "/"):find("/%.%.?/") then
      V.fail(ctx, status, fmt('%s must not have "." or ".." segments, got %s', w, V.q(uri)))
    end
    out[status] = uri
  end
  return out
end

-- try_files = { "$uri", "$uri/", "/index.html" }: every entry but the last
-- is a path tried as a file (ending in "/": as a directory, served by its
-- index); the last is a path the request is sent to inside luxd (the
-- location chosen again) or "=CODE". src/handlers/static.c runs it; false
-- (in a location) turns off what the vhost set.
S.TRY_FILES_MAX = 16
local TRY_EXAMPLE = 'try_files = { "$uri", "$uri/", "/index.html" }'
local function check_try_files(ctx, key, v, what)
  if v == false then return false end
  if type(v) ~= "table" then
    V.fail(ctx, key, fmt("%s must be a list like %s, got %s", what, TRY_EXAMPLE, V.show(v)))
  end
  local n, badk = V.array_len(v)
  if not n then
    V.fail(ctx, key, fmt("%s must be a list like %s, but has key %s", what, TRY_EXAMPLE, V.show(badk)))
  end
  if n < 2 then
    V.fail(ctx, key, fmt("%s needs at least two entries, files to try and then a path or " ..
                         '"=404": %s', what, TRY_EXAMPLE))
  end
  if n > S.TRY_FILES_MAX then
    V.fail(ctx, key, fmt("%s has %d entries; at most %d are allowed", what, n, S.TRY_FILES_MAX))
  end
  local out = {}
  for i = 1, n do
    local e, w = v[i], fmt("%s[%d]", what, i)
    if type(e) ~= "string" then V.fail(ctx, key, fmt("%s must be a string, got %s", w, V.show(e))) end
    if e == "" then V.fail(ctx, key, w .. " must not be empty") end
    V.check_len(ctx, key, e, w, V.MAX_PATH)
    if e:find("[%z\1-\31\127]") then V.fail(ctx, key, w .. " must not contain a control character") end
    local last = i == n
    if last and e:sub(1, 1) == "=" then
      local code = tonumber(e:match("^=(%d%d%d)$"))
      if not code or code < 400 or code > 599 then
        V.fail(ctx, key, fmt('%s: %s must be "=" and a status 400..599, as "=404"', w, V.q(e)))
      end
    else
      local path, query = e, nil
      if last then path, query = e:match("^([^?]*)%??(.*)$") end
      if not last and e:find("?", 1, true) then
        V.fail(ctx, key, fmt("%s: %s: only the last entry may have a query (\"?\")", w, V.q(e)))
      end
      for name in (path .. "\0"):gmatch("%$([%w_]*)") do
        if name ~= "uri" then
          V.fail(ctx, key, fmt("%s: unknown variable %s in %s; try_files knows $uri%s",
                               w, V.q("$" .. name), V.q(e), last and ' (and $args after "?")' or ""))
        end
      end
      -- $uri is a decoded path, which a query could not carry as it is.
      for name in (query or ""):gmatch("%$([%w_]*)") do
        if name ~= "args" then
          V.fail(ctx, key, fmt("%s: variable %s in the query of %s; the query knows $args only",
                               w, V.q("$" .. name), V.q(e)))
        end
      end
      if path:sub(1, 1) ~= "/" and path:sub(1, 4) ~= "$uri" then
        V.fail(ctx, key, fmt('%s: %s must be a path starting with "/" or "$uri"%s', w, V.q(e),
                             last and ', or "=404"' or ""))
      end
      -- The entry is a path in the site as $uri is: "." and ".." segments
      -- written into it would climb out of the document root.
      local bare = path:gsub("%$uri", "/u")
      if ("/" .. bare .. "/"):find("/%.%.?/") then
        V.fail(ctx, key, fmt('%s: %s must not have "." or ".." segments', w, V.q(e)))
      end
    end
    out[i] = e
  end
  return out
end

-- proxy = "name" and fallback = "name" hand requests to an upstream; false
-- (in a location) turns off what the vhost set. The upstream may be
-- declared anywhere, later or in another file: the name is looked up once
-- every file has run (luxd.config, St:finish), and refused then at the line
-- of this key.
local function check_upstream_ref(ctx, key, v, what)
  if v == false then return false end
  if type(v) ~= "string" then
    V.fail(ctx, key, fmt('%s must be the name of an upstream ("app") or false, got %s',
                         what, V.show(v)))
  end
  if v == "" then V.fail(ctx, key, what .. " must not be empty") end
  local refs = ctx.st.upstream_refs
  if refs then refs[#refs + 1] = { ctx = ctx, key = key, name = v, what = what } end
  return v
end

-- proxy_host = "host[:port]": the Host sent to the upstream instead of the
-- client's; false (in a location) sends the client's again.
local function check_proxy_host(ctx, key, v, what)
  if v == false then return false end
  -- 259: a DNS name (253 bytes) and ":65535", the longest Host there is.
  T.string({ max = 259 })(ctx, key, v, what)
  local ok, why = V.host_value(v)
  if not ok then V.fail(ctx, key, fmt("%s: %s %s", what, V.q(v), why)) end
  return v
end

-- Fields proxy_headers cannot set: the hop-by-hop ones (RFC 9110 7.6.1)
-- belong to one connection and luxd removes them from what it forwards, and
-- Host and Content-Length say what is forwarded, so they come from the
-- request (and proxy_host).
local HOP_BY_HOP = {
  connection = true, ["keep-alive"] = true, te = true, trailer = true,
  ["transfer-encoding"] = true, upgrade = true,
}

local function check_proxy_headers(ctx, key, v, what)
  local names, list, seen = header_names(ctx, key, v, what, '{ ["X-Forwarded-Port"] = "443" }')
  for _, name in ipairs(names) do
    local value, lname = v[name], name:lower()
    if seen[lname] then
      V.fail(ctx, name, fmt("%s: header %s is given twice (as %s)", what, V.q(name), V.q(seen[lname])))
    end
    seen[lname] = name
    if HOP_BY_HOP[lname] or lname:sub(1, 6) == "proxy-" then
      V.fail(ctx, name, fmt("%s: %s is a hop-by-hop field: luxd removes it from what it " ..
                            "forwards and manages the connection to the upstream itself",
                            what, V.q(name)))
    end
    if lname == "host" then
      V.fail(ctx, name, fmt('%s: %s is set with proxy_host = "name[:port]"', what, V.q(name)))
    end
    if lname == "content-length" then
      V.fail(ctx, name, fmt("%s: %s is set from the body that is forwarded, not by the config",
                            what, V.q(name)))
    end
    local w = fmt("%s[%s]", what, V.q(name))
    if type(value) == "number" then value = V.show(value) end
    T.string({ line = true, empty = true, max = V.MAX_VALUE })(ctx, name, value, w)
    if value:find("[%z\1-\8\11-\31\127]") then
      V.fail(ctx, name, w .. " must not contain a control character")
    end
    -- A field value has no white space around it (RFC 9110 5.5): " x"
    -- would be sent as "x", and " " as a field to remove.
    if value:find("^[ \t]") or value:find("[ \t]$") then
      V.fail(ctx, name, w .. " must not start or end with white space")
    end
    if value:find("$", 1, true) then
      V.fail(ctx, name, fmt("%s: variables are not supported in proxy_headers; write the value " ..
                            "itself", w))
    end
    list[#list + 1] = { name, value }
  end
  return list
end

-- proxy sends every request of a block to its upstream, so a fallback set
-- beside it would never be used: a config must not say more than it does.
local function check_proxy_fallback(ctx, got)
  -- status = true answers every request of its block with the counters.
  if got.status and (got.proxy or got.fallback) then
    local k = got.proxy and "proxy" or "fallback"
    V.fail(ctx, k, fmt('%s would never be used: "status = true" answers every request here ' ..
                       "with the server's counters; set one of them", V.q(k)))
  end
  if got.proxy and got.fallback then
    V.fail(ctx, "fallback", fmt('"fallback" would never be used: "proxy" sends every request ' ..
                                "here to upstream %s; set one of them", V.q(got.proxy)))
  end
end

-- follow_symlinks = true | false | "owner" (see src/config/load_site.c ld_read_site).
local function check_follow_symlinks(ctx, key, v, what)
  if v == true or v == false or v == "owner" then return v end
  V.fail(ctx, key, fmt('%s must be true, false or "owner", got %s', what, V.show(v)))
end

-- test_handler = true: the handler luxd's own tests stream and wait with
-- (t/handlers/test_handler.c), linked into luxd-test only.
local function check_test_handler(ctx, key, v, what)
  if not rawget(_G, "LUXD_TEST_HANDLERS") then
    V.fail(ctx, key, fmt("%s exists only in luxd-test, the build `make test` runs its tests " ..
                         "with; remove it", what))
  end
  return T.boolean()(ctx, key, v, what)
end

-- tls = { cert = "fullchain.pem", key = "privkey.pem" }: the vhost's
-- certificate (its chain after it in the cert file) and key, PEM; or a list
-- of two such pairs, one ECDSA and one RSA, each client getting the one it
-- supports. src/net/tlsctx.c reads and checks the files at every load.
local TLS_EXAMPLE = 'tls = { cert = "/etc/letsencrypt/live/example.com/fullchain.pem", ' ..
                    'key = "/etc/letsencrypt/live/example.com/privkey.pem" }'
local TLS_PAIR_SCHEMA = { keys = { cert = T.path(), key = T.path() }, order = { "cert", "key" } }
-- Keys of the TLS design (luxd.lua(5)) that this build does not have yet:
-- refused with that said, never ignored.
local TLS_UNBUILT = {
  reject_handshake = "refusing handshakes per vhost",
}
local TLS_KEYS = {
  cert = T.path(), key = T.path(),
  -- Client certificates (mTLS): the CAs that sign them, PEM; whether one
  -- is required (the default) or optional. src/net/tlsctx.c reads the file.
  client_ca = T.path(),
  client_verify = T.enum({ "require", "optional" }),
}
local TLS_SCHEMA = {
  keys = TLS_KEYS, order = { "cert", "key", "client_ca", "client_verify" },
  hint = function(k)
    if TLS_UNBUILT[k] then
      return fmt(" (%s: not built in this version of luxd)", TLS_UNBUILT[k])
    end
    if SERVER_TLS_SCHEMA.keys[k] then return " (it belongs in server { tls = { ... } })" end
  end,
  items = function(ic, t, idx, o)
    for _, i in ipairs(idx) do
      local e = t[i]
      if type(e) ~= "table" then
        V.fail(ic, nil, fmt("tls entry %d must be { cert = ..., key = ... }, got %s", i, V.show(e)))
      end
      o[i] = V.check_block(ic:child(fmt("tls entry %d", i), ic:start()), e, TLS_PAIR_SCHEMA)
    end
  end,
}

local function check_tls(ctx, key, v, what)
  if type(v) ~= "table" then
    V.fail(ctx, key, fmt("%s must be a table: %s, got %s", what, TLS_EXAMPLE, V.show(v)))
  end
  local c = ctx:child("tls", ctx:key_line(key))
  local got = V.check_block(c, v, TLS_SCHEMA)
  local list = {}
  if got.cert or got.key then list[1] = { cert = got.cert, key = got.key } end
  for _, p in ipairs(got) do list[#list + 1] = p end
  if #list == 0 then V.fail(c, nil, "no certificate: " .. TLS_EXAMPLE) end
  if #list > 2 then
    V.fail(c, nil, fmt("%d certificates: at most two, one ECDSA and one RSA", #list))
  end
  for i, p in ipairs(list) do
    local which = #list > 1 and fmt(" in entry %d", i) or ""
    if not p.cert then V.fail(c, nil, fmt('"cert" is missing%s: %s', which, TLS_EXAMPLE)) end
    if not p.key then V.fail(c, nil, fmt('"key" is missing%s: %s', which, TLS_EXAMPLE)) end
  end
  if got.client_verify and not got.client_ca then
    V.fail(c, "client_verify", 'client_verify needs client_ca = "/path/ca.pem": the CAs ' ..
                               "that sign the client certificates")
  end
  return { pairs = list, client_ca = got.client_ca,
           client_verify = got.client_ca and (got.client_verify or "require") or nil,
           _file = c.file, _line = c:start() }
end

local VHOST_KEYS = {
  tls = check_tls,
  aliases = T.array(check_alias, { single = true }),
  default = T.boolean(),
  root = T.path(),
  -- A file name (NAME_MAX), joined to the request's path.
  index = T.array(T.string({ max = 255 }), { single = true }),
  try_files = check_try_files,
  etag = T.boolean(),
  last_modified = T.boolean(),
  cache_control = T.string({ line = true, max = V.MAX_VALUE }),
  headers = check_headers,
  gzip_static = T.boolean(),
  dir_listing = T.boolean(),
  follow_symlinks = check_follow_symlinks,
  access = check_access,
  rewrite = rewrites(false),
  redirect = rewrites(true),
  fallback = check_upstream_ref,
  proxy = check_upstream_ref,
  proxy_host = check_proxy_host,
  proxy_headers = check_proxy_headers,
  proxy_via = T.boolean(),
  -- Request fields whose name has a "_" go to the upstream (default: they
  -- are dropped, and logged: CGI and WSGI map "_" and "-" alike, so
  -- X_Forwarded_For would pass for luxd's X-Forwarded-For).
  proxy_underscores = T.boolean(),
  policy = T.func(),
  error_pages = check_error_pages,
  -- A vhost's own log replaces the server's for its requests; false: none.
  access_log = check_access_log,
  status = T.boolean(),
  test_handler = check_test_handler,
  real_ip = check_real_ip,
}

-- The keys a location may set: all of a vhost's but its names, and but the
-- rewrite and redirect lists, which run before a location is chosen (the
-- location is picked for the rewritten path), so they belong to the vhost.
-- access_log too: a request is logged where its vhost says, not per location.
local VHOST_ONLY = { aliases = true, default = true, rewrite = true, redirect = true,
                     real_ip = true, access_log = true, tls = true }
local LOCATION_KEYS, LOCATION_ORDER = {}, {}
for _, k in ipairs(S.VHOST_ORDER) do
  if not VHOST_ONLY[k] then
    LOCATION_KEYS[k] = VHOST_KEYS[k]
    LOCATION_ORDER[#LOCATION_ORDER + 1] = k
  end
end

-- What a vhost serves with when its config says nothing. One table for the
-- whole load, not a copy per vhost (that copy was a fifth of what a
-- 10,000-vhost load allocated): the description carries it beside the
-- vhosts, and the C loader starts every vhost from it, as it starts a
-- location from its vhost. follow_symlinks stays unset: vhost_dir hosts
-- default to false then, named vhosts to "owner" (src/config/load.c).
S.VHOST_DEFAULTS = {
  aliases = {}, default = false, root = nil, index = { "index.html" },
  etag = true, last_modified = true, cache_control = nil, headers = {},
  gzip_static = false, dir_listing = false, status = false,
  access = {}, rewrite = {}, redirect = {},
  locations = {}, policy = nil, fallback = nil, proxy = nil, error_pages = {},
  proxy_host = nil, proxy_headers = {}, proxy_via = true,
  proxy_underscores = false,
}

-- What luxd.schema takes for the vhost and location blocks and S.KEYS.
S.RULE_KEYS, S.REDIRECT_KEYS, S.TLS_KEYS = RULE_KEYS, REDIRECT_KEYS, TLS_KEYS
S.VHOST_KEYS, S.LOCATION_KEYS, S.LOCATION_ORDER = VHOST_KEYS, LOCATION_KEYS, LOCATION_ORDER
S.check_proxy_fallback = check_proxy_fallback

return S
