--- Builds the host from source without ever blocking Neovim: `cargo build --release --locked -p bb7`
--- in the plugin's root, run as a job.
---
--- * Inside a coroutine that is resumed until it finishes (lazy.nvim runs `build.lua` at the plugin's
---   root, and `build = function() … end`, that way), `run()` yields one progress line each time cargo
---   reports progress (`Compiling wasmtime v48.0.8 (123/412), 3m12s`) and returns the binary's path,
---   or raises a message that says what to do. Resuming it with "abort" (lazy's <C-c>) cancels cargo.
--- * Anywhere else (`:BB7Build`), `run()` starts the build, shows its progress through fidget.nvim
---   when it is installed, else `vim.notify` updates (replaced in place by nvim-notify / snacks /
---   noice; the built-in one echoes them without filling `:messages`), and returns at once.
---
--- Progress: cargo draws its progress bar (`Building [==>  ] 123/412: wasmtime, …`, its own count of
--- units) only on a terminal. `CARGO_TERM_PROGRESS_WHEN=always` (stable cargo configuration, which
--- needs `CARGO_TERM_PROGRESS_WIDTH` with it) makes it draw the bar into our pipe too: the `N/M` is
--- read from there, the crate name from cargo's `Compiling name vX` lines, and the units of the `bb7`
--- package name the phases (`bb7(build)`: its build script, which builds the compiler `bb7-compile`
--- and the tool components for wasm32-wasip2 with nested cargos and precompiles the built-ins;
--- `bb7`: the host; `bb7(bin)`: linking).
--- (`--unit-graph` would give the total up front, but it is nightly-only.)
local M = {}

local uv = vim.uv or vim.loop

--- How a user rebuilds, named in every message that asks for a rebuild.
M.HINT = ":BB7Build (or :Lazy build bb7)"

--- Written into `<target>/release/` after a successful build (its mtime: when that build started):
--- a build cargo found nothing to relink for still counts as a build of the current sources.
M.STAMP = ".bb7-build-stamp"

--- The files and folders the binary is built from (relative to the plugin's root): what `stale()`
--- compares the binary with. A `git pull` that changes any of them needs a rebuild.
M.SOURCES = {
  "Cargo.toml",
  "Cargo.lock",
  "rust-toolchain.toml",
  "host/Cargo.toml",
  "host/build.rs",
  "host/src",
  "host/prompts",
  "host/assets",
  "guest-tools",
  "compiler",
  "wit",
}

local function own_root()
  local src = debug.getinfo(1, "S").source:sub(2)
  return vim.fn.fnamemodify(src, ":p:h:h:h")
end

--- The plugin's root (the folder holding `lua/bb7/build.lua`).
function M.root()
  return own_root()
end

local function mtime(st)
  return st.mtime.sec + (st.mtime.nsec or 0) / 1e9
end

--- The newest file under `path` (skipping `target/` and dot folders): mtime, path.
local function newest(path, best_t, best_p)
  local st = uv.fs_stat(path)
  if not st then
    return best_t, best_p
  end
  if st.type ~= "directory" then
    local t = mtime(st)
    if t > best_t then
      return t, path
    end
    return best_t, best_p
  end
  local h = uv.fs_scandir(path)
  while h do
    local name = uv.fs_scandir_next(h)
    if not name then
      break
    end
    if name ~= "target" and name:sub(1, 1) ~= "." then
      best_t, best_p = newest(path .. "/" .. name, best_t, best_p)
    end
  end
  return best_t, best_p
end

--- Whether `bin`, built from the plugin at `root`, is older than the sources it is built from (a
--- `git pull` without a rebuild). Returns nil when it is not (or cannot be told), else
--- `{ path = <the newest source, relative to root>, seconds = <how much newer> }`.
---@param root string
---@param bin string
---@return {path: string, seconds: number}|nil
function M.stale(root, bin)
  local st = uv.fs_stat(bin)
  if not st then
    return nil
  end
  local built = mtime(st)
  local stamp = uv.fs_stat(vim.fn.fnamemodify(bin, ":h") .. "/" .. M.STAMP)
  if stamp and mtime(stamp) > built then
    built = mtime(stamp)
  end
  local t, p = 0, nil
  for _, rel in ipairs(M.SOURCES) do
    t, p = newest(root .. "/" .. rel, t, p)
  end
  if p and t > built + 1 then -- a second's slack: file systems with coarse timestamps
    return { path = p:sub(#root + 2), seconds = t - built }
  end
  return nil
end

--- A program on PATH, else in `$CARGO_HOME/bin` or `~/.cargo/bin` (rustup installs there, and a
--- Neovim started before rustup changed PATH does not see it). Returns its path and the folder to
--- put on the child's PATH when it was not on PATH.
local function find_tool(name)
  local p = vim.fn.exepath(name)
  if p ~= "" then
    return p
  end
  local dirs = {}
  if vim.env.CARGO_HOME and vim.env.CARGO_HOME ~= "" then
    dirs[#dirs + 1] = vim.env.CARGO_HOME .. "/bin"
  end
  local home = vim.env.HOME
  if home and home ~= "" then
    dirs[#dirs + 1] = home .. "/.cargo/bin"
  end
  for _, d in ipairs(dirs) do
    if vim.fn.executable(d .. "/" .. name) == 1 then
      return d .. "/" .. name, d
    end
  end
end

local function elapsed(ns)
  local s = math.floor(ns / 1e9)
  if s < 60 then
    return s .. "s"
  end
  return ("%dm%02ds"):format(math.floor(s / 60), s % 60)
end

local TAIL = 15 -- last lines of output quoted in a failure

-- cargo's status lines shown while nothing compiles yet (fetching crates, waiting for a lock)
local STATUS_WORDS = {
  Updating = true,
  Downloading = true,
  Downloaded = true,
  Locking = true,
  Blocking = true,
  Adding = true,
  Fetching = true,
  Unpacking = true,
  Installing = true,
}

---@class bb7.BuildJob
---@field root string
---@field bin string|nil the built binary, once done
---@field status string what is happening, with the elapsed time
---@field done boolean
---@field ok boolean|nil
---@field err string|nil what went wrong and what to do, with the last lines of output
---@field cancelled boolean|nil
local Job = {}
Job.__index = Job

--- The progress line: what cargo does now, its `N/M` and the elapsed time.
function Job:describe()
  local t = elapsed(uv.hrtime() - self.t0)
  if self.done then
    return self.status
  end
  local what
  if self.step == "cargo" then
    local parts, tools, lib, link, other = {}, false, false, false, false
    for _, u in ipairs(self.active or {}) do
      if u == "bb7(build)" then
        tools = true
      elseif u == "bb7" then
        lib = true
      elseif u == "bb7(bin)" then
        link = true
      elseif u ~= "bb7(build.rs)" then
        other = true
      end
    end
    if other and self.compiling then
      parts[#parts + 1] = "Compiling " .. self.compiling
    end
    if tools then
      parts[#parts + 1] = "building the compiler and the wasm tool components"
    end
    if lib then
      parts[#parts + 1] = "compiling bb7 (the host)"
    end
    if link then
      parts[#parts + 1] = "linking bb7"
    end
    if #parts == 0 then
      parts[1] = self.compiling and ("Compiling " .. self.compiling) or self.note or "Starting cargo build --release -p bb7"
    end
    what = table.concat(parts, "; ")
    what = what:sub(1, 1):upper() .. what:sub(2)
    if self.total then
      what = ("%s (%d/%d)"):format(what, self.units, self.total)
    end
  else
    what = self.note or "Checking the Rust toolchain (rustup)"
  end
  return what .. ", " .. t
end

function Job:_changed()
  if not self.done then
    self.status = self:describe()
  end
  if self.on_update and not self._update_queued then
    self._update_queued = true
    vim.schedule(function()
      self._update_queued = false
      self.on_update(self)
    end)
  end
end

--- Records one line of a child's stderr (cargo's or rustup's; progress bar frames included).
function Job:_line(line)
  line = line:gsub("%s+$", "")
  if line == "" then
    return
  end
  local n, total, names = line:match("^%s*Building %[[=> ]*%] (%d+)/(%d+): ?(.*)$")
  if n then
    self.units, self.total = tonumber(n), tonumber(total)
    local active = {}
    for u in names:gmatch("[^,%s]+") do
      if u ~= "..." then
        active[#active + 1] = u:gsub("%.%.%.$", "")
      end
    end
    self.active = active
    return
  end
  local lines = self.lines
  lines[#lines + 1] = line
  if #lines > 400 then
    table.remove(lines, 1)
  end
  local name, ver = line:match("^%s*Compiling (%S+) v(%S+)")
  if name then
    if name ~= "bb7" then
      self.compiling = name .. " v" .. ver
    end
    return
  end
  local word = line:match("^%s*(%u%l+) ")
  if (word and STATUS_WORDS[word]) or line:match("^info: ") then
    self.note = vim.trim(line)
  end
end

--- A stderr callback splitting a child's output into lines (on `\n` and the bar's `\r`).
function Job:_reader()
  local partial = ""
  return function(_, data)
    if not data then
      if partial ~= "" then
        self:_line(partial)
        partial = ""
      end
      self:_changed()
      return
    end
    data = partial .. data
    local last = 1
    for piece, stop in data:gmatch("([^\r\n]*)[\r\n]()") do
      self:_line(piece)
      last = stop
    end
    partial = data:sub(last)
    self:_changed()
  end
end

--- What a failed build's output means, and what to do about it.
local function explain(text, root)
  local function has(...)
    for _, p in ipairs({ ... }) do
      if text:find(p) then
        return true
      end
    end
  end
  -- (a full disk while linking shows as the linker dying of SIGBUS: it writes through mmap)
  if has("No space left on device", "os error 28", "Disk quota exceeded", "signal 7 %[Bus error%]", "SIGBUS") then
    return "the disk is full (No space left on device). The build needs 2 to 3 GiB free in "
      .. root
      .. "/target (and ~/.cargo for the crates): free some space, then run "
      .. M.HINT
      .. " again."
  end
  local linker = text:match("linker `([^`]+)` not found")
  if linker then
    return ("the C linker `%s` is missing. Install a C toolchain (Debian/Ubuntu: sudo apt install build-essential; Fedora: sudo dnf install gcc; Arch: sudo pacman -S base-devel; macOS: xcode-select --install), then run %s."):format(
      linker,
      M.HINT
    )
  end
  if has("wasm32%-wasip2 target is not installed", "target may not be installed") then
    return "the wasm32-wasip2 target is missing: run `rustup target add wasm32-wasip2` in "
      .. root
      .. ", then "
      .. M.HINT
      .. "."
  end
  local need = text:match("requires rustc (%d[%w%.]*)")
  if need then
    return ("BB-7 needs Rust %s or newer: install it with rustup (https://rustup.rs), which also reads the version pinned in rust-toolchain.toml, then run %s."):format(
      need,
      M.HINT
    )
  end
  if has("needs to be updated but %-%-locked was passed", "lock file .- needs to be updated") then
    return "Cargo.lock in "
      .. root
      .. " does not match its Cargo.toml files (a checkout with local changes?): `git status` there, restore Cargo.lock, then run "
      .. M.HINT
      .. "."
  end
  if has("failed to download", "Could not resolve host", "failed to get `", "spurious network error", "network failure", "failed to query replaced source", "SSL connect error", "Couldn't connect to server") then
    return "cargo could not download the crates it needs (no network, or a proxy: set https_proxy or CARGO_HTTP_PROXY). Check the connection, then run "
      .. M.HINT
      .. "."
  end
  if has("signal: 9, SIGKILL", "memory allocation of %d+ bytes failed", "Cannot allocate memory") then
    return "a compiler process was killed, most likely because memory ran out: close other programs, or build with fewer jobs (start Neovim with CARGO_BUILD_JOBS=1), then run "
      .. M.HINT
      .. "."
  end
  if has("linking with `[^`]+` failed") then
    return "linking bb7 failed (see the linker's message below): a C toolchain and its libraries must be installed; then run "
      .. M.HINT
      .. "."
  end
  return "cargo build failed (see its last lines below). Fix what they say, then run "
    .. M.HINT
    .. "; or point setup({ bin = … }) at a bb7 built elsewhere."
end

--- The output quoted in a failure: the first `error` lines and the last lines (each cut at 300
--- characters: a linker's command line runs to thousands).
function Job:_tail()
  local lines, pick = self.lines, {}
  local errors = 0
  for i, l in ipairs(lines) do
    if errors < 3 and l:match("^error") then
      pick[i], errors = true, errors + 1
    end
  end
  for i = math.max(1, #lines - TAIL + 1), #lines do
    pick[i] = true
  end
  local out, prev = {}, 0
  for i, l in ipairs(lines) do
    if pick[i] then
      if prev > 0 and i > prev + 1 then
        out[#out + 1] = "  …"
      end
      out[#out + 1] = "  " .. (#l > 300 and (l:sub(1, 300):gsub("[\192-\255][\128-\191]*$", "") .. "…") or l)
      prev = i
    end
  end
  return table.concat(out, "\n")
end

function Job:_finish(err)
  if self.done then
    return
  end
  self.done = true
  self.proc = nil
  if self.timer then
    self.timer:stop()
    self.timer:close()
    self.timer = nil
  end
  local t = elapsed(uv.hrtime() - self.t0)
  if self.cancelled then
    self.ok, self.err = false, "BB-7 build cancelled after " .. t .. "; run " .. M.HINT .. " to build again."
  elseif err then
    self.ok, self.err = false, err
  else
    self.ok = true
    self.status = ("Built %s (%s) in %s"):format(self.bin, self.version or "bb7", t)
  end
  if not self.ok then
    self.status = self.err
  end
  if M._current == self then
    M._current = nil
  end
  if self.on_exit then
    vim.schedule(function()
      self.on_exit(self)
    end)
  end
  self:_changed()
end

function Job:_fail(what)
  local tail = self:_tail()
  self:_finish("BB-7 build failed: " .. what .. (tail ~= "" and ("\nLast lines of the output:\n" .. tail) or ""))
end

--- Runs one child with its stderr fed to the job; `on_done(result)` in the main loop.
function Job:_spawn(cmd, opts, on_done)
  if self.cancelled then
    self:_finish()
    return
  end
  local ok, proc = pcall(vim.system, cmd, {
    cwd = self.root,
    env = self.env,
    text = true,
    detach = opts.detach,
    stdout = opts.stdout,
    stderr = self:_reader(),
  }, function(res)
    vim.schedule(function()
      self.proc = nil
      if self.cancelled then
        self:_finish()
      else
        on_done(res)
      end
    end)
  end)
  if not ok then
    self:_fail("could not run " .. cmd[1] .. ": " .. tostring(proc))
    return
  end
  self.proc, self.group = proc, opts.detach
end

function Job:_cargo()
  self.step, self.note = "cargo", nil
  self:_changed()
  self:_spawn({
    self.cargo,
    "build",
    "--release",
    "--locked",
    "-p",
    "bb7",
    "--color",
    "never",
    -- where the plugin looks for it, whatever CARGO_TARGET_DIR / build.target-dir say
    "--target-dir",
    self.root .. "/target",
  }, { detach = true }, function(res)
    if res.code ~= 0 then
      local text = table.concat(self.lines, "\n")
      if res.signal and res.signal ~= 0 and not text:find("error") then
        self:_fail(("cargo was stopped by signal %d. Run %s again."):format(res.signal, M.HINT))
      else
        self:_fail(explain(text, self.root))
      end
      return
    end
    local bin = self.root .. "/target/release/bb7"
    if vim.fn.executable(bin) ~= 1 then
      self:_fail("cargo finished but " .. bin .. " is missing.")
      return
    end
    self.bin = bin
    pcall(function()
      local stamp = vim.fn.fnamemodify(bin, ":h") .. "/" .. M.STAMP
      local fd = uv.fs_open(stamp, "w", 420)
      if fd then
        uv.fs_close(fd)
        local started = self.started_at
        uv.fs_utime(stamp, started, started)
      end
    end)
    local vok = pcall(vim.system, { bin, "--version" }, { text = true, timeout = 10000 }, function(v)
      vim.schedule(function()
        if v.code == 0 then
          self.version = vim.trim(v.stdout or "")
        end
        self:_finish()
      end)
    end)
    if not vok then
      self:_finish()
    end
  end)
end

--- rustup (when it is there): is the wasm32-wasip2 target installed for this repository's toolchain
--- (rust-toolchain.toml)? Add it when it is not.
function Job:_rustup(rustup)
  self.step, self.note = "rustup", "Checking the Rust toolchain (rustup target list --installed)"
  self:_changed()
  local listed = {}
  self:_spawn({ rustup, "target", "list", "--installed" }, {
    stdout = function(_, data)
      listed[#listed + 1] = data
    end,
  }, function(res)
    if res.code ~= 0 or table.concat(listed):find("wasm32-wasip2", 1, true) then
      -- Installed (or rustup could not tell: cargo's own message will).
      self:_cargo()
      return
    end
    self.note = "Adding the wasm32-wasip2 target (rustup target add wasm32-wasip2)"
    self:_changed()
    self:_spawn({ rustup, "target", "add", "wasm32-wasip2" }, {}, function(add)
      if add.code ~= 0 then
        self:_fail(
          "the wasm32-wasip2 target is missing and `rustup target add wasm32-wasip2` failed: run it yourself in "
            .. self.root
            .. " (it needs the network), then "
            .. M.HINT
            .. "."
        )
        return
      end
      self:_cargo()
    end)
  end)
end

--- Stops the build: cargo and everything it started (rustc, the build script's nested cargo).
function Job:cancel()
  if self.done or self.cancelled then
    return
  end
  self.cancelled = true
  local proc = self.proc
  if not proc then
    self:_finish()
    return
  end
  local function signal(sig)
    if self.group then
      -- cargo runs in its own process group (detach): the whole group goes
      pcall(uv.kill, -proc.pid, sig)
    end
    pcall(proc.kill, proc, sig)
  end
  signal("sigterm")
  vim.defer_fn(function()
    if self.proc == proc then
      signal("sigkill")
    end
  end, 3000)
end

M._current = nil ---@type bb7.BuildJob|nil

--- The build running now, if any.
---@return bb7.BuildJob|nil
function M.current()
  return M._current
end

--- Starts a build and returns its job at once (or nil and why not). Progress and the end are
--- reported through `opts.on_update(job)` and `opts.on_exit(job)`, both called in the main loop.
---@param opts {root: string|nil, on_update: fun(job: bb7.BuildJob)|nil, on_exit: fun(job: bb7.BuildJob)|nil}|nil
---@return bb7.BuildJob|nil job, string|nil err
function M.start(opts)
  opts = opts or {}
  if M._current then
    return nil, "a build is already running (" .. M._current.status .. "); `:BB7Build cancel` stops it"
  end
  local job = setmetatable({
    root = opts.root or M.root(),
    t0 = uv.hrtime(),
    started_at = os.time(),
    lines = {},
    done = false,
    on_update = opts.on_update,
    on_exit = opts.on_exit,
  }, Job)
  job.status = "Starting the build"
  local cargo, dir = find_tool("cargo")
  if not cargo then
    return nil,
      "cargo not found. Install Rust from https://rustup.rs (it puts cargo in ~/.cargo/bin), then run "
        .. M.HINT
        .. "; or point setup({ bin = … }) at a bb7 built elsewhere."
  end
  job.cargo = cargo
  job.env = {
    CARGO_TERM_PROGRESS_WHEN = "always",
    CARGO_TERM_PROGRESS_WIDTH = "200",
    CARGO_TERM_COLOR = "never",
  }
  if dir then
    job.env.PATH = dir .. ":" .. (vim.env.PATH or "")
  end
  M._current = job
  vim.api.nvim_create_autocmd("VimLeavePre", {
    group = vim.api.nvim_create_augroup("bb7_build", { clear = true }),
    callback = function()
      if M._current then
        M._current:cancel()
      end
    end,
  })
  job.timer = uv.new_timer()
  job.timer:start(1000, 1000, function()
    job:_changed()
  end)
  local rustup = find_tool("rustup")
  if rustup then
    job:_rustup(rustup)
  else
    job:_cargo()
  end
  job.status = job:describe()
  return job
end

--- Cancels the running build. Returns false when there is none.
function M.cancel()
  local job = M._current
  if not job then
    return false
  end
  job:cancel()
  return true
end

local function is_builtin_notify()
  local info = debug.getinfo(vim.notify, "S")
  return info and info.source:find("vim/_editor.lua", 1, true) ~= nil
end

--- Shows a job's progress outside lazy.nvim: fidget.nvim's progress API when installed, else
--- `vim.notify` replaced in place (`id` for snacks, `replace` for nvim-notify); the built-in
--- `vim.notify` gets the final message only, progress being echoed without history.
local function reporter()
  local ok_f, fidget = pcall(require, "fidget.progress")
  local handle
  if ok_f and type(fidget) == "table" and fidget.handle and fidget.handle.create then
    local ok_h, h = pcall(fidget.handle.create, { title = "BB-7 build", message = "starting", lsp_client = { name = "bb7" } })
    handle = ok_h and h or nil
  end
  local record -- nvim-notify's record, for `replace`
  local builtin = is_builtin_notify()
  local echo_progress = true
  local shown, last = nil, 0
  local r = {}
  function r.update(job)
    local msg = job.status
    if msg == shown or job.done then
      return
    end
    local now = uv.hrtime()
    if now - last < 2e8 then -- 5 a second at most; the next one shows the latest
      return
    end
    shown, last = msg, now
    local pct = job.total and job.total > 0 and math.floor(100 * job.units / job.total) or nil
    if handle then
      pcall(handle.report, handle, { message = msg, percentage = pct })
    elseif builtin then
      if echo_progress then
        -- Neovim 0.12+: a progress message (|progress-message|, replaced in place); older: an echo.
        local ok = pcall(vim.api.nvim_echo, { { msg } }, false, { kind = "progress", id = "bb7_build", title = "BB-7 build", status = "running", percent = pct })
        if not ok then
          echo_progress = false
        end
      end
      if not echo_progress then
        vim.api.nvim_echo({ { "BB-7 build: " .. msg } }, false, {})
      end
    else
      local res = vim.notify("BB-7 build: " .. msg, vim.log.levels.INFO, { id = "bb7_build", title = "BB-7 build", replace = record, hide_from_history = true })
      if type(res) == "table" then
        record = res
      end
    end
  end
  function r.finish(job)
    if handle then
      if job.ok then
        pcall(handle.finish, handle)
      else
        pcall(handle.cancel, handle)
      end
    end
    if builtin and echo_progress and shown then
      -- close the progress message; the notification below says how it ended
      local status = job.ok and "success" or "failed"
      pcall(vim.api.nvim_echo, { { job.ok and "done" or status } }, false, { kind = "progress", id = "bb7_build", title = "BB-7 build", status = status, percent = job.ok and 100 or nil })
    end
    local level = job.ok and vim.log.levels.INFO or (job.cancelled and vim.log.levels.WARN or vim.log.levels.ERROR)
    local msg = job.ok and ("BB-7: " .. job.status) or job.err
    if job.ok then
      local host = package.loaded["bb7.host"] -- not required: a host never started is not running
      if host and host.running and host.running() then
        msg = msg .. "; :BB7Restart to use it"
      end
    end
    vim.notify(msg, level, { id = "bb7_build", title = "BB-7 build", replace = record })
  end
  return r
end

--- Starts a build that reports its progress on screen and returns at once (`:BB7Build`).
---@return bb7.BuildJob|nil
function M.start_with_progress(opts)
  opts = opts or {}
  local r = reporter()
  local job, err = M.start({
    root = opts.root,
    on_update = r.update,
    on_exit = function(job)
      r.finish(job)
      if opts.on_exit then
        opts.on_exit(job)
      end
    end,
  })
  if not job then
    -- a build already running is not an error; anything else stops this one
    vim.notify("BB-7 build: " .. err, M._current and vim.log.levels.WARN or vim.log.levels.ERROR)
    return nil
  end
  r.update(job)
  return job
end

--- Builds the host. In a coroutine resumed until it finishes (lazy.nvim's build step): yields
--- progress lines, returns the binary's path, raises what to do on failure. Elsewhere: the same as
--- `:BB7Build` (progress on screen), returning the job at once.
---@param opts {root: string|nil}|nil
function M.run(opts)
  opts = opts or {}
  local co, main = coroutine.running()
  if not co or main then
    return M.start_with_progress(opts)
  end
  local job, err = M.start({ root = opts.root })
  if not job then
    error("BB-7 build: " .. err, 0)
  end
  -- lazy.nvim >= 11.6 (the one with lazy.async) takes a yielded `{ msg, level }`: progress goes at
  -- TRACE, which its window shows as the task's status but leaves out of the log it lists when the
  -- build fails (a line per second of a 10-minute build would bury the error). Older drivers get
  -- the line as a string.
  local lazy_msg = package.loaded["lazy.async"] ~= nil
  local function say(msg, level)
    if lazy_msg then
      return coroutine.yield({ msg = msg, level = level })
    end
    return coroutine.yield(msg)
  end
  local said
  while not job.done do
    local resumed
    if job.status ~= said then
      said = job.status
      resumed = say(said, vim.log.levels.TRACE)
    else
      resumed = coroutine.yield()
    end
    if resumed == "abort" then
      job:cancel()
      error("BB-7 build: cancelled", 0)
    end
  end
  if not job.ok then
    error(job.err, 0)
  end
  say(job.status, vim.log.levels.INFO)
  return job.bin
end

return M
