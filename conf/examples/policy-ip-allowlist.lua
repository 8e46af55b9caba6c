-- An IP allow-list with a policy: only the addresses and networks below may
-- use the site, everyone else gets 403 Forbidden.
--
-- For a fixed list, the compiled access rules do the same without Lua:
--   access = { allow { from = { "10.0.0.0/8", "::1" } }, deny { prefix = "/" } }
-- A policy is the place when the list comes from elsewhere (here, more
-- entries from the LUXD_ALLOW environment variable, e.g.
-- LUXD_ALLOW="203.0.113.7 198.51.100.0/24") or when the decision needs more
-- than the address.

server {
  listen     = { "127.0.0.1:8080", "[::1]:8080" },
  workers    = "auto",
  error_log  = "logs/error.log",
  access_log = "logs/access.log",
  pid_file   = "logs/luxd.pid",
}

local ALLOW = {
  "127.0.0.1", "::1",                  -- this machine
  "10.0.0.0/8", "192.168.0.0/16",      -- the office networks
  "2001:db8:42::/48",                  -- the office, over IPv6
}
for entry in (os.getenv("LUXD_ALLOW") or ""):gmatch("%S+") do ALLOW[#ALLOW + 1] = entry end

-- Addresses as lists of numbers: 4 bytes for IPv4, 8 groups of 16 bits for IPv6.
local function parse4(s)
  local a, b, c, d = s:match("^(%d+)%.(%d+)%.(%d+)%.(%d+)$")
  if not a then return nil end
  local t = { tonumber(a), tonumber(b), tonumber(c), tonumber(d) }
  for i = 1, 4 do if t[i] > 255 then return nil end end
  return t
end

local function parse6(s)
  if s:find("%.") then return nil end  -- no embedded IPv4 in this list
  local head, tail = s:match("^(.-)::(.*)$")
  local function groups(part)
    local t = {}
    if part == "" then return t end
    for g in (part .. ":"):gmatch("([^:]*):") do
      if not g:match("^%x%x?%x?%x?$") then return nil end
      t[#t + 1] = tonumber(g, 16)
    end
    return t
  end
  local h, t
  if head then h, t = groups(head), groups(tail) else h, t = groups(s), {} end
  if not h or not t or #h + #t > 8 or (not head and #h ~= 8) then return nil end
  local out = {}
  for i = 1, #h do out[#out + 1] = h[i] end
  for _ = 1, 8 - #h - #t do out[#out + 1] = 0 end
  for i = 1, #t do out[#out + 1] = t[i] end
  return out
end

local function parse(s)
  -- An IPv4 client on a dual-stack socket shows as ::ffff:a.b.c.d.
  local v4 = s:match("^::[fF][fF][fF][fF]:(%d+%.%d+%.%d+%.%d+)$")
  if v4 then s = v4 end
  local a = parse4(s)
  if a then return a, 8 end
  return parse6(s), 16
end

-- Compiled once per load into { bytes, width, prefix bits }.
local NETS = {}
for _, entry in ipairs(ALLOW) do
  local addr, bits = entry:match("^([^/]+)/(%d+)$")
  addr = addr or entry
  local a, width = parse(addr)
  if a == nil then error("allow-list: not an address: " .. entry) end
  bits = tonumber(bits) or #a * width
  if bits > #a * width then error("allow-list: prefix too long: " .. entry) end
  NETS[#NETS + 1] = { a, width, bits }
end

local function allowed(addr)
  local a = parse(addr)
  if a == nil then return false end
  for _, net in ipairs(NETS) do
    local n, width, bits = net[1], net[2], net[3]
    if #n == #a then
      local ok, left = true, bits
      for i = 1, #a do
        if left <= 0 then break end
        local drop = left >= width and 1 or 2 ^ (width - left)
        if math.floor(a[i] / drop) ~= math.floor(n[i] / drop) then ok = false break end
        left = left - width
      end
      if ok then return true end
    end
  end
  return false
end

vhost "intranet.example" {
  default = true,
  root    = "www",
  policy = function(r)
    if not allowed(r.remote_addr) then return 403 end
  end,
}
