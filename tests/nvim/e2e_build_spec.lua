-- Installing and building (issue 31) and the install docs (issue 23, item 18): `build.lua` run the
-- way lazy.nvim runs it (in a coroutine resumed from the event loop), `:BB7Build`, the failures and
-- what they tell the user to do, cancelling, a binary older than its sources at start-up and in
-- `:checkhealth bb7`, and the lazy.nvim specs of README.md and `:help bb7-installation`.
--
-- A real build takes minutes, so here (and only here) `cargo` is a stand-in script on PATH that
-- prints cargo's real progress format (the bar cargo draws when CARGO_TERM_PROGRESS_WHEN=always,
-- its `Compiling` lines, its real error messages) and then WAITS for a file the test writes: nothing
-- here depends on timing, and "the build finished" can only happen after the test let it.
local t = require("helpers")

local uv = vim.uv

--- A stand-in `cargo` (and optionally `rustup`) in `<dir>/bin`, driven by files in `<dir>`:
---   mode    what to do (ok, linker, disk, disk_sigbus, wasm, generic, hang)
---   release created by the test: the stand-in finishes only once it exists
--- It records its pid, its child's pid (mode hang), its arguments and CARGO_TERM_PROGRESS_WHEN.
local CARGO = [=[#!/bin/bash
dir=$(dirname "$(dirname "$0")")
echo $$ > "$dir/pid"
echo "$*" > "$dir/args"
echo "$CARGO_TERM_PROGRESS_WHEN $CARGO_TERM_PROGRESS_WIDTH" > "$dir/env"
target=target
while [ $# -gt 0 ]; do
  if [ "$1" = "--target-dir" ]; then target=$2; fi
  shift
done
mode=$(cat "$dir/mode")
bar() { printf '    Building [%s] %s: %s%*s\r' "$1" "$2" "$3" 60 '' >&2; }
printf '   Compiling proc-macro2 v1.0.101\n' >&2
bar '                             ' 0/3 'proc-macro2(build.rs)'
printf '   Compiling wasmtime v48.0.8\n' >&2
bar '=========>                   ' 1/3 'wasmtime, bb7(build)'
case "$mode" in
hang)
  sleep 300 &
  echo $! > "$dir/child"
  wait
  exit 1 ;;
esac
while [ ! -e "$dir/release" ]; do [ -d "$dir" ] || exit 1; sleep 0.02; done # (gone: the test ended)
case "$mode" in
ok)
  bar '===================>         ' 2/3 'bb7(bin)'
  mkdir -p "$target/release"
  printf '#!/bin/sh\necho "bb7 0.1.0"\n' > "$target/release/bb7"
  chmod +x "$target/release/bb7"
  printf '    Finished `release` profile [optimized] target(s) in 1.00s\n' >&2
  exit 0 ;;
linker)
  printf 'error: linker `cc` not found\n  |\n  = note: No such file or directory (os error 2)\n\nerror: could not compile `bb7` (build script) due to 1 previous error\nwarning: build failed, waiting for other jobs to finish...\n' >&2 ;;
disk)
  printf 'error: failed to write to `%s/release/deps/rmetaAwV6MR/full.rmeta`: No space left on device (os error 28)\n\nerror: could not compile `wasmtime` (lib) due to 1 previous error\n' "$target" >&2 ;;
disk_sigbus)
  printf 'error: linking with `cc` failed: exit status: 1\n  |\n  = note:  "cc" "-m64" %s\n          collect2: fatal error: ld terminated with signal 7 [Bus error]\n          compilation terminated.\n\nerror: could not compile `bb7` (bin "bb7") due to 1 previous error\n' "$(printf '"-Wl,--as-needed" %.0s' $(seq 200))" >&2 ;;
