-- luxd's default configuration: the demo site that `make run` serves on
-- http://127.0.0.1:8080/ from the repository root.
--
-- A luxd config is a Lua script. It runs once at start-up (and again on each
-- reload, `kill -HUP`); luxd compiles what it declares into C tables, so none
-- of this runs per request. Relative paths are relative to the directory luxd
-- was started in. `luxd -t -c conf/luxd.lua` checks a config without serving.

server {
  listen     = { "127.0.0.1:8080" },  -- add "[::1]:8080" for IPv6, ":8080" for every address
  workers    = "auto",                -- one event loop per CPU core
  error_log  = "stderr",
  pid_file   = "logs/luxd.pid",       -- for `luxd -s reload -c conf/luxd.lua` and kill -HUP
  access_log = "logs/access.log",     -- combined format, as nginx and Apache write it
  keepalive_timeout = 30,
}

vhost "localhost" {
  default = true,                     -- also answers any Host no other vhost claims
  aliases = { "127.0.0.1" },
  root    = "www",
  index   = { "index.html" },
  headers = {
    ["X-Content-Type-Options"] = "nosniff",
    ["X-Frame-Options"]        = "SAMEORIGIN",
    ["Referrer-Policy"]        = "same-origin",
  },

  -- Access rules run in order; the first that matches decides.
  access = {
    deny  { suffix = { "~", ".bak", ".swp" } },               -- editor leftovers
    deny  { regex = [[/\.]] },                                -- dotfiles: /.git/, /.env
    allow { prefix = "/private/", from = { "127.0.0.1", "::1" } },
    deny  { prefix = "/private/" },                           -- everyone else
    deny  { method = { "TRACE", "TRACK" }, status = 405 },
  },

  redirect = { { "^/home$", "/", status = 301 } },
  rewrite  = { { "^/readme$", "/static/readme.txt" } },

  location "/static/" { cache_control = "public, max-age=3600" },

  error_pages = { [404] = "/404.html" },
}

-- More files in the same language, in sorted order. A relative pattern is
-- resolved against this file's directory (conf/conf.d/ here); none ship, and
-- a pattern that matches nothing is logged as a warning, so it is left out:
-- include "conf.d/*.lua"
