--- Agent mode in the plugin: the per-chat toggle (`:BB7Agent`), the live tool log streamed into the
--- preview, clarifying questions (answer or skip), and the step/tool counts of agent replies.
---
--- The session knows nothing of this module: a send emits each `agent_event` and `attach` subscribes
--- to them here; the mode and the answers go to the host through the session.
local session = require("bb7.session")
local util = require("bb7.util")

local M = {}

--- Whether the active chat is in agent mode.
function M.enabled()
  local c = session.chat
  return c ~= nil and c.mode == "agent"
end

--- Sets the active chat's mode (`on` true/false; nil toggles). `cb(ok)` when the host answered.
function M.set(on, cb)
  if not session.chat then
    session.notify("No active chat", vim.log.levels.WARN)
    return
  end
  if on == nil then
    on = not M.enabled()
  end
  session.set_mode(on and "agent" or "chat", cb)
end

local attached = false

--- Handles the agent events of every send from now on: the tool log goes into the reply as "tool"
--- chunks, questions are asked. Called (once is enough) by `setup()`, by the UI when it builds its
--- panes (where sends start) and by `:BB7Agent`.
function M.attach()
  if attached then
    return
  end
  attached = true
  session.subscribe("agent_event", function(ev)
    local line = M.on_event(ev)
    if line then
      session.record(session.stream, "tool", line)
      session.emit("chunk", "tool", line)
    end
  end)
end

--- `:BB7Agent [on|off|toggle]`.
function M.command(opts)
  session.hook()
  M.attach()
  local a = vim.trim(opts and opts.args or "")
  if a == "on" then
    M.set(true)
  elseif a == "off" then
    M.set(false)
  elseif a == "" or a == "toggle" then
    M.set(nil)
  else
    session.notify("Usage: :BB7Agent [on|off|toggle]", vim.log.levels.ERROR)
  end
end

--- The part of the input footer that shows the mode.
function M.footer_part()
  if M.enabled() then
    return "agent"
  end
  if session.chat and session.chat.mode == "plan" then
    return "plan"
  end
end

local function size(n)
  n = tonumber(n) or 0
  if n < 1024 then
    return n .. " B"
  end
  return ("%.1f KiB"):format(n / 1024)
end

