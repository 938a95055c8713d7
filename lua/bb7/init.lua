--- BB-7: an LLM coding companion for Neovim that never touches your files on its own.
---
--- `require("bb7").setup(opts)` sets the options (see `:help bb7-configuration`); requiring this
--- module has no side effects. The commands are defined by `plugin/bb7.lua`.
local M = {}

--- Configures the plugin. Every option is optional.
---@param opts table|nil
function M.setup(opts)
  require("bb7.config").setup(opts)
  require("bb7.session").hook()
  require("bb7.agent").attach()
  require("bb7.inline").map_start_key()
end

--- Toggles the UI (same as `:BB7`).
function M.toggle()
  require("bb7.commands").toggle()
end

--- Stops the host process.
function M.stop()
  require("bb7.host").stop()
end

return M
