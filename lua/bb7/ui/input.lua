--- The Input pane: the message being written. Its text is the chat's draft, saved when leaving the
--- chat, the pane or the UI, and restored when the chat is shown again.
local session = require("bb7.session")
local keymaps = require("bb7.ui.keymaps")
local util = require("bb7.util")

local M = {}
local buf, ui = nil, nil
local shown_chat = nil -- the chat whose draft the buffer holds

local function text()
  return table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), "\n")
end

local function set_text(s)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, util.lines(s or ""))
  vim.bo[buf].modified = false
end

--- Saves the buffer as the draft of the chat it belongs to.
function M.save_draft()
  if not buf or not shown_chat or not session.chat or session.chat.id ~= shown_chat then
    return
  end
  session.save_draft(text())
end

--- Loads the active chat's draft when the chat changed (or was truncated by an edit).
function M.render()
  if not buf or not vim.api.nvim_buf_is_valid(buf) then
    return
  end
  local chat = session.chat
  if not chat then
    shown_chat = nil
    set_text("")
    return
  end
  if shown_chat ~= chat.id then
    shown_chat = chat.id
    set_text(chat.draft or "")
  end
end

--- The agent's question waiting in the chat shown, if any: the input is its answer field.
function M.question()
  local q = session.question
  local c = session.chat
  if q and c and c.id == q.chat_id and not c.global == not q.global then
    return q
  end
end

local function stop_insert()
  if vim.fn.mode() == "i" then
    vim.cmd("stopinsert")
  end
end

--- Skips the agent's waiting question (explicitly; the reply goes on without an answer).
function M.skip()
  if not M.question() then
    session.notify("No question is waiting for an answer", vim.log.levels.WARN)
    return
  end
  session.answer_question(nil)
end

--- Sends the buffer's text, its `#buffer` / `@path` mentions resolved first (lua/bb7/mentions.lua);
--- while the agent's question waits in this chat, the text answers it instead.
function M.send()
  local s = text()
  if M.question() then
    if vim.trim(s) == "" then
      local key = keymaps.key("input", "skip_question")
      session.notify(
        "Type your answer in the input" .. (key and (", or " .. key .. " to skip the question") or " (:BB7Answer! skips the question)"),
        vim.log.levels.WARN
      )
      return
    end
    if session.answer_question(s) then
      set_text("")
      stop_insert()
    end
    return
  end
  s = require("bb7.mentions").prepare(s)
  if s and session.send(s) then
    set_text("")
    if vim.fn.mode() == "i" then
      vim.cmd("stopinsert")
    end
  end
end

function M.attach(b, u)
  buf, ui = b, u
  vim.bo[buf].filetype = "markdown"
  local function last_user_message()
    local msgs = session.chat and session.chat.messages or {}
    for i = #msgs, 1, -1 do
      if msgs[i].role == "user" then
        return i - 1
      end
    end
    session.notify("No message to edit or fork from", vim.log.levels.WARN)
  end
  keymaps.apply(buf, "input", "input", {
    send = { M.send, "send the message" },
    send_insert = { M.send, "send the message", modes = { "n", "i" } },
    edit_last = {
      function()
        local mi = last_user_message()
        if mi then
          session.confirm("Edit your last message? The chat is cut there (its reply is removed)", function()
            session.edit_message(mi)
          end)
        end
      end,
      "edit your last message (the chat is cut there; asks first)",
    },
    skip_question = { M.skip, "skip the agent's waiting question", modes = { "n", "i" } },
    fork_last = {
      function()
        local mi = last_user_message()
        if mi then
          session.fork_message(mi)
        end
      end,
      "fork a new chat from your last message",
    },
  })
  require("bb7.mentions").attach(buf)
  session.subscribe("chat", M.render)
  -- Editing a message makes it the draft, replacing what the input held.
  session.subscribe("draft", function(content)
    shown_chat = session.chat and session.chat.id
    set_text(content)
  end)
  session.subscribe("leaving_chat", M.save_draft)
  vim.api.nvim_create_autocmd({ "BufLeave", "InsertLeave" }, {
    buffer = buf,
    callback = M.save_draft,
  })
end

--- The input buffer (for tests).
function M.buf()
  return buf
end

return M
