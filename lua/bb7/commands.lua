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

--- The side-by-side local ↔ output diff of `path` (`L` in the Files pane, `:BB7DiffLocal`).
function M.diff_local(path)
  return require("bb7.ui.difflocal").open(path)
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

--- `:BB7Build`: builds the host in the background, progress on screen (lua/bb7/build.lua);
--- `:BB7Build cancel` stops it.
function M.build(opts)
  local build = require("bb7.build")
  if opts.args == "cancel" then
    if not build.cancel() then
      session.notify("No build is running", L.WARN)
    end
  elseif opts.args == "" then
    build.start_with_progress()
  else
    session.notify("Unknown argument " .. opts.args .. " (:BB7Build, or :BB7Build cancel)", L.ERROR)
  end
end

--- `:BB7Answer {text}` answers the agent's waiting question; `:BB7Answer!` skips it.
function M.answer(opts)
  session.hook()
  if opts.bang then
    session.answer_question(nil)
  elseif vim.trim(opts.args or "") == "" then
    session.notify("Usage: :BB7Answer {answer}, or :BB7Answer! to skip the question", L.WARN)
  else
    session.answer_question(opts.args)
  end
end

--- `:BB7Global`: the chat list shows the global chats (again: the project's), in the open UI;
--- outside a project, the host serves the global chats only.
function M.global()
  session.hook()
  local was = session.scope
  if not session.ensure_global() then
    return
  end
  -- Outside a project only the global chats exist; in one, the list toggles.
  require("bb7.ui.chats").set_scope((session.global_only or was ~= "global") and "global" or "project")
  if not ui().is_open() then
    ui().open("chats")
  else
    ui().focus("chats")
  end
end

--- `:BB7MoveChat [global|project]`: moves the active chat to the other store (or to `to`).
function M.move_chat(opts)
  session.hook()
  if not session.ensure_chat() then
    return
  end
  local to = vim.trim(opts.args or "")
  if to == "" then
    to = session.chat.global and "project" or "global"
  end
  if to ~= "global" and to ~= "project" then
    session.notify("Usage: :BB7MoveChat [global|project]", L.ERROR)
    return
  end
  session.move_chat(session.chat.id, to)
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
