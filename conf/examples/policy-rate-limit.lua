-- A per-IP rate limit with a policy: at most LIMIT requests per WINDOW
-- seconds from one client address; past that, 429 Too Many Requests with
-- Retry-After (the seconds until the window ends).
--
-- The counters live in luxd.shared, one store for all worker loops, so the
-- limit holds whichever loop a connection lands on, and it survives reloads.
-- A window starts at an address's first request: incr gives a new key the
-- ttl and leaves an existing key's expiry alone.

server {
  listen     = { "127.0.0.1:8080" },
  workers    = "auto",
  error_log  = "logs/error.log",
  access_log = "logs/access.log",
  pid_file   = "logs/luxd.pid",
}

local LIMIT, WINDOW = 20, 60
local shared = luxd.shared

vhost "localhost" {
  default = true,
  root    = "www",
  policy = function(r)
    local key = "rate:" .. r.remote_addr
    local n = shared.incr(key, 1, WINDOW)
    if n == nil then
      -- The store is full (100000 keys): serve rather than lock everyone out.
      return nil
    end
    r:set_header("X-RateLimit-Limit", string.format("%d", LIMIT))
    r:set_header("X-RateLimit-Remaining", string.format("%d", math.max(LIMIT - n, 0)))
    if n > LIMIT then
      local left = shared.ttl(key) or WINDOW
      r:set_header("Retry-After", string.format("%d", math.max(1, math.ceil(left))))
      return 429
    end
  end,
}
