--- Append-only, batched rendering of a streamed reply into a buffer.
---
--- Chunks are buffered in Lua and written at most once per `interval` ms with one
--- `nvim_buf_set_text` at the end of the buffer: no re-render, no flicker, and the cost of a flush
--- is proportional to the new text only. A window's cursor moves only when it was on the last line
--- (the user is following the end); otherwise it is left where it is.
local M = {}
M.__index = M

local ns = vim.api.nvim_create_namespace("bb7_stream")

--- Starts streaming at the end of `buf`.
---@param buf integer
---@param opts {interval: integer|nil, on_flush: fun(ms: number)|nil}|nil
function M.new(buf, opts)
  opts = opts or {}
  local last = vim.api.nvim_buf_line_count(buf) - 1
  local line = vim.api.nvim_buf_get_lines(buf, last, last + 1, false)[1] or ""
  local self = setmetatable({
    buf = buf,
    row = last,
    col = #line,
    pending = {},
    kind = nil,
    interval = opts.interval or 30,
    on_flush = opts.on_flush,
    timer = nil,
    stopped = false,
  }, M)
  return self
end

local HEADERS = {
  thinking = "▾ Reasoning",
}

--- Queues text of `kind` ("chunk" for reply text, "thinking" for reasoning).
function M:push(kind, text)
  if self.stopped or text == nil or text == "" then
    return
  end
  if kind ~= self.kind then
    -- A new block: reasoning gets a header line; switching back to text starts a new paragraph.
    local sep = (self.kind ~= nil or self.col > 0) and "\n" or ""
    if kind == "thinking" then
      self.pending[#self.pending + 1] = { sep .. HEADERS.thinking .. "\n", "header" }
    elseif self.kind == "thinking" then
      self.pending[#self.pending + 1] = { sep .. "\n", nil }
    end
    self.kind = kind
  end
  if text:find("\r", 1, true) then
    text = text:gsub("\r", "")
  end
  self.pending[#self.pending + 1] = { text, kind == "thinking" and "BB7Reasoning" or nil }
  self:schedule()
end

function M:schedule()
  if self.timer or self.stopped then
    return
  end
  self.timer = vim.uv.new_timer()
  self.timer:start(
    self.interval,
    0,
    vim.schedule_wrap(function()
      if self.timer then
        self.timer:close()
        self.timer = nil
      end
      self:flush()
    end)
  )
end

--- Windows showing the buffer whose cursor is on its last line.
local function followers(buf, last_row)
  local out = {}
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    local cur = vim.api.nvim_win_get_cursor(win)
    if cur[1] - 1 >= last_row then
      out[#out + 1] = win
    end
  end
  return out
end

--- Writes everything queued into the buffer now.
function M:flush()
  if #self.pending == 0 or not vim.api.nvim_buf_is_valid(self.buf) then
    return
  end
  local t0 = vim.uv.hrtime()
  local buf = self.buf
  local follow = followers(buf, self.row)
  local texts, marks = {}, {}
  for i, item in ipairs(self.pending) do
    texts[i] = item[1]
  end
  -- Highlight runs (reasoning) are computed before the write, in positions after it.
  local row, col = self.row, self.col
  local find = string.find
  for _, item in ipairs(self.pending) do
    local s = item[1]
    local nl, last, p = 0, nil, 1
    while true do
      local i = find(s, "\n", p, true)
      if not i then
        break
      end
      nl, last, p = nl + 1, i, i + 1
    end
    local er, ec
    if nl == 0 then
      er, ec = row, col + #s
    else
      er, ec = row + nl, #s - last
    end
    if item[2] then
      local group = item[2] == "header" and "BB7Reasoning" or item[2]
      local last = marks[#marks]
      if last and last[5] == group and last[3] == row and last[4] == col then
        last[3], last[4] = er, ec -- one extmark per run, not per chunk
      else
        marks[#marks + 1] = { row, col, er, ec, group }
      end
    end
    row, col = er, ec
  end
  self.pending = {}
  local text = table.concat(texts)
  local pieces = vim.split(text, "\n", { plain = true })
  local was = vim.bo[buf].modifiable
  vim.bo[buf].modifiable = true
  local ok = pcall(vim.api.nvim_buf_set_text, buf, self.row, self.col, self.row, self.col, pieces)
  if not ok then
    -- Someone else changed the buffer: continue at its end.
    local last = vim.api.nvim_buf_line_count(buf) - 1
    local line = vim.api.nvim_buf_get_lines(buf, last, last + 1, false)[1] or ""
    local dr, dc = row - self.row, col - (#pieces == 1 and self.col or 0)
    self.row, self.col = last, #line
    row, col = last + dr, (#pieces == 1 and self.col + dc or dc)
    marks = {}
    vim.api.nvim_buf_set_text(buf, self.row, self.col, self.row, self.col, pieces)
  end
  vim.bo[buf].modifiable = was
  self.row, self.col = row, col
  for _, m in ipairs(marks) do
    pcall(vim.api.nvim_buf_set_extmark, buf, ns, m[1], m[2], { end_row = m[3], end_col = m[4], hl_group = m[5] })
  end
  for _, win in ipairs(follow) do
    pcall(vim.api.nvim_win_set_cursor, win, { self.row + 1, 0 })
  end
  if self.on_flush then
    self.on_flush((vim.uv.hrtime() - t0) / 1e6)
  end
end

--- Flushes what is left and stops the timer.
function M:stop()
  if self.timer then
    self.timer:stop()
    self.timer:close()
    self.timer = nil
  end
  self:flush()
  self.stopped = true
end

M.ns = ns

return M
