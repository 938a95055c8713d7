-- End to end, real host and the mock LLM server (issue 29): chats independent of a streaming reply
-- (a second chat opened, written in and created while a 10 s reply streams), the agent's question
-- asked in the chat and answered later from the Input pane (never modal), global chats created,
-- listed and moved, the Input footer at 80 and 160 columns (the state is never cut), titles after a
-- resize, local times and readable names in the checkpoint list, a file a rollback removed.
-- Each case fails on any error notification (helpers.lua).
local t = require("helpers")
local env, session, ui, preview, host

local function usage()
  return { usage = { prompt_tokens = 100, completion_tokens = 10, cost = 0.0001 } }
end

--- A reply of `n` chunks `ms` apart (n * ms of streaming).
local function slow_reply(n, ms)
  local stream = {}
  for i = 1, n do
    stream[#stream + 1] = { delay_ms = ms }
    stream[#stream + 1] = { content = ("slow%d "):format(i) }
  end
  vim.list_extend(stream, { { finish = "stop" }, usage(), "done" })
  return { stream = stream }
end

local function text_reply(text)
  return { stream = { { content = text }, { finish = "stop" }, usage(), "done" } }
end

local function call_reply(id, name, args)
  return {
    stream = {
      { tool_call = { index = 0, id = id, name = name, arguments = vim.json.encode(args) } },
      { finish = "tool_calls" },
      usage(),
      "done",
    },
  }
end

local function start(replies)
  env = t.env({ script = { replies = replies, fallback = text_reply("fallback reply") } })
  session, ui, preview, host = require("bb7.session"), require("bb7.ui"), require("bb7.ui.preview"), require("bb7.host")
  t.write(env.project .. "/notes.txt", "indent with ?\n")
  t.cmd("BB7Init")
  t.cmd("BB7")
end

--- Nothing may be asked modally (issue 29: in-chat prompts, one confirmation style).
local function no_modal_input()
  vim.ui.input = function(o)
    error("a modal prompt: " .. tostring(o and o.prompt))
  end
  vim.fn.input = function(p)
    error("a modal prompt: " .. tostring(p))
  end
  vim.fn.confirm = function(p)
    error("a vim.fn.confirm prompt: " .. tostring(p))
  end
end

local function preview_text()
  return t.buf_text(preview.buf())
end

local function chats_pane_lines()
  return vim.api.nvim_buf_get_lines(ui.bufs.chats, 0, -1, false)
end

--- The row (1-based) of the Chats pane showing `name`.
local function chat_row(name)
  for i, l in ipairs(chats_pane_lines()) do
    if l:find(name, 1, true) then
      return i
    end
  end
end

--- Presses `keys` in the Chats pane on the chat named `name`.
local function on_chat(name, keys)
  local row = chat_row(name)
  t.ok(row, "chat " .. name .. " listed: " .. table.concat(chats_pane_lines(), "\n"))
  ui.focus("chats")
  vim.api.nvim_win_set_cursor(ui.wins.chats, { row, 0 })
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(keys, true, false, true), "x", false)
end

--- The end-of-line text the Chats pane shows on row `row` (the streaming spinner).
local function live_text(row)
  local ns = vim.api.nvim_get_namespaces().bb7_chats_live
  local out = {}
  for _, m in ipairs(vim.api.nvim_buf_get_extmarks(ui.bufs.chats, ns, { row - 1, 0 }, { row - 1, -1 }, { details = true })) do
    for _, chunk in ipairs(m[4].virt_text or {}) do
      out[#out + 1] = chunk[1]
    end
  end
  return table.concat(out)
end

local function footer()
  local f = vim.api.nvim_win_get_config(ui.wins.input).footer
  if type(f) == "table" then
    local s = {}
    for _, c in ipairs(f) do
      s[#s + 1] = c[1]
    end
    return table.concat(s)
  end
  return tostring(f or "")
end

local function input_title()
  local f = vim.api.nvim_win_get_config(ui.wins.input).title
  if type(f) == "table" then
    local s = {}
    for _, c in ipairs(f) do
      s[#s + 1] = c[1]
    end
    return table.concat(s)
  end
  return tostring(f or "")
end

return {
  {
    "a second chat opens, is written in and a third is created while a 10 s reply streams in the first",
    function()
      no_modal_input()
      start({ slow_reply(20, 500), text_reply("reply in chat two") })
      t.cmd("BB7NewChat two")
      t.cmd("BB7NewChat one")
      local input = require("bb7.ui.input")
      vim.api.nvim_buf_set_lines(input.buf(), 0, -1, false, { "Take your time." })
      input.send()
      t.wait(function()
        return preview_text():find("slow2 ", 1, true)
      end, 20000, "the reply streams")
      local a = session.stream.chat_id
      -- The chat list shows the spinner after the streaming chat.
      local spin = live_text(chat_row("one"))
      t.ok(vim.tbl_contains(ui.SPINNER, vim.trim(spin)), "spinner: " .. spin)
      -- Open the other chat from the list while the reply streams.
      on_chat("two", "<CR>")
      t.ok(session.stream ~= nil, "the reply still streams")
      t.eq("two", session.chat.name, "the second chat is open")
      t.ok(not preview_text():find("slow", 1, true), "the preview shows chat two, not the stream: " .. preview_text())
      t.ok(vim.tbl_contains(ui.SPINNER, vim.trim(live_text(chat_row("one")))), "the spinner stays on chat one")
      t.eq("", live_text(chat_row("two")), "none on chat two")
      -- Write in it: the draft is kept (saved to its own host process).
      vim.api.nvim_buf_set_lines(input.buf(), 0, -1, false, { "a draft for two" })
      input.save_draft()
      t.eq("a draft for two", session.chat.draft, "draft saved")
      -- A send here waits for the other reply: refused with a message, the text stays.
      input.send()
      t.ok(session.stream.chat_id == a, "one reply at a time")
      t.eq("a draft for two", t.buf_text(input.buf()), "the text stays in the input")
      -- Create a third chat from the list while the reply streams.
      ui.focus("chats")
      vim.api.nvim_feedkeys("n", "x", false)
      t.ok(session.stream ~= nil, "still streaming")
      t.ok(session.chat.name ~= "two" and session.chat.name ~= "one", "a new chat is open: " .. tostring(session.chat.name))
      -- Back to the streaming chat: what streamed so far is shown, and the rest follows.
      on_chat("one", "<CR>")
      t.eq(a, session.chat.id, "chat one again")
      t.ok(session.stream ~= nil, "the reply still streams after the round trip")
      t.ok(preview_text():find("slow1 slow2 ", 1, true), "the streamed text so far: " .. preview_text())
      t.wait(function()
        return session.stream == nil
      end, 30000, "the reply ends")
      t.wait(function()
        return preview_text():find("slow20", 1, true) and #host.others() == 0
      end, 10000, "the whole stored reply; the second process is gone")
      local _, n = preview_text():gsub("slow1 ", "")
      t.eq(1, n, "the reply once: " .. preview_text())
      -- Chat two kept its draft; it can be opened now the reply is done (the lock is released).
      on_chat("two", "<CR>")
      t.eq("two", session.chat.name, "chat two")
      t.eq("a draft for two", t.buf_text(input.buf()), "its draft")
      t.no_errors()
    end,
  },
  {
    "the agent's question waits in the chat: log lines shown at once, answered later from the Input pane",
    function()
      no_modal_input()
      start({
        call_reply("c1", "read_file", { file_path = "notes.txt" }),
        call_reply("c2", "clarify_user", { question = "Tabs or spaces?" }),
        text_reply("Using tabs, as you said."),
      })
      t.cmd("BB7NewChat other")
      t.cmd("BB7NewChat asks")
      t.cmd("BB7Agent on")
      t.wait(function()
        return session.chat.mode == "agent"
      end, 5000, "agent mode")
      local input = require("bb7.ui.input")
      vim.api.nvim_buf_set_lines(input.buf(), 0, -1, false, { "Fix the indentation note." })
      input.send()
      t.wait(function()
        return session.question ~= nil
      end, 60000, "the question")
      -- Shown in the chat at once, with the read before it; the input is its answer field.
      t.wait(function()
        return preview_text():find("❓ Tabs or spaces?", 1, true)
      end, 5000, "the question block")
      t.ok(preview_text():find("⚙ read_file notes.txt → notes.txt lines 1-1 of 1", 1, true), "the read: " .. preview_text())
      t.ok(input_title():find("Answer: Tabs or spaces?", 1, true), "input title: " .. input_title())
      t.ok(footer():find("waiting for your answer", 1, true), "footer: " .. footer())
      -- An empty <CR> does not skip it.
      t.clear_notes()
      input.send()
      t.ok(session.question ~= nil, "still waiting")
      -- Later: another chat first (the question keeps waiting), then back.
      on_chat("other", "<CR>")
      t.eq("other", session.chat.name, "the other chat")
      t.ok(not input_title():find("Answer", 1, true), "no answer field in the other chat: " .. input_title())
      t.eq(" ?", live_text(chat_row("asks")), "the list marks the waiting question")
      on_chat("asks", "<CR>")
      t.ok(session.question ~= nil, "the question still waits")
      t.ok(input_title():find("Answer: Tabs or spaces?", 1, true), "the answer field again")
      t.ok(preview_text():find("❓ Tabs or spaces?", 1, true), "the question in the chat again: " .. preview_text())
      ui.focus("input")
      vim.api.nvim_buf_set_lines(input.buf(), 0, -1, false, { "tabs" })
      vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes("<CR>", true, false, true), "x", false)
      t.wait(function()
        return session.stream == nil
      end, 60000, "the reply ends")
      t.wait(function()
        return preview_text():find("Using tabs, as you said.", 1, true)
      end, 10000, "the stored reply")
      t.ok(preview_text():find("⚙ clarify_user Tabs or spaces? → answered", 1, true), preview_text())
      t.ok(not input_title():find("Answer", 1, true), "the input is the input again")
      t.no_errors()
    end,
  },
  {
    "a waiting question is skipped explicitly (<M-s>), never by an empty answer",
    function()
      no_modal_input()
      start({
        call_reply("c3", "clarify_user", { question = "Which file?" }),
        text_reply("I assumed notes.txt."),
      })
      t.cmd("BB7NewChat skip")
      t.cmd("BB7Agent on")
      t.wait(function()
        return session.chat.mode == "agent"
      end, 5000, "agent mode")
      local input = require("bb7.ui.input")
      vim.api.nvim_buf_set_lines(input.buf(), 0, -1, false, { "Go." })
      input.send()
      t.wait(function()
        return session.question ~= nil
      end, 60000, "the question")
      ui.focus("input")
      vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes("<CR>", true, false, true), "x", false)
      t.ok(session.question ~= nil, "an empty <CR> does not skip")
      vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes("<M-s>", true, false, true), "x", false)
      t.wait(function()
        return session.stream == nil
      end, 60000, "the reply ends")
      t.wait(function()
        return preview_text():find("I assumed notes.txt.", 1, true)
      end, 10000, "the stored reply")
      t.ok(preview_text():find("⚙ clarify_user Which file? → skipped", 1, true), preview_text())
      t.no_errors()
    end,
  },
  {
    ":BB7Answer! from another chat skips; after the reply the streaming chat opens from there (its lock released)",
    function()
      no_modal_input()
      start({
        call_reply("c4", "clarify_user", { question = "Which file?" }),
        text_reply("I assumed notes.txt."),
      })
      t.cmd("BB7NewChat elsewhere")
      t.cmd("BB7NewChat asker")
      t.cmd("BB7Agent on")
      t.wait(function()
        return session.chat.mode == "agent"
      end, 5000, "agent mode")
      local input = require("bb7.ui.input")
      vim.api.nvim_buf_set_lines(input.buf(), 0, -1, false, { "Go." })
      input.send()
      t.wait(function()
        return session.question ~= nil
      end, 60000, "the question")
      on_chat("elsewhere", "<CR>")
      t.eq("elsewhere", session.chat.name, "another chat")
      t.cmd("BB7Answer!")
      t.wait(function()
        return session.stream == nil
      end, 60000, "the reply ends")
      t.wait(function()
        return #host.others() == 0
      end, 10000, "the reply's process is gone")
      t.eq("elsewhere", session.chat.name, "still in the other chat")
      on_chat("asker", "<CR>")
      t.eq("asker", session.chat.name, "the chat that asked opens")
      t.ok(preview_text():find("⚙ clarify_user Which file? → skipped", 1, true), preview_text())
      t.ok(preview_text():find("I assumed notes.txt.", 1, true), preview_text())
      t.no_errors()
    end,
  },
  {
    "global chats: listed with t, created with n, moved into the project and back with m",
    function()
      no_modal_input()
      start({})
      t.cmd("BB7NewChat local one")
      local yes = 0
      vim.ui.select = function(items, o, cb)
        yes = yes + 1
        t.eq("No", items[1], "No first: " .. tostring(o.prompt))
        cb("Yes")
      end
      ui.focus("chats")
      vim.api.nvim_feedkeys("t", "x", false)
      t.eq("global", session.scope, "global list")
      t.ok(chats_pane_lines()[1]:find("Global chats", 1, true), table.concat(chats_pane_lines(), "\n"))
      vim.api.nvim_feedkeys("n", "x", false)
      t.ok(session.chat and session.chat.global, "a global chat is active")
      local gid = session.chat.id
      local listed = host.call("chat_list", { global = true })
      t.ok(vim.iter(listed.chats):any(function(c)
        return c.id == gid
      end), "in the global store")
      t.ok(vim.fn.isdirectory(env.home .. "/.bb7/chats/" .. gid) == 1, "under BB7_HOME")
      session.rename_chat(gid, "worldwide")
      t.ok(chat_row("worldwide"), "renamed in the list")
      -- Move it into the project.
      on_chat("worldwide", "m")
      t.eq(1, yes, "asked first")
      t.ok(not session.chat.global, "now a project chat")
      t.eq(gid, session.chat.id, "the moved chat is active")
      t.eq("project", session.scope, "the list follows it")
      t.ok(chat_row("worldwide"), "in the project list: " .. table.concat(chats_pane_lines(), "\n"))
      t.ok(chat_row("local one"), "beside the project's chat")
      -- And a project chat to the global chats with the command.
      on_chat("local one", "<CR>")
      t.cmd("BB7MoveChat")
      t.ok(session.chat.global, "moved to global")
      t.eq("local one", session.chat.name, "the same chat")
      t.cmd("BB7Global")
      t.eq("global", session.scope, ":BB7Global shows them")
      t.ok(chat_row("local one"), "listed globally: " .. table.concat(chats_pane_lines(), "\n"))
      t.ok(not chat_row("worldwide"), "the moved one is not")
      t.no_errors()
    end,
  },
  {
    ":BB7Global outside a project: the global chats are listed, created and used for a send",
    function()
      no_modal_input()
      env = t.env({ script = { replies = { text_reply("a global reply") }, fallback = text_reply("fallback reply") } })
      session, ui, preview, host = require("bb7.session"), require("bb7.ui"), require("bb7.ui.preview"), require("bb7.host")
      t.cmd("BB7Global")
      t.ok(ui.is_open(), "the UI opens on the chat list")
      t.eq("global", session.scope, "global list")
      t.ok(chats_pane_lines()[1]:find("Global chats", 1, true), table.concat(chats_pane_lines(), "\n"))
      ui.focus("chats")
      vim.api.nvim_feedkeys("t", "x", false)
      t.eq("global", session.scope, "no project list here")
      t.clear_notes()
      vim.api.nvim_feedkeys("n", "x", false)
      t.ok(session.chat and session.chat.global, "a global chat")
      local input = require("bb7.ui.input")
      vim.api.nvim_buf_set_lines(input.buf(), 0, -1, false, { "Hello from nowhere." })
      input.send()
      t.wait(function()
        return session.stream == nil and preview_text():find("a global reply", 1, true)
      end, 30000, "the reply")
      -- Pin and delete-free: pins go to the global state dir, never a .bb7/ here.
      ui.focus("chats")
      vim.api.nvim_win_set_cursor(ui.wins.chats, { 2, 0 })
      vim.api.nvim_feedkeys("p", "x", false)
      t.ok(vim.tbl_contains(session.pinned(), session.chat.id), "pinned")
      t.ok(vim.fn.isdirectory(env.project .. "/.bb7") == 0, "no .bb7/ made in the directory")
      -- The UI closes and opens again on the global chat.
      ui.close()
      t.cmd("BB7")
      t.ok(ui.is_open(), "open again")
      t.ok(session.chat and session.chat.global, "the global chat")
      t.no_errors()
    end,
  },
  {
    "the Input footer fits at 80 and 160 columns and keeps the state; titles follow a resize",
    function()
      no_modal_input()
      vim.o.columns = 160
      start({ slow_reply(30, 200) })
      t.cmd("BB7NewChat footer")
      session.last_usage = { prompt_tokens = 123456, completion_tokens = 7890, cost = 0.123456 }
      session.last_duration = 12.3
      session.balance = { total_credits = 1234.5, total_usage = 12.25 }
      session.chat.reasoning_effort = "medium"
      local input = require("bb7.ui.input")
      vim.api.nvim_buf_set_lines(input.buf(), 0, -1, false, { "Stream." })
      input.send()
      t.wait(function()
        return preview_text():find("slow1 ", 1, true)
      end, 20000, "streaming")
      local agent = require("bb7.agent")
      agent.current = "read_file src/some/deeply/nested/directory/with/a/long/path/module.rs:1-200"
      ui.update_titles()
      local function check(cols)
        local w = vim.api.nvim_win_get_width(ui.wins.input)
        local f = footer()
        t.ok(vim.fn.strdisplaywidth(f) <= w - 2, ("%d columns: footer fits %d cells: %q"):format(cols, w - 2, f))
        t.ok(f:find("running read_file", 1, true), ("%d columns: the state is kept: %q"):format(cols, f))
        t.ok(f:find("%d+%.%d s"), ("%d columns: the elapsed time: %q"):format(cols, f))
        return f
      end
      local wide = check(160)
      vim.o.columns = 80
      vim.api.nvim_exec_autocmds("VimResized", {})
      local narrow = check(80)
      t.ok(#narrow < #wide, "shorter at 80 columns: " .. narrow .. " | " .. wide)
      t.ok(not narrow:find("balance", 1, true), "the balance goes first: " .. narrow)
      -- The title of the preview follows the new width.
      local pw = vim.api.nvim_win_get_width(ui.wins.preview)
      session.chat.name = ("a very long chat name "):rep(8)
      ui.update_titles()
      vim.o.columns = 160
      vim.api.nvim_exec_autocmds("VimResized", {})
      local function title()
        local tt = vim.api.nvim_win_get_config(ui.wins.preview).title
        return type(tt) == "table" and tt[1][1] or tostring(tt)
      end
      local wide_title = title()
      t.ok(vim.api.nvim_win_get_width(ui.wins.preview) > pw, "wider preview")
      t.ok(vim.fn.strdisplaywidth(wide_title) > pw, "the title uses the new width: " .. wide_title)
      session.cancel()
      t.wait(function()
        return session.stream == nil
      end, 20000, "cancelled")
      t.no_errors()
    end,
  },
  {
    "checkpoint list: local times and readable names; a file removed by a hard rollback says so",
    function()
      no_modal_input()
      start({
        {
          stream = {
            {
              tool_call = {
                index = 0,
                id = "w1",
                name = "write_file",
                arguments = vim.json.encode({ path = "new.txt", content = "made by the model\n" }),
              },
            },
            { finish = "tool_calls" },
            usage(),
            "done",
          },
        },
      })
      t.cmd("BB7NewChat cps")
      local input = require("bb7.ui.input")
      vim.api.nvim_buf_set_lines(input.buf(), 0, -1, false, { "Create new.txt" })
      input.send()
      t.wait(function()
        return session.stream == nil
      end, 60000, "the reply")
      t.ok(session.status_of("new.txt"), "output for new.txt: " .. vim.inspect(session.statuses))
      t.ok(session.apply("new.txt"), "applied")
      t.eq("made by the model\n", t.read(env.project .. "/new.txt"), "on disk")
      ui.close()
      vim.ui.select = function(items, _, cb)
        t.eq("No", items[1], "No first")
        cb("Yes")
      end
      t.cmd("BB7Checkpoints")
      local text = t.buf_text(0)
      t.ok(text:find("applied", 1, true), text)
      t.ok(not text:find("apply_file", 1, true), "no internal names: " .. text)
      local cp = require("bb7.host").call("checkpoint_list", {}).checkpoints[1]
      t.ok(not text:find(cp.created, 1, true), "not the UTC stamp: " .. text)
      t.ok(text:find(require("bb7.util").local_time(cp.created), 1, true), "the local time: " .. text)
      vim.api.nvim_win_set_cursor(0, { 3, 0 })
      vim.api.nvim_feedkeys("H", "x", false)
      t.eq(nil, t.read(env.project .. "/new.txt"), "the rollback removed the file")
      text = t.buf_text(0)
      t.ok(text:find("rollback of " .. cp.id, 1, true), text)
      t.ok(text:find("(file removed)", 1, true), text)
      vim.api.nvim_feedkeys("q", "x", false)
      t.cmd("BB7")
      local files = t.buf_text(ui.bufs.files)
      t.ok(files:find("D   new.txt", 1, true), "status D: " .. files)
      t.ok(files:find("(removed by a rollback)", 1, true), files)
      t.no_errors()
    end,
  },
  {
    "local_time: RFC 3339 UTC and offsets in local time; anything else as it is",
    function()
      local util = require("bb7.util")
      -- 2026-01-02T03:04:05Z is 1767323045 seconds after the epoch.
      t.eq(os.date("%Y-%m-%d %H:%M:%S", 1767323045), util.local_time("2026-01-02T03:04:05Z"), "UTC")
      t.eq(os.date("%Y-%m-%d %H:%M:%S", 1767323045), util.local_time("2026-01-02T05:04:05+02:00"), "+02:00")
      t.eq(os.date("%Y-%m-%d %H:%M:%S", 1767323045), util.local_time("2026-01-01T22:04:05.5-05:00"), "-05:00")
      t.eq("yesterday", util.local_time("yesterday"), "not a time")
      t.eq("", util.local_time(nil), "nil")
    end,
  },
}
