-- A maintenance switch: while it is on, every request answers
-- 503 Service Unavailable with Retry-After, except from the admin addresses,
-- which see the site as usual (to check it before opening it again).
--
-- Turn it on either way:
--   touch conf/maintenance.on && luxd -s reload     (rm it and reload: off)
--   LUXD_MAINTENANCE=1 in the server's environment  (read when luxd starts)
--
-- The switch is read while the config loads, so when it is off the vhost
-- has no policy at all and requests cost nothing extra.

server {
  listen     = { "127.0.0.1:8080" },
  workers    = "auto",
  error_log  = "logs/error.log",
  access_log = "logs/access.log",
  pid_file   = "logs/luxd.pid",
}

local FLAG        = "conf/maintenance.on"     -- relative to the directory luxd runs in
local RETRY_AFTER = 600                       -- seconds
local ADMINS      = { ["127.0.0.1"] = true, ["::1"] = true }

-- io works while the config loads (never while serving requests).
local io = require "io"
local function exists(path)
  local f = io.open(path, "r")
  if f then f:close() return true end
  return false
end

local MAINTENANCE = os.getenv("LUXD_MAINTENANCE") == "1" or exists(FLAG)

local function maintenance(r)
  if ADMINS[r.remote_addr] then
    r:set_header("X-Maintenance", "on (admin view)")
    return nil
  end
  r:set_header("Retry-After", tostring(RETRY_AFTER))
  r:set_header("Cache-Control", "no-store")
  return r:respond(503, "Down for maintenance. Back in a few minutes.\n")
end

vhost "localhost" {
  default = true,
  root    = "www",
  policy  = MAINTENANCE and maintenance or nil,
}
