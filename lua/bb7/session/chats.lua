--- Operations on chats: new, select, rename, delete, fork (a chat or at a message), edit a message,
--- search, the draft, pins.
local chat = require("bb7.session.chat")
local host = require("bb7.host")
local prefs = require("bb7.session.prefs")
local project = require("bb7.session.project")
local settings = require("bb7.session.settings")
local util = require("bb7.util")
local S = require("bb7.session.state")

local M = {}
local L = vim.log.levels
local ok = S.ok

function M.new_chat(name)
  if not project.ensure_initialized() then
    return false
  end
  if S.stream then
    S.notify("Another request is already in progress", L.WARN)
    return false
  end
  local params = { name = name }
  local model = settings.current_model()
  if model then
    params.model = model
  end
  local r = host.call("chat_new", params)
  if not ok(r) then
    S.fail("create chat", r)
    return false
  end
  chat.load_chat()
  chat.list_chats()
  S.emit("chats")
  return true
end

function M.select_chat(id)
  if S.chat and S.chat.id == id then
    return true
  end
  if S.stream then
    S.notify("Another request is already in progress", L.WARN)
    return false
  end
  S.emit("leaving_chat")
  local r = host.call("chat_select", { id = id })
  if not ok(r) then
    S.fail("select chat", r)
    -- A lock that is not a regular file (a planted FIFO): the host names it; offer to remove it.
    if tostring(r.message):find("chat_force_unlock", 1, true) then
      S.confirm("Force-unlock this chat (remove its lock) and open it?", function()
        local u = host.call("chat_force_unlock", { id = id })
        if not ok(u) then
          S.fail("force-unlock chat", u)
          return
        end
        M.select_chat(id)
      end)
    end
    return false
  end
  chat.load_chat()
  S.emit("chats")
  return true
end

function M.rename_chat(id, name)
  local r = host.call("chat_rename", { id = id, name = name })
  if not ok(r) then
    S.fail("rename chat", r)
    return false
  end
  if S.chat and S.chat.id == id then
    S.chat.name = name
    S.emit("chat")
  end
  chat.list_chats()
  S.emit("chats")
  S.notify("Renamed chat to " .. util.oneline(name))
  return true
end

function M.delete_chat(id)
  if S.stream and S.stream.chat_id == id then
    S.notify("Another request is already in progress", L.WARN)
    return false
  end
  local r = host.call("chat_delete", { id = id })
  if not ok(r) then
    S.fail("delete chat", r)
    return false
  end
  prefs.set_pinned(id, false)
  if S.chat and S.chat.id == id then
    S.chat, S.statuses = nil, {}
    S.emit("chat")
    S.emit("files")
  end
  chat.list_chats()
  S.emit("chats")
  S.notify("Deleted chat")
  return true
end

--- A new chat with the same model and context as chat `id`.
function M.fork_chat(id)
  local r = host.call("chat_new_with_context", { source_chat_id = id })
  if not ok(r) then
    S.fail("fork chat", r)
    return false
  end
  chat.load_chat()
  chat.list_chats()
  S.emit("chats")
  S.notify("Forked chat with its context")
  return true
end

local function warn_context(warnings)
  for _, w in ipairs(warnings or {}) do
    S.notify(("Context file %s was %s since that message"):format(util.oneline(w.path), util.oneline(w.issue)), L.WARN)
  end
end

--- Forks the active chat at user message `index` (0-based).
function M.fork_message(index)
  if not S.chat then
    return false
  end
  local r = host.call("fork_chat", { chat_id = S.chat.id, fork_message_index = index })
  if not ok(r) then
    S.fail("fork chat", r)
    return false
  end
  chat.load_chat()
  chat.list_chats()
  S.emit("chats")
  warn_context(r.context_warnings)
  S.notify("Forked into a new chat")
  return true
end

--- Truncates the active chat before user message `index` and makes that message the draft.
function M.edit_message(index)
  if not S.chat then
    return false
  end
  if S.stream then
    S.notify("Another request is already in progress", L.WARN)
    return false
  end
  local msg = S.chat.messages[index + 1]
  local content = msg and M.message_text(msg) or ""
  local r = host.call("chat_edit", { chat_id = S.chat.id, message_index = index, content = content })
  if not ok(r) then
    S.fail("edit message", r)
    return false
  end
  chat.load_chat()
  S.emit("draft", content)
  warn_context(r.context_warnings)
  return true
end

--- The text of a message (its text parts, or the legacy `content`).
function M.message_text(msg)
  local parts = {}
  for _, p in ipairs(msg.parts or {}) do
    if p.type == "text" and p.content then
      parts[#parts + 1] = p.content
    end
  end
  if #parts == 0 then
    return msg.content or ""
  end
  return table.concat(parts, "")
end

function M.search(query)
  local r = host.call("search_chats", { query = query })
  if not ok(r) then
    S.fail("search chats", r)
    return nil
  end
  return r.results or {}
end

function M.save_draft(text)
  if not S.chat or S.stream then
    return
  end
  if (S.chat.draft or "") == text then
    return
  end
  local r = host.call("save_draft", { draft = text })
  if ok(r) then
    S.chat.draft = text
  end
end

--- Pins or unpins chat `id` (`.bb7/pinned_chats.json`); returns whether it is pinned now.
function M.toggle_pin(id)
  local on = not vim.tbl_contains(prefs.pinned(), id)
  prefs.set_pinned(id, on)
  chat.list_chats()
  S.emit("chats")
  return on
end

return M
