-- Unit tests of the pure Lua parts: parsing, paths, line endings, statuses, formatting, ordering, the
-- chat renderer, the streaming renderer, the host line splitter, keymap configuration, and the shape
-- of the modules (no require cycle, who may use the host and the UI).
local t = require("helpers")
local util = require("bb7.util")

--- Every module under lua/bb7: name -> file.
local function modules()
  local out = {}
  for _, f in ipairs(vim.fn.globpath(t.repo .. "/lua", "bb7/**/*.lua", false, true)) do
    local name = f:sub(#t.repo + 6):gsub("%.lua$", ""):gsub("/", "."):gsub("%.init$", "")
    out[name] = f
  end
  return out
end

--- The static require graph of lua/bb7, lazy requires (inside functions) included: name -> set of
--- required names. Comments are skipped; `require("bb7.ui." .. name)` counts as requiring every
--- module under `bb7.ui.`.
local function require_graph()
  local mods = modules()
  local graph = {}
  for name, file in pairs(mods) do
    local deps = {}
    for line in io.lines(file) do
      if not line:match("^%s*%-%-") then
        line = line:gsub("%s%-%-%s.*$", "")
        for m in line:gmatch("require%s*%(%s*[\"']([%w%._]+)[\"']%s*%)") do
          deps[m] = true
        end
        for m in line:gmatch("pcall%(%s*require%s*,%s*[\"']([%w%._]+)[\"']") do
          deps[m] = true
        end
        for prefix in line:gmatch("require%s*%(%s*[\"']([%w%._]+)[\"']%s*%.%.") do
          for other in pairs(mods) do
            if other:sub(1, #prefix) == prefix then
              deps[other] = true
            end
          end
        end
      end
    end
    graph[name] = deps
  end
  return graph, mods
end

return {
  {
    "parse_target: path, path:start:end, bad ranges",
    function()
      t.eq({ path = "a/b.lua" }, util.parse_target("a/b.lua"), "plain")
      t.eq({ path = "a/b.lua", start_line = 3, end_line = 9 }, util.parse_target("a/b.lua:3:9"), "section")
      t.eq({ path = "C:x", start_line = 1, end_line = 2 }, util.parse_target("C:x:1:2"), "colons in path")
      t.eq({ path = "a:3" }, util.parse_target("a:3"), "one number is part of the name")
      local r, err = util.parse_target("a:9:3")
      t.eq(nil, r, "end before start")
      t.ok(err:find("invalid line range"), err)
      t.eq(nil, (util.parse_target("a:0:3")), "line 0")
      t.eq(nil, (util.parse_target("")), "empty")
    end,
  },
  {
    "relpath: inside, outside, root itself",
    function()
      t.eq({ "src/x.lua", false }, { util.relpath("/p/proj/src/x.lua", "/p/proj") }, "inside")
      t.eq({ "src/x.lua", false }, { util.relpath("/p/proj/src/x.lua", "/p/proj/") }, "trailing slash")
      t.eq({ "/p/projx/a", true }, { util.relpath("/p/projx/a", "/p/proj") }, "prefix is not inside")
      t.eq({ "/etc/hosts", true }, { util.relpath("/etc/hosts", "/p/proj") }, "outside")
    end,
  },
  {
    "line endings: detect, convert, compare",
    function()
      t.eq("crlf", util.line_ending("a\r\nb\r\n"), "crlf")
      t.eq("lf", util.line_ending("a\nb\r\n"), "first break decides")
      t.eq("lf", util.line_ending("no break"), "none")
      t.eq("a\r\nb\r\n", util.with_line_ending("a\nb\r\n", "crlf"), "to crlf, no doubled CR")
      t.eq("a\nb\n", util.with_line_ending("a\r\nb\r\n", "lf"), "to lf")
      t.ok(util.same_text("a\r\nb\n", "a\nb\n"), "crlf ignored")
      t.ok(not util.same_text("a\n", "a"), "trailing newline matters")
      t.eq({ "a", "b" }, util.lines("a\r\nb\n"), "lines")
      t.eq({ "a", "" }, util.lines("a\n\n"), "blank last line kept")
      t.eq({}, util.lines(""), "empty")
      t.eq("b\nc\n", util.section("a\nb\nc\nd\n", 2, 3), "section")
    end,
  },
  {
    "display_status: backend statuses and R, ~, ~M from the local text",
    function()
      local f = { path = "a", status = "", in_context = true, context_content = "x\n", readonly = false }
      t.eq("", util.display_status(f, "x\n"), "in sync")
      t.eq("", util.display_status(f, "x\r\n"), "crlf only differs")
      t.eq("~", util.display_status(f, "y\n"), "out of sync")
      t.eq("", util.display_status(f, nil), "local unknown")
      local m = vim.tbl_extend("force", f, { status = "M", has_output = true })
      t.eq("M", util.display_status(m, "x\n"), "modified")
      t.eq("~M", util.display_status(m, "y\n"), "conflict")
      local r = vim.tbl_extend("force", f, { readonly = true })
      t.eq("R", util.display_status(r, "x\n"), "read-only")
      t.eq("~", util.display_status(r, "z\n"), "read-only but out of sync")
      t.eq("S", util.display_status({ status = "S", in_context = true, context_content = "q" }, "other"), "section")
      t.eq("A", util.display_status({ status = "A", in_context = false }, nil), "added")
      t.eq("!A", util.display_status({ status = "!A", in_context = false }, "exists"), "conflict added")
      local ext = vim.tbl_extend("force", f, { external = true, readonly = true })
      t.eq("R", util.display_status(ext, "changed"), "external files are not compared")
    end,
  },
  {
    "formatting: prices per million, money, tokens",
    function()
      t.eq("$3.00", util.per_million("0.000003"), "string price")
      t.eq("$15.0", util.per_million(0.000015), "number price")
      t.eq("free", util.per_million("0"), "free")
      t.eq("?", util.per_million(nil), "unknown")
      t.eq("$0.0013", util.money(0.00131), "small")
      t.eq("$6.55", util.money(6.5512), "dollars")
      t.eq("-", util.money(nil), "none")
      t.eq("1.2k", util.tokens(1234), "k")
      t.eq("999", util.tokens(999), "plain")
    end,
  },
  {
    "ordering: pinned chats first, favourite models first",
    function()
      local chats = { { id = "c3" }, { id = "c2" }, { id = "c1" } }
      local ids = vim.tbl_map(function(c)
        return c.id
      end, util.order_chats(chats, { "c1", "c2" }))
      t.eq({ "c1", "c2", "c3" }, ids, "pins in pin order, rest as given")
      local models = { { id = "z", name = "Zed" }, { id = "a", name = "Alpha" }, { id = "m", name = "Mid" } }
      ids = vim.tbl_map(function(m)
        return m.id
      end, util.order_models(models, { "m" }))
      t.eq({ "m", "a", "z" }, ids, "favourite, then by name")
    end,
  },
  {
    "unified diff of context → output",
    function()
      local d = util.unified_diff("a\nb\nc\n", "a\nB\nc\n", "f.txt")
      t.eq("--- a/f.txt (context)", d[1], "header")
      t.ok(vim.tbl_contains(d, "-b") and vim.tbl_contains(d, "+B"), vim.inspect(d))
      t.ok(util.unified_diff("same\n", "same\r\n", "f")[1]:find("No differences"), "crlf-only is no diff")
    end,
  },
  {
    "chat renderer: headers, events, collapsed reasoning, line → message map",
    function()
      local render = require("bb7.ui.render")
      local chat = {
        messages = {
          { role = "assistant", parts = { { type = "context_event", action = "UserAddFile", path = "a.rs" } } },
          { role = "user", model = "m/1", parts = { { type = "text", content = "fix it\nplease" } } },
          {
            role = "assistant",
            model = "m/1",
            output_files = { "a.rs" },
            parts = {
              { type = "thinking", content = "step 1\nstep 2" },
              { type = "text", content = "Done." },
            },
          },
          { role = "system", parts = { { type = "text", content = "Response aborted by user." } } },
        },
      }
      local r = render.chat(chat, {})
      t.eq("  • Added a.rs", r.lines[1], "event line")
      t.eq("▌ You  ·  m/1", r.lines[3], "user header with model")
      t.eq(1, r.msg_at[3], "user header maps to message 1")
      t.eq(1, r.msg_at[5], "second text line maps to message 1")
      local rline
      for i, l in ipairs(r.lines) do
        if l:find("Reasoning", 1, true) then
          rline = i
        end
      end
      t.eq("▸ Reasoning (2 lines)", r.lines[rline], "collapsed by default")
      t.eq("2:1", r.fold_at[rline], "fold key")
      t.ok(vim.tbl_contains(r.lines, "⚠ Response aborted by user."), "system message")
      t.ok(vim.tbl_contains(r.lines, "  → Output: a.rs"), "output files")
      local open = render.chat(chat, { expanded = { ["2:1"] = true } })
      t.ok(vim.tbl_contains(open.lines, "  step 2"), "expanded reasoning")
      t.eq("Saved a as b", render.event_line({ action = "UserSaveAs", path = "b", original_path = "a" }), "save as")
      t.eq("Added section x:1-2", render.event_line({ action = "UserAddSection", path = "x", start_line = 1, end_line = 2 }), "section")
    end,
  },
  {
    "stream renderer: append-only, batched, no re-render, cursor left alone unless following",
    function()
      local Stream = require("bb7.ui.stream")
      local buf = vim.api.nvim_create_buf(false, true)
      vim.api.nvim_buf_set_lines(buf, 0, -1, false, { "header", "keep me", "" })
      local win = vim.api.nvim_open_win(buf, true, { relative = "editor", row = 1, col = 1, width = 40, height = 10 })
      local changes, checking = 0, true
      vim.api.nvim_buf_attach(buf, false, {
        on_lines = function(_, _, _, first)
          if checking then
            changes = changes + 1
            t.ok(first >= 2, "never rewrites earlier lines (first changed line " .. first .. ")")
          end
        end,
      })
      vim.api.nvim_win_set_cursor(win, { 1, 0 }) -- the user reads the top: not following
      local flushes = 0
      local s = Stream.new(buf, { interval = 10, on_flush = function() flushes = flushes + 1 end })
      for i = 1, 200 do
        s:push("chunk", "w" .. i .. (i % 20 == 0 and "\n" or " "))
      end
      t.wait(function()
        return flushes > 0
      end, 2000, "a flush")
      t.eq(1, flushes, "200 chunks in one batch")
      t.eq(1, changes, "one buffer change")
      t.eq({ 1, 0 }, vim.api.nvim_win_get_cursor(win), "cursor not moved")
      -- Follow: cursor on the last line moves with the stream.
      vim.api.nvim_win_set_cursor(win, { vim.api.nvim_buf_line_count(buf), 0 })
      s:push("thinking", "hmm\nmore")
      s:push("chunk", "answer")
      s:stop()
      local lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
      t.eq("keep me", lines[2], "old text intact")
      t.eq("w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 w11 w12 w13 w14 w15 w16 w17 w18 w19 w20", lines[3], "first streamed line")
      t.eq("answer", lines[#lines], "last text")
      t.ok(vim.tbl_contains(lines, "▾ Reasoning"), "reasoning header")
      t.eq(#lines, vim.api.nvim_win_get_cursor(win)[1], "follower moved to the end")
      -- A buffer changed under the stream: writing continues at its end instead of failing.
      checking = false
      local s2 = Stream.new(buf, { interval = 5 })
      vim.api.nvim_buf_set_lines(buf, 0, -1, false, { "reset" })
      s2:push("chunk", "after\nreset")
      s2:stop()
      t.eq({ "resetafter", "reset" }, vim.api.nvim_buf_get_lines(buf, 0, -1, false), "recovered")
      lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
      s:push("chunk", "ignored after stop")
      t.eq(#lines, vim.api.nvim_buf_line_count(buf), "stopped")
      vim.api.nvim_win_close(win, true)
    end,
  },
  {
    "host line splitter: partial lines across reads, several per read, bad JSON notifies",
    function()
      local host = require("bb7.host")
      local got = {}
      host.on("t_event", function(m)
        got[#got + 1] = m.n
      end)
      host._feed({ '{"type":"t_event","n":1}', '{"type":"t_ev' })
      host._feed({ 'ent","n":2}', '{"type":"t_event","n":3}', "" })
      t.eq({}, got, "dispatched from the main loop, not inside the stdout callback")
      t.wait(function()
        return #got == 3
      end, 1000, "dispatch")
      t.eq({ 1, 2, 3 }, got, "events in order")
      -- A burst is dispatched over several ticks (time budget per tick), in order, completely.
      local burst, n = {}, 20000
      for i = 1, n do
        burst[i] = vim.json.encode({ type = "t_event", n = 100 + i })
      end
      burst[#burst + 1] = ""
      got = {}
      host._feed(burst)
      host._drain()
      t.ok(#got > 0 and #got < n, ("one tick dispatched part of the burst (%d of %d)"):format(#got, n))
      t.wait(function()
        return #got == n
      end, 10000, "the rest")
      t.eq(101, got[1], "first")
      t.eq(100 + n, got[n], "last")
      t.clear_notes()
      host._feed({ "not json", "" })
      t.wait(function()
        return #t.notes > 0
      end, 1000, "notification")
      t.ok(t.notes[1].msg:find("^BB%-7: host sent a line that is not JSON"), t.notes[1].msg)
    end,
  },
  {
    "keymaps: remapped and disabled keys, buffer-local only",
    function()
      require("bb7.config").setup({ keymaps = { files = { apply = "<leader>a", reject = false } } })
      local km = require("bb7.ui.keymaps")
      local buf = vim.api.nvim_create_buf(false, true)
      km.apply(buf, "test", "files", {
        apply = { function() end, "apply" },
        reject = { function() end, "reject" },
        diff = { function() end, "diff" },
      })
      local lhs = {}
      for _, m in ipairs(vim.api.nvim_buf_get_keymap(buf, "n")) do
        lhs[m.lhs] = m.desc
      end
      local leader = vim.g.mapleader or "\\"
      t.eq("BB-7: apply", lhs[leader .. "a"], "remapped")
      t.eq("BB-7: diff", lhs["D"], "default kept")
      t.eq(nil, lhs["x"], "disabled")
      t.eq(0, #vim.tbl_filter(function(m)
        return (m.desc or ""):find("BB%-7")
      end, vim.api.nvim_get_keymap("n")), "nothing global")
      require("bb7.config").setup({})
    end,
  },
  {
    "config: defaults documented, find_bin order (bin option, then PATH)",
    function()
      local config = require("bb7.config")
      config.setup({ bin = "/nonexistent/bb7" })
      local host = require("bb7.host")
      local b, err = host.find_bin()
      t.eq(nil, b, "bad bin")
      t.ok(err:find("not executable"), err)
      config.setup({ bin = t.bin() })
      t.eq(t.bin(), (host.find_bin()), "bin option wins")
      config.setup({})
      local doc = t.read(t.repo .. "/doc/bb7.txt") or ""
      for k in pairs(config.defaults) do
        t.ok(doc:find(k, 1, true), "option documented in doc/bb7.txt: " .. k)
      end
    end,
  },
  {
    "doc/bb7.txt: helptags build, every command and every default key is documented",
    function()
      local dir = t.tmpdir("doc")
      vim.fn.mkdir(dir .. "/doc", "p")
      t.write(dir .. "/doc/bb7.txt", t.read(t.repo .. "/doc/bb7.txt"))
      vim.cmd("helptags " .. vim.fn.fnameescape(dir .. "/doc"))
      local tags = t.read(dir .. "/doc/tags")
      local doc = t.read(t.repo .. "/doc/bb7.txt")
      for name in pairs(vim.api.nvim_get_commands({})) do
        if name:match("^BB7") then
          t.ok(tags:find("\n:" .. name .. "\t") or tags:find("^:" .. name .. "\t"), "tag for :" .. name)
        end
      end
      for _, tag in ipairs({ "bb7-keymaps", "bb7-configuration", "bb7-statuses", "bb7-troubleshooting", "bb7-health" }) do
        t.ok(tags:find(tag, 1, true), tag)
      end
      for pane, keys in pairs(require("bb7.config").defaults.keymaps) do
        for action, lhs in pairs(keys) do
          local pat = "\n  " .. vim.pesc(action) .. "%s+" .. vim.pesc(lhs) .. "%s"
          t.ok(doc:find(pat), ("keymap %s.%s = %s documented"):format(pane, action, lhs))
        end
      end
    end,
  },
  {
    "start-up: a missing binary and a host of another version are reported as BB-7 messages",
    function()
      local config, host = require("bb7.config"), require("bb7.host")
      config.setup({ bin = "/nonexistent/bb7" })
      t.clear_notes()
      vim.cmd("BB7Init")
      t.wait(function()
        return #t.notes > 0
      end, 2000, "notification")
      t.eq(vim.log.levels.ERROR, t.notes[1].level, "error")
      t.ok(t.notes[1].msg:find("^BB%-7: bin /nonexistent/bb7 is not executable"), t.notes[1].msg)
      t.expect_error("BB-7: bin /nonexistent/bb7 is not executable")
      t.ok(not host.running(), "not running")
      local nvim = vim.v.progpath
      config.setup({ cmd = { nvim, "--headless", "-u", "NONE", "-i", "NONE", "-l", t.repo .. "/tests/nvim/fixtures/fake_host.lua" } })
      t.clear_notes()
      t.ok(host.start(), "started")
      t.eq("9.9.0", host.version, "version read at start-up")
      t.wait(function()
        return #t.notes > 0
      end, 2000, "version warning")
      t.wait(function()
        return #t.notes >= 2
      end, 2000, "stderr line")
      local seen = {}
      for _, n in ipairs(t.notes) do
        seen[n.msg] = n.level
      end
      t.eq(vim.log.levels.WARN, seen["BB-7: host version 9.9.0 does not match the plugin (needs 0.1.x): rebuild the host that setup({ cmd }) runs from this plugin's checkout"], vim.inspect(t.notes))
      t.eq(vim.log.levels.WARN, seen["BB-7: host: warning from the fake host"], "stderr shown as a warning")
      host.stop()
      t.ok(not host.running(), "stopped")
      config.setup({})
    end,
  },
  {
    "find_bin: the plugin's build output wins over PATH; PATH is the fallback",
    function()
      local host, config = require("bb7.host"), require("bb7.config")
      config.setup({})
      local root = t.tmpdir("plugroot")
      local pathdir = t.tmpdir("pathdir")
      vim.uv.fs_symlink(t.bin(), pathdir .. "/bb7")
      local orig_root, orig_path = host.plugin_root, vim.env.PATH
      host.plugin_root = function()
        return root
      end
      vim.env.PATH = pathdir .. ":" .. orig_path
      local ok, err = pcall(function()
        t.eq(pathdir .. "/bb7", (host.find_bin()), "PATH fallback")
        vim.fn.mkdir(root .. "/target/release", "p")
        vim.uv.fs_symlink(t.bin(), root .. "/target/release/bb7")
        t.eq(root .. "/target/release/bb7", (host.find_bin()), "build output before PATH")
      end)
      host.plugin_root, vim.env.PATH = orig_root, orig_path
      assert(ok, err)
    end,
  },
  {
    "build step: a clear message when cargo is missing",
    function()
      local orig = { vim.env.PATH, vim.env.HOME, vim.env.CARGO_HOME }
      local empty = t.tmpdir("emptypath")
      vim.env.PATH, vim.env.HOME, vim.env.CARGO_HOME = empty, empty, empty -- no ~/.cargo/bin/cargo either
      -- in lazy.nvim's coroutine it raises; elsewhere (:BB7Build) it notifies (tests/nvim/e2e_build_spec.lua)
      local ok, err = coroutine.resume(coroutine.create(require("bb7.build").run))
      vim.env.PATH, vim.env.HOME, vim.env.CARGO_HOME = orig[1], orig[2], orig[3]
      t.ok(ok == false, "fails")
      t.ok(tostring(err):find("^BB%-7 build: cargo not found%. Install Rust from https://rustup%.rs"), tostring(err))
    end,
  },
  {
    "runner: a case fails on an unexpected ERROR notification, a scheduled-callback or autocmd error; no state leaks",
    function()
      local dir = vim.fn.tempname()
      vim.fn.mkdir(dir, "p")
      local spec = dir .. "/meta_spec.lua"
      t.write(spec, table.concat({
        "local t = require('helpers')",
        "return {",
        "  { 'callback error', function() vim.schedule(function() error('boom in a callback') end) end },",
        "  { 'error notification', function() vim.notify('BB-7: oops', vim.log.levels.ERROR) end },",
        "  { 'expected error', function() vim.notify('BB-7: fine', vim.log.levels.ERROR); t.note('BB-7: fine', vim.log.levels.ERROR) end },",
        "  { 'autocmd error', function() vim.api.nvim_create_autocmd('User', { pattern = 'M', callback = function() error('boom in an autocmd') end }); pcall(vim.api.nvim_exec_autocmds, 'User', { pattern = 'M' }) end },",
        "  { 'state does not leak', function() assert(_G.leak == nil, 'leaked'); _G.leak = true end },",
        "  { 'state does not leak (2)', function() assert(_G.leak == nil, 'leaked'); _G.leak = true end },",
        "}",
      }, "\n"))
      local res = vim.system({ vim.v.progpath, "--headless", "-u", "NONE", "-i", "NONE", "-l", t.repo .. "/tests/nvim/run.lua", spec }, { text = true, cwd = t.repo }):wait(60000)
      vim.fn.delete(dir, "rf")
      t.ok(res.code ~= 0, "the run fails")
      local out = res.stdout or ""
      t.ok(out:find("FAIL meta_spec: callback error", 1, true) and out:find("boom in a callback", 1, true), out)
      t.ok(out:find("FAIL meta_spec: error notification", 1, true) and out:find("BB-7: oops", 1, true), out)
      t.ok(out:find("ok   meta_spec: expected error", 1, true), out)
      t.ok(out:find("FAIL meta_spec: autocmd error", 1, true) and out:find("boom in an autocmd", 1, true), out)
      t.ok(out:find("ok   meta_spec: state does not leak (2)", 1, true), out)
      t.ok(out:find("meta_spec: 3 passed, 3 failed", 1, true), out)
    end,
  },
  {
    "agent: a stored failed call says why in one line; a successful one shows its summary",
    function()
      local agent = require("bb7.agent")
      local bad = agent.call_line({
        tool = "read_file",
        args = { file_path = ".env" },
        ok = false,
        summary = "error",
        excerpt = "error: read_file: `.env` is hidden by the deny list (agent.deny, pattern `.env`)\nsecond line",
      })
      t.ok(bad:find("✗ read_file: `.env` is hidden by the deny list", 1, true), bad)
      t.ok(not bad:find("second line", 1, true) and not bad:find("\n", 1, true), bad)
      local long = agent.call_line({ tool = "search_project", args = { query = "x" }, ok = false, excerpt = ("y"):rep(300) })
      t.ok(vim.fn.strchars(long) < 140 and long:find("…", 1, true), long)
      local good = agent.call_line({ tool = "read_file", args = { file_path = "a.rs" }, ok = true, summary = "a.rs lines 1-7 of 7" })
      t.ok(good:find("→ a.rs lines 1-7 of 7", 1, true), good)
      local timed = agent.call_line({ tool = "read_file", args = { file_path = "a.rs" }, ok = true, summary = "s", bytes = 2048, duration_ms = 3.4 }, true)
      t.ok(timed:find("^  ▾ ⚙ read_file") and timed:find(" · 2.0 KiB · 3 ms$"), timed)
      local details = agent.call_details({ tool = "read_file", args = { file_path = "a\nb" }, ok = true, step = 2, bytes = 10, excerpt = "one\ntwo\27[31m" })
      t.ok(details[1]:find("args: ", 1, true) and not details[1]:find("\n", 1, true), vim.inspect(details))
      t.ok(details[2]:find("step 2 · ok", 1, true), vim.inspect(details))
      t.eq("│ one", details[3])
      t.ok(not details[4]:find("\27", 1, true), "control characters escaped: " .. details[4])
    end,
  },
  {
    "agent: while a tool runs the input footer names it beside the spinner",
    function()
      local agent, ui, session = require("bb7.agent"), require("bb7.ui"), require("bb7.session")
      session.stream = { started = vim.uv.hrtime() }
      agent.on_event({ kind = "job.started", data = {} })
      t.ok(ui.status_text():find("streaming", 1, true), ui.status_text())
      agent.on_event({ kind = "tool.call.requested", data = { id = "c1", tool = "read_file", args = { file_path = "src/a\nb.rs" } } })
      local text = ui.status_text()
      t.ok(text:find("running read_file src/a\\nb.rs", 1, true), text)
      agent.on_event({ kind = "tool.call.completed", data = { id = "c1", tool = "read_file", ok = true, summary = "x" } })
      t.ok(ui.status_text():find("streaming", 1, true) and not ui.status_text():find("running", 1, true), ui.status_text())
      session.stream = nil
    end,
  },
  {
    "review: an accepted hunk's buffer rewrite leaves exactly the host's bytes (BOM, CRLF, no final newline)",
    function()
      local review = require("bb7.ui.review")
      local dir = vim.fn.tempname()
      vim.fn.mkdir(dir, "p")
      for i, case in ipairs({
        { "\239\187\191one\ntwo\n", "\239\187\191one\nTWO\nthree\n" },
        { "a\r\nb\r\n", "a\r\nB\r\nc\r\n" },
        { "a\r\nb", "a\r\nB" },
        { "mixed\r\nlines\n", "mixed\r\nLINES\n" },
        { "x\n", "x\nnot ascii: é ✓\n" },
      }) do
        local path = dir .. "/f" .. i .. ".txt"
        local f = assert(io.open(path, "wb"))
        f:write(case[1])
        f:close()
        vim.cmd("edit " .. vim.fn.fnameescape(path))
        local buf = vim.api.nvim_get_current_buf()
        -- What the host does on accept: the file changes on disk, then the buffer follows.
        f = assert(io.open(path, "wb"))
        f:write(case[2])
        f:close()
        review.sync_buffer(buf, case[2])
        f = assert(io.open(path, "rb"))
        local got = f:read("*a")
        f:close()
        t.eq(case[2], got, "case " .. i)
        t.eq(false, vim.bo[buf].modified, "case " .. i .. " in sync")
        vim.cmd("bwipeout!")
      end
    end,
  },
  {
    "setup() validates its options and names the bad key; the active options stay as they were",
    function()
      local config = require("bb7.config")
      config.setup({ bin = "/x/bb7", ui = { width = 0.5 }, keymaps = { files = { reject = false, apply = "<leader>a" } } })
      t.eq(0.5, config.options.ui.width)
      for _, case in ipairs({
        { { ui = { widht = 0.5 } }, "unknown option ui.widht" },
        { { timeout = "10" }, "timeout must be a number, got string" },
        { { keymaps = { files = { apply = true } } }, "keymaps.files.apply must be a key (a string) or false" },
        { { keymaps = { nope = {} } }, "unknown option keymaps.nope" },
        { { root = 3 }, "root must be a string or function, got number" },
        { { ui = "big" }, "ui must be a table, got string" },
      }) do
        local ok, err = pcall(config.setup, case[1])
        t.ok(not ok and tostring(err):find(case[2], 1, true), vim.inspect(case[1]) .. " -> " .. tostring(err))
        t.ok(tostring(err):find("bb7.setup: ", 1, true), tostring(err))
      end
      t.eq(0.5, config.options.ui.width, "a rejected setup() changed nothing")
      t.eq(false, config.options.keymaps.files.reject)
      config.setup({ root = function() return "/tmp" end })
      t.eq("/tmp", config.root())
      config.setup({})
    end,
  },
  {
    "highlights: defined as defaults when the UI is built, and again after a colour scheme",
    function()
      local ui = require("bb7.ui")
      ui.setup_buffers()
      t.eq("Title", vim.api.nvim_get_hl(0, { name = "BB7User" }).link)
      vim.cmd("highlight clear")
      vim.cmd.colorscheme("default")
      t.eq("Title", vim.api.nvim_get_hl(0, { name = "BB7User" }).link, "after :colorscheme")
      vim.api.nvim_set_hl(0, "BB7User", { fg = "#ff0000" })
      vim.cmd.colorscheme("default")
      t.eq("Title", vim.api.nvim_get_hl(0, { name = "BB7User" }).link, "re-linked after the next one")
      t.eq(require("bb7.version").plugin, require("bb7.commands").plugin_version, "one version constant")
      local want = require("bb7.host").required_version
      t.eq(want .. ".", require("bb7.version").plugin:sub(1, #want + 1), "the host series is the plugin's major.minor")
    end,
  },
  {
    "modules: no require cycle (lazy requires included); the session and agent never require the UI",
    function()
      local graph = require_graph()
      t.ok(graph["bb7.session"] and graph["bb7.session.state"] and graph["bb7.agent"], "modules found")
      -- Depth-first search; a module met again while it is on the path closes a cycle.
      local state, path, cycles = {}, {}, {}
      local function visit(name)
        if state[name] == "done" or not graph[name] then
          return
        end
        if state[name] == "open" then
          local from = 1
          for i, n in ipairs(path) do
            if n == name then
              from = i
            end
          end
          cycles[#cycles + 1] = table.concat(vim.list_slice(path, from), " → ") .. " → " .. name
          return
        end
        state[name] = "open"
        path[#path + 1] = name
        local deps = vim.tbl_keys(graph[name])
        table.sort(deps)
        for _, d in ipairs(deps) do
          visit(d)
        end
        path[#path] = nil
        state[name] = "done"
      end
      local names = vim.tbl_keys(graph)
      table.sort(names)
      for _, n in ipairs(names) do
        visit(n)
      end
      t.eq({}, cycles, "require cycles")
      for name, deps in pairs(graph) do
        if name:match("^bb7%.session") or name == "bb7.agent" then
          for d in pairs(deps) do
            t.ok(not (d == "bb7.ui" or d:match("^bb7%.ui%.")), name .. " requires the UI (" .. d .. ")")
          end
        end
        if name:match("^bb7%.session%.") then
          t.ok(not deps["bb7.session"], name .. " requires the facade that requires it")
        end
      end
    end,
  },
  {
    "modules: the UI and agent mode reach the host only through the session",
    function()
      local graph, mods = require_graph()
      for name, deps in pairs(graph) do
        if name == "bb7.ui" or name:match("^bb7%.ui%.") or name == "bb7.agent" then
          t.ok(not deps["bb7.host"], name .. " requires bb7.host")
          local text = t.read(mods[name])
          t.ok(not text:find("host%.call%(") and not text:find("host%.request%("), name .. " calls the host")
        end
      end
    end,
  },
  {
    "modules: loading every one never requires a module still loading; the session facade is one table",
    function()
      local names = vim.tbl_keys(modules())
      table.sort(names)
      for _, n in ipairs(names) do
        package.loaded[n] = nil
      end
      local real = require
      local loading, stack, loops = {}, {}, {}
      _G.require = function(name)
        if loading[name] then
          loops[#loops + 1] = table.concat(stack, " → ") .. " → " .. name
        end
        if package.loaded[name] ~= nil then
          return real(name)
        end
        loading[name] = true
        stack[#stack + 1] = name
        local ok, mod = pcall(real, name)
        loading[name] = nil
        stack[#stack] = nil
        if not ok then
          error(mod, 0)
        end
        return mod
      end
      local ok, err = pcall(function()
        for _, n in ipairs(names) do
          require(n)
        end
      end)
      _G.require = real
      t.ok(ok, tostring(err))
      t.eq({}, loops, "modules required while they were loading")
      -- One table: state written through the facade is what every part reads, and each part's
      -- operations are the facade's.
      local session, state = require("bb7.session"), require("bb7.session.state")
      t.ok(session == state, "the facade is the state table")
      for _, n in ipairs(names) do
        if n:match("^bb7%.session%.") and n ~= "bb7.session.state" then
          for k, v in pairs(require(n)) do
            t.ok(session[k] == v, ("bb7.session.%s is %s's"):format(k, n))
          end
        end
      end
    end,
  },
  {
    "keymaps: no window maps a key of its own: every mapping takes its key from config.keymaps",
    function()
      for name, file in pairs(modules()) do
        local n = 0
        for line in io.lines(file) do
          n = n + 1
          local literal = line:match("vim%.keymap%.set%(%s*[^,]-,%s*([\"'][^\"']*[\"'])")
          t.ok(not literal, ("%s:%d maps the literal key %s"):format(name, n, tostring(literal)))
          local api = line:find("nvim_buf_set_keymap", 1, true) or line:find("nvim_set_keymap", 1, true)
          t.ok(not api, ("%s:%d maps a key through the API"):format(name, n))
        end
      end
    end,
  },
  {
    "model picker: remapped and disabled keys (config.keymaps.models), named in its title",
    function()
      local config = require("bb7.config")
      config.setup({
        env = { BB7_HOME = t.tmpdir("state") },
        keymaps = { models = { favorite = "F", filter = false, close_alt = false } },
      })
      local session = require("bb7.session")
      local win, buf = require("bb7.ui.models").show({ { id = "a/one" }, { id = "b/two" } })
      local lhs = {}
      for _, m in ipairs(vim.api.nvim_buf_get_keymap(buf, "n")) do
        lhs[m.lhs] = m.desc
      end
      t.ok(lhs["F"], "remapped favourite key")
      t.eq(nil, lhs["f"], "the default favourite key is free")
      t.eq(nil, lhs["/"], "filter disabled")
      t.eq(nil, lhs["<Esc>"], "close_alt disabled")
      t.ok(lhs["q"] and lhs["<CR>"] and lhs["e"], "defaults kept")
      local title = table.concat(vim.tbl_map(function(c)
        return c[1]
      end, vim.api.nvim_win_get_config(win).title))
      t.eq(" Model — <CR> pick · F favourite · e reasoning effort · q close ", title, "title")
      vim.api.nvim_win_set_cursor(win, { 2, 0 })
      local id = vim.api.nvim_buf_get_lines(buf, 1, 2, false)[1]:match("^..%s*(%S+)")
      vim.api.nvim_feedkeys("F", "x", false)
      t.eq({ id }, session.favorites(), "F toggled the favourite")
      vim.api.nvim_feedkeys("f", "x", false)
      t.eq({ id }, session.favorites(), "f does nothing now")
      vim.api.nvim_feedkeys("q", "x", false)
      t.ok(not vim.api.nvim_win_is_valid(win), "q closed the picker")
      config.setup({})
    end,
  },
  {
    "help window: its close keys come from config.keymaps.help (and the all.help key)",
    function()
      require("bb7.config").setup({ keymaps = { help = { close = "x", close_alt2 = false } } })
      local km = require("bb7.ui.keymaps")
      local lines = km.help_lines("files")
      t.eq("Press x or <Esc> to close. See :help bb7-keymaps", lines[#lines], "hint")
      local win = km.show_help("files")
      local lhs = {}
      for _, m in ipairs(vim.api.nvim_buf_get_keymap(vim.api.nvim_win_get_buf(win), "n")) do
        lhs[m.lhs] = true
      end
      t.ok(lhs["x"] and lhs["<Esc>"] and lhs["g?"], vim.inspect(lhs))
      t.ok(not lhs["q"] and not lhs["?"], vim.inspect(lhs))
      vim.api.nvim_feedkeys("x", "x", false)
      t.ok(not vim.api.nvim_win_is_valid(win), "x closed it")
      require("bb7.config").setup({})
    end,
  },
}
