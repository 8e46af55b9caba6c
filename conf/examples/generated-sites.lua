-- Vhosts generated from a Lua table: the config is a program, so a list of
-- sites (here inline; it could come from a file under conf.d/) becomes one
-- vhost each, with shared rules written once.

server {
  listen  = { "127.0.0.1:8080" },
  workers = "auto",
}

local sites = {
  { name = "alpha.example", aliases = { "www.alpha.example" } },
  { name = "beta.example",  cache = 300, listing = true },
  { name = "gamma.example", redirect_to = "https://alpha.example/" },
}

-- Rules every site gets.
local common_access = {
  deny { suffix = { "~", ".inc", ".bak" } },
  deny { regex = [[/\.]] },
}

for _, site in ipairs(sites) do
  local v = {
    aliases = site.aliases or {},
    root = "sites/" .. site.name,
    access = common_access,
    cache_control = site.cache and ("public, max-age=" .. site.cache) or nil,
    dir_listing = site.listing or false,
    location "/static/" { cache_control = "public, max-age=86400" },
  }
  if site.redirect_to then
    v.redirect = { { "^/(.*)$", site.redirect_to .. "$1", status = 301 } }
  end
  vhost(site.name)(v)
end

-- Numbered test sites: 100 vhosts from one loop.
for i = 1, 100 do
  vhost(string.format("test%03d.example", i)) { root = "sites/test/" .. i }
end
