--- `:BB7Usage`: the user's spend from the host's usage ledger (`get_usage`), in a buffer: a table
--- per day, per model or per chat (`d`, `m`, `c` switch; `r` reloads; `q` closes), with a small
--- bar chart of the cost in the per-day view, and the spend caps with what is left.
local session = require("bb7.session")
local util = require("bb7.util")

local M = {}

M.BAR_WIDTH = 30
local buf
M.group_by = "day"

--- The buffer's lines for the `get_usage` reply `r`.
function M.lines(r)
  local by = r.group_by or M.group_by
  local out = { ("BB-7 usage by %s   (d: day  m: model  c: chat  r: reload  q: close)"):format(by), "" }
  local caps, spent = r.caps or {}, r.spent or {}
  local capline = {}
  for _, k in ipairs({ "reply", "day", "month" }) do
    local limit = tonumber(caps["per_" .. k .. "_usd"])
    if limit then
      local used = tonumber(spent[k])
      capline[#capline + 1] = used
          and ("%s cap %s, spent %s, %s left"):format(k, util.money(limit), util.money(used), util.money(math.max(0, limit - used)))
        or ("%s cap %s"):format(k, util.money(limit))
    end
  end
  out[#out + 1] = #capline > 0 and ("Caps: " .. table.concat(capline, "; ")) or "Caps: none set (config.json spend)"
  out[#out + 1] = ("Spent today %s, this month %s (UTC)"):format(util.money(spent.day or 0), util.money(spent.month or 0))
  out[#out + 1] = ""
  local rows = r.rows or {}
  if #rows == 0 then
    out[#out + 1] = "No model requests recorded."
    return out
  end
  local keyw = #by
  for _, row in ipairs(rows) do
    keyw = math.max(keyw, vim.fn.strdisplaywidth(util.oneline(tostring(row.key))))
  end
  keyw = math.min(keyw, 48)
  local fmt = "%-" .. keyw .. "s  %8s  %10s  %10s  %10s  %10s"
  out[#out + 1] = fmt:format(by, "requests", "prompt", "completion", "cached", "cost")
  local max, total = 0, { requests = 0, prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0, cost = 0 }
  for _, row in ipairs(rows) do
    max = math.max(max, tonumber(row.cost) or 0)
    for k in pairs(total) do
      total[k] = total[k] + (tonumber(row[k]) or 0)
    end
  end
  local function line(key, row)
    return fmt:format(
      vim.fn.strcharpart(key, 0, keyw),
      tostring(row.requests or 0),
      util.tokens(row.prompt_tokens),
      util.tokens(row.completion_tokens),
      util.tokens(row.cached_tokens),
      util.money(row.cost)
    )
  end
  for _, row in ipairs(rows) do
    local l = line(util.oneline(tostring(row.key)), row)
    if by == "day" then
      local n = max > 0 and math.floor((tonumber(row.cost) or 0) / max * M.BAR_WIDTH + 0.5) or 0
      l = l .. "  " .. string.rep("█", n)
    end
    out[#out + 1] = l
  end
  out[#out + 1] = line("total", total)
  return out
end

local function render(r)
  if not (buf and vim.api.nvim_buf_is_valid(buf)) then
    return
  end
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, M.lines(r))
  vim.bo[buf].modifiable = false
end

--- Loads the usage grouped `by` (`day`, `model`, `chat`) into the buffer.
function M.load(by)
  M.group_by = by or M.group_by
  session.fetch_usage(M.group_by, function(r)
    if not r then
      return
    end
    M.last = r
    render(r)
  end)
end

--- The usage buffer (created on first use).
function M.buf()
  return buf
end

--- Opens the usage buffer in a new tab.
function M.open()
  if not (buf and vim.api.nvim_buf_is_valid(buf)) then
    buf = vim.api.nvim_create_buf(false, true)
    vim.bo[buf].bufhidden = "wipe"
    vim.bo[buf].filetype = "bb7usage"
    pcall(vim.api.nvim_buf_set_name, buf, "bb7://usage")
    local map = function(lhs, fn)
      vim.keymap.set("n", lhs, fn, { buffer = buf, nowait = true, silent = true })
    end
    map("d", function() M.load("day") end)
    map("m", function() M.load("model") end)
    map("c", function() M.load("chat") end)
    map("r", function() M.load() end)
    map("q", function() vim.cmd("bwipeout") end)
  end
  vim.cmd("tab sbuffer " .. buf)
  M.load()
end

return M
