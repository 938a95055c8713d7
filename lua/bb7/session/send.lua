--- A send in the active chat: the request, its reply streamed to subscribers (agent events included),
--- the agent's clarifying questions answered, the end of the reply settled, and cancelling it.
local chat = require("bb7.session.chat")
local chats = require("bb7.session.chats")
local config = require("bb7.config")
local fetch = require("bb7.session.fetch")
local host = require("bb7.host")
local project = require("bb7.session.project")
local settings = require("bb7.session.settings")
local S = require("bb7.session.state")

local M = {}
local L = vim.log.levels
local notify = S.notify

--- Asks (vim.ui.select) whether to go past a spend cap for one send; calls `yes()` when the user
--- says so.
function M.confirm_override(message, yes)
  local choices = { "Send anyway (override the cap for this send)", "Do not send" }
  vim.ui.select(choices, { prompt = require("bb7.util").oneline(message) }, function(_, idx)
    if idx == 1 then
      yes()
    end
  end)
end

--- Sends `text` in the active chat, streaming the reply to subscribers. `opts.override_cap`: this
--- send passes the spend caps (`send {override_cap}`); without it, a send the caps already stop
--- (nothing left of the day's or the month's cap) asks first. `opts.action` (with `opts.params`)
--- streams another action's reply the same way (`plan_approve`; `text` is then only shown).
function M.send(text, opts)
  opts = opts or {}
  text = text or ""
  if not project.ensure_chat() then
    return false
  end
  if S.stream then
    if S.stream.chat_id ~= S.chat.id then
      -- One reply at a time: the text stays in the input, to be sent when that reply ends.
      -- One short line (a long one stops the editor at a "Press ENTER" prompt).
      local name = require("bb7.util").oneline(S.stream.chat_name or S.stream.chat_id)
      if vim.fn.strchars(name) > 24 then
        name = vim.fn.strcharpart(name, 0, 23) .. "…"
      end
      notify(("A reply streams in chat %s; send when it ends"):format(name), L.WARN)
    else
      notify("Another request is already in progress", L.WARN)
    end
    return false
  end
  local retry = not opts.action and S.retry_context or nil
  if text:match("^%s*$") and not retry then
    notify("Nothing to send", L.WARN)
    return false
  end
  if text:match("^%s*$") and retry then
    text = "Please fix the edits that failed."
  end
  local cap = not opts.override_cap and fetch.spend_left()
  if cap and cap.left <= 0 then
    M.confirm_override(
      ("Spend cap: the %s cap of %s is spent (%s over). Send anyway?"):format(
        cap.cap,
        require("bb7.util").money(cap.limit),
        require("bb7.util").money(-cap.left)
      ),
      function()
        if M.send(text, vim.tbl_extend("force", opts, { override_cap = true })) and not opts.action then
          S.emit("draft", "")
        end
      end
    )
    return false
  end
  local params = opts.action and vim.deepcopy(opts.params or {}) or { content = text }
  if opts.override_cap then
    params.override_cap = true
  end
  local model = settings.current_model()
  if model then
    params.model = model
  end
  if S.chat.reasoning_effort and S.chat.reasoning_effort ~= "" then
    params.reasoning_effort = S.chat.reasoning_effort
  end
  if retry then
    params.retry_context = retry
    S.retry_context = nil
  end
  local chat_id = S.chat.id
  local st = {
    chat_id = chat_id,
    chat_name = S.chat.name,
    global = S.chat.global,
    text = text,
    action = opts.action, -- another action's reply (`plan_approve`), sent again as it was
    params = opts.params,
    started = vim.uv.hrtime(),
    proc = host.current(),
    log = {}, -- what has streamed so far: {kind, text}, replayed when the chat is shown again
  }
  S.stream = st
  local rid = host.request(opts.action or "send", params, function(r)
    M._finish_send(st, r)
  end, function(ev)
    if ev.type == "warning" then
      -- The send goes on; say what the model sees differently from the user (one short line).
      if ev.kind == "stale_context" then
        local files = ev.files or {}
        local key = (config.options.keymaps.files or {}).update
        notify(
          ("Sent with the older snapshot of %d file(s) changed since: %s%s"):format(
            #files,
            table.concat(files, ", "),
            key and (" (" .. key .. " in the Files pane updates a snapshot)") or ""
          ),
          L.WARN
        )
      elseif ev.message then
        notify(tostring(ev.message), L.WARN)
      end
      return
    end
    if ev.type == "agent_event" then
      st.agent_events = true
      -- Agent mode (`bb7.agent` subscribes): its tool log becomes "tool" chunks, its questions are
      -- asked and answered with `clarify`.
      S.emit("agent_event", ev)
      return
    end
    M.record(st, ev.type, ev.content or "")
    S.emit("chunk", ev.type, ev.content or "")
  end)
  if not rid then
    return false
  end
  st.rid = rid
  S.chat.draft = ""
  S.emit("stream_start", st)
  return true
end

