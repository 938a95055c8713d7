--- The model's output for the active chat: reading a file's output or snapshot, applying it to the
--- local file (one or all), rejecting it, and the host's side of the local ↔ output diff.
local chat = require("bb7.session.chat")
local config = require("bb7.config")
local context = require("bb7.session.context")
local host = require("bb7.host")
local util = require("bb7.util")
local S = require("bb7.session.state")

local M = {}
local L = vim.log.levels
local notify = S.notify
local ok = S.ok

--- Reloads every loaded, unmodified buffer of `abs` from disk.
local function reload_buffer(abs)
  local buf = vim.fn.bufnr(abs)
  if buf > 0 and vim.api.nvim_buf_is_loaded(buf) then
    vim.api.nvim_buf_call(buf, function()
      vim.cmd("silent! edit!")
    end)
  end
end

--- Applies the output of `path` to the local file. `quiet` suppresses the per-file message.
function M.apply(path, quiet)
  if not S.chat then
    notify("No active chat", L.WARN)
    return false
  end
  if S.busy_here() then
    notify("Another request is already in progress", L.WARN)
    return false
  end
  local f = chat.status_of(path)
  if not f or not f.has_output then
    notify("No output to apply", L.WARN)
    return false
  end
  local abs = context.abspath(path)
  local unsafe = not f.external and util.unsafe_local(S.root or config.root(), path)
  if unsafe then
    notify(("Cannot write file %s: %s"):format(util.oneline(path), unsafe), L.ERROR)
    return false
  end
  local buf = vim.fn.bufnr(abs)
  if buf > 0 and vim.api.nvim_buf_is_loaded(buf) and vim.bo[buf].modified then
    notify("Cannot write file " .. path .. ": its buffer has unsaved changes (save or undo them first)", L.ERROR)
    return false
  end
  local before = util.read_file(abs)
  local already = before ~= nil and f.output_content ~= nil and util.same_text(before, f.output_content)
  local r = host.call("apply_file", { path = path })
  if not ok(r) then
    if tostring(r.message):find("No output", 1, true) then
      notify("No output to apply", L.WARN)
    elseif tostring(r.message):find("Cannot write", 1, true) then
      notify("Cannot write file " .. path, L.ERROR)
    else
      S.fail("apply " .. path, r)
    end
    chat.refresh_files()
    return false
  end
  -- Keep the local file's line endings.
  local content = r.content or util.read_file(abs) or ""
  if before and util.line_ending(before) == "crlf" then
    local want = util.with_line_ending(content, "crlf")
    if want ~= content then
      local okw, err = util.write_file(abs, want)
      if not okw then
        notify("Cannot write file " .. path .. ": " .. tostring(err), L.ERROR)
      end
    end
  end
  host.call("sync_context", { path = path })
  reload_buffer(abs)
  if not quiet then
    notify(already and "File already applied" or ("Applied " .. path))
  end
  chat.load_chat()
  return true
end

--- The status `path` shows now (`~M`, `!A`, …), from the host's entry and the local file as it is
--- at this moment (buffer or disk); nil when the chat does not know the file.
function M.live_status(path)
  local f = chat.status_of(path)
  if not f then
    return nil, nil
  end
  local local_text = nil
  if f.in_context and not f.external then
    local_text = context.local_text(context.abspath(path))
  end
  return util.display_status(f, local_text), f
end

--- Applies the output of `path`, asking first when that would overwrite something of the user's:
--- a local file the model did not know (`!A`), or local changes made since the file was added
--- (`~M`: saved edits the output was not made from). `done()` runs after an apply.
function M.apply_asking(path, done)
  local st = M.live_status(path)
  local function go()
    if M.apply(path) and done then
      done()
    end
  end
  local name = util.oneline(path)
  if st == "!A" then
    S.confirm(name .. " exists locally. Overwrite it with the output?", go)
  elseif st == "~M" then
    S.confirm(name .. " changed locally since the model saw it. Overwrite your changes with the output?", go)
  else
    go()
  end
end

--- Applies every output (`M` and `A`; conflicts `!A` and files changed locally since the model saw
--- them, `~M`, are left for one-by-one review).
function M.apply_all()
  if not S.chat then
    notify("No active chat", L.WARN)
    return 0
  end
  local paths, changed = {}, {}
  for _, f in ipairs(S.statuses) do
    if f.has_output and (f.status == "M" or f.status == "A") then
      if M.live_status(f.path) == "~M" then
        changed[#changed + 1] = f.path
      else
        paths[#paths + 1] = f.path
      end
    end
  end
  if #changed > 0 then
    notify(
      ("Not applied, changed locally since the model saw them (apply or review them one by one): %s"):format(
        util.oneline(table.concat(changed, ", "))
      ),
      L.WARN
    )
  end
  if #paths == 0 then
    if #changed == 0 then
      notify("No output to apply", L.WARN)
    end
    return 0
  end
  local n = 0
  for _, p in ipairs(paths) do
    if M.apply(p, true) then
      n = n + 1
    end
  end
  notify(("Applied %d files"):format(n))
  return n
end

--- Rejects (deletes) the output of `path`.
function M.reject(path)
  local r = host.call("output_delete", { path = path })
  if not ok(r) then
    if tostring(r.message):find("not found", 1, true) then
      notify("No output to apply", L.WARN)
    else
      S.fail("reject " .. path, r)
    end
    return false
  end
  notify("Rejected output for " .. path)
  chat.load_chat()
  return true
end

--- The text the preview shows for status entry `f`: its output, else its context snapshot (read
--- from the host when the statuses do not carry it); nil after saying why it cannot be read.
---@return string|nil
function M.file_content(f)
  local content = f.output_content or f.context_content
  if content then
    return content
  end
  local r = host.call(f.has_output and "get_output_file" or "get_context_file", { path = f.path })
  if not ok(r) then
    S.fail("read " .. f.path, r)
    return nil
  end
  return r.content or ""
end

--- The host's reply to `get_diff_paths`: the local and output files of `path` for the side-by-side
--- diff (`type = "error"` when there is none).
function M.diff_paths(path)
  return host.call("get_diff_paths", { path = path })
end

--- Tells the host the user wrote the local file of a side-by-side diff of `path`; its reply says
--- how much of the output was taken (`outcome` "full" or "partial").
function M.diff_local_done(path)
  return host.call("diff_local_done", { path = path })
end

return M
