-- lazy.nvim runs this file (a `build.lua` at a plugin's root) in a coroutine when it installs or
-- updates the plugin: it builds the host with `cargo build --release -p bb7`, yielding cargo's
-- progress to lazy's window while Neovim stays usable. `:BB7Build` runs the same build by hand.
-- See `:help bb7-installation`.
local root = vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h")
local build = package.loaded["bb7.build"]
if not build then
  -- The plugin may not be loaded yet (lazy-loaded on a command): take the module from this checkout.
  build = dofile(root .. "/lua/bb7/build.lua")
  package.loaded["bb7.build"] = build
end
return build.run({ root = root })