--- A short summary of a call's arguments.
function M.arg_summary(tool, args)
  if type(args) ~= "table" then
    return tostring(args or "")
  end
  if args.file_path then
    local r = args.file_path
    if args.start_line then
      r = r .. ":" .. args.start_line .. (args.end_line and ("-" .. args.end_line) or "")
    end
    return r
  end
  if args.query then
    return vim.json.encode(args.query) .. (args.glob and (" in " .. args.glob) or "")
  end
  if args.prefix or args.glob then
    return (args.prefix or "") .. (args.glob and (" " .. args.glob) or "")
  end
  if args.path then
    return args.path
  end
  if type(args.edits) == "table" and args.edits[1] then
    return (args.edits[1].path or "?") .. (#args.edits > 1 and (" +" .. (#args.edits - 1)) or "")
  end
  if args.question then
    return args.question
  end
  if args.summary then -- propose_plan (plan mode)
    return args.summary
  end
  if tool == "list_files" then
    return "(project)"
  end
  return ""
end

local requested = {} -- call id -> args, for the completion line

--- The question the agent waits on (`clarification.requested` data), or nil.
function M.pending()
  return session.question
end

--- Answers the waiting question (`answer` nil or empty: skipped).
function M.answer(answer)
  return session.answer_question(answer)
end

--- Handles one `agent_event` of the streaming send; returns a line for the preview, or nil.
function M.on_event(ev)
  local d = ev.data or {}
  local k = ev.kind
  if k == "job.started" then
    M.current = nil
    return nil
  elseif k == "tool.call.requested" then
    requested[d.id or ""] = d.args
    -- The input footer shows the tool running now, beside the spinner.
    M.current = util.oneline(("%s %s"):format(d.tool or "?", M.arg_summary(d.tool, d.args)))
    return nil
  elseif k == "tool.call.completed" then
    M.current = nil
    local args = requested[d.id or ""]
    requested[d.id or ""] = nil
    local mark = d.ok and "→" or "✗"
    local what = d.ok and (d.summary or "") or (d.error or "error")
    return ("⚙ %s %s %s %s · %s · %.0f ms\n"):format(
      d.tool or "?",
      M.arg_summary(d.tool, args),
      mark,
      what,
      size(d.bytes),
      tonumber(d.duration_ms) or 0
    )
  elseif k == "clarification.requested" then
    M.current = nil
    session.ask(d)
    local km = require("bb7.config").options.keymaps.input or {}
    local named = {}
    if km.send then
      named[#named + 1] = km.send .. " answers"
    end
    if km.skip_question then
      named[#named + 1] = km.skip_question .. " skips"
    end
    local keys = table.concat(named, ", ")
    return ("❓ %s\n   ↳ answer in the Input pane%s or with :BB7Answer\n"):format(
      util.oneline(d.question or "?"),
      keys ~= "" and (" (" .. keys .. ")") or ""
    )
  elseif k == "clarification.received" then
    if session.question and session.question.question_id == d.question_id then
      session.question = nil
      session.emit("question")
    end
    return d.skipped and "  (skipped)\n" or ("  ↳ %s\n"):format(util.oneline(d.answer or ""))
  elseif k == "plan.proposed" then
    -- Plan mode: the stored plan is shown as a checklist once the chat is loaded (bb7.ui.plan).
    local n = type(d.steps) == "table" and #d.steps or 0
    return ("📋 plan %s proposed: %s (%d step%s)\n"):format(
      d.plan_id or "?",
      util.oneline(d.summary or ""),
      n,
      n == 1 and "" or "s"
    )
  elseif k == "job.failed" then
    return ("✗ %s\n"):format(d.error or "failed")
  elseif k == "provider.fallback" then
    -- hybrid_auto left the local model (:help bb7-providers)
    return ("↪ %s → %s (%s)\n"):format(d.from or "?", d.to or "?", d.reason or "?")
  end
  return nil
end

--- Why a stored call failed: the first line of its result, without the `error: ` prefix, cut to
--- `max` characters (the whole text is in the chat's trace).
local function failure(p, max)
  local first = tostring(p.excerpt or p.summary or "error"):match("^[^\n]*") or ""
  first = first:gsub("^error: ", "")
  if vim.fn.strchars(first) > max then
    first = vim.fn.strcharpart(first, 0, max - 1) .. "…"
  end
  return first
end

--- The preview line of a stored `tool_call` part (a failed call says why), with the result's size
--- and the call's duration like the live log; `open` marks it expanded (▾) or collapsed (▸).
function M.call_line(p, open)
  local line = ("  %s ⚙ %s %s %s %s"):format(
    open and "▾" or "▸",
    p.tool or "?",
    M.arg_summary(p.tool, p.args),
    p.ok and "→" or "✗",
    p.ok and (p.summary or "") or failure(p, 100)
  )
  if p.bytes then
    line = line .. " · " .. size(p.bytes)
  end
  if tonumber(p.duration_ms) then
    line = ("%s · %.0f ms"):format(line, tonumber(p.duration_ms))
  end
  return util.oneline(line)
end

--- How many lines of a call's result an expanded tool call shows.
local DETAIL_LINES = 40

--- The lines of an expanded stored `tool_call` part: its arguments, step, and the start of its
--- result (the whole result is in the chat's trace). Every line is one display line.
function M.call_details(p)
  local out = {}
  local ok, args = pcall(vim.json.encode, p.args or vim.empty_dict())
  out[#out + 1] = util.oneline("args: " .. (ok and args or "?"))
  out[#out + 1] = util.oneline(
    ("step %s · %s · %s"):format(
      tostring(p.step or "?"),
      p.ok and "ok" or "failed",
      p.bytes and size(p.bytes) or "?"
    )
  )
  local body = util.lines(tostring(p.excerpt or ""))
  for i, l in ipairs(body) do
    if i > DETAIL_LINES then
      out[#out + 1] = ("… %d more lines (the whole result is in the chat's trace)"):format(#body - DETAIL_LINES)
      break
    end
    out[#out + 1] = util.oneline("│ " .. l)
  end
  return out
end

--- The footer line of an agent reply (nil for chat-mode replies).
function M.reply_footer(m)
  local a = m and m.agent
  if type(a) ~= "table" then
    return nil
  end
  return ("  agent · %d step%s · %d tool call%s"):format(
    a.steps or 0,
    (a.steps or 0) == 1 and "" or "s",
    a.tool_calls or 0,
    (a.tool_calls or 0) == 1 and "" or "s"
  )
end

return M
