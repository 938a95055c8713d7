--- `:BB7Checkpoints` (AGENT-PROTOCOL.md §3): the project's checkpoints (every apply, newest first),
--- a 3-way view of one file of one checkpoint (base: before the apply, current: the file now,
--- proposed: what was applied), and rollback: hard (the whole checkpoint, after a confirmation) or
--- only the selected hunks (later edits are kept; hunks whose lines changed since are reported).
local keymaps = require("bb7.ui.keymaps")
local session = require("bb7.session")
local util = require("bb7.util")
local L = vim.log.levels

local M = {}

--- The keys of the list, {action, what it does}: the key is `config.keymaps.checkpoints[action]`.
M.list_keys = {
  { "open", "3-way view of the file under the cursor" },
  { "hard", "hard rollback of the checkpoint under the cursor (asks first)" },
  { "reload", "reload the list" },
  { "help", "list these keys" },
  { "close", "close" },
}

--- The keys of the 3-way view: `config.keymaps.checkpoint_view[action]`.
M.view_keys = {
  { "scoped", "roll back the hunk under the cursor (visual: every hunk in the selection)" },
  { "hard", "hard rollback of the whole checkpoint (asks first)" },
  { "help", "list these keys" },
  { "close", "close the 3-way view" },
}

local list_state = nil ---@type table|nil {buf, tab, rows}
local view_state = nil ---@type table|nil {id, path, tab, bufs, wins, hunks}

local function notify(msg, level)
  vim.notify("BB-7: " .. msg, level or L.INFO)
end

local function scratch(name, lines, filetype)
  local buf = vim.api.nvim_get_current_buf()
  vim.bo[buf].buftype = "nofile"
  vim.bo[buf].bufhidden = "wipe"
  vim.bo[buf].swapfile = false
  pcall(vim.api.nvim_buf_set_name, buf, name)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].modified = false
  if filetype then
    vim.bo[buf].filetype = filetype
  end
  return buf
end

