-- /etc/luxd/conf.d/default.lua: the site that answers any Host no other
-- vhost claims, serving /var/www/html (as Debian's nginx does with
-- sites-enabled/default). Included by /etc/luxd/luxd.lua; `make install`
-- and the Debian package never replace an edited copy. luxd.lua(5) lists
-- every key a vhost takes.

vhost "localhost" {
  default = true,                        -- answers any Host no other vhost claims
  root    = "/var/www/html",
  index   = { "index.html", "index.htm", "index.luxd-debian.html" },
  access  = {
    deny { regex = [[/\.]] },            -- dotfiles: /.git/, /.env
  },
}
