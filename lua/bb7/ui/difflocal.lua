--- `:BB7DiffLocal` (and `L` in the Files pane): the local file (left, editable) beside the chat's
--- output (right, read-only) in Neovim's diff mode, in a tab of its own; writing the local buffer
--- reports the merge to the host: all taken → applied, some taken → partially applied.
local config = require("bb7.config")
local session = require("bb7.session")
local util = require("bb7.util")

local M = {}
local L = vim.log.levels

--- Opens the diff of `path` in a new tab (the floating UI closes first).
function M.open(path)
  if not session.ensure_chat() then
    return false
  end
  local r = session.diff_paths(path)
  if r.type == "error" then
    if tostring(r.message):find("not found", 1, true) then
      session.notify("No output for " .. util.oneline(path), L.WARN)
    else
      session.fail("open the diff of " .. util.oneline(path), r)
    end
    return false
  end
  -- Only the paths the host vouched for are opened, and only when writing the local one cannot
  -- land outside the project (a symbolic link on the way, .git/, .bb7/).
  local root = session.root or config.root()
  local want = vim.fs.normalize(root .. "/" .. path)
  local why = type(r.local_path) ~= "string" and "the host gave no local path"
    or (vim.fs.normalize(r.local_path) ~= want and ("the host gave another local path (%s)"):format(util.oneline(r.local_path)))
    or util.unsafe_local(root, path)
  if why then
    session.notify(("Failed to open the diff of %s: %s"):format(util.oneline(path), why), L.ERROR)
    return false
  end
  session.close_view()
  vim.cmd("tabnew " .. vim.fn.fnameescape(r.local_path))
  local local_buf = vim.api.nvim_get_current_buf()
  vim.cmd("diffthis")
  vim.cmd("rightbelow vsplit " .. vim.fn.fnameescape(r.output_path))
  vim.bo.modifiable = false
  vim.bo.readonly = true
  vim.bo.bufhidden = "wipe"
  vim.cmd("diffthis")
  vim.cmd("wincmd h")
  vim.cmd("diffupdate")
  local group = vim.api.nvim_create_augroup("bb7_diff_local_" .. local_buf, { clear = true })
  -- The plugin writes the local file itself: checked again right before (a link may have appeared
  -- since), its folder created when it is new.
  vim.api.nvim_create_autocmd("BufWriteCmd", {
    group = group,
    buffer = local_buf,
    callback = function(ev)
      local unsafe = util.unsafe_local(root, path)
      if unsafe then
        session.notify(("Cannot write file %s: %s"):format(util.oneline(path), unsafe), L.ERROR)
        return
      end
      local target = vim.fs.normalize(vim.api.nvim_buf_get_name(ev.buf))
      if target ~= want then
        session.notify(("Cannot write file %s: the buffer was renamed"):format(util.oneline(path)), L.ERROR)
        return
      end
      vim.fn.mkdir(vim.fn.fnamemodify(want, ":h"), "p")
      local lines = vim.api.nvim_buf_get_lines(ev.buf, 0, -1, false)
      local flags = (vim.bo[ev.buf].eol or vim.bo[ev.buf].fixeol) and "" or "b"
      if vim.bo[ev.buf].fileformat == "dos" then
        for i, l in ipairs(lines) do
          if i < #lines or flags == "" then
            lines[i] = l .. "\r"
          end
        end
      end
      if vim.fn.writefile(lines, want, flags) ~= 0 then
        session.notify("Cannot write file " .. util.oneline(path), L.ERROR)
        return
      end
      vim.bo[ev.buf].modified = false
      vim.api.nvim_exec_autocmds("BufWritePost", { buffer = ev.buf })
    end,
  })
  vim.api.nvim_create_autocmd("BufWritePost", {
    group = group,
    buffer = local_buf,
    callback = function()
      local d = session.diff_local_done(path)
      if d.type == "error" then
        session.fail("record the merge of " .. path, d)
        return
      end
      if d.outcome == "full" then
        session.notify("Applied " .. path)
      elseif d.outcome == "partial" then
        session.notify("Partially applied " .. path)
      end
      session.load_chat()
    end,
  })
  session.notify(("Diff %s: local (left) ↔ output (right); take hunks with :diffget, then :w"):format(path))
  return true
end

return M
