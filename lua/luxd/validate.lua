-- luxd.validate: the pieces luxd.config builds its checks from.
--
-- A check never raises a plain string. It raises a "failure" (see V.fail)
-- that remembers the block it was checking (its context: file, starting line
-- and a label such as 'vhost "example.com"') and, when it is about one key,
-- that key. Only when a failure is reported is the line of the key looked up in
-- the source text, so a config that generates ten thousand vhosts in a loop
-- costs no text searching at all when it is correct.
--
-- This module has no state of its own: the source lines and the prefix live in
-- the loader state that luxd.config passes in every context (ctx.st).

local V = {}

local fmt, concat, sort = string.format, table.concat, table.sort
local new_tab = require("table.new")
local byte, find, sub = string.byte, string.find, string.sub
local floor, huge, max = math.floor, math.huge, math.max

---------------------------------------------------------------------------
-- Showing values in messages

-- Quotes a string the way a user would write it in the config.
function V.q(s)
  s = tostring(s)
  if s:find('[%c"\\]') then
    return (fmt("%q", s):gsub("\\\n", "\\n"))
  end
  return '"' .. s .. '"'
end

-- A value as it should appear after "got": strings quoted, numbers as written,
-- anything else by its type.
function V.show(v)
  local t = type(v)
  if t == "string" then return V.q(v) end
  if t == "number" then
    if v ~= v then return "nan" end
    if v == huge then return "math.huge" end
    if v == -huge then return "-math.huge" end
    return fmt("%.14g", v)
  end
  if t == "boolean" or t == "nil" then return tostring(v) end
  return t
end

---------------------------------------------------------------------------
-- Did you mean?

-- Levenshtein distance between two strings.
function V.distance(a, b)
  local la, lb = #a, #b
  if la == 0 then return lb end
  if lb == 0 then return la end
  local prev, cur = {}, {}
  for j = 0, lb do prev[j] = j end
  for i = 1, la do
    cur[0] = i
    local ca = a:byte(i)
    for j = 1, lb do
      local cost = (ca == b:byte(j)) and 0 or 1
      local d = prev[j - 1] + cost
      local del, ins = prev[j] + 1, cur[j - 1] + 1
      if del < d then d = del end
      if ins < d then d = ins end
      cur[j] = d
    end
    prev, cur = cur, prev
  end
  return prev[lb]
end

