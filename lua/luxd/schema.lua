-- luxd.schema: the keys of each config block, their types, their defaults,
-- and how each block is turned into the plain description the C side reads.
--
-- Every function here takes a context (see luxd.validate) and raises
-- failures; luxd.config turns a failure into "FILE:LINE: message".

local V = require("luxd.validate")
local T = V.T

local S = {}
local fmt, sort = string.format, table.sort

local STR, BOOL = T.string(), T.boolean()

local function int(min, max) return T.number({ int = true, min = min, max = max }) end
local function seconds() return T.number({ above = 0 }) end

---------------------------------------------------------------------------
-- server { }

S.SERVER_ORDER = {
  "listen", "workers", "user", "pid_file", "error_log", "error_log_level",
  "access_log", "access_log_buffer", "request_id_header", "keepalive_timeout", "keepalive_requests",
  "tcp_nodelay", "defer_accept", "header_timeout", "body_timeout", "send_timeout",
  "max_header_bytes", "max_body_bytes", "max_connections", "vhost_dir",
  "drain_timeout", "backlog", "policy_budget", "policy_memory", "real_ip", "mime_types", "tls",
}

-- The defaults an nginx or lighttpd user would expect; see luxd/config.lua.
function S.server_defaults(st)
  return {
    listen = { { host = "", port = 8080, _file = st.main, _line = 0 } },
    workers = 0,
    user = nil,
    pid_file = nil,
    error_log = "stderr",
    error_log_level = "info",
    access_log = { path = V.abspath(st.prefix, "logs/access.log"), format = "combined" },
    access_log_buffer = 65536,
    keepalive_timeout = 30,
    keepalive_requests = 1000,
    tcp_nodelay = true,
    defer_accept = true,
    header_timeout = 10,
    body_timeout = 30,
    send_timeout = 60,
    max_header_bytes = 8192,
    max_body_bytes = 1048576,
    max_connections = 10000,
    vhost_dir = nil,
    drain_timeout = 30,
    backlog = 511,
    policy_budget = 10000000,      -- Lua instructions one policy call may run
    policy_memory = 64 * 1048576,  -- bytes of Lua memory per worker for policies
    _file = st.main,
    _line = 0,
  }
end

