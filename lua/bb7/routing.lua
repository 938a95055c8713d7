--- `:BB7Routing [remote|local|hybrid_auto]` (issue 28 §10, :help bb7-providers): where the active
--- chat's model requests go, saved with the chat. Without an argument it says the current one.
local session = require("bb7.session")

local M = {}

--- The routings the host knows.
M.VALUES = { "remote", "local", "hybrid_auto" }

--- The active chat's routing ("remote" when it has none).
function M.current()
  return session.chat and session.chat.routing or "remote"
end

--- `:BB7Routing [routing]`.
function M.command(opts)
  local a = vim.trim(opts and opts.args or "")
  if a == "" then
    session.notify("Routing: " .. M.current(), vim.log.levels.INFO)
    return
  end
  if not vim.tbl_contains(M.VALUES, a) then
    session.notify("Usage: :BB7Routing [remote|local|hybrid_auto]", vim.log.levels.ERROR)
    return
  end
  session.set_routing(a)
end

return M
