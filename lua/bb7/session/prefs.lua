--- The preference files the client owns: favourite models and the last used model in the global
--- `state.json`, pinned chats in the project's `.bb7/pinned_chats.json`.
local config = require("bb7.config")
local util = require("bb7.util")
local S = require("bb7.session.state")

local M = {}

-- Global state (`$BB7_HOME/state.json`) --------------------------------------------------------------

local function state_path()
  return config.state_dir() .. "/state.json"
end

function M.global_state()
  return util.read_json(state_path(), {})
end

--- Writes the global state back (the caller read it with `global_state` and changed it).
function M.save_global_state(s)
  util.write_json(state_path(), s)
end

function M.favorites()
  local s = M.global_state()
  return type(s.favorites) == "table" and s.favorites or {}
end

function M.toggle_favorite(id)
  local s = M.global_state()
  local favs = type(s.favorites) == "table" and s.favorites or {}
  local found = false
  favs = vim.tbl_filter(function(x)
    if x == id then
      found = true
    end
    return x ~= id
  end, favs)
  if not found then
    table.insert(favs, id)
  end
  s.favorites = favs
  M.save_global_state(s)
  return not found
end

-- Pins (`.bb7/pinned_chats.json`; outside a project the global state dir's) --------------------------------------------------------------------

local function pins_path()
  if S.global_only then
    -- Outside a project (global chats only): never a `.bb7/` made in the directory.
    return config.state_dir() .. "/pinned_chats.json"
  end
  return (S.root or config.root()) .. "/.bb7/pinned_chats.json"
end

function M.pinned()
  local v = util.read_json(pins_path(), {})
  return type(v.chats) == "table" and v.chats or {}
end

function M.set_pinned(id, on)
  local list = vim.tbl_filter(function(x)
    return x ~= id
  end, M.pinned())
  if on then
    table.insert(list, id)
  end
  util.write_json(pins_path(), { chats = list })
end

return M
