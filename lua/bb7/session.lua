--- The session: project state (initialized or not, the active chat, its files), every operation the
--- commands and panes perform, and the `BB-7: …` feedback of SPEC.md. Panes subscribe to changes.
local config = require("bb7.config")
local host = require("bb7.host")
local util = require("bb7.util")

local M = {}
local L = vim.log.levels

M.root = nil ---@type string|nil  project root the host was initialized with
M.initialized = false -- the project has `.bb7/` and the host is in project mode
M.chat = nil ---@type table|nil  the active chat (`chat` reply)
M.statuses = {} ---@type table[]  `file_statuses` of the active chat
M.chats = nil ---@type table[]|nil  the chat list
M.stream = nil ---@type table|nil  {rid, chat_id, content} while a send is in flight
M.last_usage = nil ---@type table|nil
M.last_duration = nil
M.balance = nil ---@type table|nil
M.models = nil ---@type table[]|nil
M.retry_context = nil ---@type table|nil  after a diff_error, sent with the next send

local subscribers = {} ---@type table<string, fun(...)[]>

--- Subscribes to a session event: "chat", "files", "chats", "stream_start", "chunk", "stream_end", "status".
function M.subscribe(event, fn)
  subscribers[event] = subscribers[event] or {}
  table.insert(subscribers[event], fn)
end

function M.emit(event, ...)
  for _, fn in ipairs(subscribers[event] or {}) do
    local ok, err = pcall(fn, ...)
    if not ok then
      vim.notify("BB-7: internal error (" .. event .. "): " .. tostring(err), L.ERROR)
    end
  end
end

--- `vim.notify` with the BB-7 prefix.
function M.notify(msg, level)
  vim.notify("BB-7: " .. msg, level or L.INFO)
end
local notify = M.notify

