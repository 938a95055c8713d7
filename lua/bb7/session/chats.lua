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

--- Whether the chat list shows the global chats (`~/.bb7/chats`) instead of the project's.
local function global_scope()
  return S.scope == "global" or nil
end

--- A host process that is not streaming a reply: the current one, else another one running, else
--- a new one put in the same project. The host runs one reply at a time per process and does not
--- change its active chat under it, so other chats are opened in another process meanwhile.
--- Returns nil (notified) when none could be started.
local function idle_proc()
  if not S.busy_here() then
    return host.current()
  end
  for _, p in ipairs(host.others()) do
    if p ~= S.stream.proc then
      return p
    end
  end
  local streaming = host.current()
  local p = host.spawn()
  if not p then
    return nil
  end
  local r = host.call("init", { project_root = S.initialized and S.root or "" })
  host.use(streaming)
  if not ok(r) then
    S.fail("start a second host process for the other chat", r)
    host.stop_proc(p)
    return nil
  end
  return p
end

--- Makes `p` the process the session talks to (its active chat is about to be loaded).
local function use(p)
  if p ~= host.current() then
    host.use(p)
  end
end

--- Stops the host processes left from a reply that has ended (they hold their chat's lock).
function M.drop_idle_procs()
  for _, p in ipairs(host.others()) do
    if not (S.stream and S.stream.proc == p) then
      host.stop_proc(p)
    end
  end
end

function M.new_chat(name, global)
  if not project.ensure_initialized() then
    return false
  end
  if global == nil then
    global = global_scope()
  end
  local params = { name = name, global = global or nil }
  local model = settings.current_model()
  if model then
    params.model = model
  end
  local p = idle_proc()
  if not p then
    return false
  end
  S.emit("leaving_chat")
  local r = host.call("chat_new", params, { proc = p })
  if not ok(r) then
    S.fail("create chat", r)
    return false
  end
  use(p)
  chat.load_chat()
  chat.list_chats()
  S.emit("chats")
  return true
end

--- Whether chat `c` (a `chat` reply or a list entry with `global`) is chat `id` of that store.
local function same(c, id, global)
  return c ~= nil and c.id == id and not c.global == not global
end

function M.select_chat(id, global)
  if global == nil then
    global = global_scope()
  end
  if same(S.chat, id, global) then
    return true
  end
  local st = S.stream
  if st and st.chat_id == id and not st.global == not global and st.proc and st.proc ~= host.current()
    and vim.tbl_contains(host.others(), st.proc) then
    -- Back to the chat whose reply streams: its process has it active.
    S.emit("leaving_chat")
    use(st.proc)
    chat.load_chat()
    S.emit("chats")
    return true
  end
  local p = idle_proc()
  if not p then
    return false
  end
  S.emit("leaving_chat")
  local r = host.call("chat_select", { id = id, global = global or nil }, { proc = p })
  if not ok(r) then
    S.fail("select chat", r)
    -- A lock that is not a regular file (a planted FIFO): the host names it; offer to remove it.
    if tostring(r.message):find("chat_force_unlock", 1, true) then
      S.confirm("Force-unlock this chat (remove its lock) and open it?", function()
        local u = host.call("chat_force_unlock", { id = id, global = global or nil }, { proc = p })
        if not ok(u) then
          S.fail("force-unlock chat", u)
          return
        end
        M.select_chat(id, global)
      end)
    end
    return false
  end
  use(p)
  chat.load_chat()
  S.emit("chats")
  return true
end

--- Moves chat `id` between the project and the global store (`to`: "global" or "project"); the
--- moved chat becomes the active one.
function M.move_chat(id, to)
  if S.stream and S.stream.chat_id == id then
    S.notify("Another request is already in progress", L.WARN)
    return false
  end
  local p = idle_proc()
  if not p then
    return false
  end
  S.emit("leaving_chat")
  local r = host.call("chat_move", { id = id, to = to }, { proc = p })
  if not ok(r) then
    S.fail("move chat", r)
    return false
  end
  use(p)
  chat.load_chat()
  chat.list_chats()
  S.emit("chats")
  S.notify(to == "global" and "Moved chat to the global chats" or "Moved chat into the project")
  return true
end

function M.rename_chat(id, name, global)
  if global == nil then
    global = global_scope()
  end
  local r = host.call("chat_rename", { id = id, name = name, global = global or nil })
  if not ok(r) then
    S.fail("rename chat", r)
    return false
  end
  if same(S.chat, id, global) then
    S.chat.name = name
    S.emit("chat")
  end
  chat.list_chats()
  S.emit("chats")
  S.notify("Renamed chat to " .. util.oneline(name))
  return true
end

function M.delete_chat(id, global)
  if global == nil then
    global = global_scope()
  end
  if S.stream and S.stream.chat_id == id then
    S.notify("Another request is already in progress", L.WARN)
    return false
  end
  local p = idle_proc()
  if not p then
    return false
  end
  local r = host.call("chat_delete", { id = id, global = global or nil }, { proc = p })
  if not ok(r) then
    S.fail("delete chat", r)
    return false
  end
  prefs.set_pinned(id, false)
  if same(S.chat, id, global) then
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
function M.fork_chat(id, global)
  if global == nil then
    global = global_scope()
  end
  local p = idle_proc()
  if not p then
    return false
  end
  S.emit("leaving_chat")
  local r = host.call("chat_new_with_context", { source_chat_id = id, global = global or nil }, { proc = p })
  if not ok(r) then
    S.fail("fork chat", r)
    return false
  end
  use(p)
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
  local p = idle_proc()
  if not p then
    return false
  end
  local params = { chat_id = S.chat.id, fork_message_index = index, global = S.chat.global or nil }
  S.emit("leaving_chat")
  local r = host.call("fork_chat", params, { proc = p })
  if not ok(r) then
    S.fail("fork chat", r)
    return false
  end
  use(p)
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
  if S.busy_here() then
    S.notify("Another request is already in progress", L.WARN)
    return false
  end
  local msg = S.chat.messages[index + 1]
  local content = msg and M.message_text(msg) or ""
  local r = host.call("chat_edit", { chat_id = S.chat.id, message_index = index, content = content, global = S.chat.global or nil })
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
  local r = host.call("search_chats", { query = query, global = global_scope() })
  if not ok(r) then
    S.fail("search chats", r)
    return nil
  end
  return r.results or {}
end

function M.save_draft(text)
  if not S.chat or S.busy_here() then
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
