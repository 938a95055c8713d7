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

--- Sends the buffer's text (its `#buffer` / `@path` mentions resolved first: lua/bb7/mentions.lua).
function M.send()
  local s = require("bb7.mentions").prepare(text())
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