--- Asks before a destructive action (`vim.ui.select`, so the user's picker is used); runs `fn` on "Yes".
function M.confirm(prompt, fn)
  vim.ui.select({ "No", "Yes" }, { prompt = prompt }, function(choice)
    if choice == "Yes" then
      fn()
    end
  end)
end

--- Notifies a failed host reply the way SPEC.md words it.
---@param action string  what failed, for "Failed to {action}"
---@param reply table
function M.fail(action, reply)
  local msg = tostring(reply.message or "unknown error")
  if msg:find("No active chat", 1, true) then
    notify("No active chat", L.WARN)
  elseif msg:find("already in progress", 1, true) then
    notify("Another request is already in progress", L.WARN)
  elseif msg:find("locked", 1, true) then
    notify("Failed to " .. action .. ": " .. msg, L.WARN)
  else
    notify("Failed to " .. action .. ": " .. msg, L.ERROR)
  end
end

local function ok(reply)
  return reply.type ~= "error"
end

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
    M.root = nil
  end
  if M.root == root and M.initialized then
    return true
  end
  if not M.has_bb7(root) then
    if M.root ~= root then
      M.chat, M.statuses, M.chats = nil, {}, nil
    end
    M.root, M.initialized = root, false
    return false
  end
  local r = host.call("init", { project_root = root })
  if not ok(r) then
    M.fail("initialize", r)
    return false
  end
  M.root, M.initialized = root, not r.global_only
  M.default_model = r.default_model
  M.chat, M.statuses = nil, {}
  if M.chats_root ~= root then
    M.chats = nil -- the list of another project; the same project's list stays shown until reloaded
  end
  local a = host.call("chat_active", {})
  if ok(a) and a.id then
    M.load_chat()
  end
  if M.initialized and package.loaded["bb7.ui"] and require("bb7.ui").is_open() then
    -- After a restart (the host died) with the UI open, the list is reloaded at once.
    M.list_chats()
    M.emit("chats")
  end
  return M.initialized
end

--- Like `ensure`, but notifies "Not initialized" when the project has no `.bb7/`.
function M.ensure_initialized()
  if M.ensure() then
    return true
  end
  if host.running() then
    notify("Not initialized. Run :BB7Init", L.WARN)
  end
  return false
end

--- Like `ensure_initialized`, and also requires an active chat.
function M.ensure_chat()
  if not M.ensure_initialized() then
    return false
  end
  if not M.chat then
    notify("No active chat", L.WARN)
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
      notify("Already initialized")
      M.ensure()
      return true
    end
    M.fail("initialize", r)
    return false
  end
  M.root, M.initialized = nil, false
  -- Chats are private by default: git ignores `.bb7/` (delete the file to share chats).
  local gi = root .. "/.bb7/.gitignore"
  if not vim.uv.fs_lstat(gi) then
    util.write_file(gi, "# BB-7 chats are private by default; delete this file to commit them.\n*\n")
  end
  M.ensure()
  notify("Initialized in " .. root)
  M.emit("chats")
  return true
end

-- Chats ---------------------------------------------------------------------------------------------

local function set_chat(r)
  if M.chat and M.chat.id ~= r.id then
    M.retry_context = nil -- a retry belongs to the chat whose edits failed
  end
  M.chat = r
  if not M.model_override or M.model_override.chat ~= r.id then
    M.model_override = nil
  end
  -- The name may have changed (a generated title can be stored before its event arrives).
  for _, c in ipairs(M.chats or {}) do
    if c.id == r.id and c.name ~= r.name then
      c.name = r.name
      vim.schedule(function()
        M.emit("chats")
      end)
    end
  end
end

--- Reloads the active chat and its file statuses from the host.
function M.load_chat()
  local r = host.call("chat_get", {})
  if not ok(r) then
    M.chat, M.statuses = nil, {}
    M.emit("chat")
    M.emit("files")
    return false
  end
  set_chat(r)
  if M.lost_reply and M.lost_reply.chat_id == r.id and host.running() then
    -- The host died while this chat's reply streamed: the chat keeps a note saying so.
    local note = M.lost_reply.note
    M.lost_reply = nil
    if ok(host.call("add_system_message", { message = note })) then
      local again = host.call("chat_get", {})
      if ok(again) then
        set_chat(again)
      end
    end
  end
  M.refresh_files()
  M.emit("chat")
  return true
end

--- Like `load_chat` without waiting: the replies are handled as they come, then `cb()` runs.
--- Used after a reply, so the editor is never blocked on the host there.
function M.load_chat_async(cb)
  host.request("chat_get", {}, function(r)
    if not ok(r) then
      return cb()
    end
    set_chat(r)
    host.request("get_file_statuses", {}, function(fs)
      if ok(fs) and M.chat and M.chat.id == r.id then
        M.statuses = fs.files or {}
        M.fetch_estimate()
      end
      M.emit("files")
      M.emit("chat")
      cb()
    end)
  end)
end

--- Reloads the file statuses of the active chat.
function M.refresh_files()
  if not M.chat then
    M.statuses = {}
  else
    local r = host.call("get_file_statuses", {})
    M.statuses = ok(r) and (r.files or {}) or {}
    M.fetch_estimate()
  end
  M.emit("files")
end

--- The chat list (newest first), pinned chats first.
function M.list_chats()
  local r = host.call("chat_list", {})
  if not ok(r) then
    M.fail("list chats", r)
    return M.chats or {}
  end
  M.chats = util.order_chats(r.chats or {}, M.pinned())
  M.chats_root = M.root or config.root()
  return M.chats
end

function M.new_chat(name)
  if not M.ensure_initialized() then
    return false
  end
  if M.stream then
    notify("Another request is already in progress", L.WARN)
    return false
  end
  local params = { name = name }
  local model = M.current_model()
  if model then
    params.model = model
  end
  local r = host.call("chat_new", params)
  if not ok(r) then
    M.fail("create chat", r)
    return false
  end
  M.load_chat()
  M.list_chats()
  M.emit("chats")
  return true
end

function M.select_chat(id)
  if M.chat and M.chat.id == id then
    return true
  end
  if M.stream then
    notify("Another request is already in progress", L.WARN)
    return false
  end
  M.emit("leaving_chat")
  local r = host.call("chat_select", { id = id })
  if not ok(r) then
    M.fail("select chat", r)
    return false
  end
  M.load_chat()
  M.emit("chats")
  return true
end

function M.rename_chat(id, name)
  local r = host.call("chat_rename", { id = id, name = name })
  if not ok(r) then
    M.fail("rename chat", r)
    return false
  end
  if M.chat and M.chat.id == id then
    M.chat.name = name
    M.emit("chat")
  end
  M.list_chats()
  M.emit("chats")
  notify("Renamed chat to " .. util.oneline(name))
  return true
end

function M.delete_chat(id)
  if M.stream and M.stream.chat_id == id then
    notify("Another request is already in progress", L.WARN)
    return false
  end
  local r = host.call("chat_delete", { id = id })
  if not ok(r) then
    M.fail("delete chat", r)
    return false
  end
  M.set_pinned(id, false)
  if M.chat and M.chat.id == id then
    M.chat, M.statuses = nil, {}
    M.emit("chat")
    M.emit("files")
  end
  M.list_chats()
  M.emit("chats")
  notify("Deleted chat")
  return true
end

--- A new chat with the same model and context as chat `id`.
function M.fork_chat(id)
  local r = host.call("chat_new_with_context", { source_chat_id = id })
  if not ok(r) then
    M.fail("fork chat", r)
    return false
  end
  M.load_chat()
  M.list_chats()
  M.emit("chats")
  notify("Forked chat with its context")
  return true
end

local function warn_context(warnings)
  for _, w in ipairs(warnings or {}) do
    notify(("Context file %s was %s since that message"):format(util.oneline(w.path), util.oneline(w.issue)), L.WARN)
  end
end

--- Forks the active chat at user message `index` (0-based).
function M.fork_message(index)
  if not M.chat then
    return false
  end
  local r = host.call("fork_chat", { chat_id = M.chat.id, fork_message_index = index })
  if not ok(r) then
    M.fail("fork chat", r)
    return false
  end
  M.load_chat()
  M.list_chats()
  M.emit("chats")
  warn_context(r.context_warnings)
  notify("Forked into a new chat")
  return true
end

--- Truncates the active chat before user message `index` and makes that message the draft.
function M.edit_message(index)
  if not M.chat then
    return false
  end
  if M.stream then
    notify("Another request is already in progress", L.WARN)
    return false
  end
  local msg = M.chat.messages[index + 1]
  local content = msg and M.message_text(msg) or ""
  local r = host.call("chat_edit", { chat_id = M.chat.id, message_index = index, content = content })
  if not ok(r) then
    M.fail("edit message", r)
    return false
  end
  M.load_chat()
  M.emit("draft", content)
  warn_context(r.context_warnings)
  return true
end

--- The text of a message (its text parts, or the legacy `content`).
function M.message_text(msg)
  local parts = {}
  for _, p in ipairs(msg.parts or {}) do
    if p.type == "text" and p.content then
      parts[#parts + 1] = p.content
    end
  end
  if #parts == 0 then
    return msg.content or ""
  end
  return table.concat(parts, "")
end

function M.search(query)
  local r = host.call("search_chats", { query = query })
  if not ok(r) then
    M.fail("search chats", r)
    return nil
  end
  return r.results or {}
end

function M.save_draft(text)
  if not M.chat or M.stream then
    return
  end
  if (M.chat.draft or "") == text then
    return
  end
  local r = host.call("save_draft", { draft = text })
  if ok(r) then
    M.chat.draft = text
  end
end

-- Pins (`.bb7/pinned_chats.json`, owned by the client) ----------------------------------------------

local function pins_path()
  return (M.root or config.root()) .. "/.bb7/pinned_chats.json"
end

function M.pinned()
  local v = util.read_json(pins_path(), {})
  return type(v.chats) == "table" and v.chats or {}
end

function M.set_pinned(id, on)
  local list = vim.tbl_filter(function(x)
    return x ~= id
  end, M.pinned())
  if on then
    table.insert(list, id)
  end
  util.write_json(pins_path(), { chats = list })
end

function M.toggle_pin(id)
  local on = not vim.tbl_contains(M.pinned(), id)
  M.set_pinned(id, on)
  M.list_chats()
  M.emit("chats")
  return on
end

-- Context ---------------------------------------------------------------------------------------------

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
  return (M.root or config.root()) .. "/" .. path
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
      buf = require("bb7.ui").origin_buf() or 0
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
  local root = M.root or config.root()
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
  if not M.ensure_chat() then
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
      M.fail("add file", r)
    end
    return false
  end
  if t.start_line then
    notify(("Added %s:%d-%d"):format(t.path, t.start_line, t.end_line))
  else
    notify("Added " .. t.path)
  end
  M.load_chat() -- context events are messages: the chat view shows them
  return true
end

--- Files of the project for a picker: relative paths, sorted, at most `limit` (`.git/`, `.bb7/`,
--- `node_modules/` and `target/` are skipped).
function M.project_files(limit)
  limit = limit or 5000
  local root = M.root or config.root()
  local skip = { [".git"] = true, [".bb7"] = true, node_modules = true, target = true }
  local out = {}
  for name, type in vim.fs.dir(root, {
    depth = 20,
    skip = function(dir)
      return not skip[vim.fs.basename(dir)]
    end,
  }) do
    if type == "file" then
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
  if not M.ensure_chat() then
    return
  end
  local items = {}
  local origin = require("bb7.ui").origin_buf()
  local cur = origin and vim.api.nvim_buf_get_name(origin) or ""
  if cur ~= "" and vim.bo[origin].buftype == "" then
    items[#items + 1] = { label = "Current buffer: " .. util.oneline(util.relpath(cur, M.root or config.root())), paths = { cur } }
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
  if not M.ensure_chat() then
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
      M.fail("remove file", r)
    end
    return false
  end
  notify("Removed " .. (t.start_line and ("%s:%d-%d"):format(t.path, t.start_line, t.end_line) or t.path))
  M.load_chat() -- context events are messages: the chat view shows them
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
    M.fail("update " .. path, r)
    return false
  end
  notify("Updated " .. path)
  M.load_chat() -- context events are messages: the chat view shows them
  return true
end

function M.set_readonly(path, readonly)
  local r = host.call("context_set_readonly", { path = path, readonly = readonly })
  if not ok(r) then
    M.fail("set read-only", r)
    return false
  end
  notify((readonly and "Set read-only " or "Set writable ") .. path)
  M.load_chat() -- context events are messages: the chat view shows them
  return true
end

-- Output ----------------------------------------------------------------------------------------------

--- Reloads every loaded, unmodified buffer of `abs` from disk.
local function reload_buffer(abs)
  local buf = vim.fn.bufnr(abs)
  if buf > 0 and vim.api.nvim_buf_is_loaded(buf) then
    vim.api.nvim_buf_call(buf, function()
      vim.cmd("silent! edit!")
    end)
  end
end

--- The status entry of `path`.
function M.status_of(path)
  for _, f in ipairs(M.statuses) do
    if f.path == path and not f.start_line then
      return f
    end
  end
end

--- Applies the output of `path` to the local file. `quiet` suppresses the per-file message.
function M.apply(path, quiet)
  if not M.chat then
    notify("No active chat", L.WARN)
    return false
  end
  if M.stream then
    notify("Another request is already in progress", L.WARN)
    return false
  end
  local f = M.status_of(path)
  if not f or not f.has_output then
    notify("No output to apply", L.WARN)
    return false
  end
  local abs = M.abspath(path)
  local unsafe = not f.external and util.unsafe_local(M.root or config.root(), path)
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
      M.fail("apply " .. path, r)
    end
    M.refresh_files()
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
  M.load_chat()
  return true
end

--- Applies every output (`M` and `A`; conflicts `!A` are left for one-by-one review).
function M.apply_all()
  if not M.chat then
    notify("No active chat", L.WARN)
    return 0
  end
  local paths = {}
  for _, f in ipairs(M.statuses) do
    if f.has_output and (f.status == "M" or f.status == "A") then
      paths[#paths + 1] = f.path
    end
  end
  if #paths == 0 then
    notify("No output to apply", L.WARN)
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
      M.fail("reject " .. path, r)
    end
    return false
  end
  notify("Rejected output for " .. path)
  M.load_chat()
  return true
end

-- Models, favourites, balance -----------------------------------------------------------------------

local function state_path()
  return config.state_dir() .. "/state.json"
end

function M.global_state()
  return util.read_json(state_path(), {})
end

function M.favorites()
  local s = M.global_state()
  return type(s.favorites) == "table" and s.favorites or {}
end

function M.toggle_favorite(id)
  local s = M.global_state()
  local favs = type(s.favorites) == "table" and s.favorites or {}
  local found = false
  favs = vim.tbl_filter(function(x)
    if x == id then
      found = true
    end
    return x ~= id
  end, favs)
  if not found then
    table.insert(favs, id)
  end
  s.favorites = favs
  util.write_json(state_path(), s)
  return not found
end

--- The model the next send uses.
function M.current_model()
  if M.model_override and (not M.chat or M.model_override.chat == M.chat.id) then
    return M.model_override.model
  end
  if M.chat and M.chat.settings_model and M.chat.settings_model ~= "" then
    return M.chat.settings_model -- the chat's own pick, kept across chat switches and restarts
  end
  if M.chat and M.chat.model and M.chat.model ~= "" then
    return M.chat.model
  end
  return M.default_model or M.global_state().last_model
end

--- Sets the model of the active chat (persisted with `save_chat_settings`).
function M.set_model(id)
  local s = M.global_state()
  s.last_model = id
  util.write_json(state_path(), s)
  if M.chat then
    -- The host reports the model of the last user message; the pick wins until the next send.
    M.model_override = { chat = M.chat.id, model = id }
    local r = host.call("save_chat_settings", { model = id })
    if not ok(r) then
      M.fail("save the model", r)
    else
      M.chat.settings_model = id
    end
  end
  notify("Model " .. id)
  M.emit("status")
end

--- The reasoning efforts `e` cycles through in the model picker ("" = no reasoning).
M.EFFORTS = { "", "low", "medium", "high" }

--- Sets the active chat's reasoning effort (sent with every `send`).
function M.set_reasoning_effort(effort)
  if not M.chat then
    notify("No active chat", L.WARN)
    return false
  end
  local r = host.call("save_chat_settings", { reasoning_effort = effort })
  if not ok(r) then
    M.fail("save the reasoning effort", r)
    return false
  end
  M.chat.reasoning_effort = effort
  notify("Reasoning " .. (effort == "" and "off" or effort))
  M.emit("status")
  return true
end

--- Fetches the model list (async); `cb(models|nil)`.
function M.fetch_models(cb)
  if M.models then
    return cb(M.models)
  end
  host.request("get_models", {}, function(r)
    if r.type ~= "models" then
      M.fail("load models", r)
      return cb(nil)
    end
    M.models = r.models or {}
    cb(M.models)
  end)
end

--- Fetches the balance (async) and announces it. Failures (no key, offline) stay quiet: the
--- footer simply shows no balance.
function M.fetch_balance()
  host.request("get_balance", {}, function(r)
    if r.type == "balance" then
      M.balance = r
      M.emit("status")
    end
  end)
end

--- Fetches the token estimate of the active chat's next request (async).
function M.fetch_estimate()
  local id = M.chat and M.chat.id
  host.request("estimate_tokens", {}, function(r)
    if r.type == "token_estimate" and M.chat and M.chat.id == id then
      M.estimate = r
      M.emit("status")
    end
  end)
end

-- Sending ----------------------------------------------------------------------------------------------

--- Sends `text` in the active chat, streaming the reply to subscribers.
function M.send(text)
  text = text or ""
  if not M.ensure_chat() then
    return false
  end
  if M.stream then
    notify("Another request is already in progress", L.WARN)
    return false
  end
  local retry = M.retry_context
  if text:match("^%s*$") and not retry then
    notify("Nothing to send", L.WARN)
    return false
  end
  if text:match("^%s*$") and retry then
    text = "Please fix the edits that failed."
  end
  local params = { content = text }
  local model = M.current_model()
  if model then
    params.model = model
  end
  if M.chat.reasoning_effort and M.chat.reasoning_effort ~= "" then
    params.reasoning_effort = M.chat.reasoning_effort
  end
  if retry then
    params.retry_context = retry
    M.retry_context = nil
  end
  local chat_id = M.chat.id
  local st = { chat_id = chat_id, text = text, started = vim.uv.hrtime() }
  M.stream = st
  local rid = host.request("send", params, function(r)
    M._finish_send(st, r)
  end, function(ev)
    if ev.type == "agent_event" then
      local line = require("bb7.agent").on_event(ev)
      if line then
        M.emit("chunk", "tool", line)
      end
      return
    end
    M.emit("chunk", ev.type, ev.content or "")
  end)
  if not rid then
    return false
  end
  st.rid = rid
  M.chat.draft = ""
  M.emit("stream_start", st)
  return true
end

function M._finish_send(st, r)
  if r.type == "done" or r.type == "diff_error" then
    M.last_usage = r.usage
    M.last_duration = r.duration
  end
  M.emit("stream_end", r)
  if r.type == "diff_error" then
    M.retry_context = { errors = r.errors or {}, tool_calls = r.tool_calls or {} }
    -- One short line (a long one would stop the editor at a "Press ENTER" prompt); the errors
    -- themselves are shown in the chat, under the reply.
    notify(
      ("%d edit(s) could not be applied; R in the preview retries"):format(
        #(r.errors or {})
      ),
      L.WARN
    )
  elseif r.type == "error" then
    local code = tostring(r.message or ""):match("^BB%-7 host exited %(code (%-?%d+)%)")
    if code then
      M.lost_reply = {
        chat_id = st.chat_id,
        note = ("The reply to the message above was lost: the BB-7 host exited (code %s) while it was being written."):format(code),
      }
    end
    if r.message == "Response aborted by user." then
      notify("Response aborted by user.", L.INFO)
    else
      M.fail("send", r)
    end
  end
  -- The send is settled once the chat shows the stored reply (a few ms later, without blocking).
  local function settle()
    if M.stream == st then
      M.stream = nil
    end
    M.emit("status")
  end
  if not host.running() or not (M.chat and M.chat.id == st.chat_id) then
    return settle()
  end
  M.fetch_balance()
  M.load_chat_async(settle)
end

--- Cancels the in-flight send.
function M.cancel()
  if not M.stream or not M.stream.rid then
    notify("Nothing to cancel", L.WARN)
    return false
  end
  host.request("cancel", { target_request_id = M.stream.rid }, function(r)
    if r.type == "error" and not tostring(r.message):find("No active request", 1, true) then
      M.fail("cancel", r)
    end
  end)
  return true
end

-- Host events -------------------------------------------------------------------------------------------

local hooked = false
function M.hook()
  if hooked then
    return
  end
  hooked = true
  host.on("title_updated", function(msg)
    if M.chat and M.chat.id == msg.chat_id then
      M.chat.name = msg.title
      M.emit("chat_title")
    end
    for _, c in ipairs(M.chats or {}) do
      if c.id == msg.chat_id then
        c.name = msg.title
      end
    end
    M.emit("chats")
  end)
  host.on_exit(function()
    -- Pending requests (a send included) were failed by the host module; re-init on next use.
    if M.initialized and not host._stopping then
      M.reinit = true -- it died: the next start (from any request) puts it back in the project
    end
    M.root, M.initialized = nil, false
  end)
  host.on_start(function()
    -- A host started by any request after the last one died (not through `ensure`) is put back
    -- in the project first, so that request (a chat select, a list) works instead of failing.
    if M.reinit and not ensuring then
      M.reinit = false
      M.ensure()
    end
  end)
end

return M
