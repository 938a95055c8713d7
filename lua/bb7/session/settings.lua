--- The active chat's settings: the model the next send uses, its reasoning effort and its mode (chat
--- or agent), each saved with the chat through `save_chat_settings`.
local host = require("bb7.host")
local prefs = require("bb7.session.prefs")
local S = require("bb7.session.state")

local M = {}
local L = vim.log.levels

--- The model the next send uses.
function M.current_model()
  if S.model_override and (not S.chat or S.model_override.chat == S.chat.id) then
    return S.model_override.model
  end
  if S.chat and S.chat.settings_model and S.chat.settings_model ~= "" then
    return S.chat.settings_model -- the chat's own pick, kept across chat switches and restarts
  end
  if S.chat and S.chat.model and S.chat.model ~= "" then
    return S.chat.model
  end
  return S.default_model or prefs.global_state().last_model
end

--- Sets the model of the active chat (persisted with `save_chat_settings`).
function M.set_model(id)
  local s = prefs.global_state()
  s.last_model = id
  prefs.save_global_state(s)
  if S.chat then
    -- The host reports the model of the last user message; the pick wins until the next send.
    S.model_override = { chat = S.chat.id, model = id }
    local r = host.call("save_chat_settings", { model = id })
    if not S.ok(r) then
      S.fail("save the model", r)
    else
      S.chat.settings_model = id
    end
  end
  S.notify("Model " .. id)
  S.emit("status")
end

--- The reasoning efforts the model picker cycles through ("" = no reasoning).
M.EFFORTS = { "", "low", "medium", "high" }

--- Sets the active chat's reasoning effort (sent with every `send`).
function M.set_reasoning_effort(effort)
  if not S.chat then
    S.notify("No active chat", L.WARN)
    return false
  end
  local r = host.call("save_chat_settings", { reasoning_effort = effort })
  if not S.ok(r) then
    S.fail("save the reasoning effort", r)
    return false
  end
  S.chat.reasoning_effort = effort
  S.notify("Reasoning " .. (effort == "" and "off" or effort))
  S.emit("status")
  return true
end

--- Saves one chat setting `key = value` with the host (async, without blocking the editor): on
--- success it is stored in the active chat and `said` is shown; `cb(ok)` when the host answered.
local function save_setting(key, value, what, said, cb)
  if not S.chat then
    S.notify("No active chat", L.WARN)
    return
  end
  host.request("save_chat_settings", { [key] = value }, function(r)
    if r.type == "error" then
      S.notify(r.message or ("cannot change the " .. what), L.ERROR)
    elseif S.chat then
      S.chat[key] = value
      S.notify(said, L.INFO)
      S.emit("status")
    end
    if cb then
      cb(r.type ~= "error")
    end
  end)
end

--- Sets the active chat's mode, "agent", "plan" or "chat" (async, without blocking the editor); `cb(ok)`
--- when the host answered.
function M.set_mode(mode, cb)
  local said = {
    agent = "Agent mode on: the model may explore the project (read-only)",
    plan = "Plan mode on: the model explores and proposes a plan; nothing changes until you approve it",
  }
  save_setting("mode", mode, "mode", said[mode] or "Agent mode off", cb)
end

--- Sets where the active chat's requests go: "remote", "local" or "hybrid_auto" (:help
--- bb7-providers), saved with the chat (async); `cb(ok)` when the host answered.
function M.set_routing(routing, cb)
  save_setting("routing", routing, "routing", "Routing: " .. routing, cb)
end

return M
