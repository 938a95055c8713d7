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
local ns_live = vim.api.nvim_create_namespace("bb7_chats_live")

--- Whether list entry `c` is the chat `id` (of the global store when `global`).
local function is(c, id, global)
  return c ~= nil and id ~= nil and c.id == id and not c.global == not global
end

--- The spinner (or `?` while the agent's question waits) after the chat whose reply streams: redrawn by the UI's
--- ticker, without re-rendering the list (the cursor stays where it is).
function M.tick()
  if not buf or not vim.api.nvim_buf_is_valid(buf) then
    return
  end
  vim.api.nvim_buf_clear_namespace(buf, ns_live, 0, -1)
  local st = session.stream
  if not st then
    return
  end
  local spinner = ui and ui.SPINNER or { "*" }
  local secs = (vim.uv.hrtime() - (st.started or 0)) / 1e9
  local frame = spinner[math.floor(secs * 10) % #spinner + 1]
  local q = session.question
  for line, c in pairs(items) do
    if is(c, st.chat_id, st.global) then
      -- Short: the pane is narrow (the Input footer says what it is).
      local text = " " .. (q and "?" or frame)
      pcall(vim.api.nvim_buf_set_extmark, buf, ns_live, line - 1, 0, {
        virt_text = { { text, q and "WarningMsg" or "BB7Spinner" } },
        virt_text_pos = "eol",
      })
    end
  end
end

--- Shows the project's chats or the global ones (`scope`: "project" | "global").
function M.set_scope(scope)
  if scope == "project" and session.global_only then
    session.notify("No project here: only the global chats (:BB7Init makes one)", vim.log.levels.WARN)
    scope = "global"
  end
  session.scope = scope
  M.query, M.results = nil, nil
  session.list_chats()
  M.render()
end

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
  local global = session.scope == "global"
  if global and not M.query then
    local key = keymaps.key("chats", "scope")
    lines[1] = "Global chats" .. (key and ("  (" .. key .. ": the project's)") or "")
    hls[#hls + 1] = { 0, "Title" }
  end
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
      lines[#lines + 1] = global and "No global chats yet. Press n to create one." or "No chats yet. Press n to create one."
      hls[#hls + 1] = { #lines - 1, "Comment" }
    end
  end
  local pinned = {}
  for _, id in ipairs(session.pinned()) do
    pinned[id] = true
  end
  local active = session.chat
  for _, c in ipairs(list) do
    if global then
      c.global = true -- search results of the global store
    end
    local is_active = active ~= nil and is(c, active.id, active.global)
    local mark = (is_active and "▶" or " ") .. (pinned[c.id] and "★" or " ")
    local text = mark .. " " .. util.oneline(c.name or c.id)
    if c.locked then
      text = text .. " [locked]"
    end
    if c.excerpt and c.excerpt ~= "" then
      text = text .. " — " .. util.oneline((c.excerpt:gsub("\r?\n", " ")))
    end
    lines[#lines + 1] = text
    items[#lines] = c
    if is_active then
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
  M.tick()
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
  if session.select_chat(c.id, c.global or false) then
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
      session.rename_chat(c.id, name, c.global or false)
    end
  end)
end

local function delete()
  local c = current()
  if not c then
    return
  end
  session.confirm("Delete chat " .. util.oneline(c.name or c.id) .. "?", function()
    session.delete_chat(c.id, c.global or false)
  end)
end

local function fork()
  local c = current()
  if c and session.fork_chat(c.id, c.global or false) then
    ui.focus("input")
  end
end

local function pin()
  local c = current()
  if c then
    session.toggle_pin(c.id)
  end
end

local function move()
  local c = current()
  if not c then
    return
  end
  local to = c.global and "project" or "global"
  session.confirm(
    ("Move chat %s %s?"):format(util.oneline(c.name or c.id), to == "global" and "to the global chats" or "into this project"),
    function()
      if session.move_chat(c.id, to) then
        M.set_scope(to)
      end
    end
  )
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
    scope = {
      function()
        M.set_scope(session.scope == "global" and "project" or "global")
      end,
      "show the global chats / the project's chats",
    },
    move = { move, "move the chat to the global chats / into the project (asks first)" },
  })
  session.subscribe("status", M.tick)
  session.subscribe("chats", M.render)
  session.subscribe("chat", M.render)
end

return M
