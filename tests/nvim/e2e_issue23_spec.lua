-- End to end, real host (and the mock LLM server where a reply is needed): issue 23's plugin
-- findings, each as the user met it.
--   1  accepting hunks after a review conflict must not undo an edit made elsewhere (gA and ga)
--   2  p on a ~M file asks first; the status follows an edit made outside Neovim
--   3  a reply after editing a context file streams and ends like any other
--  14  an agent edit of a file it read shows M with its real change (D, P, p)
--  15  a long streamed reply with reasoning ends without a highlighter error
--  16  a review starts in the proposal, on the first hunk even on line 1; q closes it anywhere
local t = require("helpers")
local I, W = vim.log.levels.INFO, vim.log.levels.WARN

local function press(keys)
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(keys, true, false, true), "mx", false)
end

local function lines(n, f)
  local out = {}
  for i = 1, n do
    local l = f(i)
    if l then
      out[#out + 1] = l
    end
  end
  return table.concat(out, "\n") .. "\n"
end

local OLD = lines(40, function(i)
  return "line " .. i
end)
-- Three hunks: lines 3, 12 (one added after it) and 36.
local NEW = lines(40, function(i)
  if i == 3 then
    return "line three"
  elseif i == 12 then
    return "line 12\nline 12b"
  elseif i == 36 then
    return "LINE 36"
  end
  return "line " .. i
end)

local function noted(needle, level)
  for _, n in ipairs(t.notes) do
    if n.msg:find(needle, 1, true) and (level == nil or n.level == level) then
      return n
    end
  end
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

local TITLE_MODEL = "mock/title"

--- A project with m.txt (`content`) in a new chat's context and `output` as the model's version,
--- placed where the host keeps outputs (no model needed).
local function with_output(content, output, opts)
  local env = t.env(opts)
  local session = require("bb7.session")
  t.write(env.project .. "/m.txt", content)
  t.cmd("BB7Init")
  t.cmd("BB7NewChat")
  t.cmd("BB7Add m.txt")
  local out = env.project .. "/.bb7/chats/" .. session.chat.id .. "/output/m.txt"
  t.write(out, output)
  session.refresh_files()
  return env, session, out
end

--- Item 1: a review, an edit to another line from outside, then `keys` twice (the first is
--- refused as a conflict, the second goes through): the edit is still there.
local function review_with_outside_edit(place_cursor, keys, want)
  local env, _, out = with_output(OLD, NEW)
  local review = require("bb7.ui.review")
  t.cmd("edit m.txt")
  t.cmd("BB7Review m.txt")
  local st = review.current()
  t.ok(st, "review open")
  t.eq(3, #st.hunks, "three hunks")
  place_cursor(st)
  local edited = OLD:gsub("line 20\n", "line 20, edited in a shell\n")
  t.write(env.project .. "/m.txt", edited)
  t.clear_notes()
  press(keys)
  t.ok(noted("BB-7: Conflict:", W), "conflict reported: " .. vim.inspect(t.notes))
  t.eq(edited, t.read(env.project .. "/m.txt"), "nothing written on the conflict")
  t.ok(review.current(), "the review stays open")
  t.ok(t.buf_text(st.local_buf):find("line 20, edited in a shell", 1, true), "the left window shows the file as it is now")
  t.eq(3, #review.current().hunks, "the hunks are the model's three changes only")
  press(keys)
  local disk = t.read(env.project .. "/m.txt")
  t.ok(disk:find("line 20, edited in a shell\n", 1, true), "the edit made elsewhere is kept:\n" .. disk)
  t.eq(want(edited), disk, "the accepted hunks are applied on top of it")
  t.eq(disk, t.buf_text(st.local_buf) .. "\n", "the buffer follows")
  t.no_errors()
  return out
end

return {
  {
    "1: gA after a conflict keeps the edit made elsewhere (the left side is reloaded, the proposal carried onto it)",
    function()
      local out = review_with_outside_edit(function() end, "gA", function(edited)
        return NEW:gsub("line 20\n", "line 20, edited in a shell\n")
      end)
      t.eq(nil, t.read(out), "every hunk taken: the output is used up")
      t.eq(nil, require("bb7.ui.review").current(), "review closed")
    end,
  },
  {
    "1: ga on a neighbouring hunk after a conflict keeps the edit made elsewhere",
    function()
      review_with_outside_edit(function(st)
        vim.api.nvim_set_current_win(st.prop_win)
        vim.api.nvim_win_set_cursor(st.prop_win, { 13, 0 }) -- the added "line 12b"
      end, "ga", function(edited)
        return (edited:gsub("line 12\n", "line 12\nline 12b\n"))
      end)
      t.eq(2, #require("bb7.ui.review").current().hunks, "two hunks left")
    end,
  },
  {
    "16: the review starts in the proposal on a first hunk on line 1; q closes it from the local window without recording a macro",
    function()
      local old = "first\n" .. OLD
      local new = "FIRST\n" .. NEW
      local env = with_output(old, new)
      local review = require("bb7.ui.review")
      t.clear_notes()
      t.cmd("BB7Review m.txt")
      local st = review.current()
      t.ok(st, "review open")
      t.eq(4, #st.hunks, "four hunks")
      t.eq(st.prop_win, vim.api.nvim_get_current_win(), "the cursor starts in the (read-only) proposal")
      t.eq(1, vim.api.nvim_win_get_cursor(0)[1], "on the first hunk, on line 1")
      press("ga")
      t.eq("FIRST\n" .. OLD, t.read(env.project .. "/m.txt"), "ga took the hunk on line 1")
      vim.api.nvim_set_current_win(st.local_win)
      press("q")
      t.eq("", vim.fn.reg_recording(), "q did not start recording a macro")
      t.eq(nil, review.current(), "q closed the review")
      t.eq("FIRST\n" .. OLD, t.read(env.project .. "/m.txt"), "the file is untouched")
      t.no_errors()
    end,
  },
  {
    "2: the Files pane shows ~M after a save from outside; p asks before overwriting it, P leaves it alone",
    function()
      local env, session = with_output(OLD, NEW)
      local ui = require("bb7.ui")
      t.cmd("BB7")
      local function pane()
        return t.buf_text(ui.bufs.files)
      end
      t.ok(pane():find("M   m.txt", 1, true), pane())
      local mine = OLD:gsub("line 20\n", "line 20 (saved from a shell)\n")
      t.write(env.project .. "/m.txt", mine)
      t.wait(function()
        return pane():find("~M  m.txt", 1, true)
      end, 5000, "the Files pane to show ~M")
      local asked = {}
      local answer = "No"
      local orig = vim.ui.select
      vim.ui.select = function(_, o, cb)
        asked[#asked + 1] = o.prompt
        cb(answer)
      end
      local ok, err = pcall(function()
        ui.focus("files")
        for i, l in ipairs(vim.api.nvim_buf_get_lines(ui.bufs.files, 0, -1, false)) do
          if l:find("m.txt", 1, true) then
            vim.api.nvim_win_set_cursor(ui.wins.files, { i, 0 })
          end
        end
        t.clear_notes()
        press("P")
        t.ok(noted("Not applied, changed locally", W), vim.inspect(t.notes))
        t.eq(mine, t.read(env.project .. "/m.txt"), "P left the changed file alone")
        press("p")
        t.eq(1, #asked, "p asked")
        t.ok(asked[1]:find("changed locally", 1, true), asked[1])
        t.eq(mine, t.read(env.project .. "/m.txt"), "answered No: nothing written")
        answer = "Yes"
        press("p")
        t.eq(NEW, t.read(env.project .. "/m.txt"), "answered Yes: applied")
      end)
      vim.ui.select = orig
      assert(ok, err)
      t.eq(nil, session.status_of("m.txt").has_output and true or nil, "output used up")
      t.no_errors()
    end,
  },
  {
    "3: a reply after editing and saving a context file streams, ends, and the next send goes through",
    function()
      local slow = { stream = {} }
      for i = 1, 20 do
        slow.stream[#slow.stream + 1] = { content = "second" .. i .. " " }
        slow.stream[#slow.stream + 1] = { delay_ms = 20 }
      end
      vim.list_extend(slow.stream, {
        { finish = "stop" },
        { usage = { prompt_tokens = 100, completion_tokens = 10, cost = 0.0001 } },
        "done",
      })
      local env = t.env({
        script = {
          replies = { text_reply("first answer"), slow, text_reply("third answer") },
          by_model = { [TITLE_MODEL] = text_reply("A Title") },
        },
        config = { title_model = TITLE_MODEL },
      })
      local session, ui = require("bb7.session"), require("bb7.ui")
      local preview, input = require("bb7.ui.preview"), require("bb7.ui.input")
      t.write(env.project .. "/README.md", "# Readme\n")
      t.cmd("BB7Init")
      t.cmd("BB7")
      t.cmd("BB7NewChat")
      t.cmd("BB7Add README.md")
      local function send(text)
        vim.api.nvim_buf_set_lines(input.buf(), 0, -1, false, { text })
        input.send()
      end
      local function shown(s)
        return t.buf_text(preview.buf()):find(s, 1, true)
      end
      send("hello")
      t.wait(function()
        return session.stream == nil and shown("first answer")
      end, 15000, "the first reply")
      ui.close()
      t.cmd("edit README.md")
      vim.api.nvim_buf_set_lines(0, 1, 1, false, { "edited" })
      t.cmd("silent write")
      t.cmd("BB7")
      t.clear_notes()
      send("again")
      t.ok(session.stream ~= nil, "streaming")
      t.wait(function()
        return shown("second20")
      end, 15000, "the second reply to stream into the preview")
      t.wait(function()
        return session.stream == nil
      end, 15000, "the second reply to end")
      t.ok(noted("README.md", W), "the stale snapshot is mentioned: " .. vim.inspect(t.notes))
      t.ok(not noted("Another request is already in progress"), vim.inspect(t.notes))
      send("third")
      t.wait(function()
        return session.stream == nil and shown("third answer")
      end, 15000, "the third reply")
      t.eq("", t.buf_text(input.buf()), "the input was sent, not lost")
      t.no_errors()
    end,
  },
  {
    "3: a send the host refuses as busy gives its text back to the input",
    function()
      local slow = { stream = {} }
      for i = 1, 200 do
        slow.stream[#slow.stream + 1] = { content = "held" .. i .. " " }
        slow.stream[#slow.stream + 1] = { delay_ms = 50 }
      end
      vim.list_extend(slow.stream, { { finish = "stop" }, "done" })
      t.env({ script = { replies = { slow }, fallback = text_reply("fallback") } })
      local session, host = require("bb7.session"), require("bb7.host")
      local input = require("bb7.ui.input")
      t.cmd("BB7Init")
      t.cmd("BB7")
      t.cmd("BB7NewChat")
      -- Another request holds the host (sent around the session, as a second client would).
      local first, ended = false, false
      host.request("send", { content = "held" }, function()
        ended = true
      end, function()
        first = true
      end)
      t.wait(function()
        return first
      end, 10000, "the other reply to stream")
      t.clear_notes()
      vim.api.nvim_buf_set_lines(input.buf(), 0, -1, false, { "keep me" })
      input.send()
      t.wait(function()
        return session.stream == nil and t.buf_text(input.buf()) == "keep me"
      end, 10000, "the refused text back in the input")
      t.note("BB-7: Another request is already in progress", W)
      host.request("cancel", {}, function() end)
      t.wait(function()
        return ended
      end, 10000, "the other reply to end")
      t.no_errors()
    end,
  },
  {
    "15: a long streamed reply with reasoning ends without a treesitter highlighter error",
    function()
      -- 2,000 lines of reasoning (Markdown with inline markup: injections), then a list and a code
      -- block. At the end the chat is rendered again with the reasoning collapsed, far fewer lines;
      -- a highlighter still holding the old trees failed on its next redraw ("Invalid 'end_row':
      -- out of range"), which the runner catches in v:errmsg. Headless Neovim draws only when
      -- asked, so the wait redraws as a screen would.
      local stream = {}
      for i = 1, 2000 do
        stream[#stream + 1] = {
          reasoning = ("Reasoning line %d: *considering* `option_%d` and [links](x) **bold**\n"):format(i, i),
        }
        if i % 10 == 0 then
          stream[#stream + 1] = { delay_ms = 20 }
        end
      end
      for i = 1, 40 do
        stream[#stream + 1] = { content = ("- item %d with `code` and *emphasis*\n"):format(i) }
        if i == 20 then
          stream[#stream + 1] = { content = "```lua\nlocal x = 1\nprint(x)\n```\n" }
        end
      end
      vim.list_extend(stream, { { finish = "stop" }, { usage = { prompt_tokens = 10, completion_tokens = 10 } }, "done" })
      t.env({ script = { replies = { { model = "mock/reasoner", stream = stream } }, fallback = text_reply("x") } })
      local session, preview = require("bb7.session"), require("bb7.ui.preview")
      t.cmd("BB7Init")
      t.cmd("BB7")
      t.cmd("BB7NewChat")
      local input = require("bb7.ui.input")
      vim.api.nvim_buf_set_lines(input.buf(), 0, -1, false, { "think hard" })
      input.send()
      t.wait(function()
        vim.cmd("redraw")
        return session.stream == nil and t.buf_text(preview.buf()):find("▸ Reasoning", 1, true)
      end, 90000, "the reply to end and the chat to be rendered again")
      for _ = 1, 20 do
        vim.cmd("redraw")
        vim.wait(10)
      end
      t.eq("", vim.v.errmsg, "no error while drawing")
      t.ok(t.buf_text(preview.buf()):find("- item 40 with `code`", 1, true), "the whole reply shown")
      t.no_errors()
    end,
  },
  {
    "14: an agent edit of a file it read shows M; D shows just the change; P applies it",
    function()
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
      local env = t.env({
        script = {
          replies = {
            call_reply("c1", "read_file", { file_path = "notes.txt" }),
            call_reply("c2", "edit_file", {
              edits = {
                { path = "notes.txt", file_id = "{{file_id:notes.txt}}", old_string = "line 15\n", new_string = "line fifteen\n" },
              },
            }),
            text_reply("Spelled out line 15."),
          },
          fallback = text_reply("fallback"),
        },
      })
      local session, ui = require("bb7.session"), require("bb7.ui")
      local original = lines(30, function(i)
        return "line " .. i
      end)
      t.write(env.project .. "/notes.txt", original)
      t.cmd("BB7Init")
      t.cmd("BB7")
      t.cmd("BB7NewChat agent")
      t.cmd("BB7Agent on")
      t.wait(function()
        return session.chat.mode == "agent"
      end, 5000, "agent mode")
      local input = require("bb7.ui.input")
      vim.api.nvim_buf_set_lines(input.buf(), 0, -1, false, { "Spell out line 15." })
      input.send()
      t.wait(function()
        return session.stream == nil and t.buf_text(ui.bufs.preview):find("Spelled out line 15.", 1, true)
      end, 60000, "the agent reply")
      local f = session.status_of("notes.txt")
      t.eq("M", f and f.status, "M, not !A")
      t.ok(t.buf_text(ui.bufs.files):find("M   notes.txt", 1, true), t.buf_text(ui.bufs.files))
      ui.focus("files")
      for i, l in ipairs(vim.api.nvim_buf_get_lines(ui.bufs.files, 0, -1, false)) do
        if l:find("notes.txt", 1, true) then
          vim.api.nvim_win_set_cursor(ui.wins.files, { i, 0 })
        end
      end
      press("D")
      local diff = t.buf_text(ui.bufs.preview)
      t.ok(diff:find("+line fifteen", 1, true) and diff:find("-line 15", 1, true), diff)
      t.ok(not diff:find("+line 1\n", 1, true), "only the change, not the whole file added: " .. diff)
      ui.focus("files")
      t.clear_notes()
      press("P")
      t.note("BB-7: Applied 1 files", I)
      t.eq(original:gsub("line 15\n", "line fifteen\n"), t.read(env.project .. "/notes.txt"), "applied")
      t.no_errors()
    end,
  },
}