wasm)
  printf "error: failed to run custom build command for \`bb7 v0.1.0 (/p/host)\`\n\nCaused by:\n  process didn't exit successfully: \`/p/target/release/build/bb7-1/build-script-build\` (exit status: 101)\n  --- stderr\n\n  thread 'main' (20085) panicked at host/build.rs:152:9:\n\n\n  The wasm32-wasip2 target is not installed, and bb7's tool components are built for it.\n  Fix: run \`rustup target add wasm32-wasip2\` in this repository, then build again.\n\n" >&2 ;;
generic)
  printf 'error[E0308]: mismatched types\n --> host/src/main.rs:3:5\n\nerror: could not compile `bb7` (lib) due to 1 previous error\n' >&2 ;;
esac
exit 101
]=]

--- A stand-in `rustup`: `target list --installed` lists `<dir>/targets`; `target add` fails when
--- `<dir>/add_fails` exists (else records the call in `<dir>/added`).
local RUSTUP = [=[#!/bin/bash
dir=$(dirname "$(dirname "$0")")
if [ "$1 $2" = "target list" ]; then cat "$dir/targets"; exit 0; fi
if [ "$1 $2 $3" = "target add wasm32-wasip2" ]; then
  printf "info: downloading component 'rust-std' for 'wasm32-wasip2'\n" >&2
  if [ -e "$dir/add_fails" ]; then printf 'error: could not download file from https://static.rust-lang.org/dist/rust-std-wasm32-wasip2.tar.xz\n' >&2; exit 1; fi
  echo yes > "$dir/added"; exit 0
fi
exit 2
]=]

--- A temp plugin root and a PATH holding only the stand-ins and the system's tools; HOME and
--- CARGO_HOME point into the temp dir, so no real cargo (~/.cargo/bin) is found.
local function standin(mode, opts)
  opts = opts or {}
  local dir = t.tmpdir("standin")
  local root = t.tmpdir("plugin")
  if opts.cargo ~= false then
    local cargo = (opts.cargo_dir or (dir .. "/bin")) .. "/cargo"
    t.write(cargo, CARGO)
    uv.fs_chmod(cargo, 493)
    if opts.cargo_dir then
      -- a cargo found through ~/.cargo/bin: the script looks for its control files there
      vim.uv.fs_symlink(dir .. "/mode", opts.cargo_dir .. "/../mode")
    end
  end
  vim.fn.mkdir(dir .. "/bin", "p")
  if opts.rustup then
    t.write(dir .. "/bin/rustup", RUSTUP)
    uv.fs_chmod(dir .. "/bin/rustup", 493)
    t.write(dir .. "/targets", table.concat(opts.rustup.targets or {}, "\n") .. "\n")
    if opts.rustup.add_fails then
      t.write(dir .. "/add_fails", "")
    end
  end
  t.write(dir .. "/mode", mode)
  vim.env.PATH = dir .. "/bin:/usr/bin:/bin"
  vim.env.HOME = opts.home or dir
  vim.env.CARGO_HOME = opts.cargo_home or (dir .. "/cargo-home")
  -- the plugin's files, so that build.lua can load lua/bb7/build.lua from "its" checkout
  uv.fs_symlink(t.repo .. "/lua", root .. "/lua")
  t.write(root .. "/build.lua", t.read(t.repo .. "/build.lua"))
  return { dir = dir, root = root }
end

