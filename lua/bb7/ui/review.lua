--- Per-hunk review (AGENT-PROTOCOL.md §2) in Neovim's own diff mode: the local file (left) beside the
--- chat's proposed version (right, read-only), so `]c` / `[c` move between hunks. Accept or reject
--- the hunk under the cursor, or every hunk of the file; nothing is applied until you say so.
--- Accepted hunks are written by the host (atomically, with a checkpoint); the open buffer is
--- updated in place, keeping its undo history.
local keymaps = require("bb7.ui.keymaps")
local session = require("bb7.session")
local L = vim.log.levels

local M = {}

--- Buffer-local keys of a review, {action, what it does}: the key is `config.keymaps.review[action]`
--- (the action run is `action` without `_alt`); in both windows unless `proposed_only`.
M.keys = {
  { "accept", "accept the hunk under the cursor (writes the local file)" },
  { "reject", "reject the hunk under the cursor (the proposal loses it)" },
  { "accept_all", "accept every hunk of the file" },
  { "reject_all", "reject every hunk of the file" },
  { "help", "list these keys" },
  { "help_alt", "list these keys", proposed_only = true },
  { "close", "close the review" },
}

local state = nil ---@type table|nil the review in progress

local function notify(msg, level)
  vim.notify("BB-7: " .. msg, level or L.INFO)
end

local function is_error(r)
  return r.type == "error"
end

--- `content` as buffer lines for a buffer with `fileformat` (and whether it ends with a newline).
local function to_lines(content, fileformat)
  local lines = vim.split(content, "\n", { plain = true })
  local eol = true
  if lines[#lines] == "" then
    table.remove(lines)
  else
    eol = false
  end
  if fileformat == "dos" then
    for i, l in ipairs(lines) do
      lines[i] = l:gsub("\r$", "")
    end
  end
  return lines, eol
end

--- Updates loaded buffer `buf` in place to `content` (what the host just wrote to its file): only the
--- changed lines are replaced, so the undo history, marks and cursor stay; then the buffer is marked
--- in sync with the file (a silent rewrite of the same bytes, no autocommands, so Neovim does not
--- later report the file as changed outside).
function M.sync_buffer(buf, content)
  if not (buf and buf > 0 and vim.api.nvim_buf_is_loaded(buf)) then
    return
  end
  -- The rewrite must produce exactly the host's bytes: a byte-order mark is the 'bomb' option, not
  -- text (else it would be written twice); the file is UTF-8 (review refuses anything else); and the
  -- buffer is 'dos' only when every line ends in CRLF (else each line keeps its own ending).
  local bom = content:sub(1, 3) == "\239\187\191"
  if bom then
    content = content:sub(4)
  end
  vim.bo[buf].bomb = bom
  vim.bo[buf].fileencoding = "utf-8"
  local all_crlf = content:find("\n", 1, true) ~= nil and not content:find("[^\r]\n") and content:sub(1, 1) ~= "\n"
  vim.bo[buf].fileformat = all_crlf and "dos" or "unix"
  local want, eol = to_lines(content, vim.bo[buf].fileformat)
  local have = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  local a = table.concat(have, "\n") .. "\n"
  local b = table.concat(want, "\n") .. "\n"
  if a ~= b then
    local diff = vim.diff(a, b, { result_type = "indices" })
    for i = #diff, 1, -1 do
      local sa, ca, sb, cb = unpack(diff[i])
      local repl = {}
      for j = sb, sb + cb - 1 do
        repl[#repl + 1] = want[j]
      end
      local start = ca == 0 and sa or sa - 1
      vim.api.nvim_buf_set_lines(buf, start, start + ca, false, repl)
    end
    if #want == 0 then
      vim.api.nvim_buf_set_lines(buf, 0, -1, false, {})
    end
  end
  vim.bo[buf].eol = eol
  if not eol then
    vim.bo[buf].fixeol = false
  end
  vim.api.nvim_buf_call(buf, function()
    vim.cmd("noautocmd silent keepalt write!")
  end)
end

--- The hunk under the cursor of window `win` (local side: old ranges; proposed side: new ranges).
local function hunk_at(st, win)
  local line = vim.api.nvim_win_get_cursor(win)[1]
  local is_local = vim.api.nvim_win_get_buf(win) == st.local_buf
  for _, h in ipairs(st.hunks) do
    local s = is_local and h.old_start or h.new_start
    local n = is_local and h.old_lines or h.new_lines
    local first, last = s, s + n - 1
    if n == 0 then
      first, last = s, s + 1
    end
    if line >= first and line <= last then
      return h
    end
  end
end

local function set_proposed(st, content)
  local lines = to_lines(content, vim.bo[st.local_buf].fileformat)
  vim.bo[st.prop_buf].modifiable = true
  vim.api.nvim_buf_set_lines(st.prop_buf, 0, -1, false, lines)
  vim.bo[st.prop_buf].modifiable = false
  vim.bo[st.prop_buf].modified = false
end

--- The local window shows the file as it is on disk now (an unmodified buffer is re-read; undo
--- history kept).
function M.reload_local(st)
  local buf = st.local_buf
  local text = require("bb7.util").read_file(session.abspath(st.path))
  if not (text and vim.api.nvim_buf_is_loaded(buf)) or vim.bo[buf].modified then
    return
  end
  local util = require("bb7.util")
  local have = table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), "\n") .. "\n"
  if not util.same_text(have, (text:gsub("^\239\187\191", ""))) then
    vim.api.nvim_buf_call(buf, function()
      vim.cmd("silent! edit") -- 'undoreload' keeps the undo history
    end)
  end
