--- Asynchronous look-ups the UI shows, kept in the state: the model list, the account balance and
--- the token estimate of the active chat's next request.
local host = require("bb7.host")
local S = require("bb7.session.state")

local M = {}

--- Fetches the model list (async); `cb(models|nil)`.
function M.fetch_models(cb)
  if S.models then
    return cb(S.models)
  end
  host.request("get_models", {}, function(r)
    if r.type ~= "models" then
      S.fail("load models", r)
      return cb(nil)
    end
    S.models = r.models or {}
    cb(S.models)
  end)
end

--- Fetches the balance (async) and announces it. Failures (no key, offline) stay quiet: the
--- footer simply shows no balance.
function M.fetch_balance()
  host.request("get_balance", {}, function(r)
    if r.type == "balance" then
      S.balance = r
      S.emit("status")
    end
  end)
end

--- Fetches the token estimate of the active chat's next request (async).
function M.fetch_estimate()
  local id = S.chat and S.chat.id
  host.request("estimate_tokens", {}, function(r)
    if r.type == "token_estimate" and S.chat and S.chat.id == id then
      S.estimate = r
      S.emit("status")
    end
  end)
end

return M