-- A listen entry given as a table: its address, then its own keys.
local LISTEN_EXAMPLE = '{ "0.0.0.0:80", proxy_protocol = true }'
local LISTEN_ITEM_SCHEMA = {
  keys = { proxy_protocol = T.boolean(), tls = T.boolean() }, order = { "proxy_protocol", "tls" },
  items = function(ic, t, idx, o)
    if #idx ~= 1 or idx[1] ~= 1 then
      V.fail(ic, nil, fmt("a listen entry given as a table holds one address: %s, got %d items",
                          LISTEN_EXAMPLE, #idx))
    end
    o[1] = t[1]
  end,
}

local function check_listen(ctx, key, v, what)
  local list
  if type(v) == "string" or type(v) == "number" then
    list = { v }
  elseif type(v) == "table" then
    local n, badk = V.array_len(v)
    if not n then
      local hint = ""
      if badk == "proxy_protocol" then
        hint = fmt(" (a listen entry with keys is a table of its own: listen = { %s })",
                   LISTEN_EXAMPLE)
      end
      V.fail(ctx, key, fmt('%s must be a string or an array of strings, but has key %s%s',
                           what, V.show(badk), hint))
    end
    if n == 0 then V.fail(ctx, key, what .. " must not be empty") end
    list = v
  else
    V.fail(ctx, key, fmt("%s must be a string or an array of strings, got %s", what, type(v)))
  end
  local out, seen, line = {}, {}, ctx:key_line(key)
  for i, e in ipairs(list) do
    local pp, tls = false, false
    local name = (#list > 1 or type(v) == "table") and fmt("%s[%d]", what, i) or what
    if type(e) == "table" then
      local got = V.check_block(ctx:child(fmt("listen entry %d", i), line), e, LISTEN_ITEM_SCHEMA)
      if got[1] == nil then
        V.fail(ctx, key, fmt("%s has no address: %s", name, LISTEN_EXAMPLE))
      end
      e, pp, tls = got[1], got.proxy_protocol or false, got.tls or false
      if pp and tls then
        -- The PROXY header comes before the TLS handshake, in clear: the
        -- transport does not read it yet. Refused rather than misread.
        V.fail(ctx, key, fmt("%s: proxy_protocol together with tls is not supported yet; " ..
                             "use one of them on this address", name))
      end
    end
    if type(e) ~= "string" and type(e) ~= "number" then
      V.fail(ctx, key, fmt("%s must be a string, got %s", name, type(e)))
    end
    local host, port = V.parse_listen(e)
    if not host then V.fail(ctx, key, fmt("listen entry %s %s", V.show(e), port)) end
    local id = host .. "|" .. port
    if seen[id] then V.fail(ctx, key, fmt("listen entry %s is given twice", V.show(e))) end
    seen[id] = true
    out[#out + 1] = { host = host, port = port, proxy_protocol = pp or nil, tls = tls or nil,
                      _file = ctx.file, _line = line }
  end
  return out
end

-- An address or CIDR, as access rules' `from` and real_ip's `from` take it.
local function check_from(ctx, key, v, what)
  if type(v) ~= "string" then V.fail(ctx, key, fmt("%s must be a string, got %s", what, type(v))) end
  if not V.is_cidr(v) then
    V.fail(ctx, key, fmt('%s must be an IP address or a CIDR like "10.0.0.0/8", got %s',
                         what, V.q(v)))
  end
  return v
end

-- real_ip = { from = { "10.0.0.0/8" }, header = "X-Forwarded-For" }: the
-- addresses whose word on the client is taken (a PROXY protocol header, the
-- header named), as nginx's set_real_ip_from and real_ip_header.
local REAL_IP_SCHEMA = {
  keys = {
    from = T.array(check_from, { single = true, nonempty = true }),
    header = T.string({ max = V.MAX_NAME, check = function(ctx, key, v, what)
      if not V.is_token(v) then
        V.fail(ctx, key, fmt('%s must be a header name such as "X-Forwarded-For", got %s',
                             what, V.q(v)))
      end
    end }),
  },
  order = { "from", "header" },
}

local function check_real_ip(ctx, key, v, what)
  if v == false then return false end
  if type(v) ~= "table" then
    V.fail(ctx, key, fmt('%s must be { from = { "10.0.0.0/8", ... }, header = "X-Forwarded-For" } ' ..
                         "or false, got %s", what, V.show(v)))
  end
  local c = ctx:child("real_ip", ctx:key_line(key))
  local got = V.check_block(c, v, REAL_IP_SCHEMA)
  if not got.from then
    V.fail(c, nil, '"from" is missing: the addresses of the proxies to trust, as in ' ..
                   'from = { "10.0.0.0/8" }')
  end
  return { from = got.from, header = got.header, _file = c.file, _line = c:start() }
end

local function check_workers(ctx, key, v, what)
  if v == "auto" then return 0 end
  if type(v) == "number" and v % 1 == 0 and v >= 1 and v < 1e6 then return v end
  V.fail(ctx, key, fmt('%s must be "auto" or an integer >= 1, got %s', what, V.show(v)))
end

local function check_error_log(ctx, key, v, what)
  STR(ctx, key, v, what)
  if v == "stderr" then return v end
  return V.abspath(ctx.st.prefix, v)
end

local LOG_FORMATS = { "combined", "common", "json" }

-- The variables of an access-log template besides $http_NAME (any request
-- header: NAME in lower case with "_" for "-"). src/io/accesslog.c has the
-- same list (var_names) and compiles the template again at load.
S.LOG_VARIABLES = {
  "remote_addr", "time_local", "time_iso8601", "msec", "request", "request_method",
  "request_uri", "uri", "args", "server_protocol", "status", "body_bytes_sent",
  "bytes_sent", "request_time", "request_id", "host", "upstream_addr",
  "upstream_status", "upstream_response_time", "realip_remote_addr",
  "tls_protocol", "tls_cipher", "tls_sni", "tls_session_reused", "tls_client_subject",
  "tls_client_fingerprint",
}
local LOG_VAR_SET = {}
for _, n in ipairs(S.LOG_VARIABLES) do LOG_VAR_SET[n] = true end

-- What is wrong with the variable `name` of the template `what`, or nil.
local function log_var_problem(name, what)
  if LOG_VAR_SET[name] then return nil end
  if name:sub(1, 5) == "http_" and #name > 5 then return nil end
  local shown = V.q("$" .. name)
  if name == "http_" then
    return fmt("%s has %s without a header name (as in $http_user_agent or " ..
               "$http_x_forwarded_for)", what, shown)
  end
  local candidates = {}
  for i, n in ipairs(S.LOG_VARIABLES) do candidates[i] = "$" .. n end
  local dym = V.dym("$" .. name, candidates)
  if dym == "" then
    -- A name cut short ("$time_iso", "$upstream"): the one it begins.
    for _, n in ipairs(S.LOG_VARIABLES) do
      if #name >= 3 and n:sub(1, #name) == name then
        dym = fmt(" (did you mean %s?)", V.q("$" .. n))
        break
      end
    end
  end
  if dym == "" then
    -- "$hostname" for the host followed by "name": a name runs on over
    -- letters, digits and "_", so that needs ${host}name.
    for _, n in ipairs(S.LOG_VARIABLES) do
      if name:sub(1, #n) == n then
        local rest = name:sub(#n + 1)
        dym = fmt(" (for $%s followed by %s, write ${%s}%s)", n, V.q(rest), n, rest)
        break
      end
    end
  end
  return fmt("%s has an unknown variable %s%s", what, shown, dym)
end

-- Checks the $variables of a template; returns how many it has. A name is
-- [A-Za-z0-9_]+, or written ${name} when letters follow it; "$$" is a "$".
local function check_log_template(ctx, key, v, what)
  local n, i = 0, 1
  while true do
    local d = v:find("$", i, true)
    if not d then break end
    local nxt = v:sub(d + 1, d + 1)
    if nxt == "$" then
      i = d + 2
    else
      local name, e
      if nxt == "{" then
        name, e = v:match("^{([%w_]+)}()", d + 1)
        if not name then
          V.fail(ctx, key, fmt('%s has "${" without a variable name and "}" after it ' ..
                               '(as in ${status})', what))
        end
      else
        name, e = v:match("^([%w_]+)()", d + 1)
        if not name then
          V.fail(ctx, key, fmt('%s has a "$" that starts no variable name (write "$$" for a ' ..
                               '"$" of its own)', what))
        end
      end
      local problem = log_var_problem(name, what)
      if problem then V.fail(ctx, key, problem) end
      n, i = n + 1, e
    end
  end
  return n
end

local function check_log_format(ctx, key, v, what)
  STR(ctx, key, v, what)
  V.check_len(ctx, key, v, what, V.MAX_FORMAT)
  for _, f in ipairs(LOG_FORMATS) do if v == f then return v end end
  -- Anything else is a template; one without a single variable is far more
  -- likely a misspelt format name than a log line that never changes.
  if check_log_template(ctx, key, v, what) == 0 then
    local hint = V.dym(v, LOG_FORMATS)
    if hint == "" and v:find("%%") then
      hint = ' (the variables are nginx\'s, as in "$remote_addr $status", not "%h %s")'
    end
    V.fail(ctx, key, fmt('%s must be "combined", "common", "json" or a template with ' ..
                         '$variables, got %s%s', what, V.q(v), hint))
  end
  return v
end

local function log_path(ctx, key, v, what)
  STR(ctx, key, v, what)
  if v == "stderr" or v == "stdout" then return "/dev/" .. v end
  return V.abspath(ctx.st.prefix, v)
end

local ACCESS_LOG_SCHEMA = {
  keys = { path = log_path, format = check_log_format,
           escape = T.enum({ "default", "json" }) },
  order = { "path", "format", "escape" },
}

local function check_access_log(ctx, key, v, what)
  if v == false or v == "off" then return false end
  if v == true then
    return { path = V.abspath(ctx.st.prefix, "logs/access.log"), format = "combined" }
  end
  if type(v) == "string" then
    return { path = log_path(ctx, key, v, what), format = "combined" }
  end
  if type(v) ~= "table" then
    V.fail(ctx, key, fmt("%s must be a path, false or { path = ..., format = ... }, got %s",
                         what, type(v)))
  end
  local c = ctx:child("access_log", ctx:key_line(key))
  local got = V.check_block(c, v, ACCESS_LOG_SCHEMA)
  if not got.path then V.fail(c, nil, '"path" is missing') end
  return { path = got.path, format = got.format or "combined", escape = got.escape or "default" }
end

-- server { tls = { ... } }: what every TLS listener and vhost shares.
-- src/net/tlsctx.c reads ticket_key_file and checks ciphers at every load.
local SERVER_TLS_SCHEMA = {
  keys = {
    ticket_key_file = T.path(),
    protocols = T.array(function(ctx, key, v, what)
      if v == "TLSv1" or v == "TLSv1.0" or v == "TLSv1.1" or v == "SSLv3" then
        V.fail(ctx, key, fmt('%s: %s is not offered: it is broken and deprecated (RFC 8996); ' ..
                             'use "TLSv1.2" and "TLSv1.3"', what, V.q(v)))
      end
      return T.enum({ "TLSv1.2", "TLSv1.3" })(ctx, key, v, what)
    end, { single = true, nonempty = true }),
    ciphers = T.string({ line = true, max = V.MAX_VALUE }),
    handshake_timeout = seconds(),
  },
  order = { "ticket_key_file", "protocols", "ciphers", "handshake_timeout" },
  hint = function(k)
    if k == "cert" or k == "key" then
      return ' (certificates belong to a vhost: vhost "name" { tls = { cert = ..., key = ... } })'
    end
    if k == "client_ca" or k == "client_verify" then
      return ' (client certificates are a vhost\'s: vhost "name" { tls = { ..., client_ca = ... } })'
    end
  end,
}

local function check_server_tls(ctx, key, v, what)
  if type(v) ~= "table" then
    V.fail(ctx, key, fmt('%s must be a table such as { ticket_key_file = "/etc/luxd/ticket.key" }' ..
                         ", got %s", what, V.show(v)))
  end
  local c = ctx:child("tls", ctx:key_line(key))
  local got = V.check_block(c, v, SERVER_TLS_SCHEMA)
  got._file, got._line = c.file, c:start()
  if got.ciphers then got._ciphers_line = c:key_line("ciphers") end
  if got.ticket_key_file then got._ticket_key_file_line = c:key_line("ticket_key_file") end
  return got
end

local SERVER_KEYS = {
  listen = check_listen,
  workers = check_workers,
  user = T.string(),
  pid_file = T.path(),
  error_log = check_error_log,
  error_log_level = T.enum({ "debug", "info", "notice", "warn", "error" }),
  access_log = check_access_log,
  -- At most 16 MiB: the buffer is per log file and per worker loop (made
  -- on first use, so a size that cannot be had would drop every line then,
  -- not fail here); nginx's buffer= has no cap, but is one per log.
  access_log_buffer = int(0, 16777216),
  request_id_header = T.string({ max = V.MAX_NAME, check = function(ctx, key, v, what)
    if not V.is_token(v) then
      V.fail(ctx, key, fmt('%s must be a header name such as "X-Request-Id", got %s',
                           what, V.q(v)))
    end
  end }),
  keepalive_timeout = T.number({ min = 0 }),
  keepalive_requests = int(1),
  tcp_nodelay = T.boolean(),
  defer_accept = T.boolean(),
  header_timeout = seconds(),
  body_timeout = seconds(),
  send_timeout = seconds(),
  max_header_bytes = int(1),
  max_body_bytes = int(0),
  max_connections = int(1),
  vhost_dir = T.path(),
  drain_timeout = T.number({ min = 0 }),
  backlog = int(1),
  policy_budget = int(1000),
  policy_memory = int(1048576),
  real_ip = check_real_ip,
  -- Read by the C loader at every load (src/config/load.c read_mime_types):
  -- a file that cannot be read is an error at this key's line.
  mime_types = T.path(),
  tls = check_server_tls,
}

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

local DENY_SCHEMA = { keys = RULE_KEYS, order = S.RULE_ORDER }
local ALLOW_SCHEMA = {
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
  return {
    action = info.action,
    prefix = got.prefix, suffix = got.suffix, regex = got.regex,
    method = got.method, from = got.from, all = got.all,
    status = deny and (got.status or 403) or nil,
    _file = info.file, _line = info.line,
  }
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
-- Header names in case-insensitive order, then as written. At module level:
-- a closure made per call stops LuaJIT's compiler (FNEW is not compiled).
local function by_lower_name(a, b)
  local la, lb = a:lower(), b:lower()
  if la ~= lb then return la < lb end
  return a < b
end

local function header_names(ctx, key, v, what, example)
  if type(v) ~= "table" then
    V.fail(ctx, key, fmt('%s must be a table like %s, got %s', what, example, type(v)))
  end
  local names = {}
  for name in pairs(v) do
    if type(name) ~= "string" or not V.is_token(name) then
      V.fail(ctx, key, fmt('%s: %s is not a header name; write { ["X-Name"] = "value" }',
                           what, V.show(name)))
    end
    V.check_len(ctx, key, name, fmt("%s: the header name %s...", what, V.q(name:sub(1, 16))),
                V.MAX_NAME)
    names[#names + 1] = name
  end
  sort(names, by_lower_name)
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
    if type(value) ~= "string" or value:find("[%z\r\n]") or #value > V.MAX_VALUE then
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

-- follow_symlinks = true | false | "owner" (see src/config/load.c read_site).
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

function S.vhost_defaults()
  return {
    aliases = {}, default = false, root = nil, index = { "index.html" },
    etag = true, last_modified = true, cache_control = nil, headers = {},
    gzip_static = false, dir_listing = false, status = false,
    -- follow_symlinks stays nil when unset: vhost_dir hosts default to false
    -- then, named vhosts to "owner" (src/config/load.c).
    access = {}, rewrite = {}, redirect = {},
    locations = {}, policy = nil, fallback = nil, proxy = nil, error_pages = {},
    proxy_host = nil, proxy_headers = {}, proxy_via = true,
    proxy_underscores = false,
  }
end

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
-- (src/config/load.c check_error_pages).
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
  keys = VHOST_KEYS, order = S.VHOST_ORDER, items = vhost_items,
  hint = function(k) return belongs(k, "vhost") end,
  unknown = misplaced,
}

-- Every block's keys and their checkers, for tools and tests that walk the
-- schema (t/61-schema-keys.t proves each key works or is refused, and
-- t/110-reference.t that doc/luxd.lua.5 documents each one).
-- (upstream_server: one server of an upstream given as a table.)
S.KEYS = {
  server = SERVER_KEYS, access_log = ACCESS_LOG_SCHEMA.keys, upstream = UPSTREAM_KEYS,
  upstream_server = SERVER_ITEM_SCHEMA.keys,
  rule = RULE_KEYS, vhost = VHOST_KEYS, location = LOCATION_KEYS, redirect = REDIRECT_KEYS,
  listen = LISTEN_ITEM_SCHEMA.keys, real_ip = REAL_IP_SCHEMA.keys, tls = TLS_KEYS,
  server_tls = SERVER_TLS_SCHEMA.keys, upstream_tls = UPSTREAM_TLS_SCHEMA.keys,
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
