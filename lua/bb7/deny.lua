--- The agent's secret deny list (AGENT-PROTOCOL.md §1: `.env`, keys, credentials), applied to the
--- plugin's file pickers: the Files pane's `A` (|:BB7Pick|) and `@` completion in the Input pane do not
--- offer those files unless `show_denied` is set. A path typed by hand is still taken.
---
--- The patterns are the host's: `agent.deny` of config.json when it is set there (it replaces the
--- defaults, as in the host), else the defaults below (guest-tools/tool-logic/src/retrieval/deny.rs).
--- They are `.gitignore` patterns matched in any case: a pattern without `/` matches a file or folder
--- name at any depth, `**/a/b` matches `a/b` at any depth, `a/b` (or `/a`) from the project root, and a
--- trailing `/` only folders.
local config = require("bb7.config")
local util = require("bb7.util")

local M = {}

--- The host's default deny list.
M.DEFAULT = {
  ".env",
  ".env.*",
  "*.pem",
  "*.key",
  "id_rsa*",
  "id_ed25519*",
  "id_ecdsa*",
  "*.p12",
  ".netrc",
  ".npmrc",
  ".pypirc",
  ".git-credentials",
  "**/.aws/credentials",
  "**/.docker/config.json",
  "**/.kube/config",
}

--- A glob of one path component (or several joined by `/`) as an anchored Lua pattern.
local function glob(g)
  local p = g:gsub("[%^%$%(%)%%%.%[%]%+%-]", "%%%0"):gsub("%*", "[^/]*"):gsub("%?", "[^/]")
  return "^" .. p .. "$"
end

--- Compiles `patterns` into a matcher: `fn(rel) -> pattern|nil` (rel relative to the project root).
---@param patterns string[]
---@return fun(rel: string): string|nil
function M.compile(patterns)
  local rules = {}
  for _, raw in ipairs(patterns) do
    local p = vim.trim(raw)
    if p ~= "" and p:sub(1, 1) ~= "#" and p:sub(1, 1) ~= "!" then
      local r = { raw = raw }
      if p:sub(-1) == "/" then
        r.dir_only, p = true, p:sub(1, -2)
      end
      if p:sub(1, 3) == "**/" then
        p = p:sub(4)
        r.anywhere = true
      elseif p:find("/", 1, true) then
        r.anchored, p = true, p:gsub("^/", "")
      end
      r.pat = glob(p:lower())
      r.parts = select(2, p:gsub("/", "")) + 1
      rules[#rules + 1] = r
    end
  end
  return function(rel)
    local comps = vim.split(rel:lower(), "/", { plain = true, trimempty = true })
    for _, r in ipairs(rules) do
      -- Each run of `parts` components that may match: at the root only when anchored, else at any
      -- depth; a run that ends before the last component names a folder above the file.
      local starts = r.anchored and { 1 } or nil
      for s = 1, (starts and 1 or #comps) do
        local e = s + r.parts - 1
        if e <= #comps and (e < #comps or not r.dir_only) then
          if table.concat(comps, "/", s, e):match(r.pat) then
            return r.raw
          end
        end
      end
    end
    return nil
  end
end

--- The deny patterns in effect: `agent.deny` from the host's config.json, else the defaults.
---@return string[]
function M.patterns()
  local cfg = util.read_json(config.config_file(), {})
  local agent = type(cfg) == "table" and cfg.agent or nil
  if type(agent) == "table" and type(agent.deny) == "table" then
    local out = {}
    for _, p in ipairs(agent.deny) do
      if type(p) == "string" then
        out[#out + 1] = p
      end
    end
    return out
  end
  return M.DEFAULT
end

--- The matcher the pickers use (see `compile`), or nil when the `show_denied` option is set.
---@return (fun(rel: string): string|nil)|nil
function M.matcher()
  if config.options.show_denied then
    return nil
  end
  return M.compile(M.patterns())
end

return M
