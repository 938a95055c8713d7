--- Plan mode in the plugin (ECOSYSTEM-PROTOCOL.md §9): `:BB7Plan`, the chat's latest plan rendered
--- as a checklist at the end of the chat, and the preview keys that approve it (the agent reply then
--- streams like a send), edit its steps in a scratch buffer (approved on :w), or reject it (asking
--- for feedback, which the next request carries).
local util = require("bb7.util")

local M = {}

--- The chat's latest plan (a `plans` entry of `chat_get`), or nil.
function M.latest(chat)
  local plans = chat and chat.plans
  if type(plans) ~= "table" or #plans == 0 then
    return nil
  end
  return plans[#plans]
end

--- The chat's latest plan if it is still waiting for a decision, else nil.
function M.pending(chat)
  local p = M.latest(chat)
  if p and p.status == "proposed" then
    return p
  end
end

--- The key of preview action `action`, or nil when disabled.
local function key(action)
  return require("bb7.ui.keymaps").key("preview", action)
end

--- The checklist lines of `plan` (pure: used by the renderer and the live stream).
function M.checklist(plan)
  local out = {}
  out[#out + 1] = ("▌ Plan %s · %s"):format(util.oneline(plan.plan_id or plan.id or "?"), util.oneline(plan.status or "proposed"))
  out[#out + 1] = util.oneline(plan.summary or "")
  local mark = plan.status == "approved" and "[x]" or "[ ]"
  for i, s in ipairs(plan.steps or {}) do
    out[#out + 1] = ("  %s %d. %s"):format(mark, i, util.oneline(s.title or "?"))
    if s.detail and s.detail ~= "" then
      out[#out + 1] = "        " .. util.oneline(s.detail)
    end
    if type(s.files) == "table" and #s.files > 0 then
      out[#out + 1] = "        files: " .. util.oneline(table.concat(s.files, ", "))
    end
  end
  if plan.feedback and plan.feedback ~= "" then
    out[#out + 1] = "  feedback: " .. util.oneline(plan.feedback)
  end
  if (plan.status or "proposed") == "proposed" then
    local named = {}
    for _, it in ipairs({ { "plan_approve", "approves" }, { "plan_edit", "edits the steps" }, { "plan_reject", "rejects" } }) do
      local k = key(it[1])
      if k then
        named[#named + 1] = k .. " " .. it[2]
      end
    end
    out[#out + 1] = "  " .. (#named > 0 and (table.concat(named, " · ") .. " (in the preview) or ") or "")
      .. ":BB7Plan approve|edit|reject"
  end
  return out
end

--- Appends the chat's latest plan to a rendering (`add(text, group)`, see `bb7.ui.render`).
function M.render(chat, add)
  local plan = M.latest(chat)
  if not plan then
    return
  end
  add("", nil)
  for i, l in ipairs(M.checklist(plan)) do
    local group = "Comment"
    if i == 1 then
      group = "BB7Assistant"
    elseif l:match("^  %[") then
      group = nil -- the steps in the normal colour
    end
    add(l, group)
  end
end

local function session()
  return require("bb7.session")
end

--- The plan waiting for a decision in the active chat, or nil (notified).
local function need_pending()
  local s = session()
  local p = M.pending(s.chat)
  if not p then
    s.notify("No proposed plan in this chat (switch to plan mode with :BB7Plan and send)", vim.log.levels.WARN)
  end
  return p
end

--- Approves the pending plan (with `steps` when the user edited them); the agent reply streams in
--- the chat like a send. Returns whether it started.
function M.approve(steps)
  local p = need_pending()
  if not p then
    return false
  end
  local params = { plan_id = p.id }
  if steps then
    params.steps = steps
  end
  return session().send("Approve plan " .. p.id, { action = "plan_approve", params = params })
end

--- Rejects the pending plan with `feedback` (nil: asks for it). `cb(ok)` when the host answered.
function M.reject(feedback, cb)
  local p = need_pending()
  if not p then
    return false
  end
  local function send(text)
    session().reject_plan(p.id, text, cb)
  end
  if feedback ~= nil then
    send(feedback)
  else
    vim.ui.input({ prompt = "Reject the plan — feedback for the model (optional): " }, function(text)
      if text == nil then
        return -- cancelled: nothing is rejected
      end
      send(text)
    end)
  end
  return true
end

--- The scratch-buffer text of `plan`'s steps.
function M.steps_text(plan)
  local out = {
    "# Plan " .. plan.id .. ": " .. util.oneline(plan.summary or ""),
    "# One step per '- ' line; under it 'detail: …' and 'files: a, b'. :w approves, :q drops.",
  }
  for _, s in ipairs(plan.steps or {}) do
    out[#out + 1] = "- " .. util.oneline(s.title or "")
    if s.detail and s.detail ~= "" then
      out[#out + 1] = "  detail: " .. util.oneline(s.detail)
    end
    if type(s.files) == "table" and #s.files > 0 then
      out[#out + 1] = "  files: " .. table.concat(s.files, ", ")
    end
  end
  return out
end

--- The steps written in a scratch buffer (see `steps_text`), or nil and why.
function M.parse_steps(lines)
  local steps = {}
  for n, l in ipairs(lines) do
    if l:match("^%s*#") or l:match("^%s*$") then
      -- comments and blank lines
    elseif l:match("^%- ") then
      steps[#steps + 1] = { title = vim.trim(l:sub(3)) }
    else
      local cur = steps[#steps]
      if not cur then
        return nil, ("line %d: a step starts with '- '"):format(n)
      end
      local files = l:match("^%s+files:%s*(.*)$")
      local detail = l:match("^%s+detail:%s*(.*)$")
      if files then
        cur.files = {}
        for f in files:gmatch("[^,]+") do
          if vim.trim(f) ~= "" then
            cur.files[#cur.files + 1] = vim.trim(f)
          end
        end
      elseif detail then
        cur.detail = vim.trim(detail)
      else
        cur.detail = vim.trim(((cur.detail or "") .. " " .. vim.trim(l)))
      end
    end
  end
  if #steps == 0 then
    return nil, "no steps (a step starts with '- ')"
  end
  for i, s in ipairs(steps) do
    if s.title == "" then
      return nil, ("step %d has no title"):format(i)
    end
  end
  return steps
end

--- Opens the pending plan's steps in a scratch buffer; writing it (:w) approves the edited steps.
function M.edit()
  local p = need_pending()
  if not p then
    return nil
  end
  local buf = vim.api.nvim_create_buf(false, false)
  vim.api.nvim_buf_set_name(buf, "bb7://plan/" .. p.id)
  vim.bo[buf].buftype = "acwrite"
  vim.bo[buf].bufhidden = "wipe"
  vim.bo[buf].swapfile = false
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, M.steps_text(p))
  vim.bo[buf].modified = false
  vim.api.nvim_create_autocmd("BufWriteCmd", {
    buffer = buf,
    callback = function()
      local steps, err = M.parse_steps(vim.api.nvim_buf_get_lines(buf, 0, -1, false))
      if not steps then
        session().notify("Plan not approved: " .. err, vim.log.levels.ERROR)
        return
      end
      vim.bo[buf].modified = false
      if M.approve(steps) then
        vim.schedule(function()
          for _, w in ipairs(vim.fn.win_findbuf(buf)) do
            pcall(vim.api.nvim_win_close, w, true)
          end
          -- Leaving the layout for the scratch window closed it: back to the streaming reply.
          local view = session().view
          if view and not view.is_open() then
            view.open("preview")
          end
        end)
      end
    end,
  })
  vim.cmd("botright split")
  vim.api.nvim_win_set_buf(0, buf)
  return buf
end

--- The preview's plan keys (see `bb7.ui.keymaps.apply`).
function M.actions()
  return {
    plan_approve = { function() M.approve() end, "approve the proposed plan (the agent carries it out)" },
    plan_edit = { function() M.edit() end, "edit the proposed plan's steps (:w approves them)" },
    plan_reject = { function() M.reject() end, "reject the proposed plan (asks for feedback)" },
  }
end

--- `:BB7Plan [on|off|toggle|approve|edit|reject]`: plan mode for this chat, or a decision on its plan.
function M.command(opts)
  local s = session()
  s.hook()
  require("bb7.agent").attach()
  local a = vim.trim(opts and opts.args or "")
  if not s.chat then
    s.notify("No active chat", vim.log.levels.WARN)
    return
  end
  if a == "" or a == "toggle" then
    s.set_mode(s.chat.mode == "plan" and "chat" or "plan")
  elseif a == "on" then
    s.set_mode("plan")
  elseif a == "off" then
    s.set_mode("chat")
  elseif a == "approve" then
    M.approve()
  elseif a == "edit" then
    M.edit()
  elseif a == "reject" then
    M.reject()
  else
    s.notify("Usage: :BB7Plan [on|off|toggle|approve|edit|reject]", vim.log.levels.ERROR)
  end
end

return M