--- Records streamed text of `kind` in the stream `st` (shown again when its chat is reopened).
function M.record(st, kind, text)
  if st and text ~= "" then
    st.log[#st.log + 1] = { kind, text }
  end
end

function M._finish_send(st, r)
  st.ended = true -- the reply is over; the chat shows the stored one once loaded
  if r.type == "done" or r.type == "diff_error" then
    S.last_usage = r.usage
    S.last_duration = r.duration
  end
  S.emit("stream_end", r)
  if r.type == "diff_error" then
    S.retry_context = { errors = r.errors or {}, tool_calls = r.tool_calls or {} }
    -- One short line (a long one would stop the editor at a "Press ENTER" prompt); the errors
    -- themselves are shown in the chat, under the reply.
    notify(
      ("%d edit(s) could not be applied; R in the preview retries"):format(
        #(r.errors or {})
      ),
      L.WARN
    )
  elseif r.type == "error" then
    local code = tostring(r.message or ""):match("^BB%-7 host exited %(code (%-?%d+)%)")
    if code then
      S.lost_reply = {
        chat_id = st.chat_id,
        note = ("The reply to the message above was lost: the BB-7 host exited (code %s) while it was being written."):format(code),
      }
    end
    if r.message == "Response aborted by user." then
      notify("Response aborted by user.", L.INFO)
    elseif tostring(r.message):sub(1, 10) == "Spend cap:" then
      -- The host refused before asking the model: offer to send again past the cap, once (the
      -- same action with the same params: a `plan_approve` is approved again, not sent as text).
      vim.schedule(function()
        M.confirm_override(tostring(r.message) .. " Send again past the cap?", function()
          local function resend()
            if S.stream == st then -- the refused send is still settling
              return vim.defer_fn(resend, 20)
            end
            local again = { override_cap = true, action = st.action, params = st.params }
            if S.chat and S.chat.id == st.chat_id and M.send(st.text, again) and not st.action then
              S.emit("draft", "")
            end
          end
          resend()
        end)
      end)
    else
      S.fail("send", r)
    end
    -- An error before anything streamed (a spend cap, a `pre_send` hook's denial, a routing setup
    -- error, another request in progress): the typed text goes back into the input, not lost
    -- (an action's display text never does; a cancel leaves the message in the chat).
    local nothing_streamed = #st.log == 0 and not st.agent_events
    if
      nothing_streamed
      and not st.action
      and r.message ~= "Response aborted by user."
      and S.chat
      and S.chat.id == st.chat_id
      and (S.chat.draft or "") == ""
    then
      S.chat.draft = st.text
      S.emit("draft", st.text)
    end
  end
  -- The send is settled once the chat shows the stored reply (a few ms later, without blocking).
  local function settle()
    if S.stream == st then
      S.stream = nil
    end
    S.question = nil
    -- A second host process served other chats meanwhile; the one not in use now goes.
    chats.drop_idle_procs()
    S.emit("question")
    S.emit("status")
    S.emit("chats")
  end
  if not host.running() or not (S.chat and S.chat.id == st.chat_id and st.proc == host.current()) then
    return settle()
  end
  fetch.fetch_balance()
  chat.load_chat_async(settle)
end

--- Rejects plan `plan_id` of the active chat with `feedback` (plan mode; nil or "": none), then
--- reloads the chat; `cb(ok)` once it is shown.
function M.reject_plan(plan_id, feedback, cb)
  host.request("plan_reject", { plan_id = plan_id, feedback = feedback }, function(r)
    if r.type == "error" then
      notify(r.message or "cannot reject the plan", L.ERROR)
    else
      notify("Plan rejected" .. ((feedback and feedback ~= "") and "; the next send tells the model why" or ""))
    end
    chat.load_chat_async(function()
      S.emit("status")
      if cb then
        cb(r.type ~= "error")
      end
    end)
  end)
end

--- Cancels the in-flight send.
function M.cancel()
  if not S.stream or not S.stream.rid then
    notify("Nothing to cancel", L.WARN)
    return false
  end
  host.request("cancel", { target_request_id = S.stream.rid }, function(r)
    if r.type == "error" and not tostring(r.message):find("No active request", 1, true) then
      S.fail("cancel", r)
    end
  end, nil, nil, S.stream.proc)
  return true
end

--- The agent asked `q` ({question_id, question}) in the streaming reply: it waits in its chat for an
--- answer from the input pane (or `:BB7Answer`), or an explicit skip; nothing is modal.
function M.ask(q)
  local st = S.stream
  S.question = {
    question_id = q.question_id,
    question = q.question or "?",
    chat_id = st and st.chat_id,
    global = st and st.global,
  }
  S.emit("question")
  S.emit("status")
  if not (S.view and S.view.is_open()) then
    notify("The agent waits for your answer (:BB7 or :BB7Answer)")
  end
end

--- Answers the agent's waiting question with `answer` (nil or "": skipped, `no_user_answer`),
--- without waiting. Returns false (notified) when no question waits.
function M.answer_question(answer)
  local q = S.question
  if not q then
    notify("No question is waiting for an answer", L.WARN)
    return false
  end
  if answer == nil or vim.trim(answer) == "" then
    answer = "no_user_answer"
  end
  S.question = nil
  M.clarify(q.question_id, answer)
  S.emit("question")
  S.emit("status")
  return true
end

--- Answers the agent's clarifying question `qid` ("no_user_answer" skips it), without waiting.
function M.clarify(qid, answer)
  host.request("clarify", { question_id = qid, answer = answer }, function(r)
    if r.type == "error" then
      notify(r.message or "clarify failed", L.WARN)
    end
  end, nil, nil, S.stream and S.stream.proc or nil)
end

return M
