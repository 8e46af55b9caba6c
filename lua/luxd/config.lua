-- luxd.config: runs a luxd config file and returns what it declared.
--
--   local desc = require("luxd.config").load(path, host)
--     host.prefix  the server's working directory: absolute, no trailing slash
--     host.glob    function(pattern) -> sorted array of matching paths
--     host.realpath function(path) -> its canonical path, or nil
--     host.where   function(known, level) -> the file and line of the
--                  innermost stack frame from `level` up whose chunk is
--                  "@NAME" with known[NAME] set, or nothing
--
-- The config runs in a fresh environment holding the safe parts of the
-- standard library and the DSL: server, mime, upstream, vhost, location,
-- allow, deny, include (see doc/luxd.lua.5). On any mistake load raises
-- error("FILE:LINE: what is wrong", 0), FILE as the user wrote it (an
-- included file: its path relative to the prefix when it lies under it and
-- both the pattern and the including file's name were relative, else
-- absolute). A relative include pattern is
-- resolved against the directory of the file that includes it.
--
-- The description returned is plain data with every default filled in and
-- every path absolute, so the C side never needs to guess:
--
-- desc.server (the defaults below also apply when there is no server { }):
--   listen            { {host=, port=, proxy_protocol=, _file=, _line=}, ... };
--                     host "" = all addresses, "::1" for "[::1]:8080".
--                     Default ":8080". Accepted forms: "127.0.0.1:8080",
--                     "[::1]:8080", ":8080", "*:8080", "8080", 8080, or a
--                     table { ADDRESS, proxy_protocol = true } (proxy_protocol
--                     true or absent; needs real_ip).
--   workers           integer; 0 = one per core ("auto", the default)
--   user              nil | string
--   pid_file          nil | absolute path
--   error_log         "stderr" (default) | absolute path
--   error_log_level   "debug" | "info" (default) | "notice" | "warn" | "error"
--   access_log        false | { path = absolute path, format = "combined" |
--                     "common" | "json" | template of $variables, escape =
--                     "default" | "json" } (variables: schema.LOG_VARIABLES).
--                     Default { path = PREFIX/logs/access.log, format =
--                     "combined" }, as with nginx. "off" means false; "stderr"
--                     and "stdout" become "/dev/stderr" and "/dev/stdout".
--   access_log_buffer 65536 (bytes buffered per worker and log file; 0 = unbuffered; at most 16 MiB)
--   request_id_header nil | header name sent with each response's $request_id
--   keepalive_timeout 30 (seconds, >= 0; 0 = no keep-alive)
--   keepalive_requests 1000 (integer >= 1)
--   tcp_nodelay       true     defer_accept    true
--   header_timeout    10       body_timeout    30      send_timeout 60
--                     (seconds, > 0, fractions allowed)
--   max_header_bytes  8192     max_body_bytes  1048576  max_connections 10000
--                     (max_header_bytes also bounds a chunked body's chunk
--                     extensions, 413 past it, and its trailer section, 431)
--   vhost_dir         nil | absolute path
--   drain_timeout     30 (seconds a stopping or reloading server waits for
--                     requests in flight, >= 0)
--   backlog           511 (listen(2) backlog, as nginx)
--   policy_budget     10000000 (Lua instructions a policy call may run before
--                     it is stopped with a 500)
--   policy_memory     67108864 (bytes of Lua memory per worker for policies)
--   real_ip           nil | { from = { "CIDR", ... }, header = nil | "Name",
--                     _file=, _line= }: the proxies trusted to name the client
--                     (by a PROXY protocol header, and by the header named)
--   mime_types        nil | absolute path of a mime.types file (read by the
--                     C loader at every load)
--   _file, _line      where server { } is (_line 0 when there is none)
--
-- desc.mime           { [".ext"] = "type/subtype" }, extensions lower-cased
-- desc.upstreams      in declaration order, each:
--   name              as written (letters, digits, "_", "-", ".")
--   servers           { {text=, host=, port=, weight=, _file=, _line=} or
--                        {text=, unix = absolute path, weight=, _file=, _line=},
--                       ... } in the order written; text as written ("app:80",
--                     "unix:run/app.sock"), host without brackets ("::1"),
--                     weight 1..100 (default 1); _line is the server's own
--                     line when its address is written as a literal
--   keepalive 32 (0..10000)  keepalive_timeout 60  connect_timeout 5
--   read_timeout 60  send_timeout 60  fail_timeout 10 (seconds, > 0)
--   max_fails 1 (0 = never mark a server down)  max_header_bytes 32768
--   _file, _line      where upstream "name" is
-- desc.vhost_defaults what a vhost has for each key its config does not give
--                     (the defaults below; schema.VHOST_DEFAULTS)
-- desc.vhosts         in declaration order, each holding only the keys its
--                     config gave (and name, locations, _file, _line): the
--                     C loader starts every vhost from desc.vhost_defaults,
--                     as it starts a location from its vhost.
--   name, aliases     lower-cased; aliases an array, or nil
--   default           false unless the config says true (at most one vhost)
--   root              nil | absolute path
--   index             { "index.html" }
--   try_files         nil | { "$uri", ..., "/path" or "=CODE" } (2..16
--                     strings, checked) | false (a location turns it off)
--   etag, last_modified   true        gzip_static, dir_listing   false
--   follow_symlinks   nil (unset) | "owner" | true | false
--   cache_control     nil | string
--   headers           { {"Name", "value"}, ... } sorted by lower-cased name
--   access            { {action = "allow"|"deny", prefix=, suffix = {...},
--                        regex=, method = {...}, from = {...}, all = true|nil,
--                        status = 403 (deny only), _file=, _line=}, ... }
--   rewrite           { {regex=, target=, _file=, _line=}, ... }
--   redirect          { {regex=, target=, status=, _file=, _line=}, ... };
--                     status 301|302|303|307|308, default 302 (as nginx's
--                     "rewrite ... redirect")
--   locations         { {prefix=, _file=, _line=, <only the vhost keys the
--                        location set, checked and normalized the same way>},
--                       ... } in declaration order
--   policy            nil | function
--   fallback, proxy   nil | the name of a declared upstream | false (false:
--                     a location turns off what its vhost set)
--   proxy_host        nil | "host[:port]" | false (the client's Host)
--   proxy_headers     { {"Name", "value"}, ... } sorted by lower-cased name;
--                     value "" removes the field from the forwarded request
--   proxy_via         true
--   error_pages       { [404] = "/404.html", ... } (status 400..599 -> a path
--                     in the vhost), empty by default
--   real_ip           nil (the server's) | false (none) | { from = {...},
--                     header = "Name", _file=, _line= } (vhost only, not in
--                     a location; header required)
--   _file, _line      where vhost "name" is
--   Rewrite and redirect entries carry the line of the rewrite/redirect key.
-- desc.files          the files that were run, main file first
-- desc.warnings       { "FILE:LINE: message", ... }: allowed, but worth saying
--                     (an include pattern that matches no file, an upstream
--                     that no proxy or fallback names)

local V = require("luxd.validate")
local S = require("luxd.schema")

local M = {}

local fmt = string.format

local DSL_NAMES = { "server", "mime", "upstream", "vhost", "location", "allow", "deny", "include" }

-- How Lua shows a chunk name in its messages: long names are shortened to
-- ".../tail", so a message's location must be matched against this form.
local function shortname(file)
  local ok, e = pcall(loadstring("error('', 1)", "@" .. file))
  return (not ok and type(e) == "string" and e:match("^(.*):1: $")) or file
end

-- Reads a whole file. Returns its text, or nil and why not.
local function read_file(path)
  local fh, err = io.open(path, "rb")
  if not fh then
    err = tostring(err)
    if err:sub(1, #path + 2) == path .. ": " then err = err:sub(#path + 3) end
    return nil, err
  end
  local text, rerr = fh:read("*a")
  fh:close()
  if not text then return nil, tostring(rerr) end
  return text
end

local function starts(s, p) return s:sub(1, #p) == p end

local NONE = {}

local function copy(t)
  local c = {}
  for k, v in pairs(t) do c[k] = v end
  return c
end

---------------------------------------------------------------------------
-- The state of one load

local St = {}
St.__index = St

local function new_state(path, host)
  local prefix = host.prefix:gsub("(.)/+$", "%1")
  return setmetatable({
    prefix = prefix,
    glob = host.glob,
    realpath = host.realpath,
    host_where = host.where,
    main = path,
    lines = {},        -- display name -> source lines (comments removed)
    files = {},        -- display names, in the order they ran
    known = {},        -- display name -> true
    short = {},        -- display name -> Lua's short form of it
    running = {},      -- real paths of the files now running (include cycles)
    abs = {},          -- display name -> absolute path, to resolve includes
    warnings = {},     -- "FILE:LINE: ..." for what is allowed but likely wrong
    depth = 0,
    objs = {},         -- object -> info, for location/allow/deny results
    created = {},      -- those objects in the order they were made
    pending = {},      -- vhost/upstream/location names still waiting for { }
    pending_list = {},
    closures = {},     -- the function vhost/upstream/location return -> its pending entry
    mime = {},
    upstreams = {},
    upstream_by_name = {},
    upstream_refs = {}, -- { ctx, key, name, what } of each proxy/fallback = "name"
    vhosts = {},
    names = {},        -- vhost name -> the ctx of that vhost
    alias_of = {},     -- alias -> the ctx of the vhost that has it
  }, St)
end

-- The innermost user file and line on the stack, seen from a DSL function.
-- The host walks the stack (host.where): debug.getinfo made a table per
-- call, and where() runs for every vhost, location and rule (a tenth of
-- what a 10,000-vhost load allocated).
function St:where(level)
  local file, line = self.host_where(self.known, level or 3)
  if file then return file, line end
  return self.main, 0
end

-- Runs fn(...) and turns a failure it raises into "FILE:LINE: msg".
-- (The results pass through as varargs: a table to hold them was made for
-- every vhost and rule.)
local function ran(ok, ...)
  if not ok then
    local e = ...
    if V.is_fail(e) then error(V.format(e), 0) end
    error(e, 0)
  end
  return ...
end

local function run(fn, ...)
  return ran(pcall(fn, ...))
end

local function fail(st, file, line, label, msg)
  error(V.format({ ctx = V.ctx(st, file, line, label), msg = msg }), 0)
end

-- Turns whatever was raised while the config ran into "FILE:LINE: msg".
function St:locate(e)
  if V.is_fail(e) then return V.format(e) end
  local msg
  if type(e) == "string" then
    msg = e
  elseif e == nil then
    msg = "error object is nil"
  else
    local ok, s = pcall(tostring, e)
    if ok and type(s) == "string" and not (type(e) == "table" and s:match("^table: ")) then
      msg = s
    else
      msg = fmt("(error object is a %s value)", type(e))
    end
  end
  local global = msg:match("attempt to call global '([%w_]+)' %(a nil value%)$")
  if global then msg = msg .. V.dym(global, DSL_NAMES) end
  for _, f in ipairs(self.files) do
    for _, form in ipairs({ f, self.short[f] }) do
      if starts(msg, form .. ":") and msg:sub(#form + 2):match("^%d+: ") then
        return f .. msg:sub(#form + 1)
      end
    end
  end
  -- Not located in a user file: drop a location in one of luxd's own
  -- modules and name the line of the config that was running.
  msg = msg:gsub('^%[string ".-"%]:%d+: ', "", 1):gsub("^[^%s:]+:%d+: ", "", 1)
  local file, line = self:where(2)
  return fmt("%s:%d: %s", file, line, msg)
end

-- The key of a file for the include cycle check: its real path, as the
-- path written may name it anew on each turn ("d1/../d2/../d1/a.lua", a
-- symlinked directory). The path as given when the host cannot say.
function St:real(abs)
  return type(self.realpath) == "function" and self.realpath(abs) or abs
end

-- Runs one file of the config; errors go up unchanged, to be located by
-- St:locate at the top.
function St:run_file(display, abs, text)
  if not self.known[display] then
    self.known[display] = true
    self.files[#self.files + 1] = display
    self.short[display] = shortname(display)
  end
  self.abs[display] = abs
  self.lines[display] = V.split_lines(text)
  text = text:gsub("^\239\187\191", "")   -- a UTF-8 byte order mark
  if text:sub(1, 1) == "#" then text = "--" .. text end   -- a #! line
  local fn, err = loadstring(text, "@" .. display)
  if not fn then error(err, 0) end
  setfenv(fn, self.env)
  local key = self:real(abs)
  self.running[key] = true
  self.depth = self.depth + 1
  fn()
  self.depth = self.depth - 1
  self.running[key] = nil
end

---------------------------------------------------------------------------
-- The DSL

-- The value of location/allow/deny: an empty table that luxd recognizes by
-- identity, so a config cannot forge one or confuse it with its own tables.
-- One metatable for all of them (tostring names the object from its info):
-- a closure and a metatable per rule were a good part of a 10,000-vhost load.
local function object_mt(objs)
  return { __tostring = function(o)
    local i = objs[o]
    -- A table a config gave this metatable itself is no DSL object.
    if not i then return "a table" end
    return i.kind == "location" and ("location " .. V.q(i.prefix)) or (i.action .. " { ... }")
  end }
end

function St:object(info)
  local mt = self.obj_mt
  if not mt then
    mt = object_mt(self.objs)
    self.obj_mt = mt
  end
  local obj = setmetatable({}, mt)
  self.objs[obj] = info
  self.created[#self.created + 1] = obj
  return obj
end

-- Remembers that `name` "..." was called and waits for its { }.
function St:expect(kind, name, file, line)
  local p = { kind = kind, name = name, file = file, line = line }
  self.pending[p] = true
  self.pending_list[#self.pending_list + 1] = p
  return p
end

local function need_name(st, kind, name, file, line, example)
  if type(name) ~= "string" or name == "" then
    fail(st, file, line, nil, fmt("%s needs a name: %s, got %s", kind, example,
                                  type(name) == "string" and '""' or type(name)))
  end
end

-- Claims host name `name` for the vhost of ctx; `key` is "aliases" for an
-- alias, nil for its name.
-- (Two tables of contexts, not a table per name: those were a tenth of
-- what a 10,000-vhost load allocated.)
function St:claim(ctx, name, key)
  local c, alias = self.names[name], false
  if not c then c, alias = self.alias_of[name], true end
  if c then
    local line = alias and c:key_line("aliases") or c.line
    V.fail(ctx, key, fmt("name %s is already used by vhost %s (%s:%d)",
                         V.q(name), V.q(c.named), c.file, line))
  end
  if key then self.alias_of[name] = ctx else self.names[name] = ctx end
end

function St:add_vhost(p, t)
  local ctx = V.named_ctx(self, p.file, p.line, "vhost", p.name)
  if type(t) ~= "table" then
    V.fail(ctx, nil, fmt("expected a table: vhost %s { ... }, got %s", V.q(p.name), type(t)))
  end
  local name, why = V.vhost_name(p.name)
  if not name then V.fail(ctx, nil, fmt("%s %s", V.q(p.name), why)) end
  ctx.named = name
  local vh, locs = S.vhost(ctx, t)
  vh.name, vh.locations, vh._file, vh._line = name, locs, p.file, p.line
  self:claim(ctx, name, nil)
  for _, a in ipairs(vh.aliases or NONE) do
    if a == name then
      V.fail(ctx, "aliases", fmt("alias %s is the vhost's own name", V.q(a)))
    end
    self:claim(ctx, a, "aliases")
  end
  if vh.default then
    local d = self.default
    if d then
      V.fail(ctx, "default", fmt('"default = true" is already set by vhost %s (%s:%d)',
                                 V.q(d.vh.name), d.ctx.file, d.ctx:key_line("default")))
    end
    self.default = { vh = vh, ctx = ctx }
  end
  self.vhosts[#self.vhosts + 1] = vh
end

function St:add_upstream(p, t)
  local ctx = V.ctx(self, p.file, p.line, "upstream " .. V.q(p.name))
  if type(t) ~= "table" then
    V.fail(ctx, nil, fmt('expected a table: upstream %s { "127.0.0.1:8081" }, got %s',
                         V.q(p.name), type(t)))
  end
  if not p.name:match("^[%w_.%-]+$") then
    V.fail(ctx, nil, 'the name may only hold letters, digits, "_", "-" and "."')
  end
  local prev = self.upstream_by_name[p.name]
  if prev then
    V.fail(ctx, nil, fmt("the name is already used by upstream %s (%s:%d)",
                         V.q(prev.name), prev._file, prev._line))
  end
  local u = S.upstream(ctx, p.name, t)
  self.upstreams[#self.upstreams + 1] = u
  self.upstream_by_name[p.name] = u
end

function St:include(pattern, file, line)
  local ctx = V.ctx(self, file, line, "include " .. V.q(pattern))
  local abs_pattern, wild = pattern, pattern:find("[*?[]")
  if pattern:sub(1, 1) ~= "/" then
    -- Relative to the file that includes it, wherever luxd was started:
    -- include "conf.d/*.lua" in /etc/luxd/luxd.lua means /etc/luxd/conf.d.
    local including = self.abs[file] or V.abspath(self.prefix, file)
    local dir = including:match("^(.*)/[^/]*$")
    if dir == "" then dir = "/" end
    local p = dir == "/" and "" or dir
    abs_pattern = (wild and p:gsub("[][*?\\]", "\\%0") or p) .. "/" .. pattern
  end
  local paths
  if wild then
    if type(self.glob) ~= "function" then V.fail(ctx, nil, "wildcards are not supported here") end
    paths = self.glob(abs_pattern)
    if type(paths) ~= "table" then V.fail(ctx, nil, "the glob failed") end
    if #paths == 0 then
      -- Allowed (conf.d/ may be empty), but said: a pattern that matches
      -- nothing is as often a wrong directory.
      self.warnings[#self.warnings + 1] =
        fmt("%s:%d: include %s matches no file (%s)", file, line, V.q(pattern), abs_pattern)
    end
  else
    paths = { abs_pattern }
  end
  -- Each file is named in messages as it was opened: absolute, unless both
  -- the pattern and the name of the file that includes it are relative
  -- (`luxd -c conf/luxd.lua` from the source tree: conf/conf.d/a.lua).
  -- Made relative to the working directory otherwise, `-c /etc/luxd/luxd.lua`
  -- run from / would name etc/luxd/conf.d/a.lua.
  local base = (self.prefix == "/" and "" or self.prefix) .. "/"
  local relative = pattern:sub(1, 1) ~= "/" and file:sub(1, 1) ~= "/"
  local todo = {}
  for _, abs in ipairs(paths) do
    local display = abs
    if relative and starts(abs, base) then display = abs:sub(#base + 1) end
    local text, why = read_file(abs)
    if not text and not wild and why:find("No such file") then
      V.fail(ctx, nil, fmt("no such file (%s)", abs))
    elseif not text then
      V.fail(ctx, nil, fmt("cannot read %s: %s", V.q(display), why))
    end
    if self.running[self:real(abs)] then
      V.fail(ctx, nil, fmt("%s is already being run (an include cycle)", V.q(display)))
    end
    if self.depth >= 32 then V.fail(ctx, nil, "includes are nested too deeply (32 levels)") end
    todo[#todo + 1] = { display, abs, text }
  end
  return todo
end

function St:make_env()
  local st = self
  local env = {
    string = copy(string), table = copy(table), math = copy(math),
    os = { getenv = os.getenv, time = os.time, date = os.date, clock = os.clock },
    pairs = pairs, ipairs = ipairs, tostring = tostring, tonumber = tonumber,
    type = type, select = select, error = error, assert = assert, pcall = pcall,
    xpcall = xpcall, print = print, unpack = unpack, next = next,
    setmetatable = setmetatable, getmetatable = getmetatable, rawget = rawget,
    rawset = rawset, rawequal = rawequal, require = require, _VERSION = _VERSION,
  }
  if rawget(_G, "bit") then env.bit = copy(bit) end
  env._G = env

  function env.server(t)
    local file, line = st:where()
    run(function()
      local ctx = V.ctx(st, file, line, "server")
      if type(t) ~= "table" then
        V.fail(ctx, nil, fmt("expected a table: server { listen = ... }, got %s", type(t)))
      end
      if st.server then
        V.fail(ctx, nil, fmt("only one server { ... } is allowed; the first is at %s:%d",
                             st.server._file, st.server._line))
      end
      st.server = S.server(ctx, t)
    end)
  end

  function env.mime(t)
    local file, line = st:where()
    run(function()
      local ctx = V.ctx(st, file, line, "mime")
      if type(t) ~= "table" then
        V.fail(ctx, nil, fmt('expected a table: mime { [".ext"] = "type/subtype" }, got %s', type(t)))
      end
      S.mime(ctx, t, st.mime)
    end)
  end

  -- upstream "name" { ... } and vhost "name" { ... }: a name, then a table
  -- that `add` turns into the description.
  local function named_block(kind, example, add)
    return function(name)
      local file, line = st:where()
      need_name(st, kind, name, file, line, example)
      local p = st:expect(kind, name, file, line)
      return function(t)
        st.pending[p] = nil
        run(add, st, p, t)
      end
    end
  end
  env.upstream = named_block("upstream", 'upstream "app" { "127.0.0.1:8081" }', st.add_upstream)
  env.vhost = named_block("vhost", 'vhost "example.com" { ... }', st.add_vhost)

  function env.location(prefix)
    local file, line = st:where()
    need_name(st, "location", prefix, file, line, 'location "/static/" { ... }')
    local p = st:expect("location", prefix, file, line)
    local fn = function(t)
      st.pending[p] = nil
      if type(t) ~= "table" then
        fail(st, file, line, "location " .. V.q(prefix),
             fmt("expected a table: location %s { ... }, got %s", V.q(prefix), type(t)))
      end
      return st:object({ kind = "location", prefix = prefix, t = t, file = file, line = line })
    end
    st.closures[fn] = p
    return fn
  end

  local function rule(action)
    return function(t)
      local file, line = st:where()
      if type(t) ~= "table" then
        fail(st, file, line, nil, fmt('%s needs a table: %s { prefix = "/private/" }, got %s',
                                      action, action, type(t)))
      end
      return st:object({ kind = "rule", action = action, t = t, file = file, line = line })
    end
  end
  env.allow, env.deny = rule("allow"), rule("deny")

  function env.include(pattern)
    local file, line = st:where()
    if type(pattern) ~= "string" or pattern == "" then
      fail(st, file, line, nil, fmt('include needs a file name or pattern: include "conf.d/*.lua", got %s',
                                    type(pattern) == "string" and '""' or type(pattern)))
    end
    -- The included files run outside run(): their own errors must reach
    -- St:locate with their own file and line intact.
    for _, f in ipairs(run(st.include, st, pattern, file, line)) do
      st:run_file(f[1], f[2], f[3])
    end
  end

  return env
end

-- Checks what can only be checked once every file has run.
function St:finish()
  for _, p in ipairs(self.pending_list) do
    if self.pending[p] then
      local ex = p.kind == "upstream" and ' { "127.0.0.1:8081" }' or " { ... }"
      fail(self, p.file, p.line, p.kind .. " " .. V.q(p.name),
           fmt("missing { ... } after the name: %s %s%s", p.kind, V.q(p.name), ex))
    end
  end
  -- proxy and fallback may name an upstream declared after them or in
  -- another file, so names are looked up only now.
  local fails, used, names = {}, {}, {}
  for i, u in ipairs(self.upstreams) do names[i] = u.name end
  for _, r in ipairs(self.upstream_refs) do
    if self.upstream_by_name[r.name] then
      used[r.name] = true
    elseif #names == 0 then
      fails[#fails + 1] = V.try_fail(r.ctx, r.key, fmt(
        '%s names upstream %s, but there is none; declare it: upstream %s { "127.0.0.1:8081" }',
        r.what, V.q(r.name), V.q(r.name)))
    else
      fails[#fails + 1] = V.try_fail(r.ctx, r.key, fmt("%s names upstream %s, which is not declared%s",
                                                       r.what, V.q(r.name), V.dym(r.name, names)))
    end
  end
  V.raise_first(fails)
  -- Allowed (a policy may hand requests to it), but said: more often a
  -- proxy that was meant to name it and names another.
  for _, u in ipairs(self.upstreams) do
    if not used[u.name] then
      self.warnings[#self.warnings + 1] = fmt(
        "%s:%d: upstream %s is not used by any proxy or fallback (only a policy can send " ..
        "requests to it, with return r:proxy(%s))", u._file, u._line, V.q(u.name), V.q(u.name))
    end
  end
  for _, obj in ipairs(self.created) do
    local info = self.objs[obj]
    if not info.used then
      if info.kind == "location" then
        fail(self, info.file, info.line, "location " .. V.q(info.prefix),
             'must be an element of a vhost table: vhost "name" { location ' ..
             V.q(info.prefix) .. " { ... } }")
      else
        fail(self, info.file, info.line, nil,
             fmt("%s { ... } must be inside the access list of a vhost or location: " ..
                 "access = { %s { ... } }", info.action, info.action))
      end
    end
  end
end

---------------------------------------------------------------------------

function M.load(path, host)
  if type(path) ~= "string" or path == "" then error("luxd.config.load: path must be a string", 2) end
  if type(host) ~= "table" or type(host.prefix) ~= "string" or host.prefix:sub(1, 1) ~= "/" then
    error("luxd.config.load: host.prefix must be an absolute path", 2)
  end
  if type(host.where) ~= "function" then error("luxd.config.load: host.where must be a function", 2) end
  local st = new_state(path, host)
  st.env = st:make_env()
  -- luxd.shared (and whatever else the server provides) for policies.
  if type(host.luxd) == "table" then st.env.luxd = host.luxd end
  local abs = V.abspath(st.prefix, path)
  local text, why = read_file(abs)
  if not text then error(fmt("%s: cannot read: %s", path, why), 0) end
  local ok, err = xpcall(function() st:run_file(path, abs, text) end,
                         function(e) return st:locate(e) end)
  if not ok then error(err, 0) end
  run(st.finish, st)
  return {
    server = st.server or S.server_defaults(st),
    mime = st.mime,
    upstreams = st.upstreams,
    vhost_defaults = S.VHOST_DEFAULTS,
    vhosts = st.vhosts,
    files = st.files,
    warnings = st.warnings,
  }
end

return M
