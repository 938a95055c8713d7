--- The session's one shared table: the project and chat state every session module reads and writes,
--- with the event bus the panes subscribe to and the `BB-7: …` feedback of SPEC.md.
---
--- `bb7.session` (init.lua) merges every session operation into this same table, so
--- `require("bb7.session").chat` and `require("bb7.session.state").chat` are one field. The session
--- modules require each other in one direction only (see init.lua); none of them requires the UI:
--- the UI fills in `view` when it is built.
local M = {}
local L = vim.log.levels

M.root = nil ---@type string|nil  project root the host was initialized with
M.initialized = false -- the project has `.bb7/` and the host is in project mode
M.global_only = false -- the host serves the global chats only (`:BB7Global` outside a project)
M.chat = nil ---@type table|nil  the active chat (`chat` reply)
M.statuses = {} ---@type table[]  `file_statuses` of the active chat
M.chats = nil ---@type table[]|nil  the chat list
M.stream = nil ---@type table|nil  {rid, chat_id, content} while a send is in flight
M.last_usage = nil ---@type table|nil
M.last_duration = nil
M.balance = nil ---@type table|nil
M.models = nil ---@type table[]|nil
M.retry_context = nil ---@type table|nil  after a diff_error, sent with the next send
M.question = nil ---@type table|nil  {question_id, question, chat_id, global}: the agent waits for an answer
M.rolled_back = {} ---@type table<string, boolean>  paths a hard rollback removed from disk
M.scope = "project" ---@type "project"|"global"  which chats the chat list shows

--- The floating UI as the session sees it, set by `bb7.ui` when it builds its panes (nil before):
--- whether it is open, the buffer it was opened from, closing it. The session never requires the UI.
---@type {is_open: fun(): boolean, origin_buf: fun(): integer|nil, close: fun()}|nil
M.view = nil

--- Whether a reply streams in the host process the session talks to now: that process refuses to
--- change its active chat (select, new, fork, move, apply, ...) until the reply ends, so those go
--- to another process (`bb7.session.chats`).
function M.busy_here()
  local st = M.stream
  return st ~= nil and st.proc ~= nil and st.proc == require("bb7.host").current()
end

local subscribers = {} ---@type table<string, fun(...)[]>

--- Subscribes to a session event: "chat", "files", "chats", "chat_title", "draft", "leaving_chat",
--- "stream_start", "chunk", "agent_event", "stream_end", "status".
function M.subscribe(event, fn)
  subscribers[event] = subscribers[event] or {}
  table.insert(subscribers[event], fn)
end

function M.emit(event, ...)
  for _, fn in ipairs(subscribers[event] or {}) do
    local ok, err = pcall(fn, ...)
    if not ok then
      vim.notify("BB-7: internal error (" .. event .. "): " .. tostring(err), L.ERROR)
    end
  end
end

--- `vim.notify` with the BB-7 prefix.
function M.notify(msg, level)
  vim.notify("BB-7: " .. msg, level or L.INFO)
end

--- Asks before a destructive action (`vim.ui.select`, so the user's picker is used); runs `fn` on "Yes".
function M.confirm(prompt, fn)
  vim.ui.select({ "No", "Yes" }, { prompt = prompt }, function(choice)
    M.clear_prompt()
    if choice == "Yes" then
      fn()
    end
  end)
end

--- After Neovim's built-in `vim.ui.select` (an inputlist on the command line), the next message
--- would stop at "Press ENTER": the prompt's lines are cleared first. A picker plugin's select
--- leaves nothing there, and the redraw costs nothing.
function M.clear_prompt()
  if #vim.api.nvim_list_uis() > 0 then
    pcall(vim.cmd, "redraw")
  end
end

--- Notifies a failed host reply the way SPEC.md words it.
---@param action string  what failed, for "Failed to {action}"
---@param reply table
function M.fail(action, reply)
  local msg = tostring(reply.message or "unknown error")
  if msg:find("No active chat", 1, true) then
    M.notify("No active chat", L.WARN)
  elseif msg:find("already in progress", 1, true) then
    M.notify("Another request is already in progress", L.WARN)
  elseif msg:find("locked", 1, true) then
    M.notify("Failed to " .. action .. ": " .. msg, L.WARN)
  else
    M.notify("Failed to " .. action .. ": " .. msg, L.ERROR)
  end
end

--- Whether a host reply is a success (anything but `type = "error"`).
function M.ok(reply)
  return reply.type ~= "error"
end

--- Closes the floating UI when it is open: a view in a tab of its own is about to take over.
function M.close_view()
  if M.view and M.view.is_open() then
    M.view.close()
  end
end

return M
