-- Several sites on one server: exact names, aliases, a wildcard, a default
-- vhost for unknown Host headers, a site with a policy, and an application
-- server behind /api/ (upstream and proxy; see luxd.lua(5)).

server {
  listen     = { "127.0.0.1:8080", "[::1]:8080" },
  workers    = "auto",
  error_log  = "logs/error.log",
  access_log = { path = "logs/access.log", format = "combined" },
  pid_file   = "logs/luxd.pid",
}

mime { [".wasm"] = "application/wasm", [".webmanifest"] = "application/manifest+json" }

-- The application servers; names would be resolved at every load and reload.
upstream "app" {
  "127.0.0.1:8081",
  { "127.0.0.1:8082", weight = 2 },     -- gets two requests for each one of the first
  keepalive = 32, connect_timeout = 2, read_timeout = 30,
}

-- Requests for hosts no vhost names land here.
vhost "default.invalid" {
  default = true,
  root    = "www",
}

vhost "example.com" {
  aliases = { "www.example.com" },
  root    = "sites/example.com",
  etag = true, last_modified = true,
  cache_control = "public, max-age=60",
  headers = { ["X-Frame-Options"] = "DENY", ["Strict-Transport-Security"] = "max-age=31536000" },
  gzip_static = true,                   -- serve style.css.gz when the client accepts gzip

  access = {
    deny  { prefix = "/.git/" },
    allow { prefix = "/admin/", from = { "127.0.0.1", "10.0.0.0/8", "::1" } },
    deny  { prefix = "/admin/" },
  },

  redirect = { { "^/blog$", "/blog/", status = 301 } },

  location "/static/" { cache_control = "public, max-age=86400, immutable" },
  location "/api/"    { proxy = "app", proxy_headers = { ["X-Forwarded-Port"] = "443" } },
}

-- One vhost for every subdomain of example.org.
vhost "*.example.org" {
  root = "sites/example.org",
  dir_listing = true,
}

-- A site with a beta area only some clients may see.
vhost "shop.example.com" {
  root     = "sites/shop",
  -- Per-request Lua, for what the compiled rules cannot say.
  policy = function(r)
    if r.path:find("^/beta/") and r.headers["x-beta"] ~= "1" then
      return 404
    end
  end,
}
