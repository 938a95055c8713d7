--- Loads what the host holds into the state: the active chat, its file statuses and the chat list.
local config = require("bb7.config")
local fetch = require("bb7.session.fetch")
local host = require("bb7.host")
local prefs = require("bb7.session.prefs")
local util = require("bb7.util")
local S = require("bb7.session.state")

local M = {}
local ok = S.ok

local function set_chat(r)
  if S.chat and S.chat.id ~= r.id then
    S.retry_context = nil -- a retry belongs to the chat whose edits failed
  end
  S.chat = r
  if not S.model_override or S.model_override.chat ~= r.id then
    S.model_override = nil
  end
  -- The name may have changed (a generated title can be stored before its event arrives).
  for _, c in ipairs(S.chats or {}) do
    if c.id == r.id and c.name ~= r.name then
      c.name = r.name
      vim.schedule(function()
        S.emit("chats")
      end)
    end
  end
end

--- Reloads the active chat and its file statuses from the host.
function M.load_chat()
  local r = host.call("chat_get", {})
  if not ok(r) then
    S.chat, S.statuses = nil, {}
    S.emit("chat")
    S.emit("files")
    return false
  end
  set_chat(r)
  if S.lost_reply and S.lost_reply.chat_id == r.id and host.running() then
    -- The host died while this chat's reply streamed: the chat keeps a note saying so.
    local note = S.lost_reply.note
    S.lost_reply = nil
    if ok(host.call("add_system_message", { message = note })) then
      local again = host.call("chat_get", {})
      if ok(again) then
        set_chat(again)
      end
    end
  end
  M.refresh_files()
  S.emit("chat")
  return true
end

--- Like `load_chat` without waiting: the replies are handled as they come, then `cb()` runs.
--- Used after a reply, so the editor is never blocked on the host there.
function M.load_chat_async(cb)
  host.request("chat_get", {}, function(r)
    if not ok(r) then
      return cb()
    end
    set_chat(r)
    host.request("get_file_statuses", {}, function(fs)
      if ok(fs) and S.chat and S.chat.id == r.id then
        S.statuses = fs.files or {}
        fetch.fetch_estimate()
      end
      S.emit("files")
      S.emit("chat")
      cb()
    end)
  end)
end

--- Reloads the file statuses of the active chat.
function M.refresh_files()
  if not S.chat then
    S.statuses = {}
  else
    local r = host.call("get_file_statuses", {})
    S.statuses = ok(r) and (r.files or {}) or {}
    fetch.fetch_estimate()
  end
  S.emit("files")
end

--- The status entry of `path`.
function M.status_of(path)
  for _, f in ipairs(S.statuses) do
    if f.path == path and not f.start_line then
      return f
    end
  end
end

--- The chat list (newest first), pinned chats first.
function M.list_chats()
  local global = S.scope == "global"
  local r = host.call("chat_list", { global = global or nil })
  if not ok(r) then
    S.fail("list chats", r)
    return S.chats or {}
  end
  local list = r.chats or {}
  if global then
    for _, c in ipairs(list) do
      c.global = true
    end
  end
  S.chats = util.order_chats(list, prefs.pinned())
  S.chats_root = (S.root or config.root()) .. (global and " (global)" or "")
  return S.chats
end

return M
