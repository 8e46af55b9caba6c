-- /etc/luxd/luxd.lua: the configuration luxd.service runs. `make install`
-- and the Debian package put it here once and never replace an edited copy.
--
-- A luxd config is a Lua program, run at start-up and on each reload
-- (`systemctl reload luxd`, or `luxd -s reload -c /etc/luxd/luxd.lua`); what
-- it declares is compiled into C tables, so none of it runs per request.
-- Check a change with `luxd -t -c /etc/luxd/luxd.lua`. The language:
-- luxd.lua(5).

server {
  listen   = { ":80" },                  -- every address, IPv6 and IPv4
  workers  = "auto",                     -- one event loop per CPU core
  -- luxd.service's RuntimeDirectory and /var/log/luxd, made for its user:
  -- `luxd -s reload|reopen|stop` and `systemctl reload` find the server
  -- through this pid_file.
  pid_file   = "/run/luxd/luxd.pid",
  error_log  = "/var/log/luxd/error.log",
  access_log = "/var/log/luxd/access.log", -- combined format
}

-- The sites, one file each, in sorted order (relative to this file's
-- directory: /etc/luxd/conf.d/). default.lua serves /var/www/html; add a
-- file per site beside it. Should conf.d/ hold no .lua file, `luxd -t` and
-- the start-up log say so with a warning.
include "conf.d/*.lua"
