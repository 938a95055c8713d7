--- The host in the project: starting it and initializing the session (`ensure*`, `:BB7Init`), and the
--- host events that keep the state true (a title generated, the host exiting or starting again).
local chat = require("bb7.session.chat")
local config = require("bb7.config")
local host = require("bb7.host")
local S = require("bb7.session.state")

local M = {}
local L = vim.log.levels
local ok = S.ok

--- Whether `.bb7/` exists in the project root.
function M.has_bb7(root)
  return vim.fn.isdirectory((root or config.root()) .. "/.bb7") == 1
end

--- Starts the host and initializes the session for the current project when needed.
--- Returns true when the project is initialized (project mode).
local ensuring = false

function M.ensure()
  local root = config.root()
  if not host.running() then
    ensuring = true
    local started = host.start()
    ensuring = false
    if not started then
      return false
    end
    S.root = nil
  end
  if S.root == root and S.initialized then
    return true
  end
  if not M.has_bb7(root) then
    if S.root ~= root then
      S.chat, S.statuses, S.chats = nil, {}, nil
    end
    S.root, S.initialized = root, false
    return false
  end
  local r = host.call("init", { project_root = root })
  if not ok(r) then
    S.fail("initialize", r)
    return false
  end
  S.root, S.initialized = root, not r.global_only
  S.global_only = false
  S.default_model = r.default_model
  S.chat, S.statuses = nil, {}
  if S.chats_root ~= root then
    S.chats = nil -- the list of another project; the same project's list stays shown until reloaded
  end
  local a = host.call("chat_active", {})
  if ok(a) and a.id then
    chat.load_chat()
  end
  if S.initialized and S.view and S.view.is_open() then
    -- After a restart (the host died) with the UI open, the list is reloaded at once.
    chat.list_chats()
    S.emit("chats")
  end
  return S.initialized
end

--- Whether the host serves the global chats only (`:BB7Global` outside a project).
function M.global_only_here()
  return S.global_only == true and S.root == config.root() and host.running()
end

--- `:BB7Global`: in a project, true (the global chats are listed beside the project's); outside
--- one, the host is put in global-only mode (`init` without a project) and the chat list shows
--- the global chats. Returns whether global chats can be used now.
function M.ensure_global()
  if M.ensure() then
    return true
  end
  if M.global_only_here() then
    return true
  end
  if not host.running() then
    return false
  end
  local r = host.call("init", { project_root = "" })
  if not ok(r) then
    S.fail("open the global chats", r)
    return false
  end
  S.root, S.initialized, S.global_only = config.root(), false, true
  S.default_model = r.default_model
  S.chat, S.statuses, S.chats = nil, {}, nil
  S.scope = "global"
  local a = host.call("chat_active", {})
  if ok(a) and a.id then
    chat.load_chat()
  end
  return true
end

--- Like `ensure`, but notifies "Not initialized" when the project has no `.bb7/` (in global-only
--- mode, after `:BB7Global` outside a project, the global chats count as initialized).
function M.ensure_initialized()
  if M.ensure() then
    return true
  end
  if M.global_only_here() then
    return true
  end
  if host.running() then
    S.notify("Not initialized. Run :BB7Init", L.WARN)
  end
  return false
end

--- Like `ensure_initialized`, and also requires an active chat.
function M.ensure_chat()
  if not M.ensure_initialized() then
    return false
  end
  if not S.chat then
    S.notify("No active chat", L.WARN)
    return false
  end
  return true
end

--- `:BB7Init`.
function M.init_project()
  local root = config.root()
  if not host.running() and not host.start() then
    return false
  end
  local r = host.call("bb7_init", { project_root = root })
  if not ok(r) then
    if tostring(r.message):find("Already initialized", 1, true) then
      S.notify("Already initialized")
      M.ensure()
      return true
    end
    S.fail("initialize", r)
    return false
  end
  -- The host wrote `.bb7/.gitignore`: chats private by default, `tools.lock` committable.
  S.root, S.initialized = nil, false
  M.ensure()
  S.notify("Initialized in " .. root)
  S.emit("chats")
  return true
end

-- Host events -------------------------------------------------------------------------------------------

local hooked = false

--- Follows the host's events (once; every entry point calls it).
function M.hook()
  if hooked then
    return
  end
  hooked = true
  host.on("title_updated", function(msg)
    if S.chat and S.chat.id == msg.chat_id then
      S.chat.name = msg.title
      S.emit("chat_title")
    end
    for _, c in ipairs(S.chats or {}) do
      if c.id == msg.chat_id then
        c.name = msg.title
      end
    end
    S.emit("chats")
  end)
  host.on_exit(function()
    -- Pending requests (a send included) were failed by the host module; re-init on next use.
    if S.initialized and not host._stopping then
      S.reinit = true -- it died: the next start (from any request) puts it back in the project
    end
    S.root, S.initialized, S.global_only = nil, false, false
  end)
  host.on_start(function()
    -- A host started by any request after the last one died (not through `ensure`) is put back
    -- in the project first, so that request (a chat select, a list) works instead of failing.
    if S.reinit and not ensuring then
      S.reinit = false
      M.ensure()
    end
  end)
end

return M
