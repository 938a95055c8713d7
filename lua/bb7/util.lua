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
  if not path then
    path, s, e = arg:match("^(.-):(%d+)%-(%d+)$") -- `path:2-3`, as sections are shown
  end
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
function M.display_status(f, local_text, missing)
  local st = f.status or ""
  if st == "S" or st == "A" or st == "!A" then
    return st
  end
  if st == "" and missing then
    return "D" -- in the context, gone from disk (a rollback removed the file the model created)
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

--- An RFC 3339 time of the host (UTC, `2026-11-25T19:18:27Z`) in local time (`2026-11-25 20:18:27`);
--- anything else is returned as it is.
function M.local_time(iso)
  if type(iso) ~= "string" then
    return tostring(iso or "")
  end
  local y, mo, d, h, mi, s, zone = iso:match("^(%d+)-(%d+)-(%d+)T(%d+):(%d+):(%d+)%.?%d*(.*)$")
  if not y then
    return iso
  end
  local offset = 0 -- the zone of the string, in seconds east of UTC
  if zone ~= "Z" and zone ~= "" then
    local sign, zh, zm = zone:match("^([+-])(%d%d):?(%d%d)$")
    if not sign then
      return iso
    end
    offset = (tonumber(zh) * 3600 + tonumber(zm) * 60) * (sign == "-" and -1 or 1)
  end
  local fields = { year = tonumber(y), month = tonumber(mo), day = tonumber(d), hour = tonumber(h), min = tonumber(mi), sec = tonumber(s) }
  -- os.time reads the fields as local time: correct by the local zone's offset at that moment.
  local as_local = os.time(fields)
  if not as_local then
    return iso
  end
  local utc_fields = os.date("!*t", as_local)
  utc_fields.isdst = false
  local local_fields = os.date("*t", as_local)
  local_fields.isdst = false
  local zone_local = os.time(local_fields) - os.time(utc_fields)
  local epoch = as_local + zone_local - offset
  return os.date("%Y-%m-%d %H:%M:%S", epoch)
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
  name = M.oneline(name)
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

local ESCAPES = { ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t" }

--- `s` as one displayable line: line breaks, tabs and every other control character shown escaped
--- (`\n`, `\t`, `\x1b`, ...). For strings that come from the host or the model (chat names, paths):
--- a buffer line cannot hold a newline, and a terminal escape must never reach the screen raw.
---@param s any
---@return string
function M.oneline(s)
  if s == nil then
    return ""
  end
  s = tostring(s)
  if not s:find("[%z\1-\31\127]") then
    return s
  end
  return (s:gsub("[%z\1-\31\127]", function(c)
    return ESCAPES[c] or ("\\x%02x"):format(c:byte())
  end))
end

--- Why `text` cannot be sent as a context file, or nil when it can: it is binary (holds NUL bytes),
--- is not valid UTF-8, or is larger than `max_bytes`.
---@param text string
---@param max_bytes integer|nil
---@return string|nil reason
function M.unsendable(text, max_bytes)
  if max_bytes and #text > max_bytes then
    return ("it is too large (%s, the limit is %s)"):format(M.bytes(#text), M.bytes(max_bytes))
  end
  if text:find("%z") then
    return "it is a binary file"
  end
  local bad = M.invalid_utf8(text)
  if bad then
    return ("it is not UTF-8 text (invalid byte at offset %d)"):format(bad - 1)
  end
  return nil
end

--- The 1-based position of the first byte that makes `s` invalid UTF-8, or nil when it is valid.
---@param s string
---@return integer|nil
function M.invalid_utf8(s)
  local i = s:find("[\128-\255]")
  if not i then
    return nil
  end
  local n = #s
  local byte = string.byte
  while i <= n do
    local c = byte(s, i)
    if c < 0x80 then
      i = i + 1
    else
      local len, min
      if c >= 0xC2 and c <= 0xDF then
        len, min = 2, 0x80
      elseif c >= 0xE0 and c <= 0xEF then
        len, min = 3, 0x800
      elseif c >= 0xF0 and c <= 0xF4 then
        len, min = 4, 0x10000
      else
        return i
      end
      if i + len - 1 > n then
        return i
      end
      local cp = c % (2 ^ (7 - len))
      for k = 1, len - 1 do
        local cc = byte(s, i + k)
        if cc < 0x80 or cc > 0xBF then
          return i
        end
        cp = cp * 64 + (cc - 0x80)
      end
      if cp < min or cp > 0x10FFFF or (cp >= 0xD800 and cp <= 0xDFFF) then
        return i
      end
      i = i + len
      local j = s:find("[\128-\255]", i)
      if not j then
        return nil
      end
      i = j
    end
  end
  return nil
end

--- Why the local file `rel` (a path relative to `root`) must not be written from Neovim, or nil when
--- it may: it goes through a symbolic link (which could lead anywhere), or into `.git/` or `.bb7/`,
--- or out of the project. Only the components under `root` are looked at (`root` itself may be a link).
---@param root string
---@param rel string
---@return string|nil reason
function M.unsafe_local(root, rel)
  if rel == "" or rel:sub(1, 1) == "/" then
    return "it is outside the project"
  end
  local parts = vim.split(rel, "/", { plain = true })
  for _, p in ipairs(parts) do
    -- Any component, in any case (the host's rule too): `sub/.git/hooks` is a repository's as well.
    local lower = p:lower()
    if lower == ".git" or lower == ".bb7" then
      return ("it is inside %s/"):format(M.oneline(p))
    end
  end
  local cur = root:gsub("/$", "")
  for _, p in ipairs(parts) do
    if p == ".." then
      return "it is outside the project"
    end
    if p ~= "" and p ~= "." then
      cur = cur .. "/" .. p
      local st = vim.uv.fs_lstat(cur)
      if not st then
        return nil -- the rest does not exist yet: nothing to follow
      end
      if st.type == "link" then
        return ("it goes through the symbolic link %s"):format(M.oneline(M.relpath(cur, root)))
      end
    end
  end
  return nil
end

--- A byte count for display (2048 -> "2.0 KiB").
function M.bytes(n)
  if n >= 1024 * 1024 then
    return ("%.1f MiB"):format(n / 1024 / 1024)
  elseif n >= 1024 then
    return ("%.1f KiB"):format(n / 1024)
  end
  return n .. " B"
end

return M
