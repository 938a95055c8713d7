--- Builds the host from source (the lazy.nvim `build` step): `cargo build --release` in the plugin's
--- root, after checking that Rust and the wasm32-wasip2 target are installed.
local M = {}

local function fail(msg)
  error("BB-7 build: " .. msg, 0)
end

--- Runs the build. Errors with an actionable message when a prerequisite is missing.
---@param opts {on_output: fun(line: string)|nil}|nil
function M.run(opts)
  opts = opts or {}
  local root = require("bb7.host").plugin_root()
  if vim.fn.executable("cargo") ~= 1 then
    fail("cargo not found. Install Rust from https://rustup.rs, then rebuild (:Lazy build bb7.nvim)")
  end
  if vim.fn.executable("rustup") == 1 then
    local targets = vim.system({ "rustup", "target", "list", "--installed" }, { cwd = root, text = true }):wait()
    if targets.code == 0 and not (targets.stdout or ""):find("wasm32-wasip2", 1, true) then
      local add = vim.system({ "rustup", "target", "add", "wasm32-wasip2" }, { cwd = root, text = true }):wait()
      if add.code ~= 0 then
        fail("the wasm32-wasip2 target is not installed and `rustup target add wasm32-wasip2` failed: " .. (add.stderr or ""))
      end
    end
  end
  local out = {}
  local res = vim.system({ "cargo", "build", "--release", "-p", "bb7" }, {
    cwd = root,
    text = true,
    stderr = function(_, data)
      if data then
        out[#out + 1] = data
        if opts.on_output then
          opts.on_output(data)
        end
      end
    end,
  }):wait()
  if res.code ~= 0 then
    local log = table.concat(out)
    if log:find("wasm32%-wasip2") then
      fail("the wasm32-wasip2 target is missing: run `rustup target add wasm32-wasip2`, then rebuild.\n" .. log:sub(-2000))
    end
    fail("cargo build --release failed:\n" .. log:sub(-3000))
  end
  local bin = root .. "/target/release/bb7"
  if vim.fn.executable(bin) ~= 1 then
    fail("the build finished but " .. bin .. " is missing")
  end
  return bin
end

return M
