-- luxd.schema_server: the keys of server { }, its defaults, and the
-- checkers a vhost shares with it (real_ip, access_log, addresses); and
-- the shorthands every part of the schema writes its checkers with.
--
-- A part of luxd.schema, which is what callers require: it takes from the
-- table S here what it gives them, and luxd.schema_upstream and
-- luxd.schema_site take what they share with the server.

local V = require("luxd.validate")
local T = V.T

local S = {}
local fmt = string.format

-- The shorthands every part of the schema writes its checkers with.
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
  keys = { proxy_protocol = T.boolean(), tls = T.boolean(), http2 = T.boolean() },
  order = { "proxy_protocol", "tls", "http2" },
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
    local pp, tls, h2 = false, false, false
    local name = (#list > 1 or type(v) == "table") and fmt("%s[%d]", what, i) or what
    if type(e) == "table" then
      local got = V.check_block(ctx:child(fmt("listen entry %d", i), line), e, LISTEN_ITEM_SCHEMA)
      if got[1] == nil then
        V.fail(ctx, key, fmt("%s has no address: %s", name, LISTEN_EXAMPLE))
      end
      e, pp, tls, h2 = got[1], got.proxy_protocol or false, got.tls or false, got.http2 or false
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
                      http2 = h2 or nil,
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

-- The shorthands, for the other parts.
S.STR, S.BOOL, S.int, S.seconds = STR, BOOL, int, seconds

-- What luxd.schema_site takes for a vhost's keys and hints, and luxd.schema
-- for its blocks and S.KEYS.
S.SERVER_KEYS, S.SERVER_TLS_SCHEMA = SERVER_KEYS, SERVER_TLS_SCHEMA
S.LISTEN_ITEM_SCHEMA, S.REAL_IP_SCHEMA, S.ACCESS_LOG_SCHEMA =
  LISTEN_ITEM_SCHEMA, REAL_IP_SCHEMA, ACCESS_LOG_SCHEMA
S.check_from, S.check_real_ip, S.check_access_log = check_from, check_real_ip, check_access_log

return S
