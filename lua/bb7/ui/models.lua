--- The model picker: favourites first, prices per million tokens, context length; its keys
--- (`config.keymaps.models`) pick, toggle a favourite, cycle the reasoning effort, filter, close.
local config = require("bb7.config")
local keymaps = require("bb7.ui.keymaps")
local session = require("bb7.session")
local util = require("bb7.util")

local M = {}

--- One picker line for a model.
function M.line(m, fav, current)
  local p = m.pricing or {}
  return ("%s%s %-40s %8s in %8s out  %6s ctx%s"):format(
    current and "▶" or " ",
    fav and "★" or " ",
    util.oneline(m.id),
    util.per_million(p.prompt),
    util.per_million(p.completion),
    m.context_length and util.tokens(m.context_length) or "?",
    m.supports_reasoning and "  reasoning" or ""
  )
end

--- Opens the picker (fetching the model list first).
function M.open()
  if not session.ensure_initialized() then
    return
  end
  session.fetch_models(function(models)
    if models then
      vim.schedule(function()
        M.show(models)
      end)
    end
  end)
end

function M.show(models)
  local filter = ""
  local buf = vim.api.nvim_create_buf(false, true)
  vim.bo[buf].bufhidden = "wipe"
  local width = math.min(vim.o.columns - 4, 110)
  local height = math.min(vim.o.lines - 6, math.max(3, #models + 1))
  local hint = keymaps.hint("models", {
    { "pick", "pick" },
    { "favorite", "favourite" },
    { "effort", "reasoning effort" },
    { "filter", "filter" },
    { "close", "close" },
  }, " · ")
  local win = vim.api.nvim_open_win(buf, true, {
    relative = "editor",
    width = width,
    height = height,
    row = math.floor((vim.o.lines - height) / 2),
    col = math.floor((vim.o.columns - width) / 2),
    border = config.options.ui.border,
    style = "minimal",
    title = " Model" .. (hint ~= "" and (" — " .. hint) or "") .. " ",
    title_pos = "center",
    zindex = 70,
  })
  vim.wo[win].cursorline = true
  local shown = {}
  local function draw()
    local favs = session.favorites()
    local isfav = {}
    for _, id in ipairs(favs) do
      isfav[id] = true
    end
    local cur = session.current_model()
    shown = {}
    local lines = { filter ~= "" and ("filter: " .. filter) or "all models (favourites first)" }
    for _, m in ipairs(util.order_models(models, favs)) do
      local hay = ((m.id or "") .. " " .. (m.name or "")):lower()
      if filter == "" or hay:find(filter:lower(), 1, true) then
        lines[#lines + 1] = M.line(m, isfav[m.id], m.id == cur)
        shown[#lines] = m
      end
    end
    vim.bo[buf].modifiable = true
    vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
    vim.bo[buf].modifiable = false
  end
  draw()
  pcall(vim.api.nvim_win_set_cursor, win, { 2, 0 })
  local function close()
    pcall(vim.api.nvim_win_close, win, true)
  end
  local function at()
    return shown[vim.api.nvim_win_get_cursor(win)[1]]
  end
  local function pick()
    local m = at()
    if m then
      close()
      session.set_model(m.id)
    end
  end
  local function favorite()
    local m = at()
    if m then
      local row = vim.api.nvim_win_get_cursor(win)[1]
      session.toggle_favorite(m.id)
      draw()
      pcall(vim.api.nvim_win_set_cursor, win, { row, 0 })
    end
  end
  local function effort()
    local cur = session.chat and session.chat.reasoning_effort or ""
    local i = 1
    for k, v in ipairs(session.EFFORTS) do
      if v == cur then
        i = k
      end
    end
    session.set_reasoning_effort(session.EFFORTS[i % #session.EFFORTS + 1])
  end
  local function filter_models()
    vim.ui.input({ prompt = "Filter models: ", default = filter }, function(q)
      if q then
        filter = q
        draw()
        pcall(vim.api.nvim_win_set_cursor, win, { 2, 0 })
      end
    end)
  end
  keymaps.map(buf, "models", {
    pick = { pick, "pick the model under the cursor" },
    favorite = { favorite, "toggle the favourite" },
    effort = { effort, "cycle the chat's reasoning effort" },
    filter = { filter_models, "filter the models" },
    close = { close, "close the picker" },
    close_alt = { close, "close the picker" },
  })
  return win, buf
end

return M
