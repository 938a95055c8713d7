-- Test helpers: assertions, waiting, captured notifications, and the e2e environment (a temp HOME with
-- a config pointing at the mock server, a project directory, the real `bb7` host).
local M = {}

M.notes = {}
-- Every ERROR notification of the current case, and every error raised inside a scheduled or timer
-- callback: a case fails on any of them it did not expect (see `expect_error`, `M.note`).
M.errors = {}
local cleanups = {}

-- Capture every vim.notify.
vim.notify = function(msg, level)
  local n = { msg = msg, level = level or vim.log.levels.INFO }
  table.insert(M.notes, n)
  if n.level == vim.log.levels.ERROR then
    table.insert(M.errors, n)
  end
end

-- Errors inside vim.schedule / vim.schedule_wrap / vim.defer_fn callbacks are otherwise only
-- printed (and `nvim -l` still exits 0): record them so the case fails.
local real_schedule = vim.schedule
M.real_schedule = real_schedule -- the benchmarks time the plugin without this wrapper
vim.schedule = function(fn)
  return real_schedule(function()
    local ok, err = xpcall(fn, debug.traceback)
    if not ok then
      table.insert(M.errors, { msg = "error in a scheduled callback: " .. tostring(err), level = vim.log.levels.ERROR, callback = true })
    end
  end)
end

--- Errors of the current case nobody expected (callback errors always count).
function M.unexpected_errors()
  local out = {}
  for _, e in ipairs(M.errors) do
    if not e.expected then
      out[#out + 1] = e.msg
    end
  end
  return out
end

--- Marks the ERROR notifications matching `pattern` (a plain substring) as expected; errors when
--- there is none.
function M.expect_error(substring)
  local found = false
  for _, e in ipairs(M.errors) do
    if not e.callback and e.msg:find(substring, 1, true) then
      e.expected, found = true, true
    end
  end
  if not found then
    error(("expected an error notification containing %q"):format(substring), 2)
  end
end

local function fmt(v)
  return vim.inspect(v)
end

function M.eq(want, got, what)
  if not vim.deep_equal(want, got) then
    error(("%s: expected %s, got %s"):format(what or "eq", fmt(want), fmt(got)), 2)
  end
end

function M.ok(cond, what)
  if not cond then
    error("expected true: " .. (what or "?"), 2)
  end
end

--- Waits until fn() is truthy (processing events); errors after `ms`.
function M.wait(fn, ms, what)
  local ok = vim.wait(ms or 10000, function()
    local s, v = pcall(fn)
    return s and v
  end, 10)
  if not ok then
    error("timed out waiting for " .. (what or "condition"), 2)
  end
end

--- Asserts that a notification with exactly `msg` (and `level`, when given) was sent since the
--- last `clear_notes`.
function M.note(msg, level)
  for _, n in ipairs(M.notes) do
    if n.msg == msg and (level == nil or n.level == level) then
      n.expected = true -- an error asserted here is one the case expects
      return n
    end
  end
  local seen = {}
  for _, n in ipairs(M.notes) do
    seen[#seen + 1] = ("[%s] %s"):format(n.level, n.msg)
  end
  error(("expected notification %q (level %s); got:\n  %s"):format(msg, tostring(level), table.concat(seen, "\n  ")), 2)
end

function M.clear_notes()
  M.notes = {}
end

--- No notification at ERROR level since the last clear.
function M.no_errors()
  for _, n in ipairs(M.notes) do
    if n.level == vim.log.levels.ERROR then
      error("unexpected error notification: " .. n.msg, 2)
    end
  end
end

function M.tmpdir(prefix)
  local d = vim.fn.tempname() .. "-" .. (prefix or "bb7")
  vim.fn.mkdir(d, "p")
  table.insert(cleanups, function()
    vim.fn.delete(d, "rf")
  end)
  return vim.uv.fs_realpath(d)
end

function M.write(path, content)
  vim.fn.mkdir(vim.fn.fnamemodify(path, ":h"), "p")
  local f = assert(io.open(path, "wb"))
  f:write(content)
  f:close()
end

function M.read(path)
  local f = io.open(path, "rb")
  if not f then
    return nil
  end
  local s = f:read("*a")
  f:close()
  return s
end

function M.bin()
  local b = vim.env.BB7_BIN
  if not b or b == "" then
    b = M.repo .. "/target/release/bb7"
  end
  return b
end

function M.mock_bin()
  local b = vim.env.BB7_MOCK_BIN
  if not b or b == "" then
    b = M.repo .. "/target/release/bb7-mock-llm"
  end
  return b
end

--- Starts the mock LLM server with `script` (a table); returns its base URL.
function M.mock(script)
  local dir = M.tmpdir("mock")
  local file = dir .. "/script.json"
  M.write(file, vim.json.encode(script))
  local url
  local job = vim.fn.jobstart({ M.mock_bin(), "--script", file, "--port", "0" }, {
    stdin = "pipe",
    on_stdout = function(_, data)
      for _, l in ipairs(data) do
        local u = l:match("listening on (http://%S+)")
        if u then
          url = u
        end
      end
    end,
    on_stderr = function(_, data)
      for _, l in ipairs(data) do
        if l ~= "" then
          io.stderr:write("mock: " .. l .. "\n")
        end
      end
    end,
  })
  assert(job > 0, "cannot start mock " .. M.mock_bin())
  table.insert(cleanups, 1, function()
    pcall(vim.fn.chanclose, job, "stdin")
    pcall(vim.fn.jobstop, job)
  end)
  M.wait(function()
    return url
  end, 10000, "mock server to listen")
  return url .. "/api/v1"
end

--- A fresh environment: HOME with config.json, a project dir, the plugin configured for both.
--- `opts.script`: mock script (a mock server is started); `opts.base_url`: use this URL instead.
function M.env(opts)
  opts = opts or {}
  local home = M.tmpdir("home")
  local project = M.tmpdir("proj")
  local base_url = opts.base_url or (opts.script and M.mock(opts.script)) or "http://127.0.0.1:9/api/v1"
  M.write(
    home .. "/.config/bb7/config.json",
    vim.json.encode(vim.tbl_extend("force", { api_key = "test", base_url = base_url }, opts.config or {}))
  )
  local cache = vim.env.BB7_CACHE_DIR
  if not cache or cache == "" then
    cache = vim.fn.stdpath("cache") .. "/bb7-test-components"
  end
  vim.fn.mkdir(cache, "p")
  vim.cmd.cd(project)
  require("bb7").setup(vim.tbl_deep_extend("force", {
    bin = M.bin(),
    env = { HOME = home, BB7_CACHE_DIR = cache, BB7_HOME = home .. "/.bb7" },
    stream_interval = 20,
  }, opts.setup or {}))
  table.insert(cleanups, 1, function()
    require("bb7.host").stop()
  end)
  return { home = home, project = project, base_url = base_url }
end

--- Runs an Ex command, turning a Vim error into a test failure with its message.
function M.cmd(c)
  local ok, err = pcall(vim.cmd, c)
  if not ok then
    error("command failed: " .. c .. ": " .. tostring(err), 2)
  end
end

--- The lines of a buffer as one string.
function M.buf_text(buf)
  return table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), "\n")
end

function M.cleanup()
  for _, fn in ipairs(cleanups) do
    pcall(fn)
  end
  cleanups = {}
end

return M
