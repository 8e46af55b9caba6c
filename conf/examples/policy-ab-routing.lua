-- A/B test by cookie: the site exists twice, under /a/ and /b/.
--
-- A new visitor is put in a bucket (alternately; the count is in
-- luxd.shared, so the split is even across worker loops), gets a cookie
-- "ab=a" or "ab=b" for 30 days, and is redirected to the same page in its
-- bucket: /pricing.html -> /b/pricing.html. A visitor with the cookie always
-- lands in its own bucket, also when a link points into the other one. A new
-- visitor who arrives on /a/... or /b/... keeps that bucket.
--
--   www/a/index.html, www/a/pricing.html ...   version A
--   www/b/index.html, www/b/pricing.html ...   version B

server {
  listen     = { "127.0.0.1:8080" },
  workers    = "auto",
  error_log  = "logs/error.log",
  access_log = "logs/access.log",
  pid_file   = "logs/luxd.pid",
}

local COOKIE, MAX_AGE = "ab", 30 * 24 * 3600
local BUCKETS = { a = true, b = true }

local function cookie_bucket(r)
  local c = r.headers["cookie"]
  if c == nil then return nil end
  local v = (";" .. c):match(";%s*" .. COOKIE .. "=([^;%s]*)")
  return BUCKETS[v] and v or nil
end

-- r.path is decoded: encode it again for the Location header.
local function encode(path)
  return (path:gsub("[^%w%-%._~/!$&'()*+,;=:@]", function(ch)
    return string.format("%%%02X", ch:byte())
  end))
end

vhost "localhost" {
  default = true,
  root    = "www",
  policy = function(r)
    local here, rest = r.path:match("^/([ab])(/.*)$")
    if here == nil and (r.path == "/a" or r.path == "/b") then here, rest = r.path:sub(2), "/" end
    local bucket = cookie_bucket(r)
    if bucket == nil then
      if here then
        bucket = here                 -- a link into a bucket: keep it
      else
        local n = luxd.shared.incr("ab:visitors") or 0
        bucket = n % 2 == 1 and "a" or "b"
      end
      r:set_header("Set-Cookie", string.format("%s=%s; Path=/; Max-Age=%d; HttpOnly; SameSite=Lax",
                                               COOKIE, bucket, MAX_AGE))
    end
    if here == bucket and r.path ~= "/" .. here then
      return nil                      -- already in its bucket: serve the file
    end
    local url = "/" .. bucket .. encode(rest or r.path)
    if r.query ~= "" then url = url .. "?" .. r.query end
    r:set_header("Cache-Control", "private, no-store")
    return r:redirect(url, 302)
  end,
}
