-- End to end, real host and the mock LLM server: spend caps and usage in the plugin (issue 28 §11).
-- The input footer shows the day's cap and what is left; a send the host refuses (`Spend cap:`)
-- asks whether to override the cap once and resends with override_cap; once the cap is spent, a
-- send asks before anything is sent; :BB7Usage shows the ledger per day (with a bar chart), per
-- model and per chat.
local t = require("helpers")
local env, session, ui

local function text_reply(text, cost)
  return {
    stream = {
      { content = text },
      { finish = "stop" },
      { usage = { prompt_tokens = 100, completion_tokens = 10, cost = cost } },
      "done",
    },
  }
end

local function start(replies, spend)
  env = t.env({
    script = { replies = replies, fallback = text_reply("fallback reply", 0.1) },
    config = { default_model = "mock/model", spend = spend },
  })
  session, ui = require("bb7.session"), require("bb7.ui")
  t.cmd("BB7Init")
  t.cmd("BB7")
  t.cmd("BB7NewChat spend test")
end

local function send(text)
  local input = require("bb7.ui.input")
  vim.api.nvim_buf_set_lines(input.buf(), 0, -1, false, { text })
  input.send()
end

local function idle()
  t.wait(function()
    return session.stream == nil
  end, 60000, "the reply to end")
end

local function preview_text()
  return t.buf_text(require("bb7.ui.preview").buf())
end

--- Answers vim.ui.select with `answers` in turn, recording the prompts.
local prompts = {}
local function stub_select(answers)
  prompts = {}
  vim.ui.select = function(items, opts, cb)
    prompts[#prompts + 1] = opts.prompt
    local i = table.remove(answers, 1)
    cb(i and items[i], i)
  end
end

local function requests()
  local n
  require("bb7.host").request("get_usage", { group_by = "day" }, function(r)
    n = 0
    for _, row in ipairs(r.rows or {}) do
      n = n + row.requests
    end
  end)
  t.wait(function()
    return n
  end, 10000, "get_usage")
  return n
end

return {
  {
    "the footer shows the cap; a refused send asks and resends once past the cap",
    function()
      start({ text_reply("first answer", 0.1), text_reply("second answer", 0.1) }, { per_day_usd = 0.12 })
      t.wait(function()
        return ui.status_text():find("cap $0.12/day, $0.12 left", 1, true)
      end, 10000, "the cap in the footer: " .. ui.status_text())
      stub_select({ 1, 2 })
      send("one")
      idle()
      t.wait(function()
        return ui.status_text():find("$0.02 left", 1, true)
      end, 10000, "what is left after a reply")
      -- The host refuses the second send (0.1 spent + the request's worst case > 0.12): asked.
      send("two")
      t.wait(function()
        return preview_text():find("second answer", 1, true)
      end, 60000, "the resend past the cap")
      idle()
      t.eq(1, #prompts, "asked once")
      t.ok(prompts[1]:find("^Spend cap: spend.per_day_usd"), prompts[1])
      t.eq(2, requests(), "the refused send made no request; the override did")
      -- Now nothing is left: the plugin asks before sending, and "Do not send" sends nothing.
      t.wait(function()
        return ui.status_text():find("$0.00 left", 1, true)
      end, 10000, "the cap spent")
      send("three")
      t.eq(2, #prompts, "asked before sending")
      t.ok(prompts[2]:find("day cap of $0.12 is spent", 1, true), prompts[2])
      t.eq(2, requests(), "nothing was sent")
      t.no_errors()
    end,
  },
  {
    ":BB7Usage shows the table per day with a bar chart, per model and per chat",
    function()
      start({ text_reply("an answer", 0.25) })
      send("hello")
      idle()
      local usage = require("bb7.ui.usage")
      t.cmd("BB7Usage")
      t.wait(function()
        return usage.buf() and t.buf_text(usage.buf()):find("total", 1, true)
      end, 10000, "the usage table")
      local text = t.buf_text(usage.buf())
      t.ok(text:find("BB-7 usage by day", 1, true), text)
      t.ok(text:find(os.date("!%Y-%m-%d"), 1, true), text)
      t.ok(text:find(string.rep("█", usage.BAR_WIDTH), 1, true), "a full bar for the one day: " .. text)
      t.ok(text:find("$0.25", 1, true), text)
      t.ok(text:find("Caps: none set", 1, true), text)
      vim.api.nvim_feedkeys("m", "x", false)
      t.wait(function()
        return t.buf_text(usage.buf()):find("usage by model", 1, true)
      end, 10000, "per model")
      t.ok(t.buf_text(usage.buf()):find("mock/model", 1, true), t.buf_text(usage.buf()))
      vim.api.nvim_feedkeys("c", "x", false)
      t.wait(function()
        return t.buf_text(usage.buf()):find("usage by chat", 1, true)
      end, 10000, "per chat")
      t.ok(t.buf_text(usage.buf()):find(session.chat.id, 1, true), t.buf_text(usage.buf()))
      t.no_errors()
    end,
  },
}
