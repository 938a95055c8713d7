--- The session facade: `require("bb7.session")` is the shared state table (session/state.lua) with
--- every session operation merged into it, so callers use one table for state and operations.
---
--- The parts, each requiring only those before it (never the UI, never `bb7.agent`):
---   state     the shared table, events, notifications, failure wording
---   prefs     favourites, last model (`state.json`) and pins (`.bb7/pinned_chats.json`)
---   settings  the active chat's model, reasoning effort and mode
---   fetch     model list, balance, token estimate (async)
---   chat      loading the active chat, its file statuses, the chat list
---   project   starting and initializing the host in the project, its events
---   chats     new, select, rename, delete, fork, edit, search, draft, pins
---   context   targets, the user's text, adding / removing / updating context files
---   output    reading, applying and rejecting the model's output
---   review    the host's side of per-hunk review and checkpoints
---   tools     the tools the model may be offered: listing, enabling, approving, revoking
---   send      sending, the streamed reply, clarifying questions, cancelling
local M = require("bb7.session.state")

local parts = {
  prefs = require("bb7.session.prefs"),
  settings = require("bb7.session.settings"),
  fetch = require("bb7.session.fetch"),
  chat = require("bb7.session.chat"),
  project = require("bb7.session.project"),
  chats = require("bb7.session.chats"),
  context = require("bb7.session.context"),
  output = require("bb7.session.output"),
  review = require("bb7.session.review"),
  tools = require("bb7.session.tools"),
  send = require("bb7.session.send"),
}

for part, fns in pairs(parts) do
  for name, fn in pairs(fns) do
    -- One name, one operation: a part never shadows the state or another part.
    assert(M[name] == nil, ("bb7.session: %s.%s is defined twice"):format(part, name))
    M[name] = fn
  end
end

return M