-- The candidate closest to `word`, when it is close enough to be a typo: at
-- most 2 edits (1 for words of up to 3 letters), or a third of the word's
-- length for long words. Case is ignored. Ties go to the earlier candidate.
function V.suggest(word, candidates)
  if type(word) ~= "string" then return nil end
  local w = word:lower()
  local limit = (#w <= 3) and 1 or max(2, floor(#w / 3))
  local best, bestd
  for _, c in ipairs(candidates) do
    local d = V.distance(w, c:lower())
    if d <= limit and (not bestd or d < bestd) then best, bestd = c, d end
  end
  return best
end

-- ' (did you mean "x"?)' or "".
function V.dym(word, candidates)
  local s = V.suggest(word, candidates)
  if s and s ~= word then return fmt(" (did you mean %s?)", V.q(s)) end
  return ""
end

---------------------------------------------------------------------------
-- Source lines

-- The code part of a line: the text before a "--" comment that is outside a
-- quoted string. Long strings and long comments spanning lines are not
-- tracked; this is a heuristic that only picks the line an error names.
local function strip_comment(line)
  local quote, i, n = nil, 1, #line
  while i <= n do
    local c = line:sub(i, i)
    if quote then
      if c == "\\" then i = i + 1
      elseif c == quote then quote = nil end
    elseif c == '"' or c == "'" then
      quote = c
    elseif c == "-" and line:sub(i + 1, i + 1) == "-" then
      return line:sub(1, i - 1)
    end
    i = i + 1
  end
  return line
end

-- Splits source text into an array of lines with comments removed.
function V.split_lines(text)
  local lines = {}
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    lines[#lines + 1] = strip_comment((line:gsub("\r$", "")))
  end
  return lines
end

-- True when `pat` matches `line` as an assignment: followed by "=" but not "==".
local function assigns(line, pat)
  local init = 1
  while true do
    local s, e = line:find(pat, init)
    if not s then return false end
    if line:sub(e + 1, e + 1) ~= "=" then return true end
    init = e + 1
  end
end

-- The line at or after `start` where `key` is written as a table key
-- (`key =`, `["key"] =`, `[404] =`), or `start` when there is none.
-- The patterns per key, made once: every vhost asks for its root's line.
local find_key_line
local key_pats = {}    -- one lua_State per load: it lives as long as the load
-- The answers for the last (lines, start) asked: vhosts made in a loop all
-- start on the line of the loop's vhost call and ask the same keys.
local last_lines, last_start, last_found
function V.key_line(lines, start, key)
  if not lines or key == nil then return start end
  if lines ~= last_lines or start ~= last_start then
    last_lines, last_start, last_found = lines, start, {}
  end
  local found = last_found[key]
  if found == nil then
    found = find_key_line(lines, start, key)
    last_found[key] = found
  end
  return found
end

function find_key_line(lines, start, key)
  local pats = key_pats[key]
  if not pats then
    if type(key) == "number" then
      pats = { "%[%s*" .. fmt("%.14g", key) .. "%s*%]%s*=" }
    else
      local k = tostring(key)
      local esc = k:gsub("%W", "%%%0")
      pats = { "%[%s*[\"']" .. esc .. "[\"']%s*%]%s*=" }
      if k:match("^[%a_][%w_]*$") then
        pats[2] = "%f[%w_]" .. esc .. "%s*="
      end
    end
    key_pats[key] = pats
  end
  for i = (start > 0 and start or 1), #lines do
    local line = lines[i]
    for _, pat in ipairs(pats) do
      if assigns(line, pat) then return i end
    end
  end
  return start
end

-- The line at or after `start` (and before `start + 1000`) where the string
-- `s` is written as a quoted literal, or nil when there is none: the line of
-- an array element, which has no key to look for (an upstream's servers).
function V.item_line(lines, start, s)
  if not lines then return nil end
  local dq, sq, lb = '"' .. s .. '"', "'" .. s .. "'", "[[" .. s .. "]]"
  for i = (start > 0 and start or 1), math.min(#lines, start + 1000) do
    local line = lines[i]
    if line:find(dq, 1, true) or line:find(sq, 1, true) or line:find(lb, 1, true) then return i end
  end
  return nil
end

---------------------------------------------------------------------------
-- Contexts and failures

local Ctx = {}
Ctx.__index = Ctx

-- A context: where a block starts (file, line) and how messages name it.
-- The name is built only when a message needs it (V.label): a label per
-- vhost and rule, made eagerly, was a tenth of a 10,000-vhost load. It is
-- `label`, or `noun` and the quoted `named` ('vhost "a.test"'), or `part`
-- (and its number `n`) after the label of the context `up`.
function V.ctx(st, file, line, label)
  return setmetatable({ st = st, file = file, line = line, label = label }, Ctx)
end

-- A context for a block called `noun` "named".
function V.named_ctx(st, file, line, noun, named)
  return setmetatable({ st = st, file = file, line = line, noun = noun, named = named }, Ctx)
end

function V.label(c)
  local l = c.label
  if l == nil then
    if c.noun then
      l = c.noun .. " " .. V.q(c.named)
    elseif c.part then
      local part = c.n and (c.part .. " " .. c.n) or c.part
      local up = V.label(c.up)
      l = up and (up .. ": " .. part) or part
    end
    c.label = l
  end
  return l
end

-- A context for a part of this block: same file, a longer label (`label`,
-- and `n` after it when given), and optionally another starting line (and
-- file) for key searches.
function Ctx:child(label, line, file, n)
  return setmetatable({ st = self.st, file = file or self.file, line = line or self:start(),
                        up = self, part = label, n = n }, Ctx)
end

-- A context for the value of `key` of this block (an entry of a list): it
-- starts at the line of that key, looked up only if a message needs it.
function Ctx:child_at_key(label, key, n)
  return setmetatable({ st = self.st, file = self.file, up = self, part = label, n = n,
                        parent = self, parent_key = key }, Ctx)
end

-- The line this block starts at.
function Ctx:start()
  if not self.line then self.line = self.parent:key_line(self.parent_key) end
  return self.line
end

-- The line of `key` in this block.
function Ctx:key_line(key)
  return V.key_line(self.st.lines[self.file], self:start(), key)
end

local Failure = {}
Failure.__tostring = function(f) return V.format(f) end

-- Raises a failure of `ctx`: about `key` when given (its line is looked up
-- later), at `line` when given.
function V.fail(ctx, key, msg, line)
  error(setmetatable({ ctx = ctx, key = key, msg = msg, line = line }, Failure), 0)
end

function V.is_fail(e) return getmetatable(e) == Failure end

-- A failure like V.fail's, returned instead of raised (for V.raise_first).
function V.try_fail(ctx, key, msg, line)
  return setmetatable({ ctx = ctx, key = key, msg = msg, line = line }, Failure)
end

function V.fail_line(f)
  if not f.line then
    f.line = (f.key ~= nil) and f.ctx:key_line(f.key) or f.ctx:start()
  end
  return f.line
end

-- "FILE:LINE: label: msg"
function V.format(f)
  local c = f.ctx
  local label = V.label(c)
  return fmt("%s:%d: %s%s", c.file, V.fail_line(f), label and (label .. ": ") or "", f.msg)
end

-- Runs fn(...) and appends the failure it raises, if any, to `fails`.
-- Anything that is not a failure is a bug and is raised again.
local function try(fails, fn, ...)
  local ok, err = pcall(fn, ...)
  if not ok then
    if V.is_fail(err) then fails[#fails + 1] = err else error(err, 0) end
  end
end
V.try = try

-- Where on its line a failure's key is written (for failures on one line),
-- or a large number when that cannot be told.
local function fail_col(f)
  if f.key == nil then return 1e9 end
  local lines = f.ctx.st.lines[f.ctx.file]
  local line = lines and lines[V.fail_line(f)]
  local k = tostring(f.key)
  local pos = line and line:find(k, 1, true)
  return pos or 1e9
end

-- Raises the failure that comes first in the source, if any. Table
-- traversal order is arbitrary, so ties are broken by the position on the
-- line, then by key, to report the same error every time.
function V.raise_first(fails)
  if #fails == 0 then return end
  local best = fails[1]
  for i = 2, #fails do
    local f = fails[i]
    if f.ctx.file == best.ctx.file then
      local a, b = V.fail_line(f), V.fail_line(best)
      if a == b then
        local ca, cb = fail_col(f), fail_col(best)
        if ca == cb then
          a, b = tostring(f.key or ""), tostring(best.key or "")
        else
          a, b = ca, cb
        end
      end
      if a < b then best = f end
    end
  end
  error(best, 0)
end

---------------------------------------------------------------------------
-- Blocks

-- Checks table `t` against `schema`:
--   schema.keys   = { name = checker }, checker(ctx, key, value, what) -> value
--   schema.order  = the names in the order did-you-mean should prefer them
--   schema.items  = function(ctx, t, indexes, out) for array elements, or nil
--   schema.hint   = function(key) -> extra text for an unknown key, or nil
--   schema.unknown = function(ctx, key, value) -> a whole message for an
--                   unknown key, or nil for the usual one
--   schema.slots  = room for this many keys in the result from the start,
--                   or nil: a table grown a key at a time is rehashed at 1,
--                   2, 4 and 8 keys, an eighth of a 10,000-vhost load for
--                   the vhost and rule blocks
-- Returns a table of checked values for the keys `t` has (nil values dropped).
-- When several keys are wrong, the one written first in the file is reported.
local qcache = {}   -- known key -> its quoted form
local SLOW = {}     -- raised by check_fast for what only check_slow reports
local check_slow

-- A block is checked first in one go, under one pcall; only a block with a
-- wrong key is checked again key by key, to report the one written first.
-- (A pcall per key was a good part of a 10,000-vhost load.) Checkers may be
-- run twice then, which is harmless: a failed block fails the load.
local function check_fast(ctx, t, schema, out)
  local keys = schema.keys
  local items
  for k, v in pairs(t) do
    local chk = type(k) == "string" and keys[k]
    if chk then
      local what = qcache[k]
      if not what then what = V.q(k); qcache[k] = what end
      out[k] = chk(ctx, k, v, what)
    elseif type(k) == "number" and k >= 1 and k % 1 == 0 and schema.items then
      items = items or {}
      items[#items + 1] = k
    else
      error(SLOW, 0)
    end
  end
  if items then
    sort(items)
    schema.items(ctx, t, items, out)
  end
  return out
end

function V.check_block(ctx, t, schema, out)
  out = out or new_tab(0, schema.slots or 0)
  local ok, err = pcall(check_fast, ctx, t, schema, out)
  if ok then return out end
  if err ~= SLOW and not V.is_fail(err) then error(err, 0) end
  return check_slow(ctx, t, schema, out)
end

function check_slow(ctx, t, schema, out)
  local fails, items = {}, {}
  for k, v in pairs(t) do
    local tk = type(k)
    if tk == "string" then
      local chk = schema.keys[k]
      if chk then
        local what = qcache[k]
        if not what then what = V.q(k); qcache[k] = what end
        local ok, r = pcall(chk, ctx, k, v, what)
        if ok then
          out[k] = r
        elseif V.is_fail(r) then
          fails[#fails + 1] = r
        else
          error(r, 0)
        end
      else
        local msg = schema.unknown and schema.unknown(ctx, k, v)
        if not msg then
          local dym = V.dym(k, schema.order)
          if dym == "" and schema.hint then dym = schema.hint(k) or "" end
          msg = fmt("unknown key %s", V.q(k)) .. dym
        end
        fails[#fails + 1] = setmetatable({ ctx = ctx, key = k, msg = msg }, Failure)
      end
    elseif tk == "number" and k >= 1 and k % 1 == 0 then
      items[#items + 1] = k
    else
      fails[#fails + 1] = setmetatable({ ctx = ctx, key = k,
        msg = fmt("unexpected key %s (a %s)", V.show(k), tk) }, Failure)
    end
  end
  if #items > 0 then
    sort(items)
    if schema.items then
      try(fails, schema.items, ctx, t, items, out)
    else
      local v = t[items[1]]
      fails[#fails + 1] = setmetatable({ ctx = ctx, msg = fmt(
        "unexpected array element %d (%s); every value needs a key, as in key = value",
        items[1], V.show(v)) }, Failure)
    end
  end
  V.raise_first(fails)
  return out
end

---------------------------------------------------------------------------
-- Checkers: each returns checker(ctx, key, value, what) -> normalized value,
-- where `what` names the value in messages ('"root"', '"index"[2]').

local T = {}
V.T = T

local function bad(ctx, key, what, expected, v)
  V.fail(ctx, key, fmt("%s must be %s, got %s", what, expected, type(v)))
end

-- The longest strings a config may give for what luxd copies into a
-- request, a response or a log line (luxd.lua(5), LIMITS): a header name
-- (request_id_header, the names of headers and proxy_headers, real_ip's
-- header), a header value (their values, cache_control, a mime type), a
-- path sent on inside luxd or to the client (error_pages, try_files,
-- rewrite and redirect targets), an access log template. They keep every
-- such string far inside what a response head or a policy's headers may
-- hold (src/policy/policy.c: 64 KiB), whatever the config says.
V.MAX_NAME = 256
V.MAX_VALUE = 4096
V.MAX_PATH = 4096
V.MAX_FORMAT = 4096

-- Refuses a string longer than max bytes.
function V.check_len(ctx, key, v, what, max)
  if #v > max then
    V.fail(ctx, key, fmt("%s is %d bytes long; at most %d are allowed", what, #v, max))
  end
end

-- o.empty: allow ""; o.line: forbid CR and LF (header-like values);
-- o.max: at most this many bytes; o.check(ctx, key, v, what): more checks.
function T.string(o)
  o = o or {}
  return function(ctx, key, v, what)
    if type(v) ~= "string" then bad(ctx, key, what, "a string", v) end
    if v == "" and not o.empty then V.fail(ctx, key, what .. " must not be empty") end
    -- Plain finds: a pattern find is not compiled, and runs for every
    -- string of a config.
    if find(v, "\0", 1, true) then V.fail(ctx, key, what .. " must not contain a NUL byte") end
    if o.line and (find(v, "\r", 1, true) or find(v, "\n", 1, true)) then
      V.fail(ctx, key, what .. " must not contain a line break")
    end
    if o.max then V.check_len(ctx, key, v, what, o.max) end
    if o.check then o.check(ctx, key, v, what) end
    return v
  end
end

-- o.int: integers only; o.min, o.max: inclusive bounds; o.above: exclusive
-- lower bound.
function T.number(o)
  o = o or {}
  local noun = o.int and "an integer" or "a number"
  return function(ctx, key, v, what)
    if type(v) ~= "number" then bad(ctx, key, what, noun, v) end
    if v ~= v or v == huge or v == -huge then
      V.fail(ctx, key, fmt("%s must be a finite number, got %s", what, V.show(v)))
    end
    if o.int and v % 1 ~= 0 then
      V.fail(ctx, key, fmt("%s must be an integer, got %s", what, V.show(v)))
    end
    if o.min and o.max and (v < o.min or v > o.max) then
      V.fail(ctx, key, fmt("%s must be between %s and %s, got %s", what,
                           V.show(o.min), V.show(o.max), V.show(v)))
    end
    if o.min and v < o.min then
      V.fail(ctx, key, fmt("%s must be >= %s, got %s", what, V.show(o.min), V.show(v)))
    end
    if o.above and v <= o.above then
      V.fail(ctx, key, fmt("%s must be > %s, got %s", what, V.show(o.above), V.show(v)))
    end
    if o.max and v > o.max then
      V.fail(ctx, key, fmt("%s must be <= %s, got %s", what, V.show(o.max), V.show(v)))
    end
    return v
  end
end

function T.boolean()
  return function(ctx, key, v, what)
    if type(v) ~= "boolean" then bad(ctx, key, what, "true or false", v) end
    return v
  end
end

function T.func()
  return function(ctx, key, v, what)
    if type(v) ~= "function" then bad(ctx, key, what, "a function", v) end
    return v
  end
end

function T.enum(values)
  local list = {}
  for i, s in ipairs(values) do list[i] = V.q(s) end
  local expected = "one of " .. concat(list, ", ")
  return function(ctx, key, v, what)
    if type(v) ~= "string" then bad(ctx, key, what, expected, v) end
    for _, s in ipairs(values) do if s == v then return v end end
    V.fail(ctx, key, fmt("%s must be %s, got %s%s", what, expected, V.q(v),
                         V.dym(v, values)))
  end
end

-- True when t is a non-empty sequence 1..n with no other keys, or empty.
local function array_len(t)
  local n = 0
  for k in pairs(t) do
    if type(k) ~= "number" or k < 1 or k % 1 ~= 0 then return nil, k end
    n = n + 1
  end
  for i = 1, n do if t[i] == nil then return nil, i end end
  return n
end
V.array_len = array_len

-- An array whose items pass `item` (a checker); o.single: a lone string is
-- taken as an array of one; o.nonempty: at least one item.
function T.array(item, o)
  o = o or {}
  local expected = o.single and "a string or an array of strings" or "an array"
  return function(ctx, key, v, what)
    if o.single and type(v) == "string" then
      return { item(ctx, key, v, what) }
    end
    if type(v) ~= "table" then bad(ctx, key, what, expected, v) end
    local n, badk = array_len(v)
    if not n then
      V.fail(ctx, key, fmt("%s must be %s, but has key %s", what, expected, V.show(badk)))
    end
    if n == 0 and o.nonempty then V.fail(ctx, key, what .. " must not be empty") end
    local out = {}
    for i = 1, n do out[i] = item(ctx, key, v[i], fmt("%s[%d]", what, i)) end
    return out
  end
end

-- p without the slashes it ends with.
local function strip_slashes(p)
  local e = #p
  while e > 0 and byte(p, e) == 47 do e = e - 1 end
  return e == #p and p or sub(p, 1, e)
end

-- A file system path, made absolute against the loader's prefix.
function V.abspath(prefix, p)
  if p:sub(1, 1) == "/" then
    p = strip_slashes(p)
    return p == "" and "/" or p
  end
  while p:sub(1, 2) == "./" do p = p:sub(3):gsub("^/+", "") end
  if p == "." or p == "" then return prefix end
  p = strip_slashes(p)
  if prefix == "/" then return "/" .. p end
  return prefix .. "/" .. p
end

function T.path()
  local s = T.string()
  return function(ctx, key, v, what)
    return V.abspath(ctx.st.prefix, s(ctx, key, v, what))
  end
end

---------------------------------------------------------------------------
-- Names and addresses

-- Byte sets, tested a byte at a time: LuaJIT compiles such a loop, while a
-- pattern with a character class runs in the interpreter's matcher (a
-- hundred times slower per name; such checks were a fifth of a
-- 10,000-vhost load).
local ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
local function byte_set(chars)
  local set = {}
  for i = 1, #chars do set[byte(chars, i)] = true end
  return set
end
local function all_in(s, set)
  for i = 1, #s do
    if not set[byte(s, i)] then return false end
  end
  return true
end
local HOST_BYTES = byte_set("abcdefghijklmnopqrstuvwxyz0123456789_.-")

local function is_ipv4(s)
  local a, b, c, d = s:match("^(%d+)%.(%d+)%.(%d+)%.(%d+)$")
  if not a then return false end
  for _, x in ipairs({ a, b, c, d }) do
    if #x > 3 or tonumber(x) > 255 then return false end
  end
  return true
end
V.is_ipv4 = is_ipv4

-- A loose IPv6 check (the C side parses it for real with inet_pton).
local function is_ipv6(s)
  if not s:find(":") or not s:match("^[%x:.]+$") then return false end
  local _, colons = s:gsub(":", "")
  return colons >= 2 and colons <= 7
end
V.is_ipv6 = is_ipv6

-- True when s (lower case) is a DNS host name: dot-separated labels of
-- letters, digits, "-" and "_", none starting or ending with "-".
-- (By byte positions: a gmatch and a match per label were a tenth of a
-- 10,000-vhost load.)
local function is_hostname(s)
  local n = #s
  if n == 0 or n > 253 or not all_in(s, HOST_BYTES) then return false end
  local i = 1
  while true do
    local dot = find(s, ".", i, true)
    local e = (dot or n + 1) - 1 -- the label is s[i..e]
    if e < i or e - i >= 63 or byte(s, i) == 45 or byte(s, e) == 45 then return false end
    if not dot then return true end
    i = dot + 1
  end
end
V.is_hostname = is_hostname

-- Normalizes a vhost name or alias: lower case, no trailing dot. Returns the
-- name, or nil and the reason it is not one.
function V.vhost_name(s)
  local n = s:lower()
  if byte(n, -1) == 46 then n = sub(n, 1, -2) end -- one trailing "."
  if n == "*" then
    return nil, "is not a valid host name; to serve every other host, use default = true"
  end
  local bare = n
  if n:sub(1, 2) == "*." then bare = n:sub(3) end
  if byte(bare, 1) == 91 and bare:match("^%[[%x:.]+%]$") and is_ipv6(bare:sub(2, -2)) and
     bare == n then
    return n
  end
  if not is_hostname(bare) then
    return nil, 'is not a valid host name (letters, digits, "-" and "." only; ' ..
                '"*.example.com" for a wildcard)'
  end
  return n
end

-- Parses a port string: an integer 1..65535, or nil.
local function port_of(s)
  if not s or not s:match("^%d+$") or #s > 5 then return nil end
  local p = tonumber(s)
  if p < 1 or p > 65535 then return nil end
  return p
end

-- Parses a listen entry: "host:port", ":port", "*:port", "port" or a number,
-- "[v6]:port". Returns host ("" = all addresses), port; or nil and a reason.
function V.parse_listen(v)
  if type(v) == "number" then
    if v % 1 == 0 and v >= 1 and v <= 65535 then return "", v end
    return nil, "has a port outside 1..65535"
  end
  local host, port
  if v:match("^%d+$") then
    host, port = "", v
  elseif v:sub(1, 1) == "[" then
    host, port = v:match("^%[([^%]]*)%]:(%d*)$")
    if not host then return nil, 'is not "host:port", ":port" or "[IPv6]:port"' end
    if not is_ipv6(host) then return nil, "has an invalid IPv6 address" end
  else
    host, port = v:match("^([^:]*):(%d*)$")
    if not host then return nil, 'is not "host:port", ":port" or "[IPv6]:port"' end
    if host == "*" then host = "" end
    if host ~= "" and not is_ipv4(host) then
      return nil, 'must name an IP address ("127.0.0.1:8080", "[::1]:8080") or none (":8080" for all addresses)'
    end
  end
  local p = port_of(port)
  if not p then return nil, "has a port outside 1..65535" end
  return host, p
end

-- Parses an upstream server "host:port" or "[v6]:port"; the host may be a name.
-- ("unix:/path" is told apart by the caller, luxd.schema.)
function V.parse_server(v)
  local host, port
  if v:sub(1, 1) == "[" then
    host, port = v:match("^%[([^%]]*)%]:(%d*)$")
    if host and not is_ipv6(host) then return nil, "has an invalid IPv6 address" end
  else
    host, port = v:match("^([^:]+):(%d*)$")
    if host and not (is_ipv4(host) or is_hostname(host:lower())) then
      return nil, "has an invalid host"
    end
  end
  if not host then return nil, 'is not "host:port", "[IPv6]:port" or "unix:/path"' end
  local p = port_of(port)
  if not p then return nil, "has a port outside 1..65535" end
  return host, p
end

-- Checks a Host value "host[:port]" (proxy_host): a DNS name, an IPv4
-- address or "[IPv6]", then an optional port 1..65535. Returns true, or nil
-- and the reason.
function V.host_value(v)
  local host, port = v, nil
  if v:sub(1, 1) == "[" then
    local h, rest = v:match("^(%[[^%]]*%])(.*)$")
    if not h then return nil, 'has an unclosed "["' end
    host = h
    if rest ~= "" then
      port = rest:match("^:(.*)$")
      if not port then return nil, 'has something other than ":port" after "]"' end
    end
    if not is_ipv6(host:sub(2, -2)) then return nil, "has an invalid IPv6 address" end
  else
    local h, p = v:match("^([^:]*):(.*)$")
    if h then host, port = h, p end
    if not (is_ipv4(host) or is_hostname(host:lower())) then
      return nil, 'is not a host name (letters, digits, "-" and "."), an IPv4 address or "[IPv6]"'
    end
  end
  if port and not port_of(port) then return nil, "has a port outside 1..65535" end
  return true
end

-- A loose check of an IP address or CIDR (the C side parses it for real).
function V.is_cidr(s)
  local addr, bits = s:match("^([^/]+)/(%d+)$")
  addr = addr or s
  if is_ipv4(addr) then return not bits or tonumber(bits) <= 32 end
  if is_ipv6(addr) then return not bits or tonumber(bits) <= 128 end
  return false
end

-- An HTTP token (header names, methods).
local TOKEN_BYTES = byte_set("!#$%&'*+-.^_`|~" .. ALNUM)
function V.is_token(s)
  return #s > 0 and all_in(s, TOKEN_BYTES)
end

return V
