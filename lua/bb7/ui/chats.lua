--- The Chats pane: the chat list (pinned first), or search results; new, select, rename, delete,
--- fork (a new chat with the same context), search, pin.
local session = require("bb7.session")
local keymaps = require("bb7.ui.keymaps")
local util = require("bb7.util")

local M = {}
local buf = nil
local ui = nil
local items = {} -- line (1-based) -> chat entry
M.query = nil -- the search query when showing results

local ns = vim.api.nvim_create_namespace("bb7_chats")

local function current()
  local win = ui and ui.wins.chats
  if not win or not vim.api.nvim_win_is_valid(win) then
    return nil
  end
  return items[vim.api.nvim_win_get_cursor(win)[1]]
end

function M.render()
  if not buf or not vim.api.nvim_buf_is_valid(buf) then
    return
  end
  local lines, hls = {}, {}
  items = {}
  local list
  if M.query then
    lines[1] = ("Search: %s  (<Esc> clears)"):format(util.oneline(M.query))
    hls[#hls + 1] = { 0, "Comment" }
    list = M.results or {}
    if #list == 0 then
      lines[#lines + 1] = "  no matches"
    end
  else
    list = session.chats or {}
    if #list == 0 then
      lines[1] = "No chats yet. Press n to create one."
      hls[#hls + 1] = { 0, "Comment" }
    end
  end
  local pinned = {}
  for _, id in ipairs(session.pinned()) do
    pinned[id] = true
  end
  local active = session.chat and session.chat.id
  for _, c in ipairs(list) do
    local mark = (c.id == active and "▶" or " ") .. (pinned[c.id] and "★" or " ")
    local text = mark .. " " .. util.oneline(c.name or c.id)
    if c.locked then
      text = text .. " [locked]"
    end
    if c.excerpt and c.excerpt ~= "" then
      text = text .. " — " .. util.oneline((c.excerpt:gsub("\r?\n", " ")))
    end
    lines[#lines + 1] = text
    items[#lines] = c
    if c.id == active then
      hls[#hls + 1] = { #lines - 1, "BB7Active" }
    elseif pinned[c.id] then
      hls[#hls + 1] = { #lines - 1, "BB7Pinned" }
    end
  end
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.api.nvim_buf_clear_namespace(buf, ns, 0, -1)
  for _, h in ipairs(hls) do
    vim.api.nvim_buf_set_extmark(buf, ns, h[1], 0, { line_hl_group = h[2] })
  end
end

--- Shows search results for `query` (nil clears the search).
function M.search(query)
  if query == nil or query == "" then
    M.query, M.results = nil, nil
  else
    M.query = query
    M.results = session.search(query) or {}
  end
  M.render()
end

local function select()
  local c = current()
  if not c then
    return
  end
  if session.select_chat(c.id) then
    M.query, M.results = nil, nil
    M.render()
    ui.focus("input")
  end
end

local function new()
  if session.new_chat() then
    M.query, M.results = nil, nil
    M.render()
    ui.focus("input")
  end
end

local function rename()
  local c = current()
  if not c then
    return
  end
  vim.ui.input({ prompt = "Rename chat: ", default = c.name }, function(name)
    if name and name ~= "" then
      session.rename_chat(c.id, name)
    end
  end)
end

local function delete()
  local c = current()
  if not c then
    return
  end
  vim.ui.select({ "No", "Yes" }, { prompt = "Delete chat " .. util.oneline(c.name or c.id) .. "?" }, function(choice)
    if choice == "Yes" then
      session.delete_chat(c.id)
    end
  end)
end

local function fork()
  local c = current()
  if c and session.fork_chat(c.id) then
    ui.focus("input")
  end
end

local function pin()
  local c = current()
  if c then
    session.toggle_pin(c.id)
  end
end

local function search()
  vim.ui.input({ prompt = "Search chats: " }, function(q) -- starts empty
    if q then
      M.search(q)
    end
  end)
end

function M.attach(b, u)
  buf, ui = b, u
  vim.bo[buf].modifiable = false
  keymaps.apply(buf, "chats", "chats", {
    select = { select, "open the chat under the cursor" },
    new = { new, "new chat" },
    rename = { rename, "rename chat" },
    delete = { delete, "delete chat" },
    fork = { fork, "fork: a new chat with this chat's model and context" },
    search = { search, "search chats (titles and messages)" },
    clear_search = { function() M.search(nil) end, "clear the search" },
    pin = { pin, "pin / unpin chat" },
  })
  session.subscribe("chats", M.render)
  session.subscribe("chat", M.render)
end

return M
