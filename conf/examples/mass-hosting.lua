-- Mass virtual hosting (Tux's virtual_server, lighttpd's mod_simple_vhost):
-- a request for Host "a.example" is served from vhost_dir/a.example/, so a
-- new site is a new directory and needs no reload.

server {
  listen     = { ":8080" },              -- every address
  workers    = "auto",
  vhost_dir  = "/srv/vhosts",
  error_log  = "logs/error.log",
  access_log = { path = "logs/access.log", format = "json" },
  max_connections = 50000,
}

-- Rules that apply to every site would go on named vhosts; a named vhost
-- still wins over vhost_dir for its own names.
vhost "status.localhost" {
  root = "www",
  access = {
    allow { from = { "127.0.0.1", "::1" } },
    deny  { all = true },
  },
}
