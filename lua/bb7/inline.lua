--- Inline edits (`:'<,'>BB7Inline {instruction}`): a one-shot reply about the selected lines whose
--- result is shown in the buffer itself as a diff — the proposed lines are put in and highlighted,
--- the lines they replace are shown as virtual lines above them — and accepted or rejected hunk by
--- hunk with the review keys (`config.keymaps.review`).
---
--- The buffer's own text is the context, saved or not (a buffer with no file works too); the result
--- goes into the buffer as one undoable change (a rejected hunk is joined to it, so one `u` after
--- the review takes the whole inline edit back). Nothing is written to disk.
---
--- The reply comes from a host process of its own (a second instance of `bb7.host`), in a global chat
--- created for the edit and deleted once its reply is read: the chat the user has open, its
--- stream, its context and the project's `.bb7/` are never touched, and an inline edit can run while
--- a reply streams in the chat UI.
local config = require("bb7.config")
local keymaps = require("bb7.ui.keymaps")
local util = require("bb7.util")

local M = {}
local L = vim.log.levels
local ns = vim.api.nvim_create_namespace("bb7_inline")

local function notify(msg, level)
  vim.notify("BB-7: " .. msg, level or L.INFO)
end

-- The host ----------------------------------------------------------------------------------------

local inline_host = nil -- a second instance of the bb7.host module (its own process)
local inited = false -- the process answered `init` (global-only mode)

--- The inline edits' host: the `bb7.host` module loaded a second time, so it has a process, a
--- request table and an exit autocommand of its own.
function M.host()
  if not inline_host then
    local src = debug.getinfo(require("bb7.host").start, "S").source:sub(2)
    inline_host = dofile(src)
    inline_host.augroup = "bb7_inline_host"
    inline_host.on_exit(function()
      inited = false
    end)
  end
  return inline_host
end

