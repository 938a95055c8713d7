--- The Files pane: context files and output with their statuses (`M`, `A`, `!A`, `S`, `R`, `~`, `~M`,
--- `D`: gone from disk);
--- add, remove, toggle read-only, update snapshot, apply one / all, reject output, diffs.
local session = require("bb7.session")
local keymaps = require("bb7.ui.keymaps")
local render = require("bb7.ui.render")
local util = require("bb7.util")

local M = {}
local buf, ui = nil, nil
local items = {}
local ns = vim.api.nvim_create_namespace("bb7_files")

local STATUS_HL = {
  M = "BB7StatusM",
  A = "BB7StatusA",
  ["!A"] = "BB7StatusConflict",
  ["~"] = "BB7StatusSync",
  ["~M"] = "BB7StatusConflict",
  S = "Comment",
  R = "Comment",
  D = "BB7StatusConflict",
}

--- The displayed status of each entry, comparing against buffers and disk.
function M.entries()
  local out = {}
  for _, f in ipairs(session.statuses or {}) do
    local local_text, missing = nil, false
    if f.in_context and not f.start_line and not f.external then
      local_text = session.local_text(session.abspath(f.path))
    end
    if (f.status or "") == "" and local_text == nil and not f.start_line and not f.external then
      missing = vim.uv.fs_stat(session.abspath(f.path)) == nil
    end
    local unsafe = nil
    if f.has_output and not f.external and not f.start_line then
      unsafe = util.unsafe_local(session.root or require("bb7.config").root(), f.path)
    end
    local status = util.display_status(f, local_text, missing)
    local note = nil
    if status == "D" then
      note = session.rolled_back[f.path] and "removed by a rollback" or "not on disk"
    end
    out[#out + 1] = { file = f, status = status, unsafe = unsafe, note = note }
  end
  return out
end

-- While the UI is open the statuses follow edits made outside Neovim too: the directories of the
-- chat's files are watched (one fs_event each) and a change re-renders the pane.
local watchers = {} ---@type table<string, uv.uv_fs_event_t>
local rerender_queued = false

local function stop_watching()
  for dir, w in pairs(watchers) do
    pcall(w.stop, w)
    pcall(w.close, w)
    watchers[dir] = nil
  end
end

local function on_change()
  if rerender_queued then
    return
  end
  rerender_queued = true
  vim.schedule(function()
    rerender_queued = false
    if ui and ui.is_open() then
      M.render()
    else
      stop_watching()
    end
  end)
end

local function watch()
  if not (ui and ui.is_open()) then
    return stop_watching()
  end
  local want = {}
  for _, f in ipairs(session.statuses or {}) do
    if not f.external and not f.start_line then
      want[vim.fs.dirname(session.abspath(f.path))] = true
    end
  end
  for dir in pairs(watchers) do
    if not want[dir] then
      pcall(watchers[dir].stop, watchers[dir])
      pcall(watchers[dir].close, watchers[dir])
      watchers[dir] = nil
    end
  end
  for dir in pairs(want) do
    if not watchers[dir] and vim.fn.isdirectory(dir) == 1 then
      local w = vim.uv.new_fs_event()
      if w and w:start(dir, {}, on_change) then
        watchers[dir] = w
      elseif w then
        pcall(w.close, w)
      end
    end
  end
end

function M.render()
  if not buf or not vim.api.nvim_buf_is_valid(buf) then
    return
  end
  watch()
  local lines, hls = {}, {}
  items = {}
  if not session.chat then
    lines[1] = "No active chat."
  else
    local entries = M.entries()
    if #entries == 0 then
      lines[1] = "No files. :BB7Add or press a."
    end
    for _, e in ipairs(entries) do
      lines[#lines + 1] = render.file_line(e.file, e.status)
        .. (e.note and ("  (" .. e.note .. ")") or "")
        .. (e.unsafe and ("  ⚠ not writable: " .. e.unsafe) or "")
      items[#lines] = e
      if STATUS_HL[e.status] then
        hls[#hls + 1] = { #lines - 1, #e.status, STATUS_HL[e.status] }
      end
    end
  end
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.api.nvim_buf_clear_namespace(buf, ns, 0, -1)
  for _, h in ipairs(hls) do
    vim.api.nvim_buf_set_extmark(buf, ns, h[1], 0, { end_col = h[2], hl_group = h[3] })
  end
end

local function current()
  local win = ui and ui.wins.files
  if not win or not vim.api.nvim_win_is_valid(win) then
    return nil
  end
  local e = items[vim.api.nvim_win_get_cursor(win)[1]]
  return e and e.file
end

local function with_file(fn)
  return function()
    local f = current()
    if not f then
      session.notify("No file under the cursor", vim.log.levels.WARN)
      return
    end
    fn(f)
  end
end

function M.attach(b, u)
  buf, ui = b, u
  vim.bo[buf].modifiable = false
  local preview = function()
    return require("bb7.ui.preview")
  end
  keymaps.apply(buf, "files", "files", {
    open = {
      with_file(function(f)
        preview().show_file(f)
      end),
      "view the file (output if any, else context) in the preview",
    },
    add = {
      function()
        -- The default is the file being edited when the UI opened (relative to the project).
        local default = ""
        local origin = ui and ui.origin_buf and ui.origin_buf()
        local name = origin and vim.api.nvim_buf_is_valid(origin) and vim.api.nvim_buf_get_name(origin) or ""
        if name ~= "" and vim.bo[origin].buftype == "" then
          local root = (session.root or require("bb7.config").root()) .. "/"
          default = name:sub(1, #root) == root and name:sub(#root + 1) or name
        end
        vim.ui.input({ prompt = "Add file (path or path:start:end): ", default = default, completion = "file" }, function(p)
          if p and p ~= "" then
            session.add(p)
          end
        end)
      end,
      "add a file or section to the context",
    },
    pick = { session.pick_context, "pick files to add (current buffer, quickfix list, project files)" },
    remove = {
      with_file(function(f)
        if f.start_line then
          session.remove(("%s:%d:%d"):format(f.path, f.start_line, f.end_line))
        elseif f.in_context then
          session.remove(f.path)
        else
          session.notify("File not in context", vim.log.levels.WARN)
        end
      end),
      "remove from the context",
    },
    readonly = {
      with_file(function(f)
        if f.start_line then
          session.notify("Sections are always read-only", vim.log.levels.WARN)
        else
          session.set_readonly(f.path, not f.readonly)
        end
      end),
      "toggle read-only",
    },
    update = {
      with_file(function(f)
        if f.start_line or not f.in_context then
          session.notify("File not in context", vim.log.levels.WARN)
        else
          session.update(f.path)
        end
      end),
      "update the context snapshot from the buffer / disk",
    },
    apply = {
      with_file(function(f)
        session.apply_asking(f.path)
      end),
      "apply the output to the local file",
    },
    apply_all = { session.apply_all, "apply all outputs" },
    reject = {
      with_file(function(f)
        if not f.has_output then
          session.notify("No output to apply", vim.log.levels.WARN)
        else
          session.confirm("Reject (delete) the output of " .. util.oneline(f.path) .. "?", function()
            session.reject(f.path)
          end)
        end
      end),
      "reject (delete) the output (asks first)",
    },
    diff = {
      with_file(function(f)
        preview().show_diff(f.path)
      end),
      "context → output diff in the preview",
    },
    diff_local = {
      with_file(function(f)
        require("bb7.ui.difflocal").open(f.path)
      end),
      "side-by-side local ↔ output diff (:BB7DiffLocal)",
    },
    review = {
      with_file(function(f)
        require("bb7.ui.review").open(f.path)
      end),
      "review the output hunk by hunk (:BB7Review)",
    },
  })
  session.subscribe("files", M.render)
  session.subscribe("chat", M.render)
  -- `~` follows the user's edits: re-render when a buffer changes or is written.
  vim.api.nvim_create_autocmd({ "BufWritePost", "InsertLeave", "TextChanged", "FocusGained" }, {
    group = vim.api.nvim_create_augroup("bb7_files", { clear = true }),
    callback = function(ev)
      if not vim.b[ev.buf].bb7_pane and ui.is_open() then
        M.render()
      end
    end,
  })
end

return M
