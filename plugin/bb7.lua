-- BB-7 user commands. Each command loads the plugin's modules on first use; nothing else happens at
-- start-up (no keymaps, no host process until a command needs it).
if vim.g.loaded_bb7 then
  return
end
vim.g.loaded_bb7 = 1

local function cmd(name, fn, opts)
  vim.api.nvim_create_user_command(name, function(o)
    require("bb7.commands")[fn](o)
  end, opts or {})
end

local function levels()
  return { "project", "global", "system" }
end

-- Path completion without `-complete=file`, which would expand `%`, `#` and wildcards inside a
-- path argument (`a%b.txt` must stay `a%b.txt`). An argument that is exactly `%` or `#` still means
-- the current or alternate file (see `:help :BB7Add`).
local function paths(arglead)
  return vim.fn.getcompletion(arglead, "file")
end

cmd("BB7Init", "init", { desc = "BB-7: initialize .bb7/ in the current directory" })
cmd("BB7", "toggle", { desc = "BB-7: toggle the UI" })
cmd("BB7Add", "add", { nargs = "?", range = true, complete = paths, desc = "BB-7: add a file or section to the context" })
cmd("BB7AddReadonly", "add_readonly", { nargs = "?", range = true, complete = paths, desc = "BB-7: add a file read-only" })
cmd("BB7Remove", "remove", { nargs = "?", range = true, complete = paths, desc = "BB-7: remove a file from the context" })
cmd("BB7NewChat", "new_chat", { nargs = "?", desc = "BB-7: new chat" })
cmd("BB7Model", "model", { desc = "BB-7: pick the model" })
cmd("BB7Search", "search", { nargs = "?", desc = "BB-7: search chats" })
cmd("BB7Diff", "diff", { nargs = "?", complete = paths, desc = "BB-7: context → output diff" })
cmd("BB7DiffLocal", "diff_local_cmd", { nargs = "?", complete = paths, desc = "BB-7: local ↔ output side-by-side diff" })
cmd("BB7EditInstructions", "edit_instructions", {
  nargs = "?",
  complete = function()
    return levels()
  end,
  desc = "BB-7: edit instructions (project, global, system)",
})
cmd("BB7Version", "version", { desc = "BB-7: plugin and host versions" })
cmd("BB7Restart", "restart", { desc = "BB-7: restart the host process" })
cmd("BB7Build", "build", {
  nargs = "?",
  complete = function()
    return { "cancel" }
  end,
  desc = "BB-7: build the host (cargo build --release) with progress; `cancel` stops it",
})
cmd("BB7Pick", "pick", { desc = "BB-7: pick files to add (vim.ui.select)" })
cmd("BB7AddQuickfix", "add_quickfix", { desc = "BB-7: add the quickfix list's files" })
-- Per-hunk review and checkpoints (lua/bb7/ui/review.lua, lua/bb7/ui/checkpoints.lua).
vim.api.nvim_create_user_command("BB7Review", function(o)
  require("bb7.ui.review").command(o)
end, { nargs = "?", complete = "file", desc = "BB-7: review a file's change hunk by hunk (local ↔ proposed)" })
vim.api.nvim_create_user_command("BB7Checkpoints", function()
  require("bb7.ui.checkpoints").open()
end, { desc = "BB-7: checkpoints: 3-way view and rollback" })
-- Tool components: enabling, approving, revoking (lua/bb7/ui/tools.lua).
vim.api.nvim_create_user_command("BB7Tools", function()
  require("bb7.ui.tools").open()
end, { desc = "BB-7: tools: enable, approve or revoke tool components" })
vim.api.nvim_create_user_command("BB7Agent", function(o)
  require("bb7.agent").command(o)
end, {
  nargs = "?",
  complete = function()
    return { "on", "off", "toggle" }
  end,
  desc = "BB-7: agent mode for this chat (on, off, toggle)",
})
-- Issue 28 §9: plan mode (lua/bb7/ui/plan.lua).
vim.api.nvim_create_user_command("BB7Plan", function(o)
  require("bb7.ui.plan").command(o)
end, {
  nargs = "?",
  complete = function()
    return { "on", "off", "toggle", "approve", "edit", "reject" }
  end,
  desc = "BB-7: plan mode for this chat, or approve / edit / reject its proposed plan",
})
-- Issue 28 §10: remote, local or hybrid routing for this chat (lua/bb7/routing.lua).
vim.api.nvim_create_user_command("BB7Routing", function(o)
  require("bb7.routing").command(o)
end, {
  nargs = "?",
  complete = function()
    return { "remote", "local", "hybrid_auto" }
  end,
  desc = "BB-7: where this chat's model requests go (remote, local, hybrid_auto)",
})
-- Issue 28 §11: spend per day / model / chat (lua/bb7/ui/usage.lua).
vim.api.nvim_create_user_command("BB7Usage", function()
  require("bb7.ui.usage").open()
end, { desc = "BB-7: spend per day, model or chat (from the usage ledger), with the caps" })
-- Issue 29: the agent's waiting question, global chats.
cmd("BB7Answer", "answer", { nargs = "*", bang = true, desc = "BB-7: answer the agent's question (! skips it)" })
cmd("BB7Global", "global", { desc = "BB-7: the global chats (toggle the chat list between project and global)" })
cmd("BB7MoveChat", "move_chat", {
  nargs = "?",
  complete = function()
    return { "global", "project" }
  end,
  desc = "BB-7: move the active chat to the global chats or into the project",
})
-- Inline edits (lua/bb7/inline.lua).
vim.api.nvim_create_user_command("BB7Inline", function(o)
  require("bb7.inline").command(o)
end, { nargs = "*", range = true, desc = "BB-7: inline edit of the selected lines, reviewed hunk by hunk in the buffer" })
vim.api.nvim_create_user_command("BB7InlineCancel", function()
  require("bb7.inline").cancel()
end, { desc = "BB-7: cancel the inline edit waiting for its reply" })
