-- End to end, real host and the mock LLM server: the whole loop of the issue —
-- :BB7Init → open → new chat → :BB7Add a file and a section → send → streamed text appears in the
-- preview → the edited file shows M → apply → the file on disk and the open buffer change; title;
-- model picker and balance; cancel mid-stream; fork and edit from a message; search.
local t = require("helpers")
local I = vim.log.levels.INFO
local env, session, ui, preview

local WORDS = 40

local function reply1()
  local stream = {
    { comment = "OPENROUTER PROCESSING" },
    { reasoning = "The user wants a friendlier greeting. " },
    { reasoning = "One edit is enough." },
  }
  for i = 1, WORDS do
    stream[#stream + 1] = { content = "word" .. i .. (i % 10 == 0 and "\n" or " ") }
    stream[#stream + 1] = { delay_ms = 25 }
  end
  vim.list_extend(stream, {
    {
      tool_call = {
        index = 0,
        id = "call_1",
        name = "edit_file",
        arguments = vim.json.encode({
          edits = {
            {
              path = "src/main.rs",
              file_id = "{{file_id:src/main.rs}}",
              old_string = '    println!("hello");',
              new_string = '    println!("hello from BB-7");',
            },
          },
        }),
        fragments = 4,
      },
    },
    { finish = "tool_calls" },
    { usage = { prompt_tokens = 812, completion_tokens = 96, cached_tokens = 512, cost = 0.00131 } },
    "done",
  })
  return { model = "mock/reasoner", stream = stream }
end

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

local function slow_reply()
  local stream = {}
  for i = 1, 100 do
    stream[#stream + 1] = { content = "slow" .. i .. " " }
    stream[#stream + 1] = { delay_ms = 100 }
  end
  stream[#stream + 1] = { finish = "stop" }
  stream[#stream + 1] = "done"
  return { stream = stream }
end

local DIFF_ERROR = { -- an edit that cannot apply: diff_error
  stream = {
    { content = "Trying an edit." },
    {
      tool_call = {
        index = 0,
        id = "call_bad",
        name = "edit_file",
        arguments = vim.json.encode({
          edits = {
            {
              path = "src/main.rs",
              file_id = "{{file_id:src/main.rs}}",
              old_string = "this text is not in the file",
              new_string = "x",
            },
          },
        }),
      },
    },
    { finish = "tool_calls" },
    { usage = { prompt_tokens = 50, completion_tokens = 5, cost = 0.0001 } },
    "done",
  },
}

local TITLE_MODEL = "mock/title"

--- Every case runs in its own Neovim with its own mock (titles come from their own model, so
--- `replies` are exactly the case's sends) and starts from a stage:
---   "A": initialized, the UI opened once, a chat, src/lib.rs:2-3 and src/main.rs in context, the
---        UI open on the input;
---   "B": A, then "Make the greeting friendlier." sent and answered (reasoning, an edit of
---        src/main.rs) and the title "Friendlier Greeting Change" arrived.
local function given(stage, replies)
  replies = replies or {}
  if stage == "B" then
    table.insert(replies, 1, reply1())
  end
  env = t.env({
    script = {
      replies = replies,
      fallback = text_reply("fallback reply"),
      by_model = { [TITLE_MODEL] = text_reply("Friendlier Greeting Change") },
    },
    config = { title_model = TITLE_MODEL },
  })
  session, ui, preview = require("bb7.session"), require("bb7.ui"), require("bb7.ui.preview")
  t.write(env.project .. "/src/main.rs", 'fn main() {\n    println!("hello");\n}\n')
  t.write(env.project .. "/src/lib.rs", "pub fn a() {}\npub fn b() {}\npub fn c() {}\n")
  t.cmd("BB7Init")
  t.cmd("BB7")
  t.cmd("BB7NewChat")
  ui.close()
  t.cmd("edit src/lib.rs")
  t.cmd("2,3BB7Add")
  t.cmd("edit src/main.rs")
  t.cmd("BB7")
  t.cmd("BB7Add")
  if stage == "B" then
    local input = require("bb7.ui.input")
    vim.api.nvim_buf_set_lines(input.buf(), 0, -1, false, { "Make the greeting friendlier." })
    input.send()
    t.wait(function()
      return session.stream == nil
    end, 15000, "first reply done")
    t.wait(function()
      return session.chat.name == "Friendlier Greeting Change"
    end, 5000, "title")
  end
  t.clear_notes()
end

local function preview_text()
  return t.buf_text(preview.buf())
end

return {
  {
    ":BB7Init, :BB7 open, new chat, :BB7Add a file and a section",
    function()
      env = t.env({ script = { replies = {}, fallback = text_reply("fallback reply") } })
      session, ui, preview = require("bb7.session"), require("bb7.ui"), require("bb7.ui.preview")
      t.write(env.project .. "/src/main.rs", 'fn main() {\n    println!("hello");\n}\n')
      t.write(env.project .. "/src/lib.rs", "pub fn a() {}\npub fn b() {}\npub fn c() {}\n")
      t.cmd("BB7Init")
      t.cmd("BB7")
      t.ok(ui.is_open(), "open")
      t.cmd("BB7NewChat")
      ui.close()
      t.cmd("edit src/lib.rs")
      t.clear_notes()
      t.cmd("2,3BB7Add")
      t.note("BB-7: Added src/lib.rs:2-3", I)
      t.cmd("edit src/main.rs")
      t.cmd("BB7")
      -- :BB7Add from inside the UI adds the file that was being edited.
      t.cmd("BB7Add")
      t.note("BB-7: Added src/main.rs", I)
      t.eq("input", ui.current_pane(), "focus in the input")
      t.ok(preview_text():find("• Added src/main.rs", 1, true), "context events shown in the chat at once")
    end,
  },
  {
    "send: the reply streams into the preview, then M; usage, cost and balance shown; title arrives",
    function()
      given("A", { reply1() })
      local input = require("bb7.ui.input")
      vim.api.nvim_buf_set_lines(input.buf(), 0, -1, false, { "Make the greeting friendlier." })
      input.send()
      t.eq("", t.buf_text(input.buf()), "input cleared")
      t.ok(session.stream ~= nil, "streaming")
      -- Mid-stream: some words are in the preview before the reply is done.
      t.wait(function()
        return preview_text():find("word5 ", 1, true)
      end, 10000, "streamed text")
      t.ok(session.stream ~= nil and not preview_text():find("word" .. WORDS, 1, true), "seen before the end")
      t.ok(preview_text():find("▾ Reasoning", 1, true), "reasoning streamed")
      t.ok(preview_text():find("Make the greeting friendlier.", 1, true), "user message shown at once")
      t.ok(preview_text():find("• Added section src/lib.rs:2-3", 1, true), "earlier history kept above the stream")
      t.wait(function()
        return session.stream == nil
      end, 15000, "done")
      t.no_errors()
      t.ok(#preview.flush_times > 0, "batched flushes recorded")
      -- Full render after done: the reply, collapsed reasoning, the output.
      local text = preview_text()
      t.ok(text:find("word" .. WORDS, 1, true), "whole reply")
      t.ok(text:find("▸ Reasoning", 1, true), "reasoning collapsed after done")
      -- (this used to accept any "src/main.rs", which the context events above always held)
      t.ok(text:find("\n  → Output: src/main.rs\n", 1, true) or text:find("\n  → Output: src/main.rs$"), "output noted:\n" .. text)
      local f = session.status_of("src/main.rs")
      t.eq("M", f and f.status, "edited file shows M")
      t.ok(t.buf_text(ui.bufs.files):find("M   src/main.rs", 1, true), "M in the Files pane")
      t.ok(session.last_usage and session.last_usage.cost and session.last_usage.cost > 0, "usage")
      t.wait(function()
        return session.balance ~= nil
      end, 5000, "balance")
      local st = ui.status_text()
      t.ok(st:find("balance $7.50", 1, true), st)
      t.ok(st:find("last: ", 1, true), st)
      t.wait(function()
        return session.chat.name == "Friendlier Greeting Change"
      end, 5000, "title_updated")
      t.wait(function()
        return t.buf_text(ui.bufs.chats):find("Friendlier Greeting Change", 1, true)
      end, 2000, "title in the chat list")
    end,
  },
  {
    "preview: <CR> expands and collapses reasoning; Files <CR> shows the output, <BS> returns; token estimate",
    function()
      given("B")
      ui.focus("preview")
      local function find(prefix)
        for i, l in ipairs(vim.api.nvim_buf_get_lines(preview.buf(), 0, -1, false)) do
          if l:sub(1, #prefix) == prefix then
            return i
          end
        end
      end
      local row = find("▸ Reasoning")
      t.ok(row, "collapsed reasoning line")
      vim.api.nvim_win_set_cursor(ui.wins.preview, { row, 0 })
      vim.api.nvim_feedkeys("\r", "x", false)
      t.ok(find("▾ Reasoning") == row, "expanded in place")
      t.ok(preview_text():find("  The user wants a friendlier greeting. One edit is enough.", 1, true), "reasoning text")
      vim.api.nvim_feedkeys("\r", "x", false)
      t.ok(find("▸ Reasoning") == row, "collapsed again")
      ui.focus("files")
      for i, l in ipairs(vim.api.nvim_buf_get_lines(ui.bufs.files, 0, -1, false)) do
        if l:find("src/main.rs", 1, true) then
          vim.api.nvim_win_set_cursor(ui.wins.files, { i, 0 })
        end
      end
      vim.api.nvim_feedkeys("\r", "x", false)
      t.eq("preview", ui.current_pane(), "preview focused")
      t.ok(preview_text():find('println!("hello from BB-7");', 1, true), "output content shown")
      t.ok(vim.api.nvim_win_get_config(ui.wins.preview).title[1][1]:find("src/main.rs (output)", 1, true), "title")
      vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes("<BS>", true, false, true), "x", false)
      t.ok(preview_text():find("word" .. WORDS, 1, true), "back to the chat")
      t.wait(function()
        return session.estimate ~= nil
      end, 5000, "token estimate")
      t.ok(vim.api.nvim_win_get_config(ui.wins.files).title[1][1]:find("tokens", 1, true), "tokens in the Files title")
    end,
  },
  {
    "apply: the file on disk and the open buffer change",
    function()
      given("B")
      local buf = vim.fn.bufnr(env.project .. "/src/main.rs")
      t.ok(buf > 0 and vim.api.nvim_buf_is_loaded(buf), "buffer open")
      ui.focus("files")
      local row
      for i, l in ipairs(vim.api.nvim_buf_get_lines(ui.bufs.files, 0, -1, false)) do
        if l:find("src/main.rs", 1, true) then
          row = i
        end
      end
      vim.api.nvim_win_set_cursor(ui.wins.files, { row, 0 })
      t.clear_notes()
      vim.api.nvim_feedkeys("p", "x", false) -- the Files pane's apply key
      t.note("BB-7: Applied src/main.rs", I)
      local want = 'fn main() {\n    println!("hello from BB-7");\n}\n'
      t.eq(want, t.read(env.project .. "/src/main.rs"), "disk")
      t.eq(vim.split(want, "\n", { trimempty = true }), vim.api.nvim_buf_get_lines(buf, 0, -1, false), "buffer")
      t.eq("", session.status_of("src/main.rs").status, "no output left")
    end,
  },
  {
    "model picker lists models with prices; picking sets the chat's model",
    function()
      given("A")
      local models = require("bb7.ui.models")
      local got
      session.fetch_models(function(m)
        got = m
      end)
      t.wait(function()
        return got
      end, 5000, "models")
      local win, buf = models.show(got)
      local text = t.buf_text(buf)
      t.ok(text:find("mock/reasoner", 1, true) and text:find("$1.00 in", 1, true), text)
      -- Favourite the second model, then pick it.
      for i, l in ipairs(vim.api.nvim_buf_get_lines(buf, 0, -1, false)) do
        if l:find("mock/model", 1, true) then
          vim.api.nvim_win_set_cursor(win, { i, 0 })
        end
      end
      vim.api.nvim_feedkeys("f", "x", false)
      t.eq({ "mock/model" }, session.favorites(), "favourite saved")
      t.ok(vim.api.nvim_buf_get_lines(buf, 1, 2, false)[1]:find("★ mock/model", 1, true), "favourite first")
      vim.api.nvim_win_set_cursor(win, { 2, 0 })
      vim.api.nvim_feedkeys("\r", "x", false)
      t.eq("mock/model", session.current_model(), "model picked")
      -- `e` cycles the reasoning effort; it is saved for the chat and sent with the next send.
      local win2, buf2 = models.show(got)
      vim.api.nvim_feedkeys("e", "x", false)
      t.eq("low", session.chat.reasoning_effort, "effort set")
      t.ok(ui.status_text():find("(reasoning low)", 1, true), ui.status_text())
      vim.api.nvim_win_close(win2, true)
      t.ok(buf2, "picker buffer")
      local saved = vim.json.decode(t.read(env.project .. "/.bb7/chats/" .. session.chat.id .. "/chat.json"))
      t.eq("mock/model", saved.model, "persisted in chat.json")
      t.eq("low", saved.reasoning_effort, "effort persisted")
      local state = vim.json.decode(t.read(env.home .. "/.bb7/state.json"))
      t.eq("mock/model", state.last_model, "last model")
    end,
  },
  {
    "cancel mid-stream with <C-c>: partial reply kept, exact message",
    function()
      given("A", { slow_reply() })
      session.set_model("mock/model")
      session.set_reasoning_effort("low")
      t.clear_notes()
      ui.open("input")
      local input = require("bb7.ui.input")
      vim.api.nvim_buf_set_lines(input.buf(), 0, -1, false, { "Write a long answer." })
      local host = require("bb7.host")
      local orig, sent = host.request, nil
      host.request = function(action, params, ...)
        if action == "send" then
          sent = params
        end
        return orig(action, params, ...)
      end
      input.send()
      host.request = orig
      t.eq("mock/model", sent.model, "picked model sent")
      t.eq("low", sent.reasoning_effort, "reasoning effort sent")
      t.wait(function()
        return preview_text():find("slow2 ", 1, true)
      end, 10000, "slow stream started")
      t.clear_notes()
      ui.focus("input")
      vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes("<C-c>", true, false, true), "x", false)
      t.wait(function()
        return session.stream == nil
      end, 5000, "stream ended")
      t.note("BB-7: Response aborted by user.", I)
      t.wait(function()
        return preview_text():find("Response aborted by user.", 1, true)
      end, 3000, "system message rendered")
      t.ok(preview_text():find("slow1 slow2", 1, true), "partial reply kept")
      t.ok(not preview_text():find("slow99", 1, true), "stopped early")
      -- The editor stays usable and the host takes requests again.
      t.eq("chat_list", require("bb7.host").call("chat_list", {}).type, "host serving")
    end,
  },
  {
    "diff_error: the failed edit is reported; an empty send retries with retry_context",
    function()
      given("A", { DIFF_ERROR, text_reply("Retried: nothing else to change.") })
      local input = require("bb7.ui.input")
      ui.focus("input")
      vim.api.nvim_buf_set_lines(input.buf(), 0, -1, false, { "Try an edit." })
      t.clear_notes()
      input.send()
      t.wait(function()
        return session.stream == nil
      end, 10000, "reply done")
      local n = t.notes[1]
      t.ok(n and n.level == vim.log.levels.WARN and n.msg:find("^BB%-7: 1 edit%(s%) could not be applied"), vim.inspect(t.notes))
      t.ok(session.retry_context and #session.retry_context.errors == 1, "retry context kept")
      local host = require("bb7.host")
      local orig, sent = host.request, nil
      host.request = function(action, params, ...)
        if action == "send" then
          sent = params
        end
        return orig(action, params, ...)
      end
      input.send() -- empty input: retry
      host.request = orig
      t.ok(sent and sent.retry_context and #sent.retry_context.errors == 1, "retry_context sent")
      t.eq(nil, session.retry_context, "used once")
      t.wait(function()
        return session.stream == nil
      end, 10000, "retry done")
      t.ok(preview_text():find("Retried: nothing else to change.", 1, true), "retry reply")
      t.no_errors()
    end,
  },
  {
    "fork from a user message: new chat, draft is the message, context restored",
    function()
      given("B")
      local old = session.chat.id
      ui.focus("preview")
      local row
      for i, l in ipairs(vim.api.nvim_buf_get_lines(preview.buf(), 0, -1, false)) do
        if l == "Make the greeting friendlier." then
          row = i
        end
      end
      t.ok(row, "user message in the preview")
      vim.api.nvim_win_set_cursor(ui.wins.preview, { row, 0 })
      t.clear_notes()
      vim.api.nvim_feedkeys("c", "x", false) -- fork (never <C-f>: that is Vim's page down)
      t.note("BB-7: Forked into a new chat", I)
      t.ok(session.chat.id ~= old, "new chat active")
      t.eq("Make the greeting friendlier.", t.buf_text(require("bb7.ui.input").buf()), "draft in the input")
      local paths = {}
      for _, f in ipairs(require("bb7.host").call("context_list", {}).files) do
        paths[#paths + 1] = f.path .. (f.start_line and ":s" or "")
      end
      table.sort(paths)
      t.eq({ "src/lib.rs:s", "src/main.rs" }, paths, "context restored from the snapshot")
      t.ok(t.buf_text(ui.bufs.chats):find("Fork of", 1, true), "fork listed")
    end,
  },
  {
    "edit a previous message: chat truncated there, the message becomes the draft",
    function()
      given("B", { text_reply("A long answer."), text_reply("Fixed.") })
      local input0 = require("bb7.ui.input")
      for _, m in ipairs({ "Write a long answer.", "Please fix the edits that failed." }) do
        vim.api.nvim_buf_set_lines(input0.buf(), 0, -1, false, { m })
        input0.send()
        t.wait(function()
          return session.stream == nil
        end, 10000, "reply to " .. m)
      end
      -- Back to the original chat, edit its first message.
      local chats = session.list_chats()
      local orig
      for _, c in ipairs(chats) do
        if c.name == "Friendlier Greeting Change" then
          orig = c.id
        end
      end
      session.select_chat(orig)
      local before = #session.chat.messages
      local idx
      for i, m in ipairs(session.chat.messages) do
        if m.role == "user" and session.message_text(m) == "Write a long answer." then
          idx = i - 1
        end
      end
      -- <M-e> in the input edits the last user message (the retry), after asking.
      ui.open("input")
      local n0 = #session.chat.messages
      local orig_select, asked = vim.ui.select, {}
      vim.ui.select = function(_, o, cb)
        asked[#asked + 1] = o.prompt
        cb("Yes")
      end
      vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes("<M-e>", true, false, true), "x", false)
      t.eq("Please fix the edits that failed.", t.buf_text(require("bb7.ui.input").buf()), "last message in the input")
      t.ok(#session.chat.messages < n0, "cut at the last message")
      -- <C-e> in the preview edits the message under the cursor.
      before = #session.chat.messages
      ui.focus("preview")
      local row
      for i, l in ipairs(vim.api.nvim_buf_get_lines(preview.buf(), 0, -1, false)) do
        if l == "Write a long answer." then
          row = i
        end
      end
      vim.api.nvim_win_set_cursor(ui.wins.preview, { row, 0 })
      vim.api.nvim_feedkeys("i", "x", false) -- edit (never <C-e>: that is Vim's scroll)
      vim.ui.select = orig_select
      t.eq(2, #asked, "both edits asked first")
      t.ok(#session.chat.messages < before, "truncated")
      t.eq(idx, #session.chat.messages, "ends before the edited message")
      t.eq("Write a long answer.", t.buf_text(require("bb7.ui.input").buf()), "draft restored into the input")
    end,
  },
  {
    "search chats finds message content",
    function()
      given("B")
      local results = session.search("friendlier")
      t.ok(#results >= 1, "results")
      local chats = require("bb7.ui.chats")
      ui.open("chats")
      chats.search("friendlier")
      t.ok(t.buf_text(ui.bufs.chats):find("Search: friendlier", 1, true), "search header")
      t.ok(t.buf_text(ui.bufs.chats):find("Friendlier Greeting Change", 1, true), "match listed")
      ui.close()
      t.no_errors()
    end,
  },
}
