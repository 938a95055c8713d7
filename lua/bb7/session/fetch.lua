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
  M.fetch_spend()
end

--- Fetches the spend caps and what was spent today and this month (async, from the host's usage
--- ledger; `get_usage`) for the footer. Failures stay quiet.
function M.fetch_spend()
  host.request("get_usage", { group_by = "day", since = os.date("!%Y-%m-%d") }, function(r)
    if r.type == "usage" then
      S.spend = { caps = r.caps or {}, spent = r.spent or {} }
      S.emit("status")
    end
  end)
end

--- Fetches the usage ledger grouped `by` ("day", "model", "chat"; `get_usage`); `cb(reply)` with
--- the `usage` reply, or nil after a failure (reported).
function M.fetch_usage(by, cb)
  host.request("get_usage", { group_by = by }, function(r)
    if r.type ~= "usage" then
      S.fail("load usage", r)
      return cb(nil)
    end
    S.spend = { caps = r.caps or {}, spent = r.spent or {} }
    cb(r)
  end)
end

--- What is left under the tightest spend cap set for the day or the month:
--- `{cap = "day"|"month", limit, left}`, or nil when neither is set.
function M.spend_left()
  local sp = S.spend
  if not sp then
    return nil
  end
  local best
  for _, k in ipairs({ "day", "month" }) do
    local limit = tonumber(sp.caps["per_" .. k .. "_usd"])
    if limit then
      local left = limit - (tonumber(sp.spent[k]) or 0)
      if not best or left < best.left then
        best = { cap = k, limit = limit, left = left }
      end
    end
  end
  return best
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
