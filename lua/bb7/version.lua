--- The plugin's version, the one constant every module takes it from. The host it runs with must
--- be of the same major.minor series (`bb7 --version`, the `version` action).
local M = {}

--- This plugin's version.
M.plugin = "0.1.0"

--- The host series this plugin speaks to: the plugin's major.minor.
M.host_series = M.plugin:match("^(%d+%.%d+)")

return M
