-- End to end, real host: the regressions of issue 16 (the plugin tried as a first-time user and as an
-- attacker). Every case builds its own project in its own Neovim (see run.lua).
local t = require("helpers")
local I, W, E = vim.log.levels.INFO, vim.log.levels.WARN, vim.log.levels.ERROR

local function text_reply(text, extra)
  local stream = { { content = text } }
  vim.list_extend(stream, extra or {})
  vim.list_extend(stream, {
    { finish = "stop" },
    { usage = { prompt_tokens = 100, completion_tokens = 10, cost = 0.0002 } },
    "done",
  })
  return { stream = stream }
end

local function slow_reply(n)
  local stream = {}
  for i = 1, n or 200 do
    stream[#stream + 1] = { content = "slow" .. i .. " " }
    stream[#stream + 1] = { delay_ms = 100 }
  end
  stream[#stream + 1] = { finish = "stop" }
  stream[#stream + 1] = "done"
  return { stream = stream }
end

local function write_reply(path, content)
  return {
    stream = {
      { content = "Writing it." },
      {
        tool_call = {
          index = 0,
          id = "call_w",
          name = "write_file",
          arguments = vim.json.encode({ path = path, content = content }),
        },
      },
      { finish = "tool_calls" },
      { usage = { prompt_tokens = 50, completion_tokens = 5, cost = 0.0001 } },
      "done",
    },
  }
end

--- A project with `.bb7/` and one active chat (the UI closed).
local function project(opts)
  local env = t.env(opts)
  t.cmd("BB7Init")
  t.cmd("BB7NewChat")
  t.clear_notes()
  return env, require("bb7.session"), require("bb7.ui")
end

--- Floating windows open now.
local function floats()
  local n = 0
  for _, w in ipairs(vim.api.nvim_list_wins()) do
    if vim.api.nvim_win_get_config(w).relative ~= "" then
      n = n + 1
    end
  end
  return n
end

--- Sends `text` from the input pane and waits until the reply settled.
local function send(session, text)
  t.ok(session.send(text), "send started")
  t.wait(function()
    return session.stream == nil
  end, 15000, "reply settled")
end

--- Stubs vim.ui.select for one call: records the prompt, answers `answer`.
local function answer_select(answer)
  local seen = {}
  local orig = vim.ui.select
  vim.ui.select = function(items, o, cb)
    vim.ui.select = orig
    seen.prompt, seen.items = o.prompt, items
    cb(answer)
  end
  return seen
end

return {
  {
    "bug 1: leaving the UI for a new tab page (:checkhealth bb7, :tabnew) closes it later, safely",
    function()
      local _, _, ui = project()
      for _, key in ipairs({ "gc", "gp", "gi" }) do
        t.cmd("BB7")
        vim.api.nvim_feedkeys(key, "x", false)
        t.ok(ui.current_pane() ~= nil, "focus in a pane after " .. key)
        local tabs = #vim.api.nvim_list_tabpages()
        t.cmd("checkhealth bb7")
        t.eq(tabs + 1, #vim.api.nvim_list_tabpages(), "health opened in a tab")
        t.ok(t.buf_text(0):find("handshake ok", 1, true), "the health report is complete")
        -- Whatever the tab change scheduled (a deferred close of the panes) has run once a
        -- callback scheduled after it has.
        local flushed = false
        vim.schedule(function()
          flushed = true
        end)
        t.wait(function()
          return flushed
        end, 2000, "the callbacks scheduled by the tab change ran")
        t.ok(not ui.is_open(), "UI not open in the health tab page")
        vim.cmd("redraw") -- draws the tabline of every tab page: the crash was here
        t.cmd("tabclose")
        vim.cmd("redraw")
        -- Back in the first tab page: the current window is valid, the layout closes now.
        t.ok(vim.api.nvim_win_is_valid(vim.api.nvim_get_current_win()), "valid current window")
        t.wait(function()
          return floats() == 0
        end, 2000, "the layout closed")
        t.eq("", vim.api.nvim_win_get_config(0).relative, "back in a normal window")
        vim.cmd("redraw")
      end
      -- The other way into a new tab page, and :BB7 there while the first one still has the layout.
      t.cmd("BB7")
      t.cmd("tabnew")
      vim.cmd("redraw")
      t.cmd("BB7")
      t.ok(ui.is_open(), "opens in the new tab page")
      t.eq(4, floats() - 4, "the old tab page's panes wait to be closed there")
      t.cmd("BB7")
      t.cmd("tabclose")
      vim.cmd("redraw")
      t.wait(function()
        return floats() == 0
      end, 2000, "closed after returning")
      t.ok(vim.api.nvim_win_is_valid(vim.api.nvim_get_current_win()), "valid current window")
      t.cmd("BB7")
      t.ok(ui.is_open(), ":BB7 opens it again")
    end,
  },
  {
    "bug 2: a chat name with a newline and an escape is shown escaped in one line; :BB7 opens fully",
    function()
      local env, session, ui = project()
      session.rename_chat(session.chat.id, "Evil")
      local id = session.chat.id
      require("bb7.host").stop()
      -- What an old version or a hostile hand left on disk: a name with control characters.
      for _, f in ipairs({ env.project .. "/.bb7/chats/" .. id .. "/chat.json", env.project .. "/.bb7/chats/index.json" }) do
        local s = t.read(f)
        if s then
          local n
          s, n = s:gsub('"Evil"', '"Evil\\nsecond line\\u001b[2J"')
          if f:find("chat.json", 1, true) then
            t.ok(n > 0, "name replaced in " .. f)
          end
          t.write(f, s)
        end
      end
      t.cmd("BB7")
      t.ok(ui.is_open(), "UI open")
      t.wait(function()
        return t.buf_text(ui.bufs.chats):find("Evil\\nsecond line\\x1b[2J", 1, true)
      end, 3000, "escaped name in the chat list")
      local title = vim.api.nvim_win_get_config(ui.wins.preview).title[1][1]
      t.ok(title:find("Evil\\nsecond line\\x1b[2J", 1, true), "escaped name in the title: " .. title)
      t.eq("input", ui.current_pane(), "keymaps reachable: focus in the input")
      t.ok(vim.fn.maparg("q", "n", false, true).buffer == 1, "the pane keymaps are set")
    end,
  },
  {
    "bug 2: the host refuses control characters in chat names (rename and new)",
    function()
      local _, session = project()
      t.ok(not session.rename_chat(session.chat.id, "two\nlines"), "rename refused")
      t.expect_error("BB-7: Failed to rename chat: Invalid chat name: it contains the control character '\\n'")
      local r = require("bb7.host").call("chat_new", { name = "bell\7" })
      t.eq("error", r.type, "chat_new refused")
      t.ok(r.message:find("control character", 1, true), r.message)
    end,
  },
  {
    "bug 2: a model write_file to a path with a newline is refused; the UI still opens",
    function()
      local env, session, ui = project({
        script = { replies = { write_reply("evil\nname.txt", "x\n"), text_reply("Title"), text_reply("ok") } },
      })
      send(session, "write it")
      t.eq(nil, vim.uv.fs_stat(env.project .. "/evil\nname.txt"), "nothing written")
      session.refresh_files()
      for _, f in ipairs(session.statuses) do
        t.ok(not f.path:find("\n", 1, true), "no output with a newline: " .. f.path)
      end
      t.cmd("BB7")
      t.ok(ui.is_open(), "UI open")
    end,
  },
  {
    "bug 2: a failure while the UI is being built leaves nothing half-open",
    function()
      local _, _, ui = project()
      local before = floats()
      ui._fail_open = "boom"
      t.cmd("BB7")
      ui._fail_open = nil
      t.expect_error("BB-7: Failed to open the UI:")
      t.eq(before, floats(), "no pane left open")
      t.ok(not ui.is_open(), "closed")
      t.eq(nil, vim.b.bb7_pane, "the cursor is back in the user's window")
      t.cmd("BB7")
      t.ok(ui.is_open(), "opens on the next try")
      t.cmd("BB7")
      -- A failure while the panes' buffers and keymaps are set up: next time they are built anew.
      local fresh = vim.fn.bufnr("bb7://chats")
      ui.ready = false
      ui._fail_setup = "boom in setup"
      t.cmd("BB7")
      ui._fail_setup = nil
      t.expect_error("BB-7: Failed to open the UI:")
      t.eq(before, floats(), "nothing left open")
      t.cmd("BB7")
      t.ok(ui.is_open(), "built anew")
      t.ok(ui.bufs.chats ~= fresh, "new pane buffers")
      ui.focus("chats")
      t.ok(vim.fn.maparg("q", "n", false, true).buffer == 1, "keymaps in place")
    end,
  },
  {
    "bug 2: paths and names render in one line (unit): render, file_line, oneline",
    function()
      local util, render = require("bb7.util"), require("bb7.ui.render")
      t.eq("a\\nb\\tc\\x1b[0m\\x00", util.oneline("a\nb\tc\27[0m\0"), "escapes")
      t.eq("plain", util.oneline("plain"), "unchanged")
      local r = render.chat({
        messages = {
          { role = "user", model = "m\nx", parts = { { type = "text", content = "hi" } } },
          {
            role = "assistant",
            parts = {
              { type = "file", path = "a\nb.txt" },
              { type = "context_event", action = "AssistantWriteFile", path = "c\nd" },
            },
            output_files = { "e\nf" },
          },
        },
      })
      for _, l in ipairs(r.lines) do
        t.ok(not l:find("\n", 1, true), "one line: " .. l)
      end
      t.ok(table.concat(r.lines, "|"):find("a\\nb.txt", 1, true), "escaped path shown")
      t.ok(not render.file_line({ path = "x\ny" }, "M"):find("\n", 1, true), "file line")
    end,
  },
  {
    "bug 4 (unit): unsafe_local names links, .git/, .bb7/ and escapes; plain and new paths are fine",
    function()
      local util = require("bb7.util")
      local root = t.tmpdir("root")
      local outside = t.tmpdir("outside")
      vim.fn.mkdir(root .. "/real/dir", "p")
      vim.uv.fs_symlink(outside, root .. "/link")
      vim.uv.fs_symlink(outside .. "/f.txt", root .. "/real/filelink")
      t.eq({ path = "a.txt", start_line = 2, end_line = 3 }, util.parse_target("a.txt:2-3"), "path:2-3 as shown")
      t.eq({ path = "a.txt", start_line = 2, end_line = 3 }, util.parse_target("a.txt:2:3"), "path:2:3")
      t.eq(nil, util.unsafe_local(root, "real/dir/x.txt"), "plain")
      t.eq(nil, util.unsafe_local(root, "new/dir/x.txt"), "new folders")
      t.eq("it goes through the symbolic link link", util.unsafe_local(root, "link/x.txt"), "dir link")
      t.eq("it goes through the symbolic link real/filelink", util.unsafe_local(root, "real/filelink"), "file link")
      t.eq("it is inside .git/", util.unsafe_local(root, ".git/hooks/pre-commit"), ".git")
      t.eq("it is inside .bb7/", util.unsafe_local(root, ".bb7/instructions"), ".bb7")
      t.eq("it is inside .git/", util.unsafe_local(root, "vendor/lib/.git/config"), "a nested .git")
      t.eq("it is inside .GIT/", util.unsafe_local(root, "real/.GIT/hooks/x"), "any case")
      t.eq("it is outside the project", util.unsafe_local(root, "../x"), "..")
      t.eq("it is outside the project", util.unsafe_local(root, "/etc/passwd"), "absolute")
    end,
  },
  {
    "bug 3: :BB7Add refuses Latin-1, binary and huge files at once with a clear message",
    function()
      local env, session = project()
      t.write(env.project .. "/latin1.txt", "caf\233\n")
      t.write(env.project .. "/bin.dat", "ab\0cd")
      t.write(env.project .. "/big.log", ("x"):rep(1024 * 1024 + 1))
      local t0 = vim.uv.hrtime()
      t.cmd("BB7Add latin1.txt")
      t.note("BB-7: Cannot add latin1.txt: it is not UTF-8 text (invalid byte at offset 3)", E)
      t.cmd("BB7Add bin.dat")
      t.note("BB-7: Cannot add bin.dat: it is a binary file", E)
      t.cmd("BB7Add big.log")
      t.note("BB-7: Cannot add big.log: it is too large (1.0 MiB, the limit is 1.0 MiB)", E)
      local ms = (vim.uv.hrtime() - t0) / 1e6
      t.ok(ms < 3000, ("refused at once, not after a time-out (%.0f ms)"):format(ms))
      t.eq(0, #(require("bb7.host").call("context_list", {}).files or {}), "nothing added")
      -- A UTF-8 file is still fine.
      t.write(env.project .. "/ok.txt", "café\n")
      t.cmd("BB7Add ok.txt")
      t.note("BB-7: Added ok.txt", I)
      t.ok(session.chat, "chat still active")
    end,
  },
  {
    "bug 3: an error the host cannot attribute fails the waiting call at once, or is shown at once",
    function()
      project()
      local host = require("bb7.host")
      -- A line the host cannot read, then a call: the call fails now, not after the time-out.
      vim.fn.chansend(host._job(), "this is not json\n")
      local t0 = vim.uv.hrtime()
      local r = host.call("ping", {})
      local ms = (vim.uv.hrtime() - t0) / 1e6
      t.eq("error", r.type, "the waiting call failed")
      t.ok(r.message:find("the host could not read a request", 1, true), r.message)
      t.ok(ms < 3000, ("at once (%.0f ms)"):format(ms))
      t.eq(0, host._pending_count(), "nothing left pending")
      -- With nothing waiting, the user sees it at once.
      vim.fn.chansend(host._job(), "still not json\n")
      t.wait(function()
        for _, n in ipairs(t.notes) do
          if n.msg:find("the host could not read a request", 1, true) then
            return true
          end
        end
      end, 3000, "notification")
      t.expect_error("BB-7: the host could not read a request")
      t.eq("ok", host.call("ping", {}).type, "the host keeps serving")
      -- A request that is not UTF-8 never leaves the plugin.
      local bad = host.call("ping", { junk = "caf\233" })
      t.eq("error", bad.type, "refused")
      t.ok(bad.message:find("not UTF-8", 1, true), bad.message)
    end,
  },
  {
    "bug 4: :BB7DiffLocal and apply refuse a path through a symbolic link; Files says why",
    function()
      local outside = t.tmpdir("outside")
      local env, session, ui = project({
        script = { replies = { write_reply("link/x.txt", "pwned\n"), text_reply("Title") } },
      })
      send(session, "write through the link")
      -- The link appears after the model wrote (the host stored the output under its path).
      vim.uv.fs_symlink(outside, env.project .. "/link")
      session.refresh_files()
      local f = session.status_of("link/x.txt")
      t.ok(f and f.has_output, "output recorded")
      t.cmd("BB7DiffLocal link/x.txt")
      t.eq(1, #vim.api.nvim_list_tabpages(), "no diff tab opened")
      local refused = false
      for _, n in ipairs(t.notes) do
        if n.level == E and n.msg:find("link/x.txt", 1, true) and n.msg:find("symbolic link", 1, true) then
          refused, n.expected = true, true
        end
      end
      t.ok(refused, "refused with a clear error: " .. vim.inspect(t.notes))
      t.ok(not session.apply("link/x.txt"), "apply refused")
      t.note("BB-7: Cannot write file link/x.txt: it goes through the symbolic link link", E)
      t.eq(nil, vim.uv.fs_stat(outside .. "/x.txt"), "nothing written outside")
      t.cmd("BB7")
      t.ok(t.buf_text(ui.bufs.files):find("not writable: it goes through the symbolic link link", 1, true), t.buf_text(ui.bufs.files))
    end,
  },
  {
    ":BB7DiffLocal on a new file in a new folder creates the folder on :w",
    function()
      local env, session = project({
        script = { replies = { write_reply("new/dir/file.txt", "hello\n"), text_reply("Title") } },
      })
      send(session, "create it")
      t.cmd("BB7DiffLocal new/dir/file.txt")
      t.eq(2, #vim.api.nvim_list_tabpages(), "diff tab")
      t.cmd("diffupdate")
      t.cmd("diffget")
      t.eq({ "hello" }, vim.api.nvim_buf_get_lines(0, 0, -1, false), "taken: " .. vim.api.nvim_buf_get_name(0))
      t.cmd("write")
      t.eq("hello\n", t.read(env.project .. "/new/dir/file.txt"), "written, folder created")
      t.note("BB-7: Applied new/dir/file.txt", I)
    end,
  },
  {
    "bug 5: a chat's chosen model survives switching chats and a host restart",
    function()
      local _, session = project()
      local a = session.chat.id
      session.set_model("mock/model-a")
      t.cmd("BB7NewChat")
      session.set_model("mock/model-b")
      t.ok(session.select_chat(a), "back to A")
      t.eq("mock/model-a", session.current_model(), "A's model")
      t.ok(require("bb7.ui").status_text():find("mock/model-a", 1, true), "footer")
      t.cmd("BB7Restart")
      t.eq(a, session.chat and session.chat.id, "A active after restart")
      t.eq("mock/model-a", session.current_model(), "A's model after a restart")
    end,
  },
  {
    "bug 6: Vim's navigation keys stay Vim's; destructive keys ask first",
    function()
      local env, session, ui = project({
        script = { replies = { write_reply("out.txt", "x\n"), text_reply("Title") } },
      })
      send(session, "make out.txt")
      t.cmd("BB7")
      for _, pane in ipairs({ "chats", "files", "preview", "input" }) do
        ui.focus(pane)
        for _, key in ipairs({ "<C-e>", "<C-f>", "<C-b>", "<C-y>", "<C-d>", "<C-u>", "?", "n", "N" }) do
          local m = vim.fn.maparg(key, "n", false, true)
          if pane ~= "chats" or key ~= "n" then
            t.ok(m.buffer ~= 1, ("%s is not mapped in %s"):format(key, pane))
          end
        end
      end
      -- `x` in Files asks; "No" keeps the output.
      ui.focus("files")
      for i, l in ipairs(vim.api.nvim_buf_get_lines(ui.bufs.files, 0, -1, false)) do
        if l:find("out.txt", 1, true) then
          vim.api.nvim_win_set_cursor(ui.wins.files, { i, 0 })
        end
      end
      local seen = answer_select("No")
      vim.api.nvim_feedkeys("x", "x", false)
      t.ok(seen.prompt and seen.prompt:find("Reject", 1, true), "asked: " .. tostring(seen.prompt))
      t.ok(session.status_of("out.txt").has_output, "output kept")
      seen = answer_select("Yes")
      vim.api.nvim_feedkeys("x", "x", false)
      t.note("BB-7: Rejected output for out.txt", I)
      -- `i` on a user message in the preview asks before cutting the chat.
      ui.focus("preview")
      local row
      for i, l in ipairs(vim.api.nvim_buf_get_lines(ui.bufs.preview, 0, -1, false)) do
        if l == "make out.txt" then
          row = i
        end
      end
      vim.api.nvim_win_set_cursor(ui.wins.preview, { row, 0 })
      local n = #session.chat.messages
      seen = answer_select("No")
      vim.api.nvim_feedkeys("i", "x", false)
      t.ok(seen.prompt and seen.prompt:find("cut", 1, true), "asked: " .. tostring(seen.prompt))
      t.eq(n, #session.chat.messages, "chat unchanged")
      t.eq("preview", ui.current_pane(), "still in the preview (no insert mode)")
      -- The help is on g?.
      vim.api.nvim_feedkeys("g?", "x", false)
      t.ok(t.buf_text(0):find("BB-7 keys", 1, true), "help shown")
      vim.api.nvim_feedkeys("q", "x", false)
    end,
  },
  {
    "bug 7: the host dies mid-reply: a note in the chat, the chat list never blank",
    function()
      local _, session, ui = project({ script = { replies = { slow_reply(), text_reply("Title") } } })
      t.cmd("BB7NewChat second")
      t.cmd("BB7")
      local input = require("bb7.ui.input")
      vim.api.nvim_buf_set_lines(input.buf(), 0, -1, false, { "Tell me a long story." })
      input.send()
      t.wait(function()
        return t.buf_text(ui.bufs.preview):find("slow3 ", 1, true)
      end, 10000, "streaming")
      local pid = vim.fn.jobpid(require("bb7.host")._job())
      vim.uv.kill(pid, "sigkill")
      t.wait(function()
        return session.stream == nil
      end, 5000, "send settled")
      t.expect_error("BB-7: Failed to send: BB-7 host exited")
      t.ok(t.buf_text(ui.bufs.preview):find("⚠ No reply: BB-7 host exited", 1, true), "note under the message")
      t.wait(function()
        return t.buf_text(ui.bufs.chats):find("second", 1, true)
      end, 2000, "chat list kept")
      -- Any request restarts the host in the project: the list is there, a chat can be selected.
      local first
      for _, c in ipairs(session.list_chats()) do
        if c.name ~= "second" then
          first = c.id
        end
      end
      t.ok(first, "the list comes from the restarted host")
      local second = session.chat.id
      t.ok(session.select_chat(first), "select works after the restart")
      t.ok(t.buf_text(ui.bufs.chats):find("second", 1, true), "list still shown")
      t.ok(session.select_chat(second), "and back to the chat whose reply was lost")
      -- The next use restarts the host: the list is there at once, the chat keeps a note.
      ui.close()
      t.cmd("BB7")
      t.ok(t.buf_text(ui.bufs.chats):find("second", 1, true), "chat list after the restart: " .. t.buf_text(ui.bufs.chats))
      t.ok(t.buf_text(ui.bufs.preview):find("The reply to the message above was lost", 1, true), t.buf_text(ui.bufs.preview))
      local last = session.chat.messages[#session.chat.messages]
      t.eq("system", last.role, "stored as a system message")
    end,
  },
  {
    "p and P work from the diff view: D, then p applies the file shown",
    function()
      local env, session, ui = project({
        script = { replies = { write_reply("out.txt", "made\n"), text_reply("Title") } },
      })
      send(session, "make out.txt")
      t.cmd("BB7")
      ui.focus("files")
      for i, l in ipairs(vim.api.nvim_buf_get_lines(ui.bufs.files, 0, -1, false)) do
        if l:find("out.txt", 1, true) then
          vim.api.nvim_win_set_cursor(ui.wins.files, { i, 0 })
        end
      end
      vim.api.nvim_feedkeys("D", "x", false)
      t.eq("preview", ui.current_pane(), "the diff is in the preview")
      t.clear_notes()
      vim.api.nvim_feedkeys("p", "x", false)
      t.note("BB-7: Applied out.txt", I)
      t.eq("made\n", t.read(env.project .. "/out.txt"), "written")
      t.eq("chat", require("bb7.ui.preview").mode, "back to the chat")
      -- In the chat view p says what it is for instead of raising E21.
      t.clear_notes()
      vim.api.nvim_feedkeys("p", "x", false)
      t.note("BB-7: Open a file or diff first (<CR> or D in the Files pane); p applies it", W)
    end,
  },
  {
    "a failed edit is written into the chat with a retry key (R), never a long notification",
    function()
      local env, session, ui = project({
        script = {
          replies = {
            {
              stream = {
                { content = "Trying an edit." },
                {
                  tool_call = {
                    index = 0,
                    id = "call_bad",
                    name = "edit_file",
                    arguments = vim.json.encode({
                      edits = { { path = "a.txt", file_id = "{{file_id:a.txt}}", old_string = "not there", new_string = "x" } },
                    }),
                  },
                },
                { finish = "tool_calls" },
                { usage = { prompt_tokens = 50, completion_tokens = 5, cost = 0.0001 } },
                "done",
              },
            },
            text_reply("Title"),
            text_reply("Retried: nothing else to change."),
          },
        },
      })
      t.write(env.project .. "/a.txt", "alpha\n")
      t.cmd("BB7Add a.txt")
      t.cmd("BB7")
      send(session, "edit a.txt")
      local preview = t.buf_text(ui.bufs.preview)
      t.ok(preview:find("⚠ 1 edit(s) could not be applied:", 1, true), preview)
      t.ok(preview:find("  R lets the model retry them", 1, true), preview)
      for _, n in ipairs(t.notes) do
        t.ok(#n.msg < vim.o.columns, "short enough for one line (no Press ENTER): " .. n.msg)
      end
      ui.focus("preview")
      vim.api.nvim_feedkeys("R", "x", false)
      t.wait(function()
        return session.stream == nil and t.buf_text(ui.bufs.preview):find("Retried: nothing else to change.", 1, true)
      end, 10000, "retry reply")
      t.ok(not t.buf_text(ui.bufs.preview):find("could not be applied", 1, true), "the failure note is gone after the retry")
    end,
  },
  {
    "the chat is Markdown with treesitter (code blocks injected); ]] / [[ between messages; yc yanks a block",
    function()
      local _, session, ui = project({
        script = { replies = { text_reply("Here:\n\n```lua\nlocal x = 1\nprint(x)\n```\n\nDone."), text_reply("Title"), text_reply("Second.") } },
      })
      t.cmd("BB7")
      send(session, "show code")
      send(session, "again")
      local preview = require("bb7.ui.preview")
      if pcall(vim.treesitter.language.add, "markdown") then
        t.eq("markdown", preview.treesitter, "treesitter highlights the chat")
        local parser = vim.treesitter.get_parser(ui.bufs.preview, "markdown")
        parser:parse(true)
        t.ok(parser:children().lua ~= nil, "the lua block is injected: " .. vim.inspect(vim.tbl_keys(parser:children())))
      else
        t.eq("markdown", vim.bo[ui.bufs.preview].syntax, "syntax fallback")
      end
      ui.focus("preview")
      local w = ui.wins.preview
      vim.api.nvim_win_set_cursor(w, { 1, 0 })
      local lines = vim.api.nvim_buf_get_lines(ui.bufs.preview, 0, -1, false)
      local heads = {}
      for i, l in ipairs(lines) do
        if l:match("^▌ ") then
          heads[#heads + 1] = i
        end
      end
      t.ok(#heads >= 4, "four messages: " .. table.concat(lines, "\n"))
      vim.api.nvim_feedkeys("]]", "x", false)
      t.eq(heads[2], vim.api.nvim_win_get_cursor(w)[1], "]] to the next message")
      vim.api.nvim_feedkeys("]]", "x", false)
      t.eq(heads[3], vim.api.nvim_win_get_cursor(w)[1], "]] again")
      vim.api.nvim_feedkeys("[[", "x", false)
      t.eq(heads[2], vim.api.nvim_win_get_cursor(w)[1], "[[ back")
      for i, l in ipairs(lines) do
        if l == "print(x)" then
          vim.api.nvim_win_set_cursor(w, { i, 0 })
        end
      end
      vim.api.nvim_feedkeys("yc", "x", false)
      t.eq("local x = 1\nprint(x)\n", vim.fn.getreg('"'), "the block yanked")
      t.note("BB-7: Yanked 2 lines of lua", I)
    end,
  },
  {
    "context picker (vim.ui.select): the current buffer, the quickfix list, project files",
    function()
      local env, session, ui = project()
      t.write(env.project .. "/a.txt", "a\n")
      t.write(env.project .. "/sub/b.txt", "b\n")
      t.write(env.project .. "/c.txt", "c\n")
      t.write(env.project .. "/node_modules/x.js", "x\n")
      t.cmd("edit c.txt")
      vim.fn.setqflist({ { filename = env.project .. "/a.txt", lnum = 1 }, { filename = env.project .. "/sub/b.txt", lnum = 1 } })
      t.cmd("BB7")
      local labels
      local function pick(label)
        local orig = vim.ui.select
        vim.ui.select = function(items, o, cb)
          vim.ui.select = orig
          labels = vim.tbl_map(o.format_item, items)
          for _, it in ipairs(items) do
            if o.format_item(it) == label then
              return cb(it)
            end
          end
          error("no item " .. label .. " in " .. vim.inspect(labels))
        end
        ui.focus("files")
        vim.api.nvim_feedkeys("A", "x", false)
      end
      pick("Current buffer: c.txt")
      t.note("BB-7: Added c.txt", I)
      t.ok(vim.tbl_contains(labels, "sub/b.txt") and not vim.tbl_contains(labels, "node_modules/x.js"), vim.inspect(labels))
      pick("Quickfix list: 2 files")
      t.note("BB-7: Added 2 of 2 files", I)
      local paths = {}
      for _, f in ipairs(require("bb7.host").call("context_list", {}).files) do
        paths[#paths + 1] = f.path
      end
      table.sort(paths)
      t.eq({ "a.txt", "c.txt", "sub/b.txt" }, paths, "context")
      -- The same from commands: :BB7AddQuickfix and :BB7Pick.
      t.write(env.project .. "/d.txt", "d\n")
      vim.fn.setqflist({ { filename = env.project .. "/d.txt", lnum = 1 }, { filename = env.project .. "/a.txt", lnum = 1 } })
      t.clear_notes()
      t.cmd("BB7AddQuickfix")
      t.note("BB-7: Added d.txt", I)
      t.note("BB-7: File already in context", W)
      t.note("BB-7: Added 1 of 2 files", I)
      local asked
      local orig = vim.ui.select
      vim.ui.select = function(items, o, cb)
        vim.ui.select = orig
        asked = o.prompt
        cb(nil)
      end
      t.cmd("BB7Pick")
      t.eq("Add to the context", asked, ":BB7Pick opens the picker")
    end,
  },
  {
    "the project is found from a subdirectory (not ~/.bb7); :BB7Init writes .bb7/.gitignore",
    function()
      local env = t.env()
      t.cmd("BB7Init")
      t.eq("*", vim.split(t.read(env.project .. "/.bb7/.gitignore"), "\n")[2], "chats are ignored by git")
      vim.fn.mkdir(env.project .. "/src/deep", "p")
      t.cmd("cd src/deep")
      t.eq(env.project, require("bb7.config").root(), "found walking up")
      t.cmd("BB7NewChat")
      t.ok(require("bb7.session").chat, "works from the subdirectory")
      -- The global state directory is not a project.
      vim.fn.mkdir(env.home .. "/.bb7", "p")
      vim.fn.mkdir(env.home .. "/work", "p")
      t.cmd("cd " .. env.home .. "/work")
      t.eq(env.home .. "/work", require("bb7.config").root(), "~/.bb7 is not a project marker")
    end,
  },
  {
    ":BB7Add does not expand % or # inside a path; % alone means the current file",
    function()
      local env = project()
      t.write(env.project .. "/a%b.txt", "literal\n")
      t.write(env.project .. "/cur.txt", "cur\n")
      t.cmd("edit cur.txt")
      t.cmd("BB7Add a%b.txt")
      t.note("BB-7: Added a%b.txt", I)
      t.cmd("BB7Add %")
      t.note("BB-7: Added cur.txt", I)
    end,
  },
  {
    "while streaming the footer shows a spinner and the elapsed time",
    function()
      local _, session, ui = project({ script = { replies = { slow_reply(30), text_reply("Title") } } })
      t.cmd("BB7")
      t.ok(session.send("go"), "sent")
      t.wait(function()
        return ui.status_text():find("streaming 0.[3-9] s", 1) ~= nil
      end, 5000, "elapsed time")
      local a = ui.status_text()
      t.ok(a:find("<C-c> cancels", 1, true), a)
      local spin = false
      for _, f in ipairs(ui.SPINNER) do
        spin = spin or a:find(f, 1, true) ~= nil
      end
      t.ok(spin, "a spinner frame: " .. a)
      t.wait(function()
        local footer = vim.api.nvim_win_get_config(ui.wins.input).footer
        local text = type(footer) == "table" and footer[1][1] or tostring(footer)
        return text:find("streaming 1.", 1, true)
      end, 5000, "the footer itself moves")
      session.cancel()
      t.wait(function()
        return session.stream == nil
      end, 10000, "cancelled")
    end,
  },
  {
    "small things: :help bb7 opens at the top; the search prompt starts empty; titles keep their indicators",
    function()
      -- The help tags are built in a copy of doc/ (first on 'runtimepath'), never in the checkout.
      local rt = t.tmpdir("helprt")
      vim.fn.mkdir(rt .. "/doc", "p")
      t.write(rt .. "/doc/bb7.txt", t.read(t.repo .. "/doc/bb7.txt"))
      vim.cmd("helptags " .. vim.fn.fnameescape(rt .. "/doc"))
      vim.opt.runtimepath:prepend(rt)
      t.cmd("help bb7")
      t.eq(rt .. "/doc/bb7.txt", vim.fn.expand("%:p"), "the help is the copy's")
      t.eq(1, vim.fn.line("."), "at the top")
      t.cmd("helpclose")
      t.eq(0, vim.fn.filereadable(t.repo .. "/doc/tags"), "no tags file in the checkout")
      local _, _, ui = project()
      t.cmd("BB7")
      local chats = require("bb7.ui.chats")
      chats.search("something")
      local got = "unset"
      local orig = vim.ui.input
      vim.ui.input = function(o, cb)
        vim.ui.input = orig
        got = o.default
        cb(nil)
      end
      ui.focus("chats")
      vim.api.nvim_feedkeys("/", "x", false)
      t.eq(nil, got, "no default text")
      t.eq("…to/file.rs (output) — <BS> back to chat", ui.fit_title("some/very/long/path/to/file.rs (output) — <BS> back to chat", 40), "suffix kept")
      t.eq("A chat name that is…", ui.fit_title("A chat name that is quite long indeed", 20), "name start kept")
      -- The Files title picks the longest form that fits instead of being cut.
      local session = require("bb7.session")
      session.estimate = { total = 971, potential_savings = 14 }
      for _, width in ipairs({ 60, 30, 22, 12 }) do
        vim.api.nvim_win_set_width(ui.wins.files, width)
        ui.update_titles()
        local title = vim.api.nvim_win_get_config(ui.wins.files).title[1][1]
        t.ok(vim.fn.strdisplaywidth(title) <= width - 2 or title == " 971 tok ", ("fits in %d: %q"):format(width, title))
        t.ok(title:find("971", 1, true) and title:sub(-1) == " ", "whole: " .. title)
      end
    end,
  },
}
