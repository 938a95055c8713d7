--- The Preview pane: the chat (streamed replies, collapsible reasoning), a file view, or the
--- unified context → output diff of a file.
local config = require("bb7.config")
local session = require("bb7.session")
local keymaps = require("bb7.ui.keymaps")
local render = require("bb7.ui.render")
local Stream = require("bb7.ui.stream")
local util = require("bb7.util")

local M = {}
local buf, ui = nil, nil
local ns = vim.api.nvim_create_namespace("bb7_preview")
M.mode = "chat" -- "chat" | "file" | "diff"
M.title = nil
M.expanded = {} -- reasoning blocks opened by the user: "msg:part" -> true
M.layout = nil -- the last chat render (msg_at, fold_at)
M.stream = nil -- the Stream while a reply is streaming
M.flush_times = {} -- ms per flush of the current stream (for benchmarks)

function M.mode_title()
  if M.mode ~= "chat" then
    return M.title
  end
end

local function set_lines(lines, hls, ft)
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.api.nvim_buf_clear_namespace(buf, ns, 0, -1)
  vim.api.nvim_buf_clear_namespace(buf, Stream.ns, 0, -1)
  for _, h in ipairs(hls or {}) do
    local whole = h[3] == -1
    pcall(vim.api.nvim_buf_set_extmark, buf, ns, h[1], h[2], {
      end_row = whole and h[1] + 1 or h[1],
      end_col = whole and 0 or h[3],
      hl_group = h[4],
      strict = false,
    })
  end
  if ft and vim.bo[buf].syntax ~= ft then
    vim.bo[buf].syntax = ft
  end
end

local function win()
  local w = ui and ui.wins.preview
  if w and vim.api.nvim_win_is_valid(w) then
    return w
  end
end

--- Renders the active chat (full render; streaming only appends, see `bb7.ui.stream`).
function M.render()
  if not buf or not vim.api.nvim_buf_is_valid(buf) then
    return
  end
  if M.mode ~= "chat" then
    return
  end
  if M.stream then
    return -- never re-render under a running stream
  end
  local chat = session.chat
  if not chat then
    local n = session.chats and #session.chats or 0
    local msg = n > 0 and "No active chat. Select one in the Chats pane (<CR>) or press n for a new chat."
      or "No chats yet. Press n in the Chats pane to create one, then :BB7Add files to give it context."
    set_lines({ msg }, { { 0, 0, -1, "Comment" } })
    M.layout = nil
    return
  end
  local w = win()
  local was_at_end = false
  local cursor
  if w then
    cursor = vim.api.nvim_win_get_cursor(w)
    was_at_end = cursor[1] >= vim.api.nvim_buf_line_count(buf)
  end
  local r = render.chat(chat, { expanded = M.expanded, collapse = config.options.collapse_reasoning })
  M.layout = r
  set_lines(r.lines, r.hls, "markdown")
  if w then
    local n = #r.lines
    if was_at_end or M.jump_to_end then
      vim.api.nvim_win_set_cursor(w, { math.max(1, n), 0 })
    else
      vim.api.nvim_win_set_cursor(w, { math.min(cursor[1], math.max(1, n)), 0 })
    end
  end
  M.jump_to_end = false
end

--- Back to the chat view.
function M.show_chat()
  M.mode, M.title = "chat", nil
  M.jump_to_end = true
  M.render()
  ui.update_titles()
end

--- Shows a file: its output when there is one, else its context snapshot.
function M.show_file(f)
  if M.stream then
    session.notify("Another request is already in progress", vim.log.levels.WARN)
    return
  end
  local content = f.output_content or f.context_content
  local label = f.output_content and "output" or "context"
  if not content then
    local r = require("bb7.host").call(f.has_output and "get_output_file" or "get_context_file", { path = f.path })
    if r.type == "error" then
      session.fail("read " .. f.path, r)
      return
    end
    content = r.content or ""
  end
  M.mode, M.title = "file", ("%s (%s) — <BS> back to chat"):format(f.path, label)
  local ft = vim.filetype.match({ filename = f.path }) or ""
  set_lines(util.lines(content), nil, ft)
  if win() then
    vim.api.nvim_win_set_cursor(win(), { 1, 0 })
  end
  ui.update_titles()
  ui.focus("preview")
end

--- Shows the unified context → output diff of `path`.
function M.show_diff(path)
  if M.stream then
    session.notify("Another request is already in progress", vim.log.levels.WARN)
    return false
  end
  local f = session.status_of(path)
  if not f or not f.has_output then
    session.notify("No output for " .. path, vim.log.levels.WARN)
    return false
  end
  local lines = util.unified_diff(f.context_content or "", f.output_content or "", path)
  M.mode, M.title = "diff", ("diff %s — <BS> back to chat"):format(path)
  set_lines(lines, nil, "diff")
  if win() then
    vim.api.nvim_win_set_cursor(win(), { 1, 0 })
  end
  ui.update_titles()
  ui.focus("preview")
  return true
