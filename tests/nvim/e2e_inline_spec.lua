-- End to end, real host and the mock LLM server: inline edits (:BB7Inline, lua/bb7/inline.lua) on
-- unsaved buffers, shown in the buffer as hunks, accepted or rejected one by one with the review keys,
-- undone with `u`, never written to disk.
local t = require("helpers")
local I = vim.log.levels.INFO

local function press(keys)
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(keys, true, false, true), "mx", false)
end

local function reply(text)
  return { stream = { { content = text }, { finish = "stop" }, { usage = { prompt_tokens = 50, completion_tokens = 20 } }, "done" } }
end

local function lines(buf)
  return vim.api.nvim_buf_get_lines(buf, 0, -1, false)
end

local NS = "bb7_inline"

--- The inline marks of `buf`: {row, hl_group, removed lines (virtual)} in row order.
local function marks(buf)
  local ns = vim.api.nvim_get_namespaces()[NS]
  local out = {}
  for _, m in ipairs(vim.api.nvim_buf_get_extmarks(buf, ns, 0, -1, { details = true })) do
    local d = m[4]
    if d.hl_group or d.virt_lines then
      local removed = {}
      for _, vl in ipairs(d.virt_lines or {}) do
        removed[#removed + 1] = vl[1][1]
      end
      out[#out + 1] = { row = m[2], hl = d.hl_group, removed = removed }
    end
  end
  return out
end

local function global_chats(inline)
  local r = inline.host().call("chat_list", { global = true })
  t.eq("chat_list", r.type, "chat_list reply")
  return r.chats or {}
end

local DISK = table.concat({
  "local M = {}",
  "function M.a()",
  "  return 1",
  "end",
  "function M.b()",
  "  return 2",
  "end",
  "return M",
}, "\n") .. "\n"

return {
  {
    "an unsaved buffer: the proposal shown inline, ga / gr per hunk, u takes the edit back; nothing written to disk",
    function()
      local env = t.env({
        script = {
          replies = {
            reply(table.concat({
              "Here it is:",
              "",
              "```lua",
              "function M.first()",
              "  return 1",
              "end",
              "function M.b()",
              "  -- twenty",
              "  return 20",
              "end",
              "```",
            }, "\n")),
          },
        },
      })
      local inline = require("bb7.inline")
      local file = env.project .. "/m.lua"
      t.write(file, DISK)
      t.cmd("edit " .. vim.fn.fnameescape(file))
      local buf = vim.api.nvim_get_current_buf()
      -- An unsaved change: the buffer, not the file, is what the model is shown and what is edited.
      vim.api.nvim_buf_set_lines(buf, 0, 1, false, { "local M = {} -- unsaved" })
      local unsaved = lines(buf)
      t.ok(vim.bo[buf].modified, "modified")

      t.cmd("2,7BB7Inline rename a to first; make b return 20")
      t.ok(inline.running(), "waiting for the reply")
      t.wait(function()
        return inline.review(buf)
      end, 15000, "the inline review")
      t.ok(not inline.running(), "settled")
      t.eq({
        "local M = {} -- unsaved",
        "function M.first()",
        "  return 1",
        "end",
        "function M.b()",
        "  -- twenty",
        "  return 20",
        "end",
        "return M",
      }, lines(buf), "the proposal is in the buffer")
      -- Added lines highlighted, the lines they replace shown as virtual lines above them.
      t.eq({
        { row = 1, hl = "DiffAdd", removed = { "function M.a()" } },
        { row = 5, hl = "DiffAdd", removed = { "  return 2" } },
      }, marks(buf), "inline hunks")
      t.note("BB-7: 2 inline hunk(s): ga accept · gr reject · g? keys", I)
      t.eq(2, vim.api.nvim_win_get_cursor(0)[1], "cursor on the first hunk")
      t.eq(DISK, t.read(file), "nothing written yet")

      press("ga")
      t.eq(6, vim.api.nvim_win_get_cursor(0)[1], "cursor moved to the next hunk")
      t.eq({ { row = 5, hl = "DiffAdd", removed = { "  return 2" } } }, marks(buf), "one hunk left")
      press("gr")
      t.eq(nil, inline.review(buf), "review over")
      t.note("BB-7: Inline edit done: 1 accepted, 1 rejected (u undoes it)", I)
      t.eq({}, marks(buf), "no marks left")
      t.eq(0, #vim.api.nvim_buf_get_keymap(buf, "n"), "the review keys are gone")
      t.eq({
        "local M = {} -- unsaved",
        "function M.first()",
        "  return 1",
        "end",
        "function M.b()",
        "  return 2",
        "end",
        "return M",
      }, lines(buf), "the accepted hunk only")
      t.ok(vim.bo[buf].modified, "still unsaved")
      t.eq(DISK, t.read(file), "the file on disk is untouched")

      -- One `u` takes the whole inline edit back, down to the user's own unsaved text.
      vim.cmd("silent normal! u")
      t.eq(unsaved, lines(buf), "undone")
      vim.cmd("silent normal! \018") -- <C-r>
      t.eq("function M.first()", lines(buf)[2], "redone")
      t.eq(DISK, t.read(file), "still untouched on disk")
      -- The chat made for the edit is gone, and the project's .bb7/ was never made.
      t.eq({}, global_chats(inline), "no chat left behind")
      t.eq(0, vim.fn.isdirectory(env.project .. "/.bb7"), "no .bb7/ in the project")
      inline.stop()
    end,
  },
  {
    "a buffer with no file: gR rejects every hunk (the text as it was), then gA accepts every hunk; the visual key",
    function()
      t.env({
        script = {
          replies = {
            reply("```\nONE\ntwo\nTHREE\n```"),
            reply("```\nONE\ntwo\nTHREE\nfour\n```"),
          },
        },
      })
      local inline = require("bb7.inline")
      local leader = vim.g.mapleader or "\\"
      t.eq(":BB7Inline ", vim.fn.maparg(leader .. "bi", "x"), "the visual-mode key")
      t.cmd("enew")
      local buf = vim.api.nvim_get_current_buf()
      vim.api.nvim_buf_set_lines(buf, 0, -1, false, { "one", "two", "three" })
      local before = lines(buf)
      -- A buffer-local mapping of the user's on a review key: taken during the review, given back.
      vim.keymap.set("n", "ga", "<Nop>", { buffer = buf, desc = "mine" })

      t.cmd("%BB7Inline upper-case the odd lines")
      t.cmd("new") -- another buffer is current when the reply arrives
      t.wait(function()
        return inline.review(buf)
      end, 15000, "the first review")
      t.cmd("close")
      t.eq(buf, vim.api.nvim_get_current_buf(), "back in the edited buffer")
      t.eq({ "ONE", "two", "THREE" }, lines(buf), "proposed")
      t.eq(2, #marks(buf), "two hunks")
      press("gR")
      t.eq(nil, inline.review(buf), "review over")
      t.note("BB-7: Inline edit done: 0 accepted, 2 rejected (u undoes it)", I)
      t.eq(before, lines(buf), "back as it was")
      t.eq("mine", vim.fn.maparg("ga", "n", false, true).desc, "the user's ga is back")

      t.cmd("%BB7Inline upper-case the odd lines and add four")
      t.wait(function()
        return inline.review(buf)
      end, 15000, "the second review")
      t.eq({ "ONE", "two", "THREE", "four" }, lines(buf), "proposed")
      press("gA")
      t.eq(nil, inline.review(buf), "review over")
      t.note("BB-7: Inline edit done: 2 accepted, 0 rejected (u undoes it)", I)
      t.eq({ "ONE", "two", "THREE", "four" }, lines(buf), "accepted")
      t.eq({}, marks(buf), "no marks")
      t.eq({}, global_chats(inline), "no chat left behind")
      inline.stop()
    end,
  },
  {
    "editing while the reply is written: lines added above move the proposal with them; a change inside the selection drops it",
    function()
      t.env({ script = { replies = { reply("```\nB2\n```"), reply("```\nB2\n```") } } })
      local inline = require("bb7.inline")
      t.cmd("enew")
      local buf = vim.api.nvim_get_current_buf()
      vim.api.nvim_buf_set_lines(buf, 0, -1, false, { "a", "b", "c" })
      t.cmd("2BB7Inline upper-case it")
      -- Typed before the reply is read (it cannot be read before this test waits).
      vim.api.nvim_buf_set_lines(buf, 0, 0, false, { "new 1", "new 2" })
      vim.api.nvim_buf_set_lines(buf, -1, -1, false, { "z" })
      t.wait(function()
        return inline.review(buf)
      end, 15000, "the review")
      t.eq({ "new 1", "new 2", "a", "B2", "c", "z" }, lines(buf), "the proposal on the moved line")
      t.eq({ { row = 3, hl = "DiffAdd", removed = { "b" } } }, marks(buf), "hunk")
      press("gA")
      t.note("BB-7: Inline edit done: 1 accepted, 0 rejected (u undoes it)", I)

      t.cmd("3BB7Inline upper-case it")
      vim.api.nvim_buf_set_lines(buf, 2, 3, false, { "changed" })
      t.wait(function()
        return not inline.running()
      end, 15000, "the reply")
      t.note("BB-7: Inline edit dropped: the lines changed meanwhile", vim.log.levels.WARN)
      t.eq(nil, inline.review(buf), "no review")
      t.eq({ "new 1", "new 2", "changed", "B2", "c", "z" }, lines(buf), "the buffer as the user left it")
      t.eq(3, inline.rebase({ "x", "s", "y" }, { "x", "x2", "s", "y" }, 2, 2), "rebase: moved down")
      t.eq(nil, inline.rebase({ "x", "s", "t", "y" }, { "x", "s", "new", "t", "y" }, 2, 3), "rebase: inserted inside")
      inline.stop()
    end,
  },
  {
    "a reply with no code block, or a tool call instead: the buffer stays, one short line says why, no chat left",
    function()
      local call = {
        tool_call = {
          index = 0,
          id = "call_1",
          name = "edit_file",
          arguments = vim.json.encode({ edits = { { path = "x", file_id = "00000000", old_string = "a", new_string = "b" } } }),
        },
      }
      t.env({
        script = {
          replies = {
            reply("I would rather not."),
            { stream = { call, { finish = "tool_calls" }, "done" } },
          },
        },
      })
      local inline = require("bb7.inline")
      t.cmd("enew")
      local buf = vim.api.nvim_get_current_buf()
      vim.api.nvim_buf_set_lines(buf, 0, -1, false, { "a" })
      t.cmd("BB7Inline change it")
      t.wait(function()
        return not inline.running()
      end, 15000, "the first reply")
      t.note("BB-7: Inline edit: no code block in the reply", vim.log.levels.WARN)
      t.cmd("BB7Inline change it")
      t.wait(function()
        return not inline.running()
      end, 15000, "the second reply")
      t.note("BB-7: Inline edit failed: the model called edit_file", vim.log.levels.ERROR)
      t.eq({ "a" }, lines(buf), "unchanged")
      t.eq(nil, inline.review(buf), "no review")
      t.wait(function()
        return #global_chats(inline) == 0
      end, 5000, "the chats deleted")
      inline.stop()
    end,
  },
  {
    ":BB7InlineCancel stops the reply being written; the spinner goes, the buffer stays",
    function()
      local slow = {}
      for i = 1, 100 do
        slow[#slow + 1] = { content = "w" .. i .. " " }
        slow[#slow + 1] = { delay_ms = 100 }
      end
      slow[#slow + 1] = { finish = "stop" }
      slow[#slow + 1] = "done"
      t.env({ script = { replies = { { stream = slow } } } })
      local inline = require("bb7.inline")
      t.cmd("enew")
      local buf = vim.api.nvim_get_current_buf()
      vim.api.nvim_buf_set_lines(buf, 0, -1, false, { "a", "b" })
      t.cmd("2BB7Inline change it")
      local ns = vim.api.nvim_get_namespaces()[NS]
      t.eq(1, #vim.api.nvim_buf_get_extmarks(buf, ns, 0, -1, {}), "the spinner")
      t.cmd("BB7InlineCancel")
      t.wait(function()
        return not inline.running()
      end, 15000, "cancelled")
      t.note("BB-7: Inline edit cancelled", I)
      t.eq(0, #vim.api.nvim_buf_get_extmarks(buf, ns, 0, -1, {}), "no spinner")
      t.eq({ "a", "b" }, lines(buf), "unchanged")
      inline.stop()
    end,
  },
  {
    "the reply's code block: the first complete one, its fence's indentation taken off; none -> nil",
    function()
      local inline = require("bb7.inline")
      t.eq({ "a", "  b" }, inline.extract("x\n```lua\na\n  b\n```\n```\nz\n```"), "first block")
      t.eq({ "a", "b" }, inline.extract("  ~~~~\n  a\n  b\n  ~~~~"), "indented tildes")
      t.eq({ "```", "x" }, inline.extract("````\n```\nx\n````"), "a longer fence holds a shorter one")
      t.eq({}, inline.extract("```\n```"), "empty block: delete the lines")
      t.eq(nil, inline.extract("no code here"), "no block")
      t.eq(nil, inline.extract("```\ncut short"), "unclosed block")
    end,
  },
}
