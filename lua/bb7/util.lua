--- Pure helpers: argument parsing, paths, line endings, statuses, formatting. No editor state.
local M = {}

--- Parses a `:BB7Add` argument: `path`, or `path:start:end` for a section.
---@param arg string
---@return {path: string, start_line: integer|nil, end_line: integer|nil}|nil, string|nil err
function M.parse_target(arg)
  if type(arg) ~= "string" or arg == "" then
    return nil, "missing path"
  end
  local path, s, e = arg:match("^(.-):(%d+):(%d+)$")
  if path and path ~= "" then
    s, e = tonumber(s), tonumber(e)
    if s < 1 or e < s then
      return nil, ("invalid line range %d:%d"):format(s, e)
    end
    return { path = path, start_line = s, end_line = e }
  end
  return { path = arg }
end

--- `path` relative to `root` when it is inside it, else the absolute normalized path.
---@param path string
---@param root string
---@return string rel, boolean external
function M.relpath(path, root)
  local abs = vim.fs.normalize(vim.fn.fnamemodify(path, ":p"))
  root = vim.fs.normalize(root):gsub("/$", "")
  if abs == root then
    return ".", false
  end
  if abs:sub(1, #root + 1) == root .. "/" then
    return abs:sub(#root + 2), false
  end
  return abs, true
end

--- The line ending style of `text`: "crlf" when its first line break is CRLF, else "lf".
function M.line_ending(text)
  local i = text:find("\n", 1, true)
  if i and i > 1 and text:sub(i - 1, i - 1) == "\r" then
    return "crlf"
  end
  return "lf"
end

--- `text` with every line break in `style` ("lf" or "crlf").
function M.with_line_ending(text, style)
  local lf = text:gsub("\r\n", "\n")
  if style == "crlf" then
    return (lf:gsub("\n", "\r\n"))
  end
  return lf
end

--- Whether two texts are equal ignoring CRLF vs LF.
function M.same_text(a, b)
  if a == b then
    return true
  end
  if a == nil or b == nil then
    return false
  end
  return a:gsub("\r\n", "\n") == b:gsub("\r\n", "\n")
end

--- Splits text into lines for a buffer (a trailing newline does not make an extra empty line).
---@param text string
---@return string[]
function M.lines(text)
  if text == "" then
    return {}
  end
  local t = vim.split(text:gsub("\r\n", "\n"), "\n", { plain = true })
  if t[#t] == "" then
    t[#t] = nil
  end
  return t
end

--- Lines `s..e` (1-based, inclusive) of `text`, as text with a trailing newline.
function M.section(text, s, e)
  local out = {}
  local ls = M.lines(text)
  for i = s, math.min(e, #ls) do
    out[#out + 1] = ls[i]
  end
  return table.concat(out, "\n") .. "\n"
end

--- The displayed status of a file, adding the frontend statuses to the host's:
--- `R` (read-only), `~` (local differs from the context snapshot), `~M` (that, and there is output).
--- `local_text` is the buffer (when modified) or the file on disk; nil when unknown or missing.
---@param f table a `file_statuses` entry
---@param local_text string|nil
---@return string
function M.display_status(f, local_text)
  local st = f.status or ""
  if st == "S" or st == "A" or st == "!A" then
    return st
  end
  local out_of_sync = f.in_context
    and not f.external
    and local_text ~= nil
    and f.context_content ~= nil
    and not M.same_text(local_text, f.context_content)
  if out_of_sync then
    return st == "M" and "~M" or "~"
  end
  if st == "" and f.readonly then
    return "R"
  end
  return st
end

--- A price per token (string or number, dollars) as dollars per million tokens.
function M.per_million(p)
  local n = tonumber(p)
  if not n then
    return "?"
  end
  local m = n * 1e6
  if m == 0 then
    return "free"
  end
  if m < 10 then
    return ("$%.2f"):format(m)
  end
  return ("$%.1f"):format(m)
end

--- A dollar amount for display.
function M.money(x)
  local n = tonumber(x)
  if not n then
    return "-"
  end
  if n ~= 0 and math.abs(n) < 0.01 then
    return ("$%.4f"):format(n)
  end
  return ("$%.2f"):format(n)
end

--- A token count for display (1234 -> "1.2k").
function M.tokens(n)
  n = tonumber(n) or 0
  if n >= 1000 then
    return ("%.1fk"):format(n / 1000)
  end
  return tostring(n)
end

--- The unified diff from `a` to `b` as lines (via `vim.diff`), with file headers.
---@return string[]
function M.unified_diff(a, b, name)
  a = (a or ""):gsub("\r\n", "\n")
  b = (b or ""):gsub("\r\n", "\n")
  local diff = vim.diff(a, b, { result_type = "unified", ctxlen = 3, algorithm = "histogram" })
  local out = { "--- a/" .. name .. " (context)", "+++ b/" .. name .. " (output)" }
  if type(diff) ~= "string" or diff == "" then
    return { "No differences between context and output for " .. name }
  end
  for _, l in ipairs(M.lines(diff)) do
    out[#out + 1] = l
  end
  return out
end

--- Sorts chats: pinned first (in pin order), then the rest as given (newest first from the host).
---@param chats table[]
---@param pinned string[]
function M.order_chats(chats, pinned)
  local rank = {}
  for i, id in ipairs(pinned or {}) do
    rank[id] = i
  end
  local pins, rest = {}, {}
  for _, c in ipairs(chats) do
    if rank[c.id] then
      pins[#pins + 1] = c
    else
      rest[#rest + 1] = c
    end
  end
  table.sort(pins, function(x, y)
    return rank[x.id] < rank[y.id]
  end)
  for _, c in ipairs(rest) do
    pins[#pins + 1] = c
  end
  return pins
end

--- Sorts models: favourites first (in favourite order), then by name.
function M.order_models(models, favorites)
  local rank = {}
  for i, id in ipairs(favorites or {}) do
    rank[id] = i
  end
  local list = vim.list_slice(models, 1, #models)
  table.sort(list, function(x, y)
    local rx, ry = rank[x.id], rank[y.id]
    if rx and ry then
      return rx < ry
    end
    if rx or ry then
      return rx ~= nil
    end
    return (x.name or x.id) < (y.name or y.id)
  end)
  return list
end

--- Reads a whole file; nil when it cannot be read.
function M.read_file(path)
  local f = io.open(path, "rb")
  if not f then
    return nil
  end
  local s = f:read("*a")
  f:close()
  return s
end

--- Writes a whole file (truncating it). Returns true or nil, err.
function M.write_file(path, content)
  local f, err = io.open(path, "wb")
  if not f then
    return nil, err
  end
  f:write(content)
  f:close()
  return true
end

--- Reads a JSON file; `default` when it is missing or broken.
function M.read_json(path, default)
  local s = M.read_file(path)
  if not s or s == "" then
    return default
  end
  local ok, v = pcall(vim.json.decode, s, { luanil = { object = true, array = true } })
  if ok and type(v) == "table" then
    return v
  end
  return default
end

--- Writes a JSON file atomically (temp file, rename), creating its directory.
function M.write_json(path, value)
  vim.fn.mkdir(vim.fn.fnamemodify(path, ":h"), "p")
  local tmp = path .. ".tmp" .. vim.uv.getpid()
  local ok, err = M.write_file(tmp, vim.json.encode(value))
  if not ok then
    return nil, err
  end
  return vim.uv.fs_rename(tmp, path)
end

return M
