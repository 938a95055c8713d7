-- End to end, real host and the mock LLM server: plan mode in the plugin (issue 28 §9). :BB7Plan
-- puts the chat in plan mode (shown in the input footer); the proposed plan renders as a checklist
-- at the end of the chat; the approve key starts the agent reply that carries it out (streamed like a
-- send); editing the steps in a scratch buffer approves them on :w; the reject key asks for feedback.
local t = require("helpers")
local env, session, preview

local function call_reply(id, name, args, cost)
  return {
    stream = {
      { tool_call = { index = 0, id = id, name = name, arguments = vim.json.encode(args) } },
      { finish = "tool_calls" },
      { usage = { prompt_tokens = 100, completion_tokens = 10, cost = cost or 0.0001 } },
      "done",
    },
  }
end

local function text_reply(text, cost)
  return {
    stream = {
      { content = text },
      { finish = "stop" },
      { usage = { prompt_tokens = 100, completion_tokens = 10, cost = cost or 0.0001 } },
      "done",
    },
  }
end

local PLAN = {
  summary = "Add a second note",
  steps = { { title = "Write notes2.txt", detail = "one line", files = { "notes2.txt" } } },
}

--- A fresh project, the UI open on a new chat in plan mode; the mock replays the plan reply, then
--- `after`.
local function start(after, config)
  -- With a spend cap, the plan reply costs nothing: the cap is not spent before the approval.
  local cost = config and config.spend and 0 or nil
  local replies = { call_reply("p1", "propose_plan", PLAN, cost), text_reply("Plan ready.", cost) }
  vim.list_extend(replies, after or {})
  env = t.env({ script = { replies = replies, fallback = text_reply("fallback reply") }, config = config })
  session, preview = require("bb7.session"), require("bb7.ui.preview")
  t.write(env.project .. "/notes.txt", "first note\n")
  t.cmd("BB7Init")
  t.cmd("BB7")
  t.cmd("BB7NewChat plan test")
  t.cmd("BB7Plan")
  t.wait(function()
    return session.chat.mode == "plan"
  end, 5000, "plan mode")
  t.ok(require("bb7.ui").status_text():find("plan", 1, true), require("bb7.ui").status_text())
  local input = require("bb7.ui.input")
  vim.api.nvim_buf_set_lines(input.buf(), 0, -1, false, { "Plan a second note." })
  input.send()
  t.wait(function()
    return session.stream == nil and session.chat.plans and #session.chat.plans == 1
  end, 90000, "the plan reply")
end

local function preview_text()
  return t.buf_text(preview.buf())
end

local function press(keys)
  require("bb7.ui").focus("preview")
  vim.api.nvim_feedkeys(keys, "x", false)
end

local function wait_reply(what)
  t.wait(function()
    return session.stream ~= nil
  end, 10000, what .. " starts")
  t.wait(function()
    return session.stream == nil
  end, 90000, what .. " ends")
end

return {
  {
    "an approval refused by a spend cap is approved again past the cap (not sent as text)",
    function()
      local prompts = {}
      vim.ui.select = function(items, opts, cb)
        prompts[#prompts + 1] = opts.prompt
        cb(items[1], 1)
      end
      -- Every request's worst case is over the day's cap: each is refused, then sent past it.
      start({
        call_reply("w1", "write_file", { path = "notes2.txt", content = "second note\n" }),
        text_reply("Done per plan."),
      }, { spend = { per_day_usd = 0.000001 } })
      t.eq(1, #prompts, "the plan send was refused and sent again")
      press("A")
      t.wait(function()
        return #prompts == 2
      end, 30000, "the approval refused by the cap")
      t.ok(prompts[2]:find("^Spend cap:"), prompts[2])
      t.wait(function()
        return session.stream == nil and session.chat.plans[1].status == "approved"
      end, 90000, "the approval past the cap")
      local text = preview_text()
      t.ok(text:find("Done per plan.", 1, true), text)
      t.ok(not text:find("Approve plan", 1, true), "no display text sent as a message: " .. text)
      t.eq("", session.chat.draft or "", "the action's display text is not put in the input")
      t.no_errors()
    end,
  },
  {
    "the plan renders as a checklist; the approve key starts the agent reply",
    function()
      start({
        call_reply("w1", "write_file", { path = "notes2.txt", content = "second note\n" }),
        text_reply("Done per plan."),
      })
      local text = preview_text()
      t.ok(text:find("▌ Plan plan%-[^ ]+ · proposed"), text)
      t.ok(text:find("[ ] 1. Write notes2.txt", 1, true), text)
      t.ok(text:find("files: notes2.txt", 1, true), text)
      t.ok(text:find("A approves · E edits the steps · X rejects", 1, true), text)
      press("A")
      wait_reply("the approved reply")
      t.no_errors()
      t.eq("approved", session.chat.plans[1].status, "stored status")
      text = preview_text()
      t.ok(text:find("Done per plan.", 1, true), text)
      t.ok(text:find("[x] 1. Write notes2.txt", 1, true), text)
      t.ok(text:find("I approve plan", 1, true), "the approval is the user message: " .. text)
      t.ok(text:find("⚙ write_file notes2.txt", 1, true), text)
    end,
  },
  {
    "editing the steps in a scratch buffer approves them on :w",
    function()
      start({ text_reply("Following your steps.") })
      local buf = require("bb7.ui.plan").edit()
      t.ok(buf, "the steps buffer opened")
      local lines = t.buf_text(buf)
      t.ok(lines:find("- Write notes2.txt", 1, true), lines)
      vim.api.nvim_buf_set_lines(buf, 0, -1, false, { "- Write notes3.txt instead", "  files: notes3.txt" })
      vim.api.nvim_set_current_buf(buf)
      t.cmd("write")
      wait_reply("the approved reply")
      t.no_errors()
      local plan = session.chat.plans[1]
      t.eq("approved", plan.status, "stored status")
      t.eq("Write notes3.txt instead", plan.steps[1].title, "edited step stored")
      t.ok(require("bb7.ui").is_open(), "the UI is open again after :w")
      t.ok(preview_text():find("Following your steps.", 1, true), preview_text())
    end,
  },
  {
    "the reject key asks for feedback and records it",
    function()
      start({})
      local prompts = {}
      vim.ui.input = function(opts, cb)
        prompts[#prompts + 1] = opts.prompt
        cb("Too broad; only touch notes.txt")
      end
      press("X")
      t.wait(function()
        return session.chat.plans[1].status == "rejected" and preview_text():find("· rejected", 1, true)
      end, 10000, "rejected, shown in the chat")
      t.eq(1, #prompts, "asked once")
      t.ok(prompts[1]:find("feedback", 1, true), prompts[1])
      local text = preview_text()
      t.ok(text:find("· rejected", 1, true), text)
      t.ok(text:find("feedback: Too broad; only touch notes.txt", 1, true), text)
      t.ok(not text:find("A approves", 1, true), "no keys for a decided plan: " .. text)
      t.no_errors()
    end,
  },
}
