--- Mentions in the Input pane: `#buffer` (the file you were editing when the UI opened), `#buffers`
--- (every listed file buffer) and `@path` (a project file, or an absolute one) put those files in the
--- chat's context for the message being sent — as |:BB7Add| would, unsaved buffers as you see them;
--- a file already in context whose text changed since its snapshot is updated — and the mention
--- becomes the file's path in the message, so the model knows which file is meant.
---
--- Completion: typing `@` or `#` at the start of a word in the Input pane opens the completion menu
--- (|complete()|) with the project's files (the deny list hidden, |bb7-picker|) or `#buffer` /
--- `#buffers`; typing narrows it. `keymaps.input.mention` picks a file with |vim.ui.select()| (your
--- picker) and inserts `@path`; the pane's 'omnifunc' completes a mention under the cursor too.
local config = require("bb7.config")
local session = require("bb7.session")
local util = require("bb7.util")

local M = {}
local L = vim.log.levels

local function notify(msg, level)
  vim.notify("BB-7: " .. msg, level or L.INFO)
end

--- The mentions in `text`, in order: `{kind = "buffer"|"buffers"|"path", s, e, path?}`: the mention
--- is the bytes from `s` up to (not including) `e` (a mention starts the text or follows white space; trailing
--- punctuation `.,;:!?)` is not part of a path).
---@param text string
---@return table[]
function M.parse(text)
  local out = {}
  local pos = 1
  while true do
    local s, e, at, word = text:find("()[#@]([^%s]+)", pos)
    if not s then
      break
    end
    local prev = at > 1 and text:sub(at - 1, at - 1) or ""
    local kind = text:sub(at, at)
    pos = e + 1
    if prev == "" or prev:match("%s") then
      if kind == "#" then
        local name = word:match("^(buffers?)[%.,;:!%?%)]*$")
        if name then
          out[#out + 1] = { kind = name, s = at, e = at + 1 + #name }
        end
      else
        local path = word:gsub("[%.,;:!%?%)]+$", "")
        if path ~= "" then
          out[#out + 1] = { kind = "path", s = at, e = at + 1 + #path, path = path }
        end
      end
    end
  end
  return out
end

local function root()
  return session.root or config.root()
end

--- Whether `buf` holds a file the user edits (not a plugin pane, a help page or a terminal).
local function file_buffer(buf)
  return buf
    and vim.api.nvim_buf_is_valid(buf)
    and vim.api.nvim_buf_is_loaded(buf)
    and vim.bo[buf].buftype == ""
    and vim.api.nvim_buf_get_name(buf) ~= ""
    and not vim.b[buf].bb7_pane
end

--- The buffer `#buffer` means: the one being edited when the UI opened, else the alternate one.
local function current_buffer()
  local origin = session.view and session.view.origin_buf()
  if file_buffer(origin) then
    return origin
  end
  local alt = vim.fn.bufnr("#")
  if alt > 0 and file_buffer(alt) then
    return alt
  end
end

--- The listed file buffers, in buffer order.
local function listed_buffers()
  local out = {}
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.bo[b].buflisted and file_buffer(b) then
      out[#out + 1] = b
    end
  end
  return out
end

local function abs_of(buf)
  return vim.fs.normalize(vim.fn.fnamemodify(vim.api.nvim_buf_get_name(buf), ":p"))
end

--- The absolute path `@path` names, when it is a file (or a loaded buffer), else nil.
local function resolve_path(p)
  local abs
  if p:sub(1, 1) == "/" or p:sub(1, 1) == "~" then
    abs = vim.fs.normalize(vim.fn.fnamemodify(vim.fn.expand(p, true), ":p"))
  else
    abs = vim.fs.normalize(root() .. "/" .. p)
  end
  if vim.fn.filereadable(abs) == 1 then
    return abs
  end
  local b = vim.fn.bufnr(abs)
  if b > 0 and file_buffer(b) then
    return abs
  end
end

--- Puts `abs` in the context of the active chat, or updates its snapshot when the user's text of
--- it changed since. Returns its context path, or nil (the reason was notified).
local function ensure_in_context(abs)
  local rel = util.relpath(abs, root())
  local f = session.status_of(rel)
  if not f then
    if session.add(abs) then
      return rel
    end
    return nil
  end
  local text = session.local_text(abs)
  if text and f.context_content and not util.same_text(text, f.context_content) then
    if not session.update(rel) then
      return nil
    end
  end
  return rel
end

--- Resolves the mentions of `text` for a send in the active chat: their files are put in the context
--- (see the module's description) and each mention becomes its path(s) in backticks. Returns the
--- text to send, or nil when a mention could not be resolved (the reason was notified; nothing is
--- sent). Text without mentions is returned as it is, without asking the host anything.
---@param text string
---@return string|nil
function M.prepare(text)
  local found = M.parse(text)
  if #found == 0 then
    return text
  end
  local wanted = {} -- mention -> absolute paths
  local any = false
  for i, m in ipairs(found) do
    if m.kind == "buffer" then
      local b = current_buffer()
      if not b then
        notify("#buffer: open the UI from the file you mean", L.WARN)
        return nil
      end
      wanted[i] = { abs_of(b) }
    elseif m.kind == "buffers" then
      local list = {}
      for _, b in ipairs(listed_buffers()) do
        list[#list + 1] = abs_of(b)
      end
      if #list == 0 then
        notify("#buffers: no file buffers are open", L.WARN)
        return nil
      end
      wanted[i] = list
    else
      local abs = resolve_path(m.path)
      if abs then
        wanted[i] = { abs }
      elseif m.path:find("[/%.]") then
        notify(("@%s: no such file (sent as written)"):format(util.oneline(m.path)), L.WARN)
      end
    end
    any = any or wanted[i] ~= nil
  end
  if not any then
    return text
  end
  if not session.ensure_chat() then
    return nil
  end
  session.refresh_files()
  local done = {} -- abs -> context path
  local out, last = {}, 1
  for i, m in ipairs(found) do
    if wanted[i] then
      local names = {}
      for _, abs in ipairs(wanted[i]) do
        if done[abs] == nil then
          local rel = ensure_in_context(abs)
          if not rel then
            return nil
          end
          done[abs] = rel
        end
        names[#names + 1] = "`" .. done[abs] .. "`"
      end
      out[#out + 1] = text:sub(last, m.s - 1)
      out[#out + 1] = table.concat(names, ", ")
      last = m.e
    end
  end
  out[#out + 1] = text:sub(last)
  return table.concat(out)
end

-- Completion --------------------------------------------------------------------------------------

--- The completion items for a mention that starts with `prefix` (`@…` or `#…`).
---@param prefix string
---@return table[]
function M.items(prefix)
  local items = {}
  if prefix:sub(1, 1) == "#" then
    for _, w in ipairs({ "#buffer", "#buffers" }) do
      if w:sub(1, #prefix) == prefix then
        local what = w == "#buffer" and "the file you were editing" or "every open file buffer"
        items[#items + 1] = { word = w, menu = "[BB-7] " .. what }
      end
    end
    return items
  end
  local seen = {}
  local r = root()
  local function add(rel)
    if not seen[rel] then
      seen[rel] = true
      items[#items + 1] = { word = "@" .. rel, abbr = rel, menu = "[BB-7]" }
    end
  end
  -- Open buffers first, then the project's files (the deny list hidden).
  local denied = require("bb7.deny").matcher()
  for _, b in ipairs(listed_buffers()) do
    local rel, external = util.relpath(abs_of(b), r)
    if external or not (denied and denied(rel)) then
      add(rel)
    end
  end
  for _, rel in ipairs(session.project_files()) do
    add(rel)
  end
  local needle = prefix:sub(2):lower()
  if needle == "" then
    return items
  end
  return vim.tbl_filter(function(it)
    return it.word:sub(2):lower():find(needle, 1, true) ~= nil
  end, items)
end

--- The start (0-based byte column) of the mention before the cursor in insert mode, and its text.
local function mention_before_cursor()
  local line = vim.api.nvim_get_current_line()
  local col = vim.api.nvim_win_get_cursor(0)[2]
  local before = line:sub(1, col)
  local s = before:find("[#@][^%s]*$")
  if not s then
    return nil
  end
  if s > 1 and not before:sub(s - 1, s - 1):match("%s") then
    return nil
  end
  return s - 1, before:sub(s)
end

--- 'omnifunc' of the Input pane: completes the mention before the cursor.
function M.omnifunc(findstart, base)
  if findstart == 1 then
    local start = mention_before_cursor()
    return start or -3
  end
  return M.items(base)
end

local saved_completeopt = nil

--- Opens the completion menu for the mention just started (`@` or `#` typed at a word start):
--- nothing is inserted until an item is chosen; typing narrows the menu.
local function auto_complete()
  local start, prefix = mention_before_cursor()
  if not start or #prefix ~= 1 or vim.fn.pumvisible() == 1 then
    return
  end
  local items = M.items(prefix)
  if #items == 0 then
    return
  end
  if not saved_completeopt then
    saved_completeopt = vim.o.completeopt
    vim.o.completeopt = "menuone,noinsert,noselect"
  end
  vim.fn.complete(start + 1, items)
end

local function restore_completeopt()
  if saved_completeopt then
    vim.o.completeopt = saved_completeopt
    saved_completeopt = nil
  end
end

--- Picks a project file with |vim.ui.select()| and inserts `@path` at the cursor of `win`.
function M.pick(buf, win)
  local files = M.items("@")
  local mode = vim.fn.mode()
  vim.ui.select(files, {
    prompt = "Mention a file",
    format_item = function(it)
      return util.oneline(it.abbr)
    end,
  }, function(choice)
    if not choice or not vim.api.nvim_win_is_valid(win) or vim.api.nvim_win_get_buf(win) ~= buf then
      return
    end
    local row, col = unpack(vim.api.nvim_win_get_cursor(win))
    local line = vim.api.nvim_buf_get_lines(buf, row - 1, row, false)[1] or ""
    local pre = line:sub(1, col)
    local lead = (pre == "" or pre:match("%s$")) and "" or " "
    local ins = lead .. choice.word .. " "
    vim.api.nvim_buf_set_text(buf, row - 1, col, row - 1, col, { ins })
    vim.api.nvim_win_set_cursor(win, { row, col + #ins })
    if mode == "i" then
      vim.cmd("startinsert")
    end
  end)
end

--- Sets up mentions in the Input pane's buffer `buf`: its 'omnifunc', the menu on `@` / `#`, and the
--- picker key (`keymaps.input.mention`, in normal and insert mode).
function M.attach(buf)
  vim.bo[buf].omnifunc = "v:lua.require'bb7.mentions'.omnifunc"
  local group = vim.api.nvim_create_augroup("bb7_mentions_" .. buf, { clear = true })
  vim.api.nvim_create_autocmd("TextChangedI", {
    group = group,
    buffer = buf,
    callback = auto_complete,
  })
  vim.api.nvim_create_autocmd({ "CompleteDone", "InsertLeave" }, {
    group = group,
    buffer = buf,
    callback = restore_completeopt,
  })
  require("bb7.ui.keymaps").apply(buf, "input", "input", {
    mention = {
      function()
        M.pick(buf, vim.api.nvim_get_current_win())
      end,
      "mention a file (@path) picked with vim.ui.select",
      modes = { "n", "i" },
    },
  })
end

return M
