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
  if M.treesitter then
    -- A full replace (the end of a stream collapses its reasoning: hundreds of lines fewer) would
    -- leave the highlighter with trees and injections over rows that are gone, and its next
    -- redraw fails ("Invalid 'end_row': out of range"): highlight the new text afresh instead.
    pcall(vim.treesitter.stop, buf)
    M.treesitter, M.hl = nil, nil
  end
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
  if ft then
    M.highlight(ft)
  end
end

--- Highlights the preview as `ft`: with treesitter when Neovim has the parser (for Markdown the
--- code blocks are highlighted by injection in their own language), else with the syntax file.
function M.highlight(ft)
  if M.hl == ft then
    return
  end
  M.hl = ft
  pcall(vim.treesitter.stop, buf)
  local lang = ft ~= "" and vim.treesitter.language.get_lang(ft) or nil
  if lang and pcall(vim.treesitter.start, buf, lang) then
    vim.bo[buf].syntax = ""
    M.treesitter = lang
    return
  end
  M.treesitter = nil
  vim.bo[buf].syntax = ft
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
  local st = session.stream
  local streams_here = st ~= nil and not st.ended and session.chat ~= nil and st.chat_id == session.chat.id
    and not st.global == not session.chat.global
  if M.stream then
    if streams_here then
      return -- never re-render under a running stream
    end
    M.detach() -- another chat is shown: its reply goes on, kept in the stream's log
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
  local retry = session.retry_context
  local r = render.chat(chat, {
    expanded = M.expanded,
    collapse = config.options.collapse_reasoning,
    failed = retry and retry.errors or nil,
  })
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
  if streams_here then
    M.attach_stream(st)
  end
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
  local label = f.output_content and "output" or "context"
  local content = session.file_content(f)
  if not content then
    return
  end
  M.detach() -- a reply streaming in this chat goes on; <BS> shows it again
  M.path = f.path
  M.mode, M.title = "file", ("%s (%s) — <BS> back to chat"):format(util.oneline(f.path), label)
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
  local f = session.status_of(path)
  if not f or not f.has_output then
    session.notify("No output for " .. path, vim.log.levels.WARN)
    return false
  end
  local lines = util.unified_diff(f.context_content or "", f.output_content or "", path)
  M.detach()
  M.path = path
  M.mode, M.title = "diff", ("diff %s — p applies, <BS> back to chat"):format(util.oneline(path))
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
    -- Reasoning follows `collapse_reasoning`; a tool call starts collapsed.
    open = not key:match("^tool:") and not config.options.collapse_reasoning
  end
  M.expanded[key] = not open
  M.render()
end

-- Streaming --------------------------------------------------------------------------------------------

