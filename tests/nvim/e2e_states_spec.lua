-- End to end, real host: the state machine of SPEC.md and its exact notifications, context
-- commands without the UI, sections, the Files pane statuses, chats pane operations.
local t = require("helpers")
local W, I = vim.log.levels.WARN, vim.log.levels.INFO
local env

--- Every case runs in its own Neovim and starts from one of these states (SPEC.md's state table):
--- 0 not initialized (a project with src/a.txt open), 1 initialized, 2 a chat active, 3 and
--- src/a.txt plus its section 2-3 in context.
local function given(level)
  env = t.env()
  t.write(env.project .. "/src/a.txt", "one\ntwo\nthree\nfour\n")
  t.cmd("edit src/a.txt")
  if level >= 1 then
    t.cmd("BB7Init")
  end
  if level >= 2 then
    t.cmd("BB7NewChat")
  end
  if level >= 3 then
    t.cmd("BB7Add")
    t.cmd("2,3BB7Add")
  end
  t.clear_notes()
end

return {
  {
    "not initialized: :BB7, :BB7Add, :BB7AddReadonly, :BB7Remove warn",
    function()
      given(0)
      t.cmd("BB7")
      t.note("BB-7: Not initialized. Run :BB7Init", W)
      t.ok(not require("bb7.ui").is_open(), "UI stays closed")
      for _, c in ipairs({ "BB7Add", "BB7AddReadonly", "BB7Remove" }) do
        t.clear_notes()
        t.cmd(c)
        t.note("BB-7: Not initialized. Run :BB7Init", W)
      end
      t.eq(0, vim.fn.isdirectory(env.project .. "/.bb7"), ".bb7 not created")
    end,
  },
  {
    ":BB7Init creates .bb7, a second :BB7Init says already initialized",
    function()
      given(0)
      t.cmd("BB7Init")
      t.note("BB-7: Initialized in " .. env.project, I)
      t.eq(1, vim.fn.isdirectory(env.project .. "/.bb7"), ".bb7 created")
      t.clear_notes()
      t.cmd("BB7Init")
      t.note("BB-7: Already initialized", I)
    end,
  },
  {
    "no chats: context commands say No active chat; :BB7 opens the empty state",
    function()
      given(1)
      for _, c in ipairs({ "BB7Add", "BB7AddReadonly", "BB7Remove" }) do
        t.clear_notes()
        t.cmd(c)
        t.note("BB-7: No active chat", W)
      end
      t.cmd("BB7")
      local ui = require("bb7.ui")
      t.ok(ui.is_open(), "UI open")
      t.eq("chats", ui.current_pane(), "focus on the chat list")
      t.ok(t.buf_text(ui.bufs.preview):find("No chats yet", 1, true), "empty-state text")
      t.cmd("BB7")
      t.ok(not ui.is_open(), ":BB7 toggles closed")
    end,
  },
  {
    "chat active: :BB7NewChat, :BB7Add file and section, duplicates, :BB7Remove",
    function()
      given(1)
      t.cmd("BB7NewChat")
      t.ok(require("bb7.session").chat, "a chat is active")
      t.clear_notes()
      t.cmd("BB7Add")
      t.note("BB-7: Added src/a.txt", I)
      t.clear_notes()
      t.cmd("BB7Add")
      t.note("BB-7: File already in context", W)
      t.clear_notes()
      t.cmd("2,3BB7Add")
      t.note("BB-7: Added src/a.txt:2-3", I)
      t.clear_notes()
      t.cmd("BB7Add src/a.txt:2:3")
      t.note("BB-7: File already in context", W)
      t.write(env.project .. "/b.txt", "bee\n")
      t.clear_notes()
      t.cmd("BB7AddReadonly b.txt")
      t.note("BB-7: Added b.txt", I)
      t.clear_notes()
      t.cmd("BB7Add nope.txt")
      t.note("BB-7: Cannot read file nope.txt", vim.log.levels.ERROR)
      local r = require("bb7.host").call("context_list", {})
      local seen = {}
      for _, f in ipairs(r.files) do
        seen[#seen + 1] = f.path .. (f.start_line and (":" .. f.start_line .. ":" .. f.end_line) or "") .. (f.readonly and " ro" or "")
      end
      table.sort(seen)
      t.eq({ "b.txt ro", "src/a.txt", "src/a.txt:2:3 ro" }, seen, "context")
      -- A file outside the project is added by absolute path, always read-only.
      local outside = t.tmpdir("outside") .. "/ref.txt"
      t.write(outside, "reference\n")
      t.clear_notes()
      t.cmd("BB7Add " .. outside)
      t.note("BB-7: Added " .. outside, I)
      require("bb7.session").refresh_files()
      local st = require("bb7.session").status_of(outside)
      t.ok(st and st.external and st.readonly, "external and read-only")
      t.cmd("BB7Remove " .. outside)
      t.note("BB-7: Removed " .. outside, I)
      t.clear_notes()
      t.cmd("BB7Remove b.txt")
      t.note("BB-7: Removed b.txt", I)
      t.clear_notes()
      t.cmd("BB7Remove b.txt")
      t.note("BB-7: File not in context", W)
    end,
  },
  {
    "Files pane shows S, blank, ~ for a modified buffer, R after toggling read-only",
    function()
      given(3)
      local ui = require("bb7.ui")
      t.cmd("BB7")
      local files = require("bb7.ui.files")
      local function statuses()
        local out = {}
        for _, e in ipairs(files.entries()) do
          out[(e.file.path .. (e.file.start_line and ":s" or ""))] = e.status
        end
        return out
      end
      t.eq({ ["src/a.txt"] = "", ["src/a.txt:s"] = "S" }, statuses(), "initial statuses")
      -- Modify the buffer without saving: `~` comes from the buffer.
      local buf = vim.fn.bufnr(env.project .. "/src/a.txt")
      vim.api.nvim_buf_set_lines(buf, 0, 1, false, { "ONE" })
      vim.api.nvim_exec_autocmds("TextChanged", { buffer = buf })
      t.eq("~", statuses()["src/a.txt"], "buffer differs from the snapshot")
      t.ok(t.buf_text(ui.bufs.files):find("~   src/a.txt", 1, true) ~= nil, "rendered: " .. t.buf_text(ui.bufs.files))
      -- Update the snapshot from the buffer: in sync again.
      t.clear_notes()
      require("bb7.session").update("src/a.txt")
      t.note("BB-7: Updated src/a.txt", I)
      t.eq("", statuses()["src/a.txt"], "synced")
      vim.api.nvim_buf_call(buf, function()
        vim.cmd("silent write")
      end)
      require("bb7.session").set_readonly("src/a.txt", true)
      t.eq("R", statuses()["src/a.txt"], "read-only")
      require("bb7.session").set_readonly("src/a.txt", false)
      ui.close()
    end,
  },
  {
    "chats pane: second chat, rename, pin, search, select, delete; none active shows the picker",
    function()
      given(2)
      local session = require("bb7.session")
      local first = session.chat.id
      session.rename_chat(first, "physics refactor")
      t.cmd("BB7NewChat")
      local second = session.chat.id
      t.ok(first ~= second, "new chat")
      session.toggle_pin(first)
      local chats = session.list_chats()
      t.eq(first, chats[1].id, "pinned first")
      local pins = vim.json.decode(t.read(env.project .. "/.bb7/pinned_chats.json"))
      t.eq({ first }, pins.chats, "pins file")
      -- Search from the command.
      t.cmd("BB7Search physics")
      local cbuf = require("bb7.ui").bufs.chats
      t.ok(t.buf_text(cbuf):find("physics refactor", 1, true), "search result listed")
      t.ok(not t.buf_text(cbuf):find(second, 1, true), "non-matching chat hidden")
      require("bb7.ui").close()
      t.ok(session.select_chat(first), "select")
      t.eq(first, session.chat.id, "selected")
      t.ok(session.delete_chat(first), "delete the active chat")
      t.eq(nil, session.chat, "no chat active")
      t.clear_notes()
      t.cmd("BB7Add")
      t.note("BB-7: No active chat", W)
      -- Chats exist, none active: :BB7 opens on the chat list.
      t.cmd("BB7")
      t.eq("chats", require("bb7.ui").current_pane(), "picker")
      t.ok(t.buf_text(cbuf):find(session.chats[1].name, 1, true), "chat listed")
      require("bb7.ui").close()
      session.select_chat(second)
    end,
  },
  {
    "chats pane keys: n new, r rename, p pin, c fork, / search, <Esc> clear, d delete, <CR> select",
    function()
      given(2)
      local session, ui = require("bb7.session"), require("bb7.ui")
      local orig_input, orig_select = vim.ui.input, vim.ui.select
      local answer
      vim.ui.input = function(_, cb)
        cb(answer)
      end
      vim.ui.select = function(items, _, cb)
        cb(answer, answer and vim.fn.index(items, answer) + 1)
      end
      local function press(keys)
        vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(keys, true, false, true), "x", false)
      end
      local function row_of(text)
        for i, l in ipairs(vim.api.nvim_buf_get_lines(ui.bufs.chats, 0, -1, false)) do
          if l:find(text, 1, true) then
            return i
          end
        end
      end
      local ok, err = pcall(function()
        t.cmd("BB7")
        ui.focus("chats")
        local before = #session.list_chats()
        press("n")
        t.eq(before + 1, #session.chats, "n: new chat")
        t.eq("input", ui.current_pane(), "focus moves to the input")
        local id = session.chat.id
        ui.focus("chats")
        vim.api.nvim_win_set_cursor(ui.wins.chats, { row_of("▶"), 0 }) -- the active (new) chat
        answer = "keyed chat"
        press("r")
        t.eq("keyed chat", session.chat.name, "r: renamed")
        vim.api.nvim_win_set_cursor(ui.wins.chats, { row_of("keyed chat"), 0 })
        press("p")
        t.ok(vim.tbl_contains(session.pinned(), id), "p: pinned")
        t.ok(vim.api.nvim_buf_get_lines(ui.bufs.chats, 0, 1, false)[1]:find("★ keyed chat", 1, true), "pinned on top")
        vim.api.nvim_win_set_cursor(ui.wins.chats, { row_of("keyed chat"), 0 })
        press("p")
        t.ok(not vim.tbl_contains(session.pinned(), id), "p again: unpinned")
        ui.focus("chats")
        vim.api.nvim_win_set_cursor(ui.wins.chats, { row_of("keyed chat"), 0 })
        press("c")
        t.ok(session.chat.id ~= id, "c: forked into a new chat")
        ui.focus("chats")
        answer = "keyed"
        press("/")
        t.ok(t.buf_text(ui.bufs.chats):find("Search: keyed", 1, true), "/: search")
        press("<Esc>")
        t.ok(not t.buf_text(ui.bufs.chats):find("Search:", 1, true), "<Esc>: cleared")
        vim.api.nvim_win_set_cursor(ui.wins.chats, { row_of("keyed chat"), 0 })
        press("<CR>")
        t.eq(id, session.chat.id, "<CR>: selected")
        ui.focus("chats")
        vim.api.nvim_win_set_cursor(ui.wins.chats, { row_of("keyed chat"), 0 })
        answer = "Yes"
        press("d")
        t.eq(nil, row_of("keyed chat"), "d: deleted")
        t.eq(nil, session.chat, "the active chat was deleted")
        ui.close()
      end)
      vim.ui.input, vim.ui.select = orig_input, orig_select
      assert(ok, err)
      -- Leave a chat active for the next tests.
      session.select_chat(session.list_chats()[1].id)
    end,
  },
  {
    "draft is saved per chat and restored",
    function()
      given(2)
      local session = require("bb7.session")
      local ui = require("bb7.ui")
      t.cmd("BB7")
      local input = require("bb7.ui.input")
      vim.api.nvim_buf_set_lines(input.buf(), 0, -1, false, { "half-written", "message" })
      ui.close() -- saves the draft
      local a = session.chat.id
      t.cmd("BB7NewChat")
      t.cmd("BB7")
      t.eq("", t.buf_text(input.buf()), "new chat has an empty draft")
      ui.close()
      session.select_chat(a)
      t.cmd("BB7")
      t.eq("half-written\nmessage", t.buf_text(input.buf()), "draft restored")
      ui.close()
      local r = require("bb7.host").call("chat_get", {})
      t.eq("half-written\nmessage", r.draft, "draft persisted in the host")
    end,
  },
  {
    ":BB7Version, :BB7EditInstructions, :BB7Restart, help lists keymaps, no global maps",
    function()
      given(2)
      t.clear_notes()
      t.cmd("BB7Version")
      local n = t.notes[#t.notes]
      t.ok(n.msg:match("^BB%-7: plugin %S+, host 0%.%d+%.%d+"), "version message: " .. n.msg)
      t.cmd("BB7EditInstructions")
      t.eq(env.project .. "/.bb7/instructions", vim.api.nvim_buf_get_name(0), "instructions opened")
      t.cmd("BB7Restart")
      t.note("BB-7: Restarted host " .. require("bb7.host").version, I)
      t.ok(require("bb7.session").chat, "chat re-opened after restart")
      t.cmd("BB7")
      local km = require("bb7.ui.keymaps")
      local help = table.concat(km.help_lines("files"), "\n")
      t.ok(help:find("apply the output", 1, true), "help lists files keys")
      require("bb7.ui").close()
      for _, m in ipairs(vim.api.nvim_get_keymap("n")) do
        t.ok(not (m.desc or ""):find("^BB%-7"), "global keymap " .. m.lhs)
      end
      t.no_errors()
    end,
  },
  {
    ":checkhealth bb7: binary, version, handshake, config and key (never printed), components",
    function()
      given(1)
      local cfg = env.home .. "/.config/bb7/config.json"
      local saved = t.read(cfg)
      t.write(cfg, vim.json.encode({ api_key = "sk-secret-XYZ123", base_url = "http://127.0.0.1:9/api/v1" }))
      t.cmd("checkhealth bb7")
      local text = t.buf_text(0)
      t.write(cfg, saved)
      t.ok(not text:find("sk-secret-XYZ123", 1, true), "API key never printed")
      for _, want in ipairs({
        "OK Neovim",
        "OK found " .. t.bin(),
        "OK version 0.1",
        "OK handshake ok",
        "OK API key is set (not shown)",
        "built-in tools embedded and compiled into the binary",
        "OK compiler for third-party components and hooks: ",
      }) do
        t.ok(text:find(want, 1, true), want .. " in:\n" .. text)
      end
      t.ok(not text:find("ERROR", 1, true), "no errors:\n" .. text)
      vim.cmd("bwipe")
    end,
  },
  {
    "host errors become BB-7 notifications, never tracebacks (model list and send against a dead endpoint)",
    function()
      given(2)
      local session = require("bb7.session")
      t.clear_notes()
      t.cmd("BB7Model")
      t.wait(function()
        return #t.notes > 0
      end, 15000, "models error")
      t.eq(vim.log.levels.ERROR, t.notes[1].level, "error level")
      t.ok(t.notes[1].msg:find("^BB%-7: Failed to load models: "), t.notes[1].msg)
      t.expect_error("BB-7: Failed to load models: ")
      t.clear_notes()
      t.ok(session.send("hello"), "send started")
      t.wait(function()
        return session.stream == nil
      end, 30000, "send ended")
      local found
      for _, n in ipairs(t.notes) do
        t.ok(not n.msg:find("traceback", 1, true) and not n.msg:find("internal error", 1, true), n.msg)
        if n.msg:find("^BB%-7: Failed to send: ") and n.level == vim.log.levels.ERROR then
          found, n.expected = true, true
        end
      end
      t.ok(found, vim.inspect(t.notes))
    end,
  },
  {
    "the host exiting is reported; :BB7Restart brings it back",
    function()
      given(2)
      local host = require("bb7.host")
      t.clear_notes()
      -- Kill the process from outside, as a crash would.
      local pid = vim.fn.jobpid(host._job())
      vim.uv.kill(pid, "sigkill")
      t.wait(function()
        return not host.running()
      end, 5000, "exit noticed")
      t.wait(function()
        for _, n in ipairs(t.notes) do
          if n.msg:find("^BB%-7: host exited with code") then
            return true
          end
        end
      end, 2000, "exit notification")
      t.cmd("BB7Restart")
      t.ok(host.running(), "running again")
      t.clear_notes()
      t.write(env.project .. "/b.txt", "bee\n")
      t.cmd("BB7Add b.txt")
      t.note("BB-7: Added b.txt", vim.log.levels.INFO)
    end,
  },
  {
    "the host is shut down when Neovim exits (VimLeavePre)",
    function()
      given(1)
      local host = require("bb7.host")
      t.ok(host.running(), "running")
      local pid = vim.fn.jobpid(host._job())
      vim.api.nvim_exec_autocmds("VimLeavePre", {})
      t.ok(not host.running(), "stopped")
      t.wait(function()
        return vim.uv.kill(pid, 0) ~= 0
      end, 3000, "process gone")
    end,
  },
  {
    "a FIFO at a chat's lock: selecting it names the problem and offers force-unlock",
    function()
      given(2)
      local session = require("bb7.session")
      local a = session.chat.id
      t.cmd("BB7NewChat")
      t.ok(session.chat.id ~= a, "another chat is active")
      local lock = env.project .. "/.bb7/chats/" .. a .. "/lock"
      os.remove(lock)
      vim.fn.system({ "mkfifo", lock })
      t.eq(0, vim.v.shell_error, "mkfifo")
      local asked
      local orig = vim.ui.select
      vim.ui.select = function(_, opts, cb)
        asked = opts.prompt
        cb("Yes")
      end
      t.clear_notes()
      local ok_, err = pcall(session.select_chat, a)
      vim.ui.select = orig
      t.ok(ok_, tostring(err))
      t.expect_error("not a regular file")
      t.ok(asked and asked:find("Force-unlock", 1, true), "force-unlock offered")
      t.eq(a, session.chat.id, "the chat is open after force-unlock")
    end,
  },
}
