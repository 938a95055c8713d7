--- Buffer-local keymaps of the plugin's windows, taken from `config.keymaps` (remappable, `false`
--- disables), the hints that name them, and the `g?` help listing a pane's keys.
local config = require("bb7.config")

local M = {}

--- What each pane registered, for the help window: pane -> list of {lhs, desc}.
M.registered = {}

--- The key of `action` in `config.keymaps[group]`, or nil when the user disabled it.
---@param group string
---@param action string
---@return string|nil
function M.key(group, action)
  return (config.options.keymaps[group] or {})[action] or nil
end

--- Maps `actions` (name -> {fn, desc, modes?}) on `buf` with the keys of `config.keymaps[group]`
--- (a disabled key maps nothing). Returns what was mapped: a list of {lhs, desc, group}.
---@param buf integer
---@param group string
---@param actions table<string, {[1]: function, [2]: string, modes: string[]|nil}>
---@return table[]
function M.map(buf, group, actions)
  local mapped = {}
  local names = vim.tbl_keys(actions)
  table.sort(names)
  for _, name in ipairs(names) do
    local a = actions[name]
    local lhs = M.key(group, name)
    if lhs then
      vim.keymap.set(a.modes or "n", lhs, a[1], { buffer = buf, nowait = true, silent = true, desc = "BB-7: " .. a[2] })
      mapped[#mapped + 1] = { lhs, a[2], group }
    end
  end
  return mapped
end

--- Maps `actions` on pane buffer `buf` (see `map`) with keys from `config.options.keymaps[group]`
--- where group is `pane` or "all", and lists them in the pane's help.
---@param buf integer
---@param pane string
---@param group string
---@param actions table<string, {[1]: function, [2]: string, modes: string[]|nil}>
function M.apply(buf, pane, group, actions)
  M.registered[pane] = M.registered[pane] or {}
  vim.list_extend(M.registered[pane], M.map(buf, group, actions))
end

--- A hint naming the keys of `group`: "key label" for each {action, label} of `items` whose key is
--- enabled, joined by `sep` (so a title or message never names a key that does nothing).
---@param group string
---@param items {[1]: string, [2]: string}[]
---@param sep string
---@return string
function M.hint(group, items, sep)
  local parts = {}
  for _, it in ipairs(items) do
    local lhs = M.key(group, it[1])
    if lhs then
      parts[#parts + 1] = lhs .. " " .. it[2]
    end
  end
  return table.concat(parts, sep)
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
  local close = {}
  for _, action in ipairs({ "close", "close_alt" }) do
    close[#close + 1] = M.key("help", action)
  end
  lines[#lines + 1] = (#close > 0 and ("Press %s to close. "):format(table.concat(close, " or ")) or "")
    .. "See :help bb7-keymaps"
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
  local function close()
    pcall(vim.api.nvim_win_close, win, true)
  end
  M.map(buf, "help", {
    close = { close, "close the help" },
    close_alt = { close, "close the help" },
    close_alt2 = { close, "close the help" },
  })
  -- The key that opened the help closes it too.
  local help = M.key("all", "help")
  if help then
    vim.keymap.set("n", help, close, { buffer = buf, nowait = true, silent = true, desc = "BB-7: close the help" })
  end
  return win
end

return M