--- Starts the inline host and puts it in global-only mode (no project: it never opens the
--- project's `.bb7/`, so it holds no lock there and never changes which chat is active in it).
---@return table|nil host
local function ready()
  local h = M.host()
  if not h.running() then
    inited = false
    if not h.start() then
      return nil
    end
  end
  if not inited then
    local r = h.call("init", {})
    if r.type == "error" then
      notify("Failed to start inline edits: " .. tostring(r.message), L.ERROR)
      return nil
    end
    inited = true
  end
  return h
end

--- Stops the inline host (tests; Neovim stops it on exit by itself).
function M.stop()
  if inline_host then
    inline_host.stop()
  end
end

-- The reply ---------------------------------------------------------------------------------------

--- The lines of the first fenced code block of `text` (``` or ~~~, closed by a fence of the same
--- kind at least as long; the opening fence's indentation is taken off its lines), or nil when the
--- text has no complete code block.
---@param text string
---@return string[]|nil
function M.extract(text)
  local lines = vim.split((text or ""):gsub("\r\n", "\n"), "\n", { plain = true })
  for i, line in ipairs(lines) do
    local indent, fence = line:match("^( *)(```+)")
    if not fence then
      indent, fence = line:match("^( *)(~~~+)")
    end
    if fence and #indent <= 3 then
      local ch = fence:sub(1, 1)
      local body = {}
      for j = i + 1, #lines do
        local close = lines[j]:match("^ *(" .. ch:rep(3) .. ch .. "*)%s*$")
        if close and #close >= #fence then
          return body
        end
        local l = lines[j]
        if #indent > 0 and l:sub(1, #indent) == indent then
          l = l:sub(#indent + 1)
        end
        body[#body + 1] = l
      end
      return nil -- a block never closed: the reply was cut short
    end
  end
  return nil
end

--- The message sent for an edit of lines `l1..l2` of a buffer.
function M.prompt(o)
  local longest = 2
  for _, l in ipairs(o.selection) do
    for run in l:gmatch("`+") do
      longest = math.max(longest, #run)
    end
  end
  local fence = ("`"):rep(longest + 1)
  local where = o.unsaved and " (with unsaved changes; the file in your context is the editor's text)" or ""
  return table.concat({
    ("Inline edit of lines %d-%d of %s%s."):format(o.l1, o.l2, o.name, where),
    "",
    "Instruction: " .. o.instruction,
    "",
    ("Lines %d-%d now:"):format(o.l1, o.l2),
    fence .. (o.filetype or ""),
    table.concat(o.selection, "\n"),
    fence,
    "",
    ("Reply with exactly one fenced code block holding the complete new text of lines %d-%d "):format(o.l1, o.l2)
      .. "(it replaces them; keep their indentation) and nothing else: no explanation, no other code block.",
  }, "\n")
end

-- The review --------------------------------------------------------------------------------------

local reviews = {} ---@type table<integer, table> buffer -> review in progress
local job = nil ---@type table|nil the edit waiting for its reply

--- The review keys an inline review maps in the buffer, {action, what it does}.
local KEYS = {
  { "accept", "accept the inline hunk under the cursor" },
  { "reject", "reject the inline hunk under the cursor (its old lines come back)" },
  { "accept_all", "accept every inline hunk" },
  { "reject_all", "reject every inline hunk" },
  { "help", "list these keys" },
}

local function expand_tabs(s)
  local ts = vim.o.tabstop > 0 and vim.o.tabstop or 8
  return (s:gsub("\t", (" "):rep(ts)))
end

--- The rows (0-based, inclusive) hunk `h` spans now: its proposed lines, or for a hunk that only
--- removes lines the row its removed lines are shown at. nil once its mark is gone.
local function extent(buf, h)
  local m = vim.api.nvim_buf_get_extmark_by_id(buf, ns, h.id, { details = true })
  if not m or #m == 0 then
    return nil
  end
  local r, d = m[1], m[3] or {}
  if h.point then
    return r, r
  end
  local er, ec = d.end_row or r, d.end_col or 0
  local last = ec == 0 and er - 1 or er
  return r, math.max(last, r - 1)
end

local function open_hunks(st)
  local out = {}
  for _, h in ipairs(st.hunks) do
    if not h.done then
      out[#out + 1] = h
    end
  end
  return out
end

--- The keys named at each hunk and when the review starts. Every message stays one short line (at
--- 80 columns a longer one stops the editor at a "Press ENTER" prompt).
local function hint()
  return keymaps.hint("review", {
    { "accept", "accept" },
    { "reject", "reject" },
    { "help", "keys" },
  }, " · ")
end

--- Marks hunk `h` at `row` (its `count` proposed lines start there) with the old lines above it.
local function place(buf, row, count, old)
  local virt = {}
  for _, l in ipairs(old) do
    virt[#virt + 1] = { { expand_tabs(l), "DiffDelete" } }
  end
  local n = vim.api.nvim_buf_line_count(buf)
  local opts = { virt_lines = #virt > 0 and virt or nil, virt_lines_above = true, strict = false }
  local h = { old = old, point = count == 0 }
  if count > 0 then
    opts.hl_group, opts.hl_eol = "DiffAdd", true
    if row + count >= n then
      local last = vim.api.nvim_buf_get_lines(buf, n - 1, n, false)[1] or ""
      opts.end_row, opts.end_col = n - 1, #last
    else
      opts.end_row, opts.end_col = row + count, 0
    end
  elseif row >= n then
    -- Lines removed at the end of the buffer: shown below its last line.
    row, opts.virt_lines_above, h.below = n - 1, false, true
  end
  h.id = vim.api.nvim_buf_set_extmark(buf, ns, row, 0, opts)
  return h
end

--- The hint at the end of the first line of each open hunk (the keys that act on it).
local function show_hints(buf, st)
  vim.api.nvim_buf_clear_namespace(buf, st.hint_ns, 0, -1)
  local text = hint()
  if text == "" then
    return
  end
  for _, h in ipairs(open_hunks(st)) do
    local r = extent(buf, h)
    if r then
      vim.api.nvim_buf_set_extmark(buf, st.hint_ns, r, 0, {
        virt_text = { { "  BB-7: " .. text, "Comment" } },
        virt_text_pos = "eol",
        strict = false,
      })
    end
  end
end

local function restore_keys(buf, st)
  for _, k in ipairs(st.mapped or {}) do
    pcall(vim.keymap.del, "n", k[1], { buffer = buf })
  end
  vim.api.nvim_buf_call(buf, function() -- mapset restores a buffer-local mapping in the current buffer
    for _, saved in ipairs(st.saved_maps or {}) do
      pcall(vim.fn.mapset, "n", false, saved)
    end
  end)
end

--- Ends the review of `buf`: marks, hints and keys go; the buffer keeps what was accepted.
local function finish(buf, why)
  local st = reviews[buf]
  if not st then
    return
  end
  reviews[buf] = nil
  if vim.api.nvim_buf_is_valid(buf) then
    vim.api.nvim_buf_clear_namespace(buf, ns, 0, -1)
    vim.api.nvim_buf_clear_namespace(buf, st.hint_ns, 0, -1)
    restore_keys(buf, st)
  end
  pcall(vim.api.nvim_del_augroup_by_id, st.augroup)
  if why then
    notify(why)
  else
    notify(("Inline edit done: %d accepted, %d rejected (u undoes it)"):format(st.accepted, st.rejected))
  end
end

--- The open hunk at cursor row `row` (0-based) of `buf`, else the only open hunk, else nil.
local function hunk_at(buf, st, row)
  local open = open_hunks(st)
  for _, h in ipairs(open) do
    local first, last = extent(buf, h)
    if first and ((row >= first and row <= last) or (last < first and row == first)) then
      return h
    end
  end
  if #open == 1 then
    return open[1]
  end
end

local function resolve(buf, st, h, accept)
  if accept then
    st.accepted = st.accepted + 1
  else
    local first, last = extent(buf, h)
    if first then
      local s, e = first, last + 1
      if h.point then
        s = h.below and first + 1 or first
        e = s
      end
      -- Joined to the proposal's change: one `u` after the review takes the whole edit back.
      vim.api.nvim_buf_call(buf, function()
        pcall(vim.cmd, "undojoin")
      end)
      vim.api.nvim_buf_set_lines(buf, s, e, false, h.old)
    end
    st.rejected = st.rejected + 1
  end
  h.done = true
  pcall(vim.api.nvim_buf_del_extmark, buf, ns, h.id)
end

--- Moves the cursor of the current window (showing `buf`) to the next open hunk.
local function goto_next(buf, st, from)
  if vim.api.nvim_get_current_buf() ~= buf then
    return
  end
  local best, first = nil, nil
  for _, h in ipairs(open_hunks(st)) do
    local r = extent(buf, h)
    if r then
      first = first and math.min(first, r) or r
      if r >= from and (not best or r < best) then
        best = r
      end
    end
  end
  local row = best or first
  if row then
    pcall(vim.api.nvim_win_set_cursor, 0, { row + 1, 0 })
  end
end

local function after(buf, st, row)
  if #open_hunks(st) == 0 then
    finish(buf)
  else
    show_hints(buf, st)
    goto_next(buf, st, row)
  end
end

--- Accepts (or rejects) the inline hunk under the cursor of the current buffer.
function M.resolve_current(accept)
  local buf = vim.api.nvim_get_current_buf()
  local st = reviews[buf]
  if not st then
    notify("No inline edit to review in this buffer", L.WARN)
    return
  end
  local row = vim.api.nvim_win_get_cursor(0)[1] - 1
  local h = hunk_at(buf, st, row)
  if not h then
    notify("No inline hunk under the cursor", L.WARN)
    return
  end
  resolve(buf, st, h, accept)
  after(buf, st, row)
end

--- Accepts (or rejects) every open inline hunk of the current buffer.
function M.resolve_all(accept)
  local buf = vim.api.nvim_get_current_buf()
  local st = reviews[buf]
  if not st then
    notify("No inline edit to review in this buffer", L.WARN)
    return
  end
  -- Bottom up, so a rejected hunk never moves one still to do.
  local open = open_hunks(st)
  table.sort(open, function(a, b)
    return (extent(buf, a) or 0) > (extent(buf, b) or 0)
  end)
  for _, h in ipairs(open) do
    resolve(buf, st, h, accept)
  end
  after(buf, st, 0)
end

local function map_keys(buf, st)
  local actions = {
    accept = { function() M.resolve_current(true) end, KEYS[1][2] },
    reject = { function() M.resolve_current(false) end, KEYS[2][2] },
    accept_all = { function() M.resolve_all(true) end, KEYS[3][2] },
    reject_all = { function() M.resolve_all(false) end, KEYS[4][2] },
    help = { function() keymaps.show_help("inline") end, KEYS[5][2] },
  }
  -- The user's own buffer-local mappings of these keys come back when the review ends.
  st.saved_maps = {}
  vim.api.nvim_buf_call(buf, function() -- maparg sees the current buffer's mappings
    for name in pairs(actions) do
      local lhs = keymaps.key("review", name)
      if lhs then
        local m = vim.fn.maparg(lhs, "n", false, true)
        if type(m) == "table" and m.buffer == 1 then
          st.saved_maps[#st.saved_maps + 1] = m
        end
      end
    end
  end)
  st.mapped = keymaps.map(buf, "review", actions)
  keymaps.registered.inline = vim.deepcopy(st.mapped)
end

--- Shows `new` (the proposed text of lines `l1..l2`, whose text was `old`) in `buf` as inline hunks
--- and starts their review. Returns the number of hunks (0: the proposal changes nothing).
function M.show(buf, l1, old, new)
  local a = #old > 0 and (table.concat(old, "\n") .. "\n") or ""
  local b = #new > 0 and (table.concat(new, "\n") .. "\n") or ""
  local diff = vim.diff(a, b, { result_type = "indices" }) --[[@as integer[][] ]]
  if #diff == 0 then
    return 0
  end
  local st = { hunks = {}, accepted = 0, rejected = 0, hint_ns = vim.api.nvim_create_namespace("bb7_inline_hints") }
  -- The text before the proposal: back to it (`u` during the review) ends the review.
  st.original = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  -- A change of its own in the undo history (not merged into what the user typed last).
  vim.api.nvim_buf_call(buf, function()
    vim.cmd("let &undolevels = &undolevels")
  end)
  for i = #diff, 1, -1 do
    local sa, ca, sb, cb = unpack(diff[i])
    local row = l1 - 1 + (ca == 0 and sa or sa - 1)
    local repl = cb > 0 and { unpack(new, sb, sb + cb - 1) } or {}
    local removed = ca > 0 and { unpack(old, sa, sa + ca - 1) } or {}
    vim.api.nvim_buf_set_lines(buf, row, row + ca, false, repl)
    st.hunks[i] = place(buf, row, cb, removed)
  end
  reviews[buf] = st
  map_keys(buf, st)
  show_hints(buf, st)
  st.augroup = vim.api.nvim_create_augroup("bb7_inline_review_" .. buf, { clear = true })
  vim.api.nvim_create_autocmd({ "BufUnload", "BufWipeout" }, {
    group = st.augroup,
    buffer = buf,
    callback = function()
      reviews[buf] = nil
      pcall(vim.api.nvim_del_augroup_by_id, st.augroup)
    end,
  })
  vim.api.nvim_create_autocmd({ "TextChanged", "TextChangedI" }, {
    group = st.augroup,
    buffer = buf,
    callback = function()
      if reviews[buf] == st and vim.deep_equal(vim.api.nvim_buf_get_lines(buf, 0, -1, false), st.original) then
        finish(buf, "Inline edit undone")
      end
    end,
  })
  return #diff
end

--- The review in progress in `buf` (tests), or nil.
function M.review(buf)
  return reviews[buf or vim.api.nvim_get_current_buf()]
end

-- The request -------------------------------------------------------------------------------------

local SPIN = { "⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏" }

local function stop_spinner(j)
  if j.timer then
    j.timer:stop()
    j.timer:close()
    j.timer = nil
  end
  if vim.api.nvim_buf_is_valid(j.buf) then
    pcall(vim.api.nvim_buf_del_extmark, j.buf, ns, j.spin_id)
  end
end

local function start_spinner(j)
  local i = 0
  j.started = vim.uv.hrtime()
  local function draw()
    if not vim.api.nvim_buf_is_valid(j.buf) then
      return
    end
    i = i % #SPIN + 1
    local secs = math.floor((vim.uv.hrtime() - j.started) / 1e9)
    j.spin_id = vim.api.nvim_buf_set_extmark(j.buf, ns, j.l1 - 1, 0, {
      id = j.spin_id,
      virt_text = {
        { ("  %s BB-7 %ds · %s · :BB7InlineCancel"):format(SPIN[i], secs, util.oneline(j.instruction)), "Comment" },
      },
      virt_text_pos = "eol",
      strict = false,
    })
  end
  draw()
  j.timer = vim.uv.new_timer()
  j.timer:start(100, 100, vim.schedule_wrap(function()
    if job == j then
      draw()
    end
  end))
end

local function drop_chat(h, j)
  if j.chat_id then
    h.request("chat_delete", { id = j.chat_id, global = true }, function() end)
  end
end

--- Where lines `l1..l2` of `base` are in `cur` (the buffer now, changed while the reply was
--- written): their new first line, or nil when a change touched them.
---@param base string[]
---@param cur string[]
---@return integer|nil
function M.rebase(base, cur, l1, l2)
  if vim.deep_equal(base, cur) then
    return l1
  end
  local a = #base > 0 and (table.concat(base, "\n") .. "\n") or ""
  local b = #cur > 0 and (table.concat(cur, "\n") .. "\n") or ""
  local offset = 0
  for _, d in ipairs(vim.diff(a, b, { result_type = "indices" }) --[[@as integer[][] ]]) do
    local sa, ca, _, cb = unpack(d)
    if ca == 0 then -- lines inserted after base line `sa`
      if sa >= l1 and sa < l2 then
        return nil
      elseif sa < l1 then
        offset = offset + cb
      end
    else
      local last = sa + ca - 1
      if last >= l1 and sa <= l2 then
        return nil
      elseif last < l1 then
        offset = offset + cb - ca
      end
    end
  end
  local at = l1 + offset
  -- The lines must be there, unchanged (a diff may align repeated lines differently).
  for i = l1, l2 do
    if cur[at + i - l1] ~= base[i] then
      return nil
    end
  end
  return at
end

--- The reply arrived (or failed): the proposal is shown in the buffer.
local function settle(h, j, r)
  stop_spinner(j)
  if job == j then
    job = nil
  end
  if r.type ~= "done" then
    drop_chat(h, j)
    if r.message == "Response aborted by user." then
      notify("Inline edit cancelled")
    elseif r.type == "diff_error" then
      -- The model called a file tool instead of answering with a code block (none is offered).
      local call = (r.tool_calls or {})[1]
      local tool = type(call) == "table" and type(call.tool) == "string" and call.tool or "a tool"
      notify("Inline edit failed: the model called " .. util.oneline(tool):sub(1, 24), L.ERROR)
    else
      notify("Inline edit failed: " .. util.oneline(r.message or r.type), L.ERROR)
    end
    return
  end
  local c = h.call("chat_get", {})
  drop_chat(h, j)
  if c.type == "error" then
    notify("Inline edit failed: " .. util.oneline(c.message), L.ERROR)
    return
  end
  local reply = ""
  for _, m in ipairs(c.type == "chat" and c.messages or {}) do
    if m.role == "assistant" then
      reply = m.content or ""
    end
  end
  local new = M.extract(reply)
  if not new then
    notify("Inline edit: no code block in the reply", L.WARN)
    return
  end
  local buf = j.buf
  if not vim.api.nvim_buf_is_valid(buf) or not vim.api.nvim_buf_is_loaded(buf) then
    return
  end
  -- Edits made meanwhile elsewhere in the buffer are fine: the proposal goes where the lines are now.
  local now = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  local at = M.rebase(j.lines, now, j.l1, j.l2)
  if not at then
    notify("Inline edit dropped: the lines changed meanwhile", L.WARN)
    return
  end
  if not vim.bo[buf].modifiable then
    notify("Inline edit: the buffer is not modifiable", L.WARN)
    return
  end
  local old = { unpack(j.lines, j.l1, j.l2) }
  local n = M.show(buf, at, old, new)
  if n == 0 then
    notify("Inline edit: the model proposes no change")
    return
  end
  if vim.api.nvim_get_current_buf() == buf then
    goto_next(buf, reviews[buf], at - 1)
  end
  local keys = hint()
  notify(("%d inline hunk(s)%s"):format(n, keys ~= "" and (": " .. keys) or ""))
end

--- Starts an inline edit of lines `l1..l2` of `buf` with `instruction`.
---@param o {buf: integer, l1: integer, l2: integer, instruction: string}
---@return boolean started
function M.start(o)
  local buf = o.buf
  local instruction = vim.trim(o.instruction or "")
  if instruction == "" then
    notify("Inline edit: no instruction", L.WARN)
    return false
  end
  if job then
    notify("An inline edit is running (:BB7InlineCancel)", L.WARN)
    return false
  end
  if reviews[buf] then
    notify("Finish reviewing the inline edit in this buffer first", L.WARN)
    return false
  end
  if not vim.bo[buf].modifiable then
    notify("Inline edit: the buffer is not modifiable", L.WARN)
    return false
  end
  local lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  local text = table.concat(lines, "\n") .. "\n"
  local why = util.unsendable(text, config.options.max_file_bytes)
  if why then
    notify("Cannot edit this buffer inline: " .. why, L.ERROR)
    return false
  end
  local name = vim.api.nvim_buf_get_name(buf)
  local path
  if name ~= "" and vim.bo[buf].buftype == "" then
    path = vim.fs.normalize(vim.fn.fnamemodify(name, ":p"))
  else
    path = vim.fs.normalize(vim.fn.getcwd()) .. "/untitled-" .. buf
  end
  local h = ready()
  if not h then
    return false
  end
  local model
  local okm, m = pcall(function()
    return require("bb7.session").current_model()
  end)
  if okm and type(m) == "string" and m ~= "" then
    model = m
  end
  local label = util.oneline(instruction)
  local r = h.call("chat_new", { name = "Inline: " .. label:sub(1, 60), global = true, model = model })
  if r.type == "error" or not r.id then
    notify("Inline edit failed: " .. util.oneline(r.message or "no chat"), L.ERROR)
    return false
  end
  local j = {
    buf = buf,
    l1 = o.l1,
    l2 = o.l2,
    lines = lines,
    instruction = instruction,
    chat_id = r.id,
  }
  local a = h.call("context_add", { path = path, content = text, readonly = true })
  if a.type == "error" then
    drop_chat(h, j)
    notify("Inline edit failed: " .. util.oneline(a.message), L.ERROR)
    return false
  end
  local content = M.prompt({
    l1 = o.l1,
    l2 = o.l2,
    name = path,
    unsaved = vim.bo[buf].modified or name == "",
    instruction = instruction,
    filetype = vim.bo[buf].filetype,
    selection = { unpack(lines, o.l1, o.l2) },
  })
  job = j
  start_spinner(j)
  local rid = h.request("send", { content = content, model = model }, function(reply)
    settle(h, j, reply)
  end, function() end) -- chunks: the result is read from the chat once the reply is stored
  if not rid then
    return false
  end
  j.rid = rid
  return true
end

--- Cancels the inline edit waiting for its reply.
function M.cancel()
  if not job or not job.rid then
    notify("No inline edit is running", L.WARN)
    return false
  end
  M.host().request("cancel", { target_request_id = job.rid }, function(r)
    if r.type == "error" and not tostring(r.message):find("No active request", 1, true) then
      notify("Failed to cancel the inline edit: " .. util.oneline(r.message), L.WARN)
    end
  end)
  return true
end

--- Whether an inline edit is waiting for its reply (tests, status).
function M.running()
  return job ~= nil
end

--- `:[range]BB7Inline [instruction]`: asks for the instruction when none is given.
function M.command(opts)
  local buf = vim.api.nvim_get_current_buf()
  if vim.b[buf].bb7_pane then
    notify("Run :BB7Inline in a file's buffer, not in a pane", L.WARN)
    return
  end
  local l1, l2 = opts.line1, opts.line2
  if opts.args ~= "" then
    M.start({ buf = buf, l1 = l1, l2 = l2, instruction = opts.args })
    return
  end
  vim.ui.input({ prompt = ("BB-7 inline edit of lines %d-%d: "):format(l1, l2) }, function(instr)
    if instr and vim.trim(instr) ~= "" and vim.api.nvim_buf_is_valid(buf) then
      M.start({ buf = buf, l1 = l1, l2 = l2, instruction = instr })
    end
  end)
end

--- Maps the visual-mode key of `config.keymaps.inline.start` (`:'<,'>BB7Inline ` on the command
--- line, for the instruction to be typed). Called by `setup()`.
function M.map_start_key()
  local lhs = keymaps.key("inline", "start")
  if not lhs then
    return
  end
  -- A mapping of the user's (or another plugin's) on that key wins.
  local have = vim.fn.maparg(lhs, "x", false, true)
  if type(have) == "table" and have.lhs and not tostring(have.desc or ""):find("^BB%-7") then
    return
  end
  vim.keymap.set("x", lhs, ":BB7Inline ", { desc = "BB-7: inline edit of the selection" })
end

return M
