-- End to end, real host and the mock LLM server: agent mode in the plugin. :BB7Agent toggles the
-- chat's mode (shown in the input footer); a send streams the live tool log into the preview; a
-- clarifying question is answered in the Input pane, another is skipped explicitly; the stored reply shows
-- its calls (expandable) and the step/tool counts.
local t = require("helpers")
local env, session, ui, preview

local function call_reply(id, name, args)
  return {
    stream = {
      { tool_call = { index = 0, id = id, name = name, arguments = vim.json.encode(args) } },
      { finish = "tool_calls" },
      { usage = { prompt_tokens = 100, completion_tokens = 10, cost = 0.0001 } },
      "done",
    },
  }
end

local function text_reply(text)
  return {
    stream = {
      { content = text },
      { finish = "stop" },
      { usage = { prompt_tokens = 100, completion_tokens = 10, cost = 0.0001 } },
      "done",
    },
  }
end

local function script(replies)
  return { replies = replies, fallback = text_reply("fallback reply") }
end

--- A fresh project with notes.txt, the UI open on a new chat, in agent mode when `agent` is set;
--- the mock server replays `replies`. Each case starts here, in its own Neovim.
local function start(replies, agent)
  env = t.env({ script = script(replies) })
  session, ui, preview = require("bb7.session"), require("bb7.ui"), require("bb7.ui.preview")
  t.write(env.project .. "/notes.txt", "indent with ?\n")
  t.cmd("BB7Init")
  t.cmd("BB7")
  t.cmd("BB7NewChat agent test")
  if agent then
    t.cmd("BB7Agent on")
    t.wait(function()
      return session.chat.mode == "agent"
    end, 5000, "agent mode")
  end
end

local function preview_text()
  return t.buf_text(preview.buf())
end

local answers = {}
local asked = {}

--- Answers questions from `answers` in the Input pane, as a user does (nil when empty: skipped
--- explicitly with the skip key), noting each question. Nothing is asked modally (issue 29).
local function stub_input()
  vim.ui.input = function(opts)
    error("a modal prompt: " .. tostring(opts.prompt))
  end
  session.subscribe("question", function()
    local q = session.question
    if not q or q.seen then
      return
    end
    q.seen = true
    asked[#asked + 1] = q.question
    vim.schedule(function()
      local input = require("bb7.ui.input")
      local answer = table.remove(answers, 1)
      if answer then
        vim.api.nvim_buf_set_lines(input.buf(), 0, -1, false, { answer })
        input.send()
      else
        input.skip()
      end
    end)
  end)
end

-- Each case runs in its own Neovim (tests/nvim/run.lua) from `start`.
return {
  {
    ":BB7Agent toggles the chat's mode; the input footer shows it",
    function()
      start({}, false)
      t.ok(session.chat and session.chat.mode ~= "agent", "a new chat is in chat mode")
      t.ok(not ui.status_text():find("agent", 1, true), ui.status_text())
      t.cmd("BB7Agent")
      t.wait(function()
        return session.chat.mode == "agent"
      end, 5000, "agent mode")
      t.ok(ui.status_text():find("agent", 1, true), ui.status_text())
      t.cmd("BB7Agent off")
      t.wait(function()
        return session.chat.mode == "chat"
      end, 5000, "chat mode")
      t.cmd("BB7Agent on")
      t.wait(function()
        return session.chat.mode == "agent"
      end, 5000, "agent mode again")
      -- The mode is the chat's: it survives reloading the chat from the host.
      local done = false
      session.load_chat_async(function()
        done = true
      end)
      t.wait(function()
        return done
      end, 5000, "reload")
      t.eq("agent", session.chat.mode, "stored mode")
    end,
  },
  {
    "send: the tool log streams into the preview; the question is answered; counts in the reply footer",
    function()
      start({
        call_reply("c1", "read_file", { file_path = "notes.txt" }),
        call_reply("c2", "clarify_user", { question = "Tabs or spaces?" }),
        text_reply("Using tabs, as you said."),
      }, true)
      stub_input()
      answers = { "tabs" }
      local input = require("bb7.ui.input")
      vim.api.nvim_buf_set_lines(input.buf(), 0, -1, false, { "Fix the indentation note." })
      input.send()
      local ok, err = pcall(t.wait, function()
        return preview_text():find("⚙ read_file notes.txt → notes.txt lines 1-1 of 1", 1, true)
      end, 90000, "tool log line")
      if not ok then
        error(tostring(err) .. "\npreview:\n" .. preview_text() .. "\nnotes: " .. vim.inspect(t.notes))
      end
      t.wait(function()
        return session.stream == nil
      end, 60000, "done")
      t.no_errors()
      t.eq(1, #asked, "one question asked")
      t.ok(asked[1]:find("Tabs or spaces?", 1, true), asked[1])
      local text = preview_text()
      t.ok(text:find("Using tabs, as you said.", 1, true), text)
      t.ok(text:find("⚙ read_file notes.txt → notes.txt lines 1-1 of 1", 1, true), "stored call shown: " .. text)
      t.ok(text:find("⚙ clarify_user Tabs or spaces? → answered", 1, true), text)
      t.ok(text:find("agent · 3 steps · 2 tool calls", 1, true), text)
      -- A stored call is collapsed with its size and duration; <CR> shows its arguments and result.
      local ui, preview = require("bb7.ui"), require("bb7.ui.preview")
      local function row_of(pat)
        for i, l in ipairs(vim.api.nvim_buf_get_lines(preview.buf(), 0, -1, false)) do
          if l:find(pat, 1, true) then
            return i
          end
        end
      end
      local row = row_of("▸ ⚙ read_file notes.txt")
      t.ok(row, "collapsed stored call: " .. text)
      local line = vim.api.nvim_buf_get_lines(preview.buf(), row - 1, row, false)[1]
      t.ok(line:find(" B · %d+ ms$"), "size and duration: " .. line)
      ui.focus("preview")
      vim.api.nvim_win_set_cursor(ui.wins.preview, { row, 0 })
      vim.api.nvim_feedkeys("\r", "x", false)
      t.eq(row, row_of("▾ ⚙ read_file notes.txt"), "expanded in place")
      text = preview_text()
      t.ok(text:find('args: {"file_path":"notes.txt"}', 1, true), text)
      t.ok(text:find("│ ", 1, true), "the start of the result: " .. text)
      vim.api.nvim_feedkeys("\r", "x", false)
      t.eq(row, row_of("▸ ⚙ read_file notes.txt"), "collapsed again")
      t.ok(not preview_text():find("args: {", 1, true), "details hidden again")
      t.no_errors()
    end,
  },
  {
    "a skipped question sends no_user_answer",
    function()
      start({
        call_reply("c3", "clarify_user", { question = "Which file?" }),
        text_reply("I assumed notes.txt."),
      }, true)
      stub_input()
      answers = {}
      local input = require("bb7.ui.input")
      vim.api.nvim_buf_set_lines(input.buf(), 0, -1, false, { "Again." })
      input.send()
      t.wait(function()
        return session.stream == nil
      end, 60000, "done")
      t.no_errors()
      t.eq(1, #asked, "the question was asked")
      t.ok(asked[1]:find("Which file?", 1, true), asked[1])
      local text = preview_text()
      t.ok(text:find("⚙ clarify_user Which file? → skipped", 1, true), text)
      t.ok(text:find("I assumed notes.txt.", 1, true), text)
      t.ok(text:find("agent · 2 steps · 1 tool call", 1, true), text)
    end,
  },
}
