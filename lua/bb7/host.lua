--- The host process: finding the `bb7` binary, starting it with `jobstart()`, line-delimited JSON
--- requests matched by `request_id`, stream events, restart and shutdown.
local config = require("bb7.config")

local M = {}

--- The host version this plugin speaks to (major.minor must match).
M.required_version = require("bb7.version").host_series

-- Host processes. The host runs one reply at a time per process and refuses to change its
-- active chat under it, so while a reply streams in one process, other chats are served by
-- another (see `spawn`, `use`). `cur` is the process requests go to; `job` is its job id.
local procs = {} ---@type table<integer, {job: integer, partial: string}>
local cur = nil ---@type {job: integer, partial: string}|nil
local job = nil ---@type integer|nil
local next_id = 0
local pending = {} ---@type table<string, {cb: fun(msg: table), on_event: fun(msg: table)|nil, proc: table|nil}>
local listeners = {} ---@type table<string, fun(msg: table)[]> async events without a request (title_updated)
local exit_handlers = {} ---@type fun(code: integer)[]
M.version = nil ---@type string|nil
M.bin_path = nil ---@type string|nil
--- The autocommand group that stops this host with Neovim. A second instance of this module (the
--- inline edits' own host, lua/bb7/inline.lua) sets its own, so each instance stops its own process.
M.augroup = "bb7_host"

--- The directory of this plugin (the one holding `lua/bb7/host.lua`).
function M.plugin_root()
  local src = debug.getinfo(1, "S").source:sub(2)
  return vim.fn.fnamemodify(src, ":p:h:h:h")
end

--- Where the binary comes from: `setup({ bin })`, the plugin's build output, then `PATH`.
---@return string|nil path, string|nil err
function M.find_bin()
  local bin = config.options.bin
  if bin and bin ~= "" then
    bin = vim.fn.expand(bin)
    if vim.fn.executable(bin) == 1 then
      return bin
    end
    return nil, "bin " .. bin .. " is not executable"
  end
  local built = M.plugin_root() .. "/target/release/bb7"
  if vim.fn.executable(built) == 1 then
    return built
  end
  local on_path = vim.fn.exepath("bb7")
  if on_path ~= "" then
    return on_path
  end
  return nil,
    "bb7 binary not found (looked at setup({ bin }), " .. built .. " and PATH): run " .. require("bb7.build").HINT .. " to build it"
end

--- Whether the host process is running.
function M.running()
  return job ~= nil
end

--- Registers a handler for an async event type (e.g. `title_updated`).
function M.on(event_type, fn)
  listeners[event_type] = listeners[event_type] or {}
  table.insert(listeners[event_type], fn)
end

--- Registers a handler run when the host exits.
function M.on_exit(fn)
  table.insert(exit_handlers, fn)
end

local start_handlers = {} ---@type fun()[]

--- Registers a handler run after the host started (and answered the version check), before any
--- other request goes out: the session re-initializes a restarted host there.
function M.on_start(fn)
  table.insert(start_handlers, fn)
end

local function notify(msg, level)
  vim.schedule(function()
    vim.notify("BB-7: " .. msg, level or vim.log.levels.ERROR)
  end)
end

--- The events that end a streaming request (`send`); anything else it streams is an event.
M.TERMINAL = { done = true, diff_error = true, error = true }

--- Handles one decoded message from the host.
local function dispatch(msg)
  local rid = msg.request_id
  local p = rid and pending[rid]
  if p then
    -- A streaming request ends with exactly one of `done` / `diff_error` / `error`; every other
    -- event with its id (chunks, reasoning, agent events, a `warning`) belongs to the stream.
    if p.on_event and not M.TERMINAL[msg.type] then
      p.on_event(msg)
      return
    end
    pending[rid] = nil
    p.cb(msg)
    return
  end
  local ls = listeners[msg.type]
  if ls then
    for _, fn in ipairs(ls) do
      local ok, err = pcall(fn, msg)
      if not ok then
        notify("internal error in " .. msg.type .. " handler: " .. tostring(err))
      end
    end
  end
end

-- Lines are decoded and dispatched from a queue drained in the main loop (vim.schedule), never
-- inside the stdout callback: handlers may call `M.call`, whose vim.wait must see further output.
-- Replies to synchronous calls are resolved directly in the callback, so a nested wait always
-- returns. A drain stops after a time budget and continues on the next tick, so a burst of
-- thousands of chunks never blocks the editor for long.
local queue, q_head, q_tail = {}, 1, 0
local scheduled, draining = false, false
local BUDGET_NS = 4e6
local MAX_LINE = 16 * 1024 * 1024
local DECODE_OPTS = { luanil = { object = true, array = true } }

local drain

local function schedule_drain()
  if not scheduled then
    scheduled = true
    vim.schedule(function()
      M._drain() -- through the module table, so benchmarks can time it
    end)
  end
end

local function decode(line)
  local ok, msg = pcall(vim.json.decode, line, DECODE_OPTS)
  if ok and type(msg) == "table" then
    return msg
  end
  notify("host sent a line that is not JSON: " .. line:sub(1, 200), vim.log.levels.WARN)
end

drain = function()
  scheduled = false
  if draining then
    return -- the outer drain loop picks up what was queued meanwhile
  end
  draining = true
  local t0 = vim.uv.hrtime()
  while q_head <= q_tail do
    local item = queue[q_head]
    queue[q_head] = nil
    q_head = q_head + 1
    local msg = type(item) == "string" and decode(item) or item
    if msg then
      local ok, err = pcall(dispatch, msg)
      if not ok then
        notify("internal error: " .. tostring(err))
      end
    end
    if q_head <= q_tail and vim.uv.hrtime() - t0 > BUDGET_NS then
      draining = false
      schedule_drain() -- the rest on the next tick: input and redraws go first
      return
    end
  end
  queue, q_head, q_tail = {}, 1, 0
  draining = false
end

local function enqueue(item)
  q_tail = q_tail + 1
  queue[q_tail] = item
  schedule_drain()
end

M._detached = { partial = "" } -- lines fed with no process running (benchmarks, tests)

--- Splits raw stdout data (a list of strings as `jobstart` gives them) into lines and queues them.
--- Exposed for the benchmarks and tests.
function M._feed(data, proc)
  proc = proc or cur or M._detached
  local n = #data
  for i = 1, n do
    local piece = data[i]
    if i == 1 then
      piece = proc.partial .. piece
    end
    if i == n then
      proc.partial = piece
    elseif piece ~= "" then
      local rid = piece:match('"request_id":"([^"]*)"')
      local p = rid and pending[rid]
      if p and p.sync then
        local msg = decode(piece)
        if msg then
          pending[rid] = nil
          p.cb(msg)
        end
      elseif not rid and piece:find('"type":"error"', 1, true) then
        -- An error the host could not attribute (it could not read the request line): handled
        -- right here, so a synchronous call waiting for it fails now instead of timing out.
        local msg = decode(piece)
        if msg then
          M._unattributed(msg)
        end
      else
        enqueue(piece)
      end
    end
  end
end

--- An `error` without a `request_id`: the host could not read one of our lines. It fails the oldest
--- synchronous call still waiting (the editor is blocked on it), or is shown to the user at once.
function M._unattributed(msg)
  local oldest, oldest_n = nil, math.huge
  for rid, p in pairs(pending) do
    local n = tonumber(rid) or math.huge
    if p.sync and n < oldest_n then
      oldest, oldest_n = rid, n
    end
  end
  local text = "the host could not read a request: " .. tostring(msg.message or "unknown error")
  if oldest then
    local p = pending[oldest]
    pending[oldest] = nil
    p.cb({ type = "error", request_id = oldest, message = text })
  else
    notify(text)
  end
end

--- Dispatches everything queued now (for benchmarks and tests).
function M._drain()
  drain()
end

--- Fails the requests waiting for process `proc`.
local function fail_pending(message, proc)
  local old = pending
  pending = {}
  for rid, p in pairs(old) do
    if p.proc ~= proc then
      pending[rid] = p
    else
      local msg = { type = "error", request_id = rid, message = message }
      if p.sync then
        pcall(p.cb, msg)
      else
        pending[rid] = p
        enqueue(msg)
      end
    end
  end
end

local function set_current(proc)
  cur = proc
  job = proc and proc.job or nil
end

--- Starts the host if it is not running. Returns true on success; notifies and returns false otherwise.
---@return boolean ok, string|nil err
function M.start()
  if job then
    return true
  end
  local cmd = config.options.cmd
  if not cmd then
    local bin, err = M.find_bin()
    if not bin then
      notify(err)
      return false, err
    end
    cmd = { bin }
  end
  M.bin_path = cmd[1]
  local proc = { partial = "" }
  local env = config.options.env
  local ok, id = pcall(vim.fn.jobstart, cmd, {
    env = env,
    stdin = "pipe",
    on_stdout = function(_, data)
      M._feed(data, proc)
    end,
    on_stderr = function(_, data)
      for _, line in ipairs(data) do
        if line ~= "" then
          notify("host: " .. line, vim.log.levels.WARN)
        end
      end
    end,
    on_exit = function(id, code)
      procs[id] = nil
      local was_current = cur == proc
      if was_current then
        set_current(nil)
        M.version = nil
      end
      fail_pending("BB-7 host exited (code " .. code .. ")", proc)
      if not was_current then
        return -- another chat's process (a reply streamed there): the session goes on here
      end
      for _, fn in ipairs(exit_handlers) do
        pcall(fn, code)
      end
      if code ~= 0 and not M._stopping then
        notify("host exited with code " .. code .. "; run :BB7Restart", vim.log.levels.WARN)
      end
    end,
  })
  if not ok or id <= 0 then
    local err = "failed to start host " .. tostring(cmd[1]) .. ": " .. tostring(ok and id or id)
    notify(err)
    return false, err
  end
  proc.job = id
  procs[id] = proc
  set_current(proc)
  M._stopping = false
  -- Shut the host down with Neovim.
  vim.api.nvim_create_autocmd("VimLeavePre", {
    group = vim.api.nvim_create_augroup(M.augroup, { clear = true }),
    callback = function()
      M.stop()
    end,
  })
  -- Version check at start-up.
  local reply = M.call("version", {}, { timeout = 5000 })
  if reply.type ~= "version" then
    M.check_version(nil, tostring(reply.message))
    return true
  end
  M.version = reply.version
  for _, fn in ipairs(start_handlers) do
    local ok, err = pcall(fn)
    if not ok then
      notify("internal error after start: " .. tostring(err))
    end
  end
  M.check_version(M.version)
  return true
end

--- What to do about a host that does not go with this plugin, or nil when it does. A binary of
--- the plugin's own build is rebuilt with :BB7Build (or :Lazy build bb7); one from setup({ bin })
--- or PATH was built elsewhere. The plugin's own build is also compared with the sources it is
--- built from: older than them is a `git pull` without a rebuild.
---@param version string|nil the host's answer to `version` (nil: it did not answer)
---@param bin string|nil the binary (default: the one running)
---@param no_answer string|nil why it did not answer the version check
---@return string|nil
function M.version_problem(version, bin, no_answer)
  local build = require("bb7.build")
  bin = bin or M.bin_path
  local root = M.plugin_root()
  local own = not config.options.cmd
    and bin ~= nil
    and vim.fn.resolve(vim.fn.fnamemodify(bin, ":p")) == vim.fn.resolve(root .. "/target/release/bb7")
  local fix
  if own then
    fix = "run " .. build.HINT .. ", then :BB7Restart"
  elseif config.options.cmd then
    fix = "rebuild the host that setup({ cmd }) runs from this plugin's checkout"
  elseif config.options.bin and config.options.bin ~= "" then
    fix = "rebuild "
      .. tostring(bin)
      .. " (setup({ bin })) from this plugin's checkout, or drop `bin` and run "
      .. build.HINT
  else
    fix = "it is " .. tostring(bin) .. " on PATH; run " .. build.HINT .. " (the plugin's own build is used before PATH)"
  end
  local want = M.required_version
  if version == nil then
    return ("host did not answer the version check (%s): it may be older than the plugin; %s"):format(tostring(no_answer), fix)
  end
  if type(version) ~= "string" or version:sub(1, #want + 1) ~= want .. "." then
    return ("host version %s does not match the plugin (needs %s.x): %s"):format(tostring(version), want, fix)
  end
  if own then
    local stale = build.stale(root, bin)
    if stale then
      return ("the host binary is older than the plugin's sources (%s changed after it was built: a git pull without a rebuild?): %s"):format(
        stale.path,
        fix
      )
    end
  end
end

--- The version check at start-up: a host that does not go with the plugin is reported (a warning
--- that says what to do); the host is used anyway.
function M.check_version(version, no_answer)
  local problem = M.version_problem(version, nil, no_answer)
  if problem then
    notify(problem, vim.log.levels.WARN)
  end
end

--- Sends a request. `cb(msg)` gets the reply (or `{type="error", message}`); `on_event(msg)` gets
--- `chunk`/`thinking` events for streaming requests. Returns the request id, or nil when the host
--- could not be started (cb is called with an error).
---@param action string
---@param params table|nil
---@param cb fun(msg: table)
---@param on_event fun(msg: table)|nil
---@param sync boolean|nil  a `call` waits for the reply (resolved in the stdout callback)
---@param proc table|nil  the process to send it to (default: the current one; see `spawn`)
---@return string|nil
function M.request(action, params, cb, on_event, sync, proc)
  if proc and not procs[proc.job] then
    cb({ type = "error", message = "host not running" })
    return nil
  end
  if not proc and not job and not M.start() then
    cb({ type = "error", message = "host not running" })
    return nil
  end
  proc = proc or cur
  next_id = next_id + 1
  local rid = tostring(next_id)
  local req = vim.deepcopy(params or {})
  req.action = action
  req.request_id = rid
  local line = vim.json.encode(req)
  -- The host reads UTF-8 JSON lines of at most 16 MiB; anything else could never be answered.
  local bad = #line > MAX_LINE and ("request too large (%d bytes)"):format(#line)
    or (require("bb7.util").invalid_utf8(line) and "request holds text that is not UTF-8")
  if bad then
    cb({ type = "error", message = bad })
    return nil
  end
  pending[rid] = { cb = cb, on_event = on_event, sync = sync, proc = proc }
  local ok = pcall(vim.fn.chansend, proc.job, line .. "\n")
  if not ok then
    pending[rid] = nil
    cb({ type = "error", message = "cannot write to the host" })
    return nil
  end
  return rid
end

--- Sends a request and waits for the reply (processing other events meanwhile). `opts.proc` sends
--- it to that process instead of the current one.
---@return table reply  `{type="error", message=...}` on failure or timeout
function M.call(action, params, opts)
  local done, result = false, nil
  local rid = M.request(action, params, function(msg)
    done, result = true, msg
  end, nil, true, opts and opts.proc)
  if not rid then
    return result or { type = "error", message = "host not running" }
  end
  local timeout = (opts and opts.timeout) or config.options.timeout
  vim.wait(timeout, function()
    return done
  end, 5)
  if not done then
    pending[rid] = nil
    return { type = "error", message = "host did not answer " .. action .. " within " .. timeout .. " ms" }
  end
  return result
end

local function stop_job(id)
  pcall(vim.fn.chansend, id, vim.json.encode({ action = "shutdown" }) .. "\n")
  pcall(vim.fn.chanclose, id, "stdin")
  local res = vim.fn.jobwait({ id }, 2000)
  if res[1] == -1 then
    pcall(vim.fn.jobstop, id)
  end
  procs[id] = nil
end

--- Stops the host (every process: graceful `shutdown`, then a kill if it does not exit).
function M.stop()
  if not job and next(procs) == nil then
    return
  end
  M._stopping = true
  local current = job
  for id in pairs(procs) do
    if id ~= current then
      stop_job(id)
    end
  end
  if current then
    stop_job(current)
  end
  set_current(nil)
  M.version = nil
end

--- The process requests go to now (nil when none runs).
function M.current()
  return cur
end

--- Makes `proc` (a running process of `M.current()`'s) the one requests go to.
function M.use(proc)
  if proc and procs[proc.job] then
    set_current(proc)
    return true
  end
  return false
end

--- Starts another host process and makes it the current one (the previous one keeps running,
--- its requests still answered). Returns the new process, or nil when it could not start.
function M.spawn()
  local prev = cur
  set_current(nil)
  if not M.start() then
    set_current(prev)
    return nil
  end
  return cur
end

--- The running processes other than the current one.
function M.others()
  local out = {}
  for _, p in pairs(procs) do
    if p ~= cur then
      out[#out + 1] = p
    end
  end
  return out
end

--- Stops process `proc` (never the current one).
function M.stop_proc(proc)
  if proc and proc ~= cur and procs[proc.job] then
    stop_job(proc.job)
  end
end

--- Restarts the host.
function M.restart()
  M.stop()
  return M.start()
end

--- The job id of the host (for tests).
function M._job()
  return job
end

--- The number of requests waiting for a reply (for tests).
function M._pending_count()
  return vim.tbl_count(pending)
end

return M
