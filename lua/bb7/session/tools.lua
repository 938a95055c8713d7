--- The host's side of `:BB7Tools`: the tools the model may be offered (built-in and third-party
--- components), enabling one per project, and the user's approvals (grants). Each function returns
--- the host's reply: `{type = "tools", tools = {…}}` (the updated list) or `type = "error"`; the
--- wording is left to the view.
local host = require("bb7.host")
local project = require("bb7.session.project")

local M = {}

--- Every tool, built-in and installed (`tools`). Starts the host, and initializes the project when
--- there is one, first. Returns nil when the host could not be started (that was already reported).
function M.tools_list()
  project.ensure()
  if not host.running() then
    return nil
  end
  return host.call("tools_list", {})
end

--- Enables or disables component `name` (its name or its tool's name) in the project.
function M.tool_set_enabled(name, enabled)
  return host.call("tool_set_enabled", { name = name, enabled = enabled == true })
end

--- Grants component `name` exactly what the user was shown: `shown` is the list entry the approval
--- dialog displayed, so the grant is pinned to its `sha256` and its `requested` capabilities (the host
--- refuses when the installed binary is no longer that one).
function M.tool_grant(name, shown)
  local req = { name = name }
  if type(shown) == "table" then
    req.sha256 = shown.sha256
    local r = shown.requested or {}
    req.files = r.files or "none"
    req.network = r.network or {}
    req.env = r.env or {}
    req.http = r.http or {}
  end
  return host.call("tool_grant", req)
end

--- Withdraws component `name`'s grant: it stays installed but is not offered to the model.
function M.tool_revoke(name)
  return host.call("tool_revoke", { name = name })
end

return M
