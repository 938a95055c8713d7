--- Buffer-local keymaps of the plugin's panes, taken from `config.keymaps` (remappable, `false` disables),
--- and the `?` help listing them.
local config = require("bb7.config")

local M = {}

--- What each pane registered, for the help window: pane -> list of {lhs, desc}.
M.registered = {}

--- Maps `actions` (name -> {fn, desc, modes?}) on `buf` for `pane`, with keys from
--- `config.options.keymaps[group]` where group is `pane` or "all".
---@param buf integer
---@param pane string
---@param group string
---@param actions table<string, {[1]: function, [2]: string, modes: string[]|nil}>
function M.apply(buf, pane, group, actions)
  local keys = config.options.keymaps[group] or {}
  M.registered[pane] = M.registered[pane] or {}
  local names = vim.tbl_keys(actions)
  table.sort(names)
  for _, name in ipairs(names) do
    local a = actions[name]
    local lhs = keys[name]
    if lhs then
      vim.keymap.set(a.modes or "n", lhs, a[1], { buffer = buf, nowait = true, silent = true, desc = "BB-7: " .. a[2] })
      table.insert(M.registered[pane], { lhs, a[2], group })
    end
  end
end

--- The help lines for `pane`.
function M.help_lines(pane)
  local lines = { "BB-7 keys — " .. pane, "" }
  local entries = vim.deepcopy(M.registered[pane] or {})
  table.sort(entries, function(a, b)
    if a[3] ~= b[3] then
      return a[3] ~= "all"
    end
    return a[1] < b[1]
  end)
  local group = nil
  for _, e in ipairs(entries) do
    if e[3] ~= group then
      group = e[3]
      if group == "all" then
        lines[#lines + 1] = ""
        lines[#lines + 1] = "In every pane:"
      end
    end
    lines[#lines + 1] = ("  %-10s %s"):format(e[1], e[2])
  end
  lines[#lines + 1] = ""
  lines[#lines + 1] = "Press q or <Esc> to close. See :help bb7-keymaps"
  return lines
end

--- Shows the help float for `pane`.
function M.show_help(pane)
  local lines = M.help_lines(pane)
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].bufhidden = "wipe"
  local width = 0
  for _, l in ipairs(lines) do
    width = math.max(width, vim.fn.strdisplaywidth(l))
  end
  local win = vim.api.nvim_open_win(buf, true, {
    relative = "editor",
    width = width + 2,
    height = #lines,
    row = math.floor((vim.o.lines - #lines) / 2),
    col = math.floor((vim.o.columns - width) / 2),
    style = "minimal",
    border = config.options.ui.border,
    title = " Help ",
    zindex = 80,
  })
  for _, k in ipairs({ "q", "<Esc>", "?", "g?" }) do
    vim.keymap.set("n", k, function()
      pcall(vim.api.nvim_win_close, win, true)
    end, { buffer = buf, nowait = true })
  end
  return win
end

return M