end

--- Re-reads the hunks and the proposal; closes the review when nothing is left (or when the host
--- cannot carry the proposal onto an edit made since: it says why).
local function refresh(st)
  local r = session.get_hunks(st.path)
  if is_error(r) then
    notify(tostring(r.message), L.WARN)
    M.close()
    return false
  end
  if #(r.hunks or {}) == 0 then
    M.close()
    return false
  end
  if r.rebased then
    notify(st.path .. " changed since the proposal was made: the proposal now starts from it", L.WARN)
  end
  st.hunks, st.base_hash = r.hunks, r.base_hash
  local out = session.output_file(st.path)
  if not is_error(out) and vim.api.nvim_buf_is_valid(st.prop_buf) then
    set_proposed(st, out.content or "")
  end
  for _, w in ipairs({ st.local_win, st.prop_win }) do
    if vim.api.nvim_win_is_valid(w) then
      vim.api.nvim_win_call(w, function()
        vim.cmd("diffupdate")
      end)
    end
  end
  return true
end

local function after_change(st, remaining, done_msg)
  session.load_chat()
  if remaining == 0 then
    notify(done_msg)
    M.close()
  else
    refresh(st)
  end
end

local function accept_ids(st, ids)
  if vim.bo[st.local_buf].modified then
    notify("Cannot write file " .. st.path .. ": its buffer has unsaved changes (save or undo them first)", L.ERROR)
    return false
  end
  local r = session.apply_hunks(st.path, ids, st.base_hash)
  if is_error(r) then
    if tostring(r.message):find("^Conflict:") then
      -- The file changed since the hunks were computed: the left side shows it as it is now, and
      -- the host carries the proposal onto it (or says why it cannot) before anything is accepted.
      notify(r.message, L.WARN)
      M.reload_local(st)
      refresh(st)
    else
      session.fail("apply hunks of " .. st.path, r)
    end
    return false
  end
  M.sync_buffer(st.local_buf, r.content or "")
  after_change(st, r.remaining, "Applied " .. st.path)
  return true
end

local function reject_ids(st, ids)
  local r = session.reject_hunks(st.path, ids)
  if is_error(r) then
    session.fail("reject hunks of " .. st.path, r)
    refresh(st)
    return false
  end
  after_change(st, r.remaining, "Rejected output for " .. st.path)
  return true
