-- lighttpd's classic mod_access setup, in luxd:
--
--   url.access-deny = ( "~", ".inc" )
--   $HTTP["remoteip"] !~ "^(127\.0\.0\.1|10\.)" {
--     $HTTP["url"] =~ "^/admin/" { url.access-deny = ( "" ) }
--   }
--
-- Access rules are checked in order and the first match decides, like
-- nginx's allow/deny lists; they are compiled into C, not run as Lua.

server {
  listen = { "127.0.0.1:8080" },
}

vhost "localhost" {
  default = true,
  root = "www",
  access = {
    deny  { suffix = { "~", ".inc" } },                          -- url.access-deny = ( "~", ".inc" )
    allow { prefix = "/admin/", from = { "127.0.0.1", "10.0.0.0/8" } },
    deny  { prefix = "/admin/" },                                 -- everyone else: 403
    deny  { regex = [[\.(bak|old|orig)$]], status = 404 },       -- pretend these do not exist
  },
}