local function text_lines(content)
  local lines = vim.split(content or "", "\n", { plain = true })
  if lines[#lines] == "" then
    table.remove(lines)
  end
  for i, l in ipairs(lines) do
    lines[i] = l:gsub("\r$", "")
  end
  return lines
end

local function help(title, group, keys)
  local lines = { title }
  for _, k in ipairs(keys) do
    local lhs = keymaps.key(group, k[1])
    if lhs then
      lines[#lines + 1] = ("  %-5s %s"):format(lhs, k[2])
    end
  end
  vim.notify(table.concat(lines, "\n"), L.INFO)
end

local function map(buf, group, keys, actions)
  for _, k in ipairs(keys) do
    local lhs = keymaps.key(group, k[1])
    if lhs then
      vim.keymap.set("n", lhs, actions[k[1]], { buffer = buf, nowait = true, desc = "BB-7 checkpoints: " .. k[2] })
    end
  end
end

--- After a rollback: open buffers of the files follow (in place, undo kept), the user hears what
--- happened.
local function after_rollback(r, what)
  local review = require("bb7.ui.review")
  for _, path in ipairs(r.files or {}) do
    local abs = session.abspath(path)
    local buf = vim.fn.bufnr(abs)
    if buf > 0 and vim.api.nvim_buf_is_loaded(buf) then
      if vim.bo[buf].modified then
        notify(path .. " changed on disk, but its buffer has unsaved changes; reload it with :e!", L.WARN)
      else
        local f = io.open(abs, "rb")
        if f then
          local content = f:read("*a")
          f:close()
          review.sync_buffer(buf, content)
        else
          vim.api.nvim_buf_call(buf, function()
            vim.cmd("silent! edit!")
          end)
        end
      end
    end
  end
  local conflicts = r.conflicts or {}
  if #conflicts > 0 then
    local ids = {}
    for _, c in ipairs(conflicts) do
      ids[#ids + 1] = c.path .. " " .. c.hunk_id
    end
    notify(("%s: %d files written; %d hunks not rolled back because their lines changed since: %s"):format(
      what,
      #(r.files or {}),
      #conflicts,
      table.concat(ids, ", ")
    ), L.WARN)
  else
    notify(("%s: %d files written"):format(what, #(r.files or {})))
  end
  session.load_chat()
end

--- Hard rollback of checkpoint `id`, after a confirmation.
function M.hard(id)
  session.confirm(
    "Restore every file of checkpoint " .. id .. " to its content before that apply? Later edits to those files are lost.",
    function()
      local r = session.rollback_hard(id)
      if r.type == "error" then
        session.fail("roll back " .. id, r)
        return
      end
      -- A file the apply created is removed: the Files pane says so (not a blank status).
      for _, path in ipairs(r.files or {}) do
        if vim.fn.filereadable(session.abspath(path)) == 0 then
          session.rolled_back[path] = true
        end
      end
      after_rollback(r, "Rolled back " .. id)
      M.refresh_view()
      M.reload()
    end
  )
end

--- Scoped rollback of `hunk_ids` of checkpoint `id`.
function M.scoped(id, hunk_ids)
  local r = session.rollback_hunks(id, hunk_ids)
  if r.type == "error" then
    session.fail("roll back hunks of " .. id, r)
    return false
  end
  after_rollback(r, "Rolled back " .. #hunk_ids - #(r.conflicts or {}) .. " hunks of " .. id)
  M.refresh_view()
  M.reload()
  return true
end

-- The 3-way view -----------------------------------------------------------------------------------

--- The checkpoint hunks overlapping lines `first..last` of the window's side (base: old ranges,
--- proposed: new ranges).
local function hunks_in(st, side, first, last)
  local out = {}
  for _, h in ipairs(st.hunks) do
    local s = side == "base" and h.old_start or h.new_start
    local n = side == "base" and h.old_lines or h.new_lines
    local a, b = s, s + n - 1
    if n == 0 then
      a, b = s, s + 1
    end
    if a <= last and b >= first then
      out[#out + 1] = h.id
    end
  end
  return out
end

local function close_view()
  local st = view_state
  view_state = nil
  if st and vim.api.nvim_tabpage_is_valid(st.tab) and #vim.api.nvim_list_tabpages() > 1 then
    pcall(vim.cmd, "tabclose " .. vim.api.nvim_tabpage_get_number(st.tab))
  end
end

local function scoped_at(first, last)
  local st = view_state
  if not st then
    return
  end
  local buf = vim.api.nvim_get_current_buf()
  local side = buf == st.bufs.base and "base" or buf == st.bufs.proposed and "proposed" or nil
  if not side then
    notify("Put the cursor on a hunk in the base (left) or proposed (right) window", L.WARN)
    return
  end
  local ids = hunks_in(st, side, first, last)
  if #ids == 0 then
    notify("No hunk of this checkpoint under the cursor", L.WARN)
    return
  end
  M.scoped(st.id, ids)
end

local function fill_view(st, d)
  local panes = { base = d.base, current = d.current, proposed = d.proposed }
  for name, content in pairs(panes) do
    local buf = st.bufs[name]
    if buf and vim.api.nvim_buf_is_valid(buf) then
      vim.bo[buf].modifiable = true
      vim.api.nvim_buf_set_lines(buf, 0, -1, false, text_lines(content))
      vim.bo[buf].modifiable = false
      vim.bo[buf].modified = false
    end
  end
  st.hunks = d.hunks or {}
  for _, w in pairs(st.wins) do
    if vim.api.nvim_win_is_valid(w) then
      vim.api.nvim_win_call(w, function()
        vim.cmd("diffupdate")
      end)
    end
  end
end

--- Re-reads the 3-way view after a rollback.
function M.refresh_view()
  local st = view_state
  if not st then
    return
  end
  local d = session.checkpoint_diff3(st.id, st.path)
  if d.type ~= "error" then
    fill_view(st, d)
  end
end

--- Opens the 3-way view of `path` in checkpoint `id`: base | current | proposed, in diff mode.
function M.view(id, path)
  local d = session.checkpoint_diff3(id, path)
  if d.type == "error" then
    session.fail("open checkpoint " .. id, d)
    return false
  end
  close_view()
  local ft = vim.filetype.match({ filename = path }) or ""
  vim.cmd("tabnew")
  local st = { id = id, path = path, tab = vim.api.nvim_get_current_tabpage(), bufs = {}, wins = {} }
  local order = { "base", "current", "proposed" }
  for i, name in ipairs(order) do
    if i > 1 then
      vim.cmd("rightbelow vnew")
    end
    st.wins[name] = vim.api.nvim_get_current_win()
    st.bufs[name] = scratch(("bb7-checkpoint://%s/%s/%s"):format(id, name, path), {}, ft)
    vim.cmd("diffthis")
  end
  view_state = st
  fill_view(st, d)
  local actions = {
    scoped = function()
      local l = vim.api.nvim_win_get_cursor(0)[1]
      scoped_at(l, l)
    end,
    hard = function()
      M.hard(st.id)
    end,
    help = function()
      help("BB-7 checkpoint view (base | current | proposed):", "checkpoint_view", M.view_keys)
    end,
    close = close_view,
  }
  local scoped = keymaps.key("checkpoint_view", "scoped")
  for _, buf in pairs(st.bufs) do
    map(buf, "checkpoint_view", M.view_keys, actions)
    if scoped then
      vim.keymap.set("x", scoped, function()
        local a, b = vim.fn.line("v"), vim.fn.line(".")
        vim.cmd("normal! \27")
        scoped_at(math.min(a, b), math.max(a, b))
      end, { buffer = buf, desc = "BB-7 checkpoints: roll back the hunks in the selection" })
    end
  end
  vim.api.nvim_set_current_win(st.wins.proposed)
  local hint = keymaps.hint("checkpoint_view", {
    { "scoped", "roll back hunk" },
    { "hard", "hard rollback" },
    { "help", "keys" },
  }, ", ")
  notify(("Checkpoint %s, %s: base | current | proposed%s"):format(id, path, hint ~= "" and ("; " .. hint) or ""))
  return true
end

--- The 3-way view in progress (tests).
function M.current_view()
  return view_state
end

-- The list ---------------------------------------------------------------------------------------

--- Readable names of the host's checkpoint kinds.
local KINDS = {
  apply_file = "applied",
  apply_file_as = "applied as new file",
  apply_hunks = "hunks applied",
  rollback = "rollback",
}

local function render_list(st, cps)
  local hint = keymaps.hint("checkpoints", {
    { "open", "3-way view" },
    { "hard", "hard rollback" },
    { "help", "keys" },
  }, ", ")
  local lines = { "BB-7 checkpoints (newest first)" .. (hint ~= "" and (": " .. hint) or ""), "" }
  st.rows = {}
  for _, c in ipairs(cps) do
    local kind = (KINDS[c.kind] or tostring(c.kind)) .. (c.rollback_of and (" of " .. c.rollback_of) or "")
    for _, f in ipairs(c.files or {}) do
      -- Host-provided text, possibly from a planted checkpoint record: one display line each.
      -- `after_hash` null: the file was removed (a rollback of the apply that created it).
      local what = (f.after_hash == nil or f.after_hash == vim.NIL) and "  (file removed)" or ""
      lines[#lines + 1] = util.oneline(
        ("%s  %s  %-28s %s%s"):format(c.id, util.local_time(c.created), kind, f.path, what)
      )
      st.rows[#lines] = { id = c.id, path = f.path }
    end
  end
  if #cps == 0 then
    lines[#lines + 1] = "(no checkpoints yet: they are made by every apply)"
  end
  vim.bo[st.buf].modifiable = true
  vim.api.nvim_buf_set_lines(st.buf, 0, -1, false, lines)
  vim.bo[st.buf].modifiable = false
  vim.bo[st.buf].modified = false
end

--- Reloads the list (if open).
function M.reload()
  local st = list_state
  if not (st and vim.api.nvim_buf_is_valid(st.buf)) then
    return
  end
  local r = session.checkpoints()
  if r.type == "error" then
    session.fail("list checkpoints", r)
    return
  end
  render_list(st, r.checkpoints or {})
end

local function row()
  local st = list_state
  return st and st.rows[vim.api.nvim_win_get_cursor(0)[1]]
end

--- `:BB7Checkpoints`.
function M.open()
  session.hook()
  if not session.ensure_initialized() then
    return false
  end
  local r = session.checkpoints()
  if r.type == "error" then
    session.fail("list checkpoints", r)
    return false
  end
  if list_state and vim.api.nvim_buf_is_valid(list_state.buf) then
    pcall(vim.api.nvim_buf_delete, list_state.buf, { force = true })
  end
  vim.cmd("tabnew")
  local st = { tab = vim.api.nvim_get_current_tabpage() }
  st.buf = scratch("bb7-checkpoints://" .. (session.root or ""), {}, "bb7checkpoints")
  list_state = st
  render_list(st, r.checkpoints or {})
  vim.api.nvim_win_set_cursor(0, { math.min(3, vim.api.nvim_buf_line_count(st.buf)), 0 })
  map(st.buf, "checkpoints", M.list_keys, {
    open = function()
      local x = row()
      if x then
        M.view(x.id, x.path)
      end
    end,
    hard = function()
      local x = row()
      if x then
        M.hard(x.id)
      end
    end,
    reload = M.reload,
    help = function()
      help("BB-7 checkpoints:", "checkpoints", M.list_keys)
    end,
    close = function()
      list_state = nil
      if #vim.api.nvim_list_tabpages() > 1 then
        pcall(vim.cmd, "tabclose")
      else
        pcall(vim.api.nvim_buf_delete, st.buf, { force = true })
      end
    end,
  })
  return true
end

return M
