--- The context of the active chat: resolving a command's target, reading the user's text of a file,
--- and adding, removing, updating and picking context files.
local chat = require("bb7.session.chat")
local config = require("bb7.config")
local host = require("bb7.host")
local project = require("bb7.session.project")
local util = require("bb7.util")
local S = require("bb7.session.state")

local M = {}
local L = vim.log.levels
local notify = S.notify
local ok = S.ok

--- The text the user has for `abs`: the loaded buffer when it is modified, else the file on disk.
---@return string|nil
function M.local_text(abs)
  local buf = vim.fn.bufnr(abs)
  if buf > 0 and vim.api.nvim_buf_is_loaded(buf) and vim.bo[buf].modified then
    local lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
    local nl = vim.bo[buf].fileformat == "dos" and "\r\n" or "\n"
    local text = table.concat(lines, nl)
    if vim.bo[buf].eol or vim.bo[buf].fixeol then
      text = text .. nl
    end
    return text
  end
  return util.read_file(abs)
end

--- The absolute path of a context path.
function M.abspath(path)
  if path:sub(1, 1) == "/" then
    return path
  end
  return (S.root or config.root()) .. "/" .. path
end

--- Resolves a command argument (or the current buffer) into a target for context commands.
---@return table|nil target {path, abs, start_line?, end_line?}
function M.resolve_target(arg, range)
  local t
  if arg == "%" then
    arg = nil -- asked for explicitly: the current file
  elseif arg == "#" then
    local alt = vim.fn.bufnr("#") > 0 and vim.api.nvim_buf_get_name(vim.fn.bufnr("#")) or ""
    if alt == "" then
      notify("No alternate file", L.WARN)
      return nil
    end
    arg = alt
  end
  if arg and arg ~= "" then
    local err
    t, err = util.parse_target(arg)
    if not t then
      notify("Failed to parse " .. arg .. ": " .. err, L.ERROR)
      return nil
    end
  else
    local buf = 0
    if vim.b.bb7_pane then
      -- From inside the UI: the file the user was editing when it opened.
      buf = S.view and S.view.origin_buf() or 0
    end
    local name = vim.api.nvim_buf_get_name(buf)
    if name == "" or vim.bo[buf].buftype ~= "" then
      notify("No file in the current buffer", L.WARN)
      return nil
    end
    t = { path = name }
    if range then
      t.start_line, t.end_line = range[1], range[2]
    end
  end
  local root = S.root or config.root()
  local abs = vim.fs.normalize(vim.fn.fnamemodify(t.path, ":p"))
  if t.path:sub(1, 1) ~= "/" and not (arg == nil or arg == "") then
    abs = vim.fs.normalize(vim.fn.fnamemodify(root .. "/" .. t.path, ":p"))
  end
  t.abs = abs
  t.path = util.relpath(abs, root)
  return t
end

--- Whether `text` (the content of `path`) can go into the context; says why not when it cannot
--- (a binary file, not UTF-8, larger than `max_file_bytes`), before anything is sent to the host.
function M.sendable(path, text)
  local why = util.unsendable(text, config.options.max_file_bytes)
  if why then
    notify(("Cannot add %s: %s"):format(util.oneline(path), why), L.ERROR)
    return false
  end
  return true
end

--- `:BB7Add` / `:BB7AddReadonly` / the Files pane's add.
function M.add(arg, opts)
  opts = opts or {}
  if not project.ensure_chat() then
    return false
  end
  local t = M.resolve_target(arg, opts.range)
  if not t then
    return false
  end
  local text = M.local_text(t.abs)
  if not text then
    notify("Cannot read file " .. t.path, L.ERROR)
    return false
  end
  if not M.sendable(t.path, text) then
    return false
  end
  local r
  if t.start_line then
    local n = #util.lines(text)
    if t.end_line > n then
      notify(("Failed to add section: %s has %d lines"):format(t.path, n), L.ERROR)
      return false
    end
    r = host.call("context_add_section", {
      path = t.path,
      content = util.section(text, t.start_line, t.end_line),
      start_line = t.start_line,
      end_line = t.end_line,
    })
  else
    r = host.call("context_add", { path = t.path, content = text, readonly = opts.readonly or false })
  end
  if not ok(r) then
    if tostring(r.message):find("already exists", 1, true) then
      notify("File already in context", L.WARN)
    else
      S.fail("add file", r)
    end
    return false
  end
  if t.start_line then
    notify(("Added %s:%d-%d"):format(t.path, t.start_line, t.end_line))
  else
    notify("Added " .. t.path)
  end
  chat.load_chat() -- context events are messages: the chat view shows them
  return true