end

local function under_cursor(st)
  local h = hunk_at(st, vim.api.nvim_get_current_win())
  if not h then
    notify("No hunk under the cursor (]c / [c move between hunks)", L.WARN)
  end
  return h
end

local function all_ids(st)
  local ids = {}
  for _, h in ipairs(st.hunks) do
    ids[#ids + 1] = h.id
  end
  return ids
end

local actions = {
  accept = function(st)
    local h = under_cursor(st)
    return h and accept_ids(st, { h.id })
  end,
  reject = function(st)
    local h = under_cursor(st)
    return h and reject_ids(st, { h.id })
  end,
  accept_all = function(st)
    return accept_ids(st, all_ids(st))
  end,
  reject_all = function(st)
    return reject_ids(st, all_ids(st))
  end,
  help = function()
    M.help()
  end,
  close = function()
    M.close()
  end,
}

--- Lists the review keys.
function M.help()
  local lines = { "BB-7 review keys:" }
  for _, k in ipairs(M.keys) do
    local lhs = keymaps.key("review", k[1])
    if lhs then
      lines[#lines + 1] = ("  %-3s %s"):format(lhs, k[2])
    end
  end
  lines[#lines + 1] = "  ]c  [c  next / previous hunk (Neovim's diff mode)"
  vim.notify(table.concat(lines, "\n"), L.INFO)
end

--- The keys named when a review opens ("ga accept, gr reject, gA / gR all, ]c / [c move, g? keys"
--- with the default keys); a disabled key is left out.
local function open_hint()
  local function key(action)
    return keymaps.key("review", action)
  end
  local parts = {}
  for _, a in ipairs({ { "accept", "accept" }, { "reject", "reject" } }) do
    if key(a[1]) then
      parts[#parts + 1] = key(a[1]) .. " " .. a[2]
    end
  end
  if key("accept_all") and key("reject_all") then
    parts[#parts + 1] = key("accept_all") .. " / " .. key("reject_all") .. " all"
  elseif key("accept_all") then
    parts[#parts + 1] = key("accept_all") .. " accept all"
  elseif key("reject_all") then
    parts[#parts + 1] = key("reject_all") .. " reject all"
  end
  parts[#parts + 1] = "]c / [c move"
  local help = key("help") or key("help_alt")
  if help then
    parts[#parts + 1] = help .. " keys"
  end
  return table.concat(parts, ", ")
end

local function map_keys(st)
  st.local_keys = {} -- what the local buffer got, taken off again when the review ends
  for _, buf in ipairs({ st.local_buf, st.prop_buf }) do
    for _, k in ipairs(M.keys) do
      local lhs = keymaps.key("review", k[1])
      if lhs and (buf == st.prop_buf or not k.proposed_only) then
        local action = actions[(k[1]:gsub("_alt$", ""))]
        vim.keymap.set("n", lhs, function()
          if state then
            action(state)
          end
        end, { buffer = buf, nowait = true, desc = "BB-7 review: " .. k[2] })
        if buf == st.local_buf then
          st.local_keys[#st.local_keys + 1] = lhs
        end
      end
    end
  end
end

local function unmap_keys(st)
  if not vim.api.nvim_buf_is_valid(st.local_buf) then
    return
  end
  for _, lhs in ipairs(st.local_keys or {}) do
    pcall(vim.keymap.del, "n", lhs, { buffer = st.local_buf })
  end
end

--- The review in progress (tests and statuslines).
function M.current()
  return state
end

--- Ends the review: the keys leave the local buffer, diff mode is switched off, the tab closes.
function M.close()
  local st = state
  if not st then
    return
  end
  state = nil
  unmap_keys(st)
  if vim.api.nvim_win_is_valid(st.local_win) then
    vim.api.nvim_win_call(st.local_win, function()
      vim.cmd("diffoff")
    end)
  end
  if vim.api.nvim_buf_is_valid(st.prop_buf) then
    pcall(vim.api.nvim_buf_delete, st.prop_buf, { force = true })
  end
  if vim.api.nvim_tabpage_is_valid(st.tab) and #vim.api.nvim_list_tabpages() > 1 then
    pcall(vim.cmd, "tabclose " .. vim.api.nvim_tabpage_get_number(st.tab))
  end
end

--- Opens the review of `path` (a project-relative path of the active chat's output).
function M.open(path)
  if not session.ensure_chat() then
    return false
  end
  M.close()
  local r = session.get_hunks(path)
  if is_error(r) then
    if tostring(r.message):find("No output", 1, true) or tostring(r.message):find("not found", 1, true) then
      notify("No output for " .. path, L.WARN)
    elseif tostring(r.message):find("^Conflict:") then
      notify(r.message, L.WARN) -- edited where the model changed it too: merge by hand or reject
    else
      session.fail("review " .. path, r)
    end
    return false
  end
  if #r.hunks == 0 then
    notify("Nothing to review in " .. path .. ": the output matches the local file", L.WARN)
    return false
  end
  local out = session.output_file(path)
  if is_error(out) then
    session.fail("review " .. path, out)
    return false
  end
  local abs = session.abspath(path)
  local existing = vim.fn.bufnr(abs)
  if existing > 0 and vim.api.nvim_buf_is_loaded(existing) and vim.bo[existing].modified then
    notify("Cannot review " .. path .. ": its buffer has unsaved changes (save or undo them first)", L.ERROR)
    return false
  end
  session.close_view()
  vim.cmd("tabnew " .. vim.fn.fnameescape(abs))
  local st = {
    path = path,
    hunks = r.hunks,
    base_hash = r.base_hash,
    tab = vim.api.nvim_get_current_tabpage(),
    local_win = vim.api.nvim_get_current_win(),
    local_buf = vim.api.nvim_get_current_buf(),
  }
  M.reload_local(st) -- a buffer loaded before an edit from outside shows the file as it is
  vim.cmd("diffthis")
  vim.cmd("rightbelow vnew")
  st.prop_win = vim.api.nvim_get_current_win()
  st.prop_buf = vim.api.nvim_get_current_buf()
  vim.bo[st.prop_buf].buftype = "nofile"
  vim.bo[st.prop_buf].bufhidden = "wipe"
  vim.bo[st.prop_buf].swapfile = false
  pcall(vim.api.nvim_buf_set_name, st.prop_buf, "bb7-proposed://" .. path)
  vim.bo[st.prop_buf].filetype = vim.bo[st.local_buf].filetype
  set_proposed(st, out.content or "")
  vim.cmd("diffthis")
  state = st
  map_keys(st)
  -- Closing the proposal window (or its tab) ends the review: the keys leave the local buffer.
  vim.api.nvim_create_autocmd("BufWipeout", {
    buffer = st.prop_buf,
    once = true,
    callback = function()
      vim.schedule(function()
        if state == st then
          M.close()
        end
      end)
    end,
  })
  vim.cmd("diffupdate")
  -- The cursor starts in the proposal (read-only: stray keys cannot edit the file) on the first
  -- hunk, wherever it is (line 1 included).
  vim.api.nvim_set_current_win(st.prop_win)
  local first = r.hunks[1]
  local line = math.max(1, first.new_lines > 0 and first.new_start or first.new_start + 1)
  line = math.min(line, vim.api.nvim_buf_line_count(st.prop_buf))
  vim.api.nvim_win_set_cursor(st.prop_win, { line, 0 })
  if r.rebased then
    notify(path .. " changed since the proposal was made: the proposal now starts from it", L.WARN)
  end
  notify(("Review %s: %d hunks; %s"):format(path, #r.hunks, open_hint()))
  return true
end

--- `:BB7Review [path]` (default: the current buffer's file).
function M.command(opts)
  session.hook()
  if not session.ensure_chat() then
    return
  end
  local t = session.resolve_target(opts.args ~= "" and opts.args or nil)
  if t then
    M.open(t.path)
  end
end

return M