--- Runs `fn` in a coroutine the way lazy.nvim does (lazy/async.lua): a uv check handle resumes it
--- from the event loop (vim.schedule_wrap) on every loop iteration until it is dead; a yielded
--- string is a progress message (lazy logs it as the task's status). `st.abort = true` makes the
--- next resume pass "abort" (lazy's <C-c>).
local function lazy_like(fn)
  local co = coroutine.create(fn)
  local st = { yields = {}, done = false }
  local check = uv.new_check()
  check:start(vim.schedule_wrap(function()
    if st.done or coroutine.status(co) ~= "suspended" then
      return
    end
    local ok, res = coroutine.resume(co, st.abort and "abort" or nil)
    if not ok then
      st.err, st.done = res, true
    elseif coroutine.status(co) == "dead" then
      st.result, st.done = res, true
    elseif res then
      if type(res) == "table" then -- a LazyMsg (lazy.nvim >= 11.6)
        st.yields[#st.yields + 1] = { msg = res.msg, level = res.level, released = st.released }
      else
        st.yields[#st.yields + 1] = { msg = res, released = st.released }
      end
    end
    if st.done then
      check:stop()
      check:close()
    end
  end))
  return st
end

local function release(s)
  t.write(s.dir .. "/release", "")
end

--- Whether process `pid` is alive (a zombie is not).
local function alive(pid)
  if not uv.kill(pid, 0) then
    return false
  end
  local stat = t.read("/proc/" .. pid .. "/stat") or ""
  return not stat:match("^%d+ %b() Z")
end

local function any_yield(st, pattern)
  for _, y in ipairs(st.yields) do
    if y.msg:find(pattern) then
      return y
    end
  end
end

--- A build that fails with the stand-in's `mode`, run through build.lua as lazy runs it: the error
--- it raises.
local function lazy_failure(mode)
  local s = standin(mode)
  release(s)
  local st = lazy_like(assert(loadfile(s.root .. "/build.lua")))
  t.wait(function()
    return st.done
  end, 20000, "the build to fail")
  t.eq(nil, st.result, "no binary")
  return tostring(st.err)
end

--- The `cmd = { … }` list of the lazy.nvim spec in `text` (the first one).
local function spec_commands(text)
  local list = text:match("cmd%s*=%s*(%b{})")
  local out = {}
  for name in (list or ""):gmatch('"(BB7%w*)"') do
    out[name] = true
  end
  return out, list
end

return {
  {
    "build.lua in lazy's coroutine: yields cargo's progress (N/M) while a timer keeps firing, then the binary",
    function()
      local s = standin("ok")
      package.loaded["bb7.build"] = nil -- build.lua takes the module from its own checkout
      local st = lazy_like(assert(loadfile(s.root .. "/build.lua")))
      -- The stand-in cargo cannot finish before the release file exists; the timer writes it after
      -- it has fired three times while cargo ran and a progress line was yielded. So a finished
      -- build proves the timer fired (Neovim was not blocked) and progress came before the end.
      local ticks = 0
      local timer = uv.new_timer()
      timer:start(10, 10, function()
        ticks = ticks + 1
        if ticks >= 3 and not st.released and uv.fs_stat(s.dir .. "/pid") and any_yield(st, "Compiling wasmtime v48%.0%.8.*%(1/3%)") then
          st.released = true
          assert(io.open(s.dir .. "/release", "w")):close() -- (a fast callback: no vim.fn here)
        end
      end)
      t.wait(function()
        return st.done
      end, 20000, "the build to finish")
      timer:stop()
      timer:close()
      t.eq(nil, st.err, "no error")
      t.eq(s.root .. "/target/release/bb7", st.result, "the binary's path")
      t.ok(ticks >= 3, "the timer fired while cargo ran")
      local y = any_yield(st, "Compiling wasmtime v48%.0%.8.*%(1/3%)") -- cargo's unit count
      t.ok(y and not y.released, "a progress line before cargo finished: " .. vim.inspect(st.yields))
      t.ok(y.msg:find("Compiling wasmtime v48.0.8; building the compiler and the wasm tool components (1/3), ", 1, true), "the build script's phase: " .. y.msg)
      t.ok(y.msg:match(", %d+s$"), "elapsed time: " .. y.msg)
      t.ok(any_yield(st, "^Linking bb7 %(2/3%)"), "linking: " .. vim.inspect(st.yields))
      local last = st.yields[#st.yields].msg
      t.ok(last:find("^Built " .. vim.pesc(s.root) .. "/target/release/bb7 %(bb7 0%.1%.0%) in %d+s$"), last)
      t.eq(
        "build --release --locked -p bb7 --color never --target-dir " .. s.root .. "/target",
        vim.trim(t.read(s.dir .. "/args")),
        "cargo's arguments"
      )
      t.eq("always 200", vim.trim(t.read(s.dir .. "/env")), "cargo draws its progress bar into the pipe")
      t.ok(uv.fs_stat(s.root .. "/target/release/" .. require("bb7.build").STAMP), "build stamp written")
      t.eq(nil, require("bb7.build").current(), "no build running")
    end,
  },
  {
    "lazy.nvim >= 11.6 (lazy.async loaded): progress is yielded at TRACE, the end at INFO, a failure raised",
    function()
      package.loaded["lazy.async"] = {} -- what build.lua looks at to know it may yield a LazyMsg
      local s = standin("ok")
      local st = lazy_like(assert(loadfile(s.root .. "/build.lua")))
      t.wait(function()
        return any_yield(st, "Compiling wasmtime v48%.0%.8.*%(1/3%)")
      end, 20000, "a progress line")
      release(s)
      t.wait(function()
        return st.done
      end, 20000, "the build to finish")
      t.eq(nil, st.err, "no error")
      for i, y in ipairs(st.yields) do
        local want = i == #st.yields and vim.log.levels.INFO or vim.log.levels.TRACE
        t.eq(want, y.level, "level of " .. y.msg)
      end
      t.ok(st.yields[#st.yields].msg:find("^Built "), st.yields[#st.yields].msg)
      -- a failure is raised (lazy shows it in red), after TRACE progress only
      local err = lazy_failure("linker")
      t.ok(err:find("^BB%-7 build failed: the C linker `cc` is missing"), err)
    end,
  },
  {
    ":BB7Build returns while cargo runs; progress and the end through vim.notify",
    function()
      local s = standin("ok")
      local build = require("bb7.build")
      build.root = function()
        return s.root
      end
      t.cmd("BB7Build")
      -- The stand-in cannot finish before the release file exists: the command came back first.
      local job = build.current()
      t.ok(job and not job.done, "the build is running after :BB7Build returned")
      t.wait(function()
        for _, n in ipairs(t.notes) do
          if n.msg:find("^BB%-7 build: Compiling wasmtime v48%.0%.8.*%(1/3%)") then
            return true
          end
        end
      end, 10000, "a progress notification")
      t.ok(not job.done, "still running")
      t.cmd("BB7Build")
      t.ok(t.notes[#t.notes].msg:find("^BB%-7 build: a build is already running %(Compiling wasmtime"), t.notes[#t.notes].msg)
      t.eq(vim.log.levels.WARN, t.notes[#t.notes].level, "a warning")
      t.ok(build.current() == job, "the same build")
      release(s)
      t.wait(function()
        return job.done
      end, 10000, "the build to finish")
      t.wait(function()
        for _, n in ipairs(t.notes) do
          if n.msg:find("^BB%-7: Built .*/target/release/bb7 %(bb7 0%.1%.0%) in %d+s$") and n.level == vim.log.levels.INFO then
            return true
          end
        end
      end, 5000, "the success notification")
    end,
  },
  {
    "failures say what to do, with cargo's last lines: linker, full disk, wasm target, other errors",
    function()
      local err = lazy_failure("linker")
      t.ok(err:find("^BB%-7 build failed: the C linker `cc` is missing%. Install a C toolchain %(Debian/Ubuntu: sudo apt install build%-essential"), err)
      t.ok(err:find("run :BB7Build (or :Lazy build bb7)", 1, true), err)
      t.ok(err:find("\n  error: linker `cc` not found", 1, true), "cargo's lines quoted: " .. err)

      err = lazy_failure("disk")
      t.ok(err:find("^BB%-7 build failed: the disk is full %(No space left on device%)"), err)
      t.ok(err:find("No space left on device (os error 28)", 1, true), err)

      err = lazy_failure("disk_sigbus")
      t.ok(err:find("^BB%-7 build failed: the disk is full"), err)
      for line in err:gmatch("[^\n]+") do
        t.ok(#line < 320, "long lines are cut: " .. #line)
      end

      err = lazy_failure("wasm")
      t.ok(err:find("^BB%-7 build failed: the wasm32%-wasip2 target is missing: run `rustup target add wasm32%-wasip2` in "), err)

      err = lazy_failure("generic")
      t.ok(err:find("^BB%-7 build failed: cargo build failed %(see its last lines below%)"), err)
      t.ok(err:find("setup({ bin = … })", 1, true), "the alternative: " .. err)
      t.ok(err:find("  error[E0308]: mismatched types", 1, true), err)
      t.ok(err:find("  error: could not compile `bb7` (lib) due to 1 previous error", 1, true), err)
    end,
  },
  {
    "no cargo: build.lua raises and :BB7Build notifies what to do; cargo in ~/.cargo/bin is used",
    function()
      local s = standin("ok", { cargo = false })
      local st = lazy_like(assert(loadfile(s.root .. "/build.lua")))
      t.wait(function()
        return st.done
      end, 5000, "the build to fail")
      t.ok(tostring(st.err):find("^BB%-7 build: cargo not found%. Install Rust from https://rustup%.rs"), tostring(st.err))
      t.ok(tostring(st.err):find(":BB7Build (or :Lazy build bb7)", 1, true), tostring(st.err))
      t.clear_notes()
      local build = require("bb7.build")
      build.root = function()
        return s.root
      end
      t.cmd("BB7Build")
      t.expect_error("BB-7 build: cargo not found. Install Rust from https://rustup.rs")
      t.eq(nil, build.current(), "nothing running")

      -- rustup's cargo in ~/.cargo/bin while PATH lacks it (Neovim started before rustup ran)
      local home = t.tmpdir("home")
      vim.fn.mkdir(home .. "/.cargo/bin", "p")
      local s2 = standin("ok", { cargo_dir = home .. "/.cargo/bin", home = home })
      t.write(home .. "/.cargo/release", "")
      st = lazy_like(assert(loadfile(s2.root .. "/build.lua")))
      t.wait(function()
        return st.done
      end, 10000, "the build to finish")
      t.eq(nil, st.err, "built with ~/.cargo/bin/cargo")
      t.eq(s2.root .. "/target/release/bb7", st.result, "binary")
    end,
  },
  {
    "rustup: a missing wasm32-wasip2 target is added first; when adding fails, the message says what to run",
    function()
      local s = standin("ok", { rustup = { targets = { "x86_64-unknown-linux-gnu" } } })
      release(s)
      local st = lazy_like(assert(loadfile(s.root .. "/build.lua")))
      t.wait(function()
        return st.done
      end, 10000, "the build to finish")
      t.eq(nil, st.err, "built")
      t.eq("yes", vim.trim(t.read(s.dir .. "/added") or ""), "rustup target add ran")
      t.ok(any_yield(st, "^info: downloading component 'rust%-std' for 'wasm32%-wasip2'"), "rustup's progress: " .. vim.inspect(st.yields))

      s = standin("ok", { rustup = { targets = { "x86_64-unknown-linux-gnu" }, add_fails = true } })
      st = lazy_like(assert(loadfile(s.root .. "/build.lua")))
      t.wait(function()
        return st.done
      end, 10000, "the build to fail")
      local err = tostring(st.err)
      t.ok(err:find("^BB%-7 build failed: the wasm32%-wasip2 target is missing and `rustup target add wasm32%-wasip2` failed: run it yourself in "), err)
      t.ok(err:find("error: could not download file", 1, true), err)
      t.eq(nil, t.read(s.dir .. "/pid"), "cargo never ran")
    end,
  },
  {
    "cancel: :BB7Build cancel and lazy's abort stop cargo and what it started",
    function()
      local s = standin("hang")
      local build = require("bb7.build")
      build.root = function()
        return s.root
      end
      t.cmd("BB7Build")
      t.wait(function()
        return t.read(s.dir .. "/child")
      end, 10000, "cargo and its child to run")
      local pid, child = tonumber(t.read(s.dir .. "/pid")), tonumber(t.read(s.dir .. "/child"))
      t.ok(alive(pid) and alive(child), "running")
      t.cmd("BB7Build cancel")
      t.wait(function()
        return not alive(pid) and not alive(child)
      end, 10000, "cargo and its child to stop")
      t.wait(function()
        for _, n in ipairs(t.notes) do
          if n.msg:find("^BB%-7 build cancelled after %d+s; run :BB7Build") and n.level == vim.log.levels.WARN then
            return true
          end
        end
      end, 5000, "the cancelled notification")
      t.eq(nil, build.current(), "nothing running")
      t.clear_notes()
      t.cmd("BB7Build cancel")
      t.note("BB-7: No build is running", vim.log.levels.WARN)

      s = standin("hang")
      local st = lazy_like(assert(loadfile(s.root .. "/build.lua")))
      t.wait(function()
        return t.read(s.dir .. "/child")
      end, 10000, "cargo to run")
      pid, child = tonumber(t.read(s.dir .. "/pid")), tonumber(t.read(s.dir .. "/child"))
      st.abort = true
      t.wait(function()
        return st.done
      end, 10000, "the coroutine to end")
      t.eq("BB-7 build: cancelled", tostring(st.err), "aborted")
      t.wait(function()
        return not alive(pid) and not alive(child)
      end, 10000, "cargo and its child to stop")
    end,
  },
  {
    "a binary older than its sources (git pull, no rebuild): stale(), the start-up check and :checkhealth say :BB7Build",
    function()
      local build, host, config = require("bb7.build"), require("bb7.host"), require("bb7.config")
      -- stale() on files alone
      local root = t.tmpdir("stale")
      t.write(root .. "/target/release/bb7", "")
      t.write(root .. "/host/src/main.rs", "")
      t.write(root .. "/guest-tools/target/x", "")
      t.write(root .. "/lua/bb7/x.lua", "")
      local now = os.time()
      local function age(rel, secs)
        uv.fs_utime(root .. "/" .. rel, now - secs, now - secs)
      end
      age("target/release/bb7", 100)
      age("host/src/main.rs", 200)
      t.eq(nil, build.stale(root, root .. "/target/release/bb7"), "built after its sources")
      age("guest-tools/target/x", 10) -- build output, not a source
      age("lua/bb7/x.lua", 10) -- Lua is not built into the binary
      t.eq(nil, build.stale(root, root .. "/target/release/bb7"), "only sources count")
      age("host/src/main.rs", 10)
      local s = build.stale(root, root .. "/target/release/bb7")
      t.eq("host/src/main.rs", s and s.path, "a newer source")
      t.write(root .. "/target/release/" .. build.STAMP, "")
      age("target/release/" .. build.STAMP, 5)
      t.eq(nil, build.stale(root, root .. "/target/release/bb7"), "a :BB7Build after it counts")

      -- the plugin's own build output, older than a source: start-up and checkhealth
      local e = t.env()
      config.setup({ env = config.options.env })
      local plug = t.tmpdir("plug")
      vim.fn.mkdir(plug .. "/target/release", "p")
      uv.fs_symlink(t.bin(), plug .. "/target/release/bb7")
      t.write(plug .. "/host/src/chat/mod.rs", "")
      local bin_time = uv.fs_stat(t.bin()).mtime.sec
      uv.fs_utime(plug .. "/host/src/chat/mod.rs", bin_time + 100, bin_time + 100)
      host.plugin_root = function()
        return plug
      end
      t.eq(plug .. "/target/release/bb7", (host.find_bin()), "the plugin's own build")
      t.clear_notes()
      t.ok(host.start(), "the host starts anyway")
      t.wait(function()
        for _, n in ipairs(t.notes) do
          if n.msg:find("older than", 1, true) then
            return true
          end
        end
      end, 5000, "the warning")
      t.note(
        "BB-7: the host binary is older than the plugin's sources (host/src/chat/mod.rs changed after it was built: a git pull without a rebuild?): run :BB7Build (or :Lazy build bb7), then :BB7Restart",
        vim.log.levels.WARN
      )
      host.stop()
      vim.cmd("silent checkhealth bb7")
      local text = t.buf_text(0)
      t.ok(text:find("WARNING the host binary is older than the plugin's sources (host/src/chat/mod.rs changed", 1, true), text)
      t.ok(text:find("run :BB7Build (or :Lazy build bb7), then :BB7Restart", 1, true), text)
      vim.cmd("bwipeout!")
      -- fresh again
      uv.fs_utime(plug .. "/host/src/chat/mod.rs", bin_time - 100, bin_time - 100)
      vim.cmd("silent checkhealth bb7")
      text = t.buf_text(0)
      t.ok(text:find("OK built after its sources last changed", 1, true), text)
      t.ok(not text:find("older than the plugin", 1, true), text)
      assert(e)
    end,
  },
  {
    "install docs: the lazy.nvim specs list every command; doc/bb7.txt holds no stray control bytes",
    function()
      local readme = t.read(t.repo .. "/README.md")
      local doc = t.read(t.repo .. "/doc/bb7.txt")
      local install = readme:match("### Install %(lazy%.nvim%)(.-)\n###? ")
      local help = doc:match("%*bb7%-installation%*(.-)\n=====")
      t.ok(install and help, "install sections found")
      local in_readme = spec_commands(install)
      local in_help = spec_commands(help)
      local defined = {}
      for name in pairs(vim.api.nvim_get_commands({})) do
        if name:match("^BB7") then
          defined[#defined + 1] = name
          t.ok(in_readme[name], "README's lazy.nvim spec lists " .. name)
          t.ok(in_help[name], ":help bb7-installation's lazy.nvim spec lists " .. name)
        end
      end
      t.ok(#defined >= 20, "commands defined: " .. #defined)
      for name in pairs(in_help) do
        t.ok(vim.fn.exists(":" .. name) == 2, ":help bb7-installation lists a command that does not exist: " .. name)
      end
      -- Only newlines (and tabs outside `inline code`): a literal ESC or line break inside a
      -- sentence breaks the rendered help.
      for n, line in ipairs(vim.split(doc, "\n", { plain = true })) do
        local bad = line:find("[%z\1-\8\11-\31\127]")
        t.ok(not bad, ("doc/bb7.txt:%d holds control byte %d"):format(n, bad and line:byte(bad) or 0))
        for code in line:gmatch("`[^`]*`") do
          t.ok(not code:find("\t", 1, true), ("doc/bb7.txt:%d: a tab inside %s"):format(n, code))
        end
      end
      t.ok(not doc:find("`\n`", 1, true), "no line break inside inline code")
      -- The escapes the help shows are the ones names are shown with.
      local util = require("bb7.util")
      for _, c in ipairs({ "\n", "\t", "\27" }) do
        t.ok(doc:find("`" .. util.oneline(c) .. "`", 1, true), "doc/bb7.txt shows " .. util.oneline(c))
      end
      -- build.lua is where lazy.nvim looks for it, and the specs rely on it
      t.ok(uv.fs_stat(t.repo .. "/build.lua"), "build.lua at the root")
      t.ok(not install:match("```lua\n(.-)```"):find("build%s*="), "README's spec leaves the build to build.lua")
      t.ok(not help:match(">lua\n(.-)\n<"):find("build%s*="), "so does the help's")
    end,
  },
}
