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

-- Compiled once per load, as the access rules' `from` lists are: a bad
-- entry stops the load (luxd -t names the line). An IPv4 client on a
-- dual-stack socket (::ffff:a.b.c.d) matches its IPv4 network.
local OFFICE = luxd.cidr(ALLOW)

vhost "intranet.example" {
  default = true,
  root    = "www",
  policy = function(r)
    -- contains() is nil (false here) for a client with no IP address.
    if not OFFICE:contains(r.remote_addr) then return 403 end
  end,
}
