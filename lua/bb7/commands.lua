--- The user commands (`:BB7…`). `plugin/bb7.lua` defines them; each one requires what it needs lazily.
local session = require("bb7.session")
local host = require("bb7.host")

local M = {}
local L = vim.log.levels

M.plugin_version = require("bb7.version").plugin

local function ui()
  return require("bb7.ui")
end

local function range_of(opts)
  if opts.range and opts.range > 0 then
    return { opts.line1, opts.line2 }
  end
end

function M.init()
  session.hook()
  session.init_project()
end

function M.toggle()
  session.hook()
  ui().toggle()
end

function M.add(opts)
  session.hook()
  session.add(opts.args, { range = range_of(opts) })
end

function M.add_readonly(opts)
  session.hook()
  if range_of(opts) then
    -- Sections are always read-only.
    session.add(opts.args, { range = range_of(opts) })
  else
    session.add(opts.args, { readonly = true })
  end
end

function M.remove(opts)
  session.hook()
  session.remove(opts.args, { range = range_of(opts) })
end

function M.new_chat(opts)
  session.hook()
  if session.new_chat(opts.args ~= "" and opts.args or nil) then
    session.notify("New chat " .. require("bb7.util").oneline(session.chat and session.chat.name or ""))
    if ui().is_open() then
      ui().focus("input")
    end
  end
end

function M.model()
  session.hook()
  require("bb7.ui.models").open()
end

function M.search(opts)
  session.hook()
  if not session.ensure_initialized() then
    return
  end
  local function run(q)
    session.list_chats()
    if ui().open("chats") then
      require("bb7.ui.chats").search(q)
    end
  end
  if opts.args ~= "" then
    run(opts.args)
  else
    vim.ui.input({ prompt = "Search chats: " }, function(q)
      if q and q ~= "" then
        run(q)
      end
    end)
  end
end

local function target_path(arg)
  local t = session.resolve_target(arg ~= "" and arg or nil)
  return t and t.path
end

function M.diff(opts)
  session.hook()
  if not session.ensure_chat() then
    return
  end
  local path = target_path(opts.args)
  if not path then
    return
  end
  session.refresh_files()
  local f = session.status_of(path)
  if not f or not f.has_output then
    session.notify("No output for " .. path, L.WARN)
    return
  end
  if ui().open("preview") then
    require("bb7.ui.preview").show_diff(path)
  end
end

--- Native side-by-side local ↔ output diff in a new tab. Writing the local buffer reports the merge
--- to the host (`diff_local_done`): all taken → applied, some taken → partially applied.
function M.diff_local(path)
  if not session.ensure_chat() then
    return false
  end
  local util = require("bb7.util")
  local r = host.call("get_diff_paths", { path = path })
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
  local root = session.root or require("bb7.config").root()
  local want = vim.fs.normalize(root .. "/" .. path)
  local why = type(r.local_path) ~= "string" and "the host gave no local path"
    or (vim.fs.normalize(r.local_path) ~= want and ("the host gave another local path (%s)"):format(util.oneline(r.local_path)))
    or util.unsafe_local(root, path)
  if why then
    session.notify(("Failed to open the diff of %s: %s"):format(util.oneline(path), why), L.ERROR)
    return false
  end
  if ui().is_open() then
    ui().close()
  end
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
      local d = host.call("diff_local_done", { path = path })
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

function M.diff_local_cmd(opts)
  session.hook()
  if not session.ensure_chat() then
    return
  end
  local path = target_path(opts.args)
  if path then
    M.diff_local(path)
  end
end

function M.edit_instructions(opts)
  session.hook()
  local level = opts.args ~= "" and opts.args or "project"
  if level ~= "project" and level ~= "global" and level ~= "system" then
    session.notify("Unknown instructions level " .. level .. " (project, global or system)", L.ERROR)
    return
  end
  if level == "project" and not session.ensure_initialized() then
    return
  end
  if level ~= "project" and not host.running() and not host.start() then
    return
  end
  local r = host.call("prepare_instructions", { level = level })
  if r.type == "error" then
    session.fail("open instructions", r)
    return
  end
  if ui().is_open() then
    ui().close()
  end
  vim.cmd("edit " .. vim.fn.fnameescape(r.path))
end

function M.version()
  if not host.running() then
    host.start()
  end
  session.notify(
    ("plugin %s, host %s (%s)"):format(M.plugin_version, host.version or "not running", host.bin_path or "?")
  )
end

--- `:BB7Pick`: the context picker (vim.ui.select) of the Files pane's `A`.
function M.pick()
  session.hook()
  session.pick_context()
end

--- `:BB7AddQuickfix`: adds every file of the quickfix list.
function M.add_quickfix()
  session.hook()
  if not session.ensure_chat() then
    return
  end
  local files = session.quickfix_files()
  if #files == 0 then
    session.notify("The quickfix list has no files", L.WARN)
    return
  end
  session.notify(("Added %d of %d files"):format(session.add_many(files), #files))
end

function M.restart()
  session.hook()
  local was_open = ui().is_open()
  if was_open then
    ui().close()
  end
  host.stop()
  session.root, session.initialized = nil, false
  session.chat, session.statuses, session.chats = nil, {}, nil
  if host.start() then
    session.ensure()
    session.notify("Restarted host " .. (host.version or ""))
  end
end

return M
