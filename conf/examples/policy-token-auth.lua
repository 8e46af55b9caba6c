-- Token authentication with a policy: every request needs
--
--   Authorization: Bearer <token>
--
-- with one of the tokens below, or it gets 401 Unauthorized and a
-- WWW-Authenticate challenge (RFC 6750). /static/ stays open: a location's
-- policy replaces its vhost's, so an empty one lets everything through.
--
--   curl -H "Authorization: Bearer alice-7f3c9e2b5d1a" http://127.0.0.1:8080/

server {
  listen     = { "127.0.0.1:8080" },
  workers    = "auto",
  error_log  = "logs/error.log",
  access_log = "logs/access.log",
  pid_file   = "logs/luxd.pid",
}

-- token -> who holds it. The table is built once per load (start and each
-- reload), so rotating a token is an edit and `luxd -s reload`.
local TOKENS = {
  ["alice-7f3c9e2b5d1a"] = "alice",
  ["bob-0e8d4c6a2f91e5"] = "bob",
}
-- One more from the environment, to keep a secret out of the file.
local deploy = os.getenv("LUXD_DEPLOY_TOKEN")
if deploy and #deploy >= 16 then TOKENS[deploy] = "deploy" end

local CHALLENGE = 'Bearer realm="api"'

vhost "api.example" {
  default = true,
  root    = "www",

  policy = function(r)
    local auth = r.headers["authorization"]
    if auth == nil then
      r:set_header("WWW-Authenticate", CHALLENGE)
      return 401                      -- error_pages apply, if the vhost has one for 401
    end
    -- The scheme is case-insensitive (RFC 7235), the token is not
    -- (b64token: letters, digits, - . _ ~ + /, then any '=').
    local scheme, token = auth:match("^(%a+) +([%w%-%._~%+/]+=*) *$")
    if scheme == nil or scheme:lower() ~= "bearer" or TOKENS[token] == nil then
      r:set_header("WWW-Authenticate", CHALLENGE .. ', error="invalid_token"')
      return 401
    end
    return nil                        -- a known token: on to the file
  end,

  location "/static/" {
    policy = function(r) return nil end,
  },
}