end

--- Files of the project for a picker: relative paths, sorted, at most `limit` (`.git/`, `.bb7/`,
--- `node_modules/` and `target/` are skipped, and so are the files of the agent's deny list unless
--- `show_denied` is set: lua/bb7/deny.lua).
function M.project_files(limit)
  limit = limit or 5000
  local root = S.root or config.root()
  local skip = { [".git"] = true, [".bb7"] = true, node_modules = true, target = true }
  local denied = require("bb7.deny").matcher()
  local out = {}
  for name, type in vim.fs.dir(root, {
    depth = 20,
    skip = function(dir)
      return not skip[vim.fs.basename(dir)]
    end,
  }) do
    if type == "file" and not (denied and denied(name)) then
      out[#out + 1] = name
      if #out >= limit then
        break
      end
    end
  end
  table.sort(out)
  return out
end

--- The distinct files of the quickfix list, as `:BB7Add` arguments (absolute paths).
function M.quickfix_files()
  local seen, out = {}, {}
  for _, item in ipairs(vim.fn.getqflist()) do
    local name = item.bufnr > 0 and vim.api.nvim_buf_get_name(item.bufnr) or ""
    if name ~= "" and not seen[name] then
      seen[name] = true
      out[#out + 1] = name
    end
  end
  return out
end

--- Adds each of `paths`; returns how many were added.
function M.add_many(paths)
  local n = 0
  for _, p in ipairs(paths) do
    if M.add(p) then
      n = n + 1
    end
  end
  return n
end

--- The context picker: `vim.ui.select` (so the user's picker plugin shows it) over the file being
--- edited, the quickfix list's files and the project's files.
function M.pick_context()
  if not project.ensure_chat() then
    return
  end
  local items = {}
  local origin = S.view and S.view.origin_buf()
  local cur = origin and vim.api.nvim_buf_get_name(origin) or ""
  if cur ~= "" and vim.bo[origin].buftype == "" then
    items[#items + 1] = { label = "Current buffer: " .. util.oneline(util.relpath(cur, S.root or config.root())), paths = { cur } }
  end
  local qf = M.quickfix_files()
  if #qf > 0 then
    items[#items + 1] = { label = ("Quickfix list: %d file%s"):format(#qf, #qf == 1 and "" or "s"), paths = qf }
  end
  for _, p in ipairs(M.project_files()) do
    items[#items + 1] = { label = util.oneline(p), paths = { p } }
  end
  vim.ui.select(items, {
    prompt = "Add to the context",
    format_item = function(it)
      return it.label
    end,
  }, function(choice)
    if choice then
      if #choice.paths > 1 then
        notify(("Added %d of %d files"):format(M.add_many(choice.paths), #choice.paths))
      else
        M.add(choice.paths[1])
      end
    end
  end)
end

--- `:BB7Remove` / the Files pane's remove.
function M.remove(arg, opts)
  opts = opts or {}
  if not project.ensure_chat() then
    return false
  end
  local t = M.resolve_target(arg, opts.range)
  if not t then
    return false
  end
  local r
  if t.start_line then
    r = host.call("context_remove_section", { path = t.path, start_line = t.start_line, end_line = t.end_line })
  else
    r = host.call("context_remove", { path = t.path })
  end
  if not ok(r) then
    if tostring(r.message):find("not found", 1, true) then
      notify("File not in context", L.WARN)
    else
      S.fail("remove file", r)
    end
    return false
  end
  notify("Removed " .. (t.start_line and ("%s:%d-%d"):format(t.path, t.start_line, t.end_line) or t.path))
  chat.load_chat() -- context events are messages: the chat view shows them
  return true
end

--- Re-snapshots a context file from the buffer or disk (`u` in the Files pane).
function M.update(path)
  local text = M.local_text(M.abspath(path))
  if not text then
    notify("Cannot read file " .. path, L.ERROR)
    return false
  end
  if not M.sendable(path, text) then
    return false
  end
  local r = host.call("context_update", { path = path, content = text })
  if not ok(r) then
    S.fail("update " .. path, r)
    return false
  end
  notify("Updated " .. path)
  chat.load_chat() -- context events are messages: the chat view shows them
  return true
end

function M.set_readonly(path, readonly)
  local r = host.call("context_set_readonly", { path = path, readonly = readonly })
  if not ok(r) then
    S.fail("set read-only", r)
    return false
  end
  notify((readonly and "Set read-only " or "Set writable ") .. path)
  chat.load_chat() -- context events are messages: the chat view shows them
  return true
end

return M