--- Stops showing the streaming reply in the buffer (the reply goes on; its text is kept in the
--- stream's log and shown again when its chat is).
function M.detach()
  if M.stream then
    M.stream:stop()
    M.stream = nil
    M.stream_tail = nil
  end
end

local function push(kind, text)
  -- A tool-log line (agent mode) starts on a line of its own.
  if kind == "tool" and M.stream_tail and M.stream_tail ~= "\n" then
    text = "\n" .. text
  end
  M.stream:push(kind == "thinking" and "thinking" or "chunk", text)
  M.stream_tail = text:sub(-1)
end

--- Shows the reply streaming in the chat shown (called after the chat was rendered): the user's
--- message when the chat does not hold it yet, the assistant header, what has streamed so far,
--- then the stream itself.
function M.attach_stream(st)
  if M.stream or not buf then
    return
  end
  local msgs = session.chat and session.chat.messages or {}
  local with_user = M.new_send
  M.new_send = false
  local lines = {}
  if with_user then
    lines = { "", "▌ You" }
    vim.list_extend(lines, util.lines(st.text))
  end
  vim.list_extend(lines, { "", "▌ Assistant  ·  " .. util.oneline(session.current_model() or ""), "" })
  local n = vim.api.nvim_buf_line_count(buf)
  local first = vim.api.nvim_buf_get_lines(buf, 0, 1, false)[1]
  local start = n
  if n == 1 and (first == "" or #msgs == 0) then
    start = 0
    table.remove(lines, 1)
  end
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, start, -1, false, lines)
  vim.bo[buf].modifiable = false
  if with_user then
    vim.api.nvim_buf_set_extmark(buf, ns, start + (start == 0 and 0 or 1), 0, { line_hl_group = "BB7User" })
  end
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
  if #(st.log or {}) > 0 then
    for _, item in ipairs(st.log) do
      push(item[1], item[2])
    end
    M.stream:flush()
  end
end

local function start_stream(st)
  if not buf then
    return
  end
  if M.mode ~= "chat" then
    M.mode, M.title = "chat", nil
  end
  M.detach()
  M.jump_to_end = true
  M.new_send = true -- the chat does not hold the message just sent yet
  M.render()
  M.new_send = false
  if ui then
    ui.update_titles()
  end
end

local function on_chunk(kind, text)
  if M.stream then
    push(kind, text)
    if kind == "tool" then
      M.stream:flush() -- a tool's log line is shown at once (a question may follow it)
    end
  end
end

local function end_stream(r)
  M.stream_tail = nil
  if M.stream then
    M.stream:stop()
    M.stream = nil
    if r and r.type == "error" and r.message ~= "Response aborted by user." and vim.api.nvim_buf_is_valid(buf) then
      -- Say under the message that its reply is missing (kept until the chat is re-rendered; a
      -- reply lost to a host exit is also recorded in the chat, see session.lost_reply).
      local n = vim.api.nvim_buf_line_count(buf)
      vim.bo[buf].modifiable = true
      vim.api.nvim_buf_set_lines(buf, n, n, false, { "", "⚠ No reply: " .. util.oneline(r.message or "unknown error") })
      vim.bo[buf].modifiable = false
      vim.api.nvim_buf_set_extmark(buf, ns, n + 1, 0, { line_hl_group = "WarningMsg" })
      local w = win()
      if w then
        pcall(vim.api.nvim_win_set_cursor, w, { n + 2, 0 })
      end
    end
  end
  M.jump_to_end = true
end

--- The first line of each message in the chat view (1-based, ascending).
local function message_starts()
  local out, prev = {}, nil
  if M.mode ~= "chat" or not M.layout then
    return out
  end
  local n = #M.layout.lines
  for l = 1, n do
    local mi = M.layout.msg_at[l]
    if mi and mi ~= prev then
      out[#out + 1] = l
    end
    prev = mi
  end
  return out
end

--- Moves the cursor to the next (`dir` 1) or previous (-1) message.
function M.jump_message(dir)
  local w = win()
  if not w then
    return
  end
  local cur = vim.api.nvim_win_get_cursor(w)[1]
  local starts = message_starts()
  local target
  if dir > 0 then
    for _, l in ipairs(starts) do
      if l > cur then
        target = l
        break
      end
    end
  else
    for i = #starts, 1, -1 do
      if starts[i] < cur then
        target = starts[i]
        break
      end
    end
  end
  if target then
    vim.cmd("normal! m'") -- so <C-o> comes back
    vim.api.nvim_win_set_cursor(w, { target, 0 })
  end
end

--- The fenced code block around line `row` (1-based) of the buffer: its lines, or nil.
function M.code_block_at(row)
  local lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  local open_at = nil
  local i = 1
  while i <= #lines do
    if lines[i]:match("^%s*```") then
      if open_at then
        if row > open_at and row < i or row == open_at or row == i then
          return vim.list_slice(lines, open_at + 1, i - 1), lines[open_at]:match("^%s*```%s*(%S*)")
        end
        open_at = nil
      else
        open_at = i
      end
    end
    i = i + 1
  end
  return nil
end

local function yank_code()
  local w = win()
  if not w then
    return
  end
  local body, lang = M.code_block_at(vim.api.nvim_win_get_cursor(w)[1])
  if not body then
    session.notify("No code block under the cursor", vim.log.levels.WARN)
    return
  end
  local text = table.concat(body, "\n") .. "\n"
  vim.fn.setreg('"', text, "l")
  if vim.fn.has("clipboard") == 1 then
    pcall(vim.fn.setreg, "+", text, "l")
  end
  session.notify(("Yanked %d line%s%s"):format(#body, #body == 1 and "" or "s", lang ~= "" and (" of " .. lang) or ""))
end

--- The file the preview shows (file or diff view), if any.
function M.shown_path()
  if M.mode ~= "chat" then
    return M.path
  end
end

function M.attach(b, u)
  buf, ui = b, u
  vim.bo[buf].modifiable = false
  keymaps.apply(buf, "preview", "preview", require("bb7.ui.plan").actions())
  keymaps.apply(buf, "preview", "preview", {
    next_message = { function() M.jump_message(1) end, "next message" },
    prev_message = { function() M.jump_message(-1) end, "previous message" },
    yank_code = { yank_code, "yank the code block under the cursor" },
    apply = {
      function()
        local p = M.shown_path()
        if not p then
          session.notify("Open a file or diff first (<CR> or D in the Files pane); p applies it", vim.log.levels.WARN)
          return
        end
        session.apply_asking(p, function()
          M.show_chat()
        end)
      end,
      "apply the output of the file shown (file or diff view)",
    },
    apply_all = { session.apply_all, "apply all outputs" },
    retry = {
      function()
        if not session.retry_context then
          session.notify("No failed edits to retry", vim.log.levels.WARN)
          return
        end
        session.send("")
      end,
      "let the model retry the edits that failed",
    },
    toggle = { toggle, "expand / collapse the reasoning or tool call under the cursor" },
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
        local later = #(session.chat.messages or {}) - mi - 1
        session.confirm(
          ("Edit this message? The chat is cut here (%d later message%s removed)"):format(later, later == 1 and "" or "s"),
          function()
            if session.edit_message(mi) then
              ui.focus("input")
            end
          end
        )
      end,
      "edit the user message under the cursor (truncates the chat there; asks first)",
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
