--- Pure rendering of a chat into buffer lines, highlights and a line → message map. No editor state,
--- so it is unit-tested directly.
local util = require("bb7.util")

local M = {}

local EVENT_TEXT = {
  UserAddFile = "Added",
  UserAddSection = "Added section",
  UserRemoveFile = "Removed",
  UserRemoveSection = "Removed section",
  AssistantWriteFile = "Assistant modified",
  UserWriteFile = "Updated",
  UserApplyFile = "Applied",
  UserPartialApplyFile = "Partially applied",
  UserSaveAs = "Saved as",
  UserRejectOutput = "Rejected output of",
  ForkWarningModified = "Changed since the original message:",
  ForkWarningDeleted = "Deleted since the original message:",
}

--- One line describing a context event part.
function M.event_line(p)
  local verb = EVENT_TEXT[p.action]
  if p.action == "UserSetReadOnly" then
    verb = p.readonly and "Set read-only" or "Set writable"
  end
  local path = util.oneline(p.path or "?")
  if p.start_line and p.end_line then
    path = ("%s:%d-%d"):format(path, p.start_line, p.end_line) -- sections read `path:2-3` everywhere
  end
  if p.action == "UserSaveAs" and p.original_path then
    return ("Saved %s as %s"):format(util.oneline(p.original_path), path)
  end
  return ("%s %s"):format(verb or util.oneline(p.action or "Event"), path)
end

--- Renders `chat`.
---@param chat table  a `chat` reply
---@param opts {expanded: table<string, boolean>|nil, collapse: boolean|nil}|nil
---@return {lines: string[], hls: table[], msg_at: table<integer, integer>, fold_at: table<integer, string>, user_lines: integer[]}
function M.chat(chat, opts)
  opts = opts or {}
  local expanded = opts.expanded or {}
  local collapse = opts.collapse ~= false
  local lines, hls, msg_at, fold_at = {}, {}, {}, {}
  local function add(text, group, mi)
    lines[#lines + 1] = text
    if group then
      hls[#hls + 1] = { #lines - 1, 0, -1, group }
    end
    if mi then
      msg_at[#lines] = mi
    end
  end
  local function add_text(text, mi, group)
    for _, l in ipairs(vim.split((text or ""):gsub("\r\n", "\n"), "\n", { plain = true })) do
      add(l, group, mi)
    end
  end

  local messages = chat.messages or {}
  if #messages == 0 then
    add("No messages yet. Type in the input pane below and press <CR> (normal mode) to send.", "Comment")
  end
  local last_model = nil
  for i, m in ipairs(messages) do
    local mi = i - 1 -- 0-based, as the protocol counts
    local parts = m.parts or {}
    local only_events = #parts > 0
    for _, p in ipairs(parts) do
      if p.type ~= "context_event" then
        only_events = false
      end
    end
    if m.role == "user" then
      local head = "▌ You"
      if m.model and m.model ~= last_model then
        head = head .. "  ·  " .. util.oneline(m.model)
        last_model = m.model
      end
      if #lines > 0 then
        add("", nil, nil)
      end
      add(head, "BB7User", mi)
      add_text(require("bb7.session").message_text(m), mi)
    elseif m.role == "system" then
      local t = require("bb7.session").message_text(m)
      if t ~= "" then
        add_text("⚠ " .. t, mi, "WarningMsg")
      end
      for _, p in ipairs(parts) do
        if p.type == "context_event" then
          add("  • " .. M.event_line(p), "Comment", mi)
        end
      end
    elseif only_events then
      for _, p in ipairs(parts) do
        add("  • " .. M.event_line(p), "Comment", mi)
      end
    else
      if #lines > 0 then
        add("", nil, nil)
      end
      add("▌ Assistant" .. (m.model and ("  ·  " .. util.oneline(m.model)) or ""), "BB7Assistant", mi)
      if #parts == 0 and m.content then
        add_text(m.content, mi)
      end
      for pi, p in ipairs(parts) do
        if p.type == "thinking" then
          local key = mi .. ":" .. pi
          local body = util.lines(p.content or "")
          local open = expanded[key]
          if open == nil then
            open = not collapse
          end
          if open then
            add("▾ Reasoning", "BB7Reasoning", mi)
            fold_at[#lines] = key
            for _, l in ipairs(body) do
              add("  " .. l, "BB7Reasoning", mi)
              fold_at[#lines] = key
            end
          else
            add(("▸ Reasoning (%d line%s)"):format(#body, #body == 1 and "" or "s"), "BB7Reasoning", mi)
            fold_at[#lines] = key
          end
        elseif p.type == "text" or p.type == "raw" then
          add_text(p.content, mi)
        elseif p.type == "code" then
          add("```" .. util.oneline(p.language or ""), nil, mi)
          add_text(p.content, mi)
          add("```", nil, mi)
        elseif p.type == "file" then
          add("  ✎ " .. util.oneline(p.path or ""), "Directory", mi)
        elseif p.type == "context_event" then
          add("  • " .. M.event_line(p), "Comment", mi)
        elseif p.type == "tool_call" then
          -- Collapsed by default; <CR> on the line shows the arguments and the start of the result.
          local agent = require("bb7.agent")
          local key = "tool:" .. mi .. ":" .. pi
          local open = expanded[key] == true
          add(agent.call_line(p, open), "Comment", mi)
          fold_at[#lines] = key
          if open then
            for _, l in ipairs(agent.call_details(p)) do
              add("      " .. l, "Comment", mi)
              fold_at[#lines] = key
            end
          end
        end
      end
      if m.output_files and #m.output_files > 0 then
        add("  → Output: " .. util.oneline(table.concat(m.output_files, ", ")), "Directory", mi)
      end
      local agent_footer = require("bb7.agent").reply_footer(m)
      if agent_footer then
        add(agent_footer, "Comment", mi)
      end
    end
  end
  require("bb7.ui.plan").render(chat, add)
  if opts.failed and #opts.failed > 0 then
    -- The edits of the last reply that could not be applied, and how to retry them.
    add("", nil, nil)
    add(("⚠ %d edit(s) could not be applied:"):format(#opts.failed), "WarningMsg")
    for _, e in ipairs(opts.failed) do
      for i, l in ipairs(vim.split(tostring(e):gsub("\r\n", "\n"), "\n", { plain = true })) do
        add((i == 1 and "  • " or "    ") .. l, "WarningMsg")
      end
    end
    add("  R lets the model retry them (or send an empty message).", "Comment")
  end
  return { lines = lines, hls = hls, msg_at = msg_at, fold_at = fold_at }
end

--- The status column of the Files pane for one entry.
function M.file_line(f, status)
  local name = util.oneline(f.path)
  if f.start_line then
    name = ("%s:%d-%d"):format(name, f.start_line, f.end_line)
  end
  local flags = {}
  if f.readonly and status ~= "R" and status ~= "S" then
    flags[#flags + 1] = "ro"
  end
  if f.external then
    flags[#flags + 1] = "ext"
  end
  local tok = f.tokens and ("  " .. util.tokens(f.tokens)) or ""
  return ("%-3s %s%s%s"):format(status, name, #flags > 0 and (" [" .. table.concat(flags, ",") .. "]") or "", tok)
end

return M