end

local function cursor_line()
  local w = win()
  return w and vim.api.nvim_win_get_cursor(w)[1] or nil
end

--- The message index (0-based) under the cursor, if it is a user message.
local function user_message_at_cursor()
  if M.mode ~= "chat" or not M.layout or not session.chat then
    return nil
  end
  local mi = M.layout.msg_at[cursor_line() or 0]
  local m = mi and session.chat.messages[mi + 1]
  if m and m.role == "user" then
    return mi
  end
  return nil
end

local function toggle()
  if M.mode ~= "chat" or not M.layout then
    return
  end
  local key = M.layout.fold_at[cursor_line() or 0]
  if not key then
    return
  end
  local open = M.expanded[key]
  if open == nil then
    open = not config.options.collapse_reasoning
  end
  M.expanded[key] = not open
  M.render()
end

-- Streaming --------------------------------------------------------------------------------------------

local function start_stream(st)
  if not buf then
    return
  end
  if M.mode ~= "chat" then
    M.mode, M.title = "chat", nil
  end
  M.jump_to_end = true
  M.render()
  -- The user's message and the assistant header, then stream below them.
  local lines = { "", "▌ You" }
  vim.list_extend(lines, util.lines(st.text))
  vim.list_extend(lines, { "", "▌ Assistant  ·  " .. (session.current_model() or ""), "" })
  local n = vim.api.nvim_buf_line_count(buf)
  local first = vim.api.nvim_buf_get_lines(buf, 0, 1, false)[1]
  local start = n
  if n == 1 and (first == "" or (session.chat and #(session.chat.messages or {}) == 0)) then
    start = 0
    table.remove(lines, 1)
  end
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, start, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.api.nvim_buf_set_extmark(buf, ns, start + (start == 0 and 0 or 1), 0, { line_hl_group = "BB7User" })
  local total = vim.api.nvim_buf_line_count(buf)
  vim.api.nvim_buf_set_extmark(buf, ns, total - 2, 0, { line_hl_group = "BB7Assistant" })
  local w = win()
  if w then
    vim.api.nvim_win_set_cursor(w, { vim.api.nvim_buf_line_count(buf), 0 })
  end
  M.flush_times = {}
  M.stream = Stream.new(buf, {
    interval = config.options.stream_interval,
    on_flush = function(ms)
      M.flush_times[#M.flush_times + 1] = ms
    end,
  })
end

local function on_chunk(kind, text)
  if M.stream then
    -- A tool-log line (agent mode) starts on a line of its own.
    if kind == "tool" and M.stream_tail and M.stream_tail ~= "\n" then
      text = "\n" .. text
    end
    M.stream:push(kind == "thinking" and "thinking" or "chunk", text)
    M.stream_tail = text:sub(-1)
  end
end

local function end_stream()
  M.stream_tail = nil
  if M.stream then
    M.stream:stop()
    M.stream = nil
  end
  M.jump_to_end = true
end

function M.attach(b, u)
  buf, ui = b, u
  vim.bo[buf].modifiable = false
  keymaps.apply(buf, "preview", "preview", {
    toggle = { toggle, "expand / collapse the reasoning under the cursor" },
    fork = {
      function()
        local mi = user_message_at_cursor()
        if not mi then
          session.notify("Put the cursor on one of your messages to fork from it", vim.log.levels.WARN)
          return
        end
        if session.fork_message(mi) then
          ui.focus("input")
        end
      end,
      "fork a new chat from the user message under the cursor",
    },
    edit = {
      function()
        local mi = user_message_at_cursor()
        if not mi then
          session.notify("Put the cursor on one of your messages to edit it", vim.log.levels.WARN)
          return
        end
        if session.edit_message(mi) then
          ui.focus("input")
        end
      end,
      "edit the user message under the cursor (truncates the chat there)",
    },
    chat = { M.show_chat, "back to the chat view" },
    follow = {
      function()
        local w = win()
        if w then
          vim.api.nvim_win_set_cursor(w, { vim.api.nvim_buf_line_count(buf), 0 })
        end
      end,
      "go to the end and follow the stream",
    },
  })
  session.subscribe("chat", function()
    if M.mode == "chat" then
      M.render()
    end
  end)
  session.subscribe("stream_start", start_stream)
  session.subscribe("chunk", on_chunk)
  session.subscribe("stream_end", end_stream)
  session.subscribe("leaving_chat", function()
    M.expanded = {}
    M.mode, M.title = "chat", nil
    M.jump_to_end = true
  end)
end

--- The preview buffer (for tests).
function M.buf()
  return buf
end

return M
