-- A small test runner for headless Neovim:
--   nvim --headless -u NONE -l tests/nvim/run.lua tests/nvim/<file>_spec.lua [filter]
-- A spec file returns a list of { name, fn }; tests run in order in this one Neovim (e2e files use
-- that to build a scenario step by step). Exits non-zero when any test fails.
local spec = arg[1]
local filter = arg[2]
if not spec then
  io.stderr:write("usage: run.lua SPEC.lua [filter]\n")
  os.exit(2)
end

local repo = vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h:h:h")
vim.opt.runtimepath:prepend(repo)
package.path = repo .. "/tests/nvim/?.lua;" .. package.path
vim.o.swapfile = false
vim.o.shadafile = "NONE"
-- (the headless UI size is left as is: resizing it trips an assertion in dev builds when tabs open)
vim.cmd("runtime plugin/bb7.lua")

local t = require("helpers")
t.repo = repo

local ok_load, tests = pcall(dofile, spec)
if not ok_load then
  io.stdout:write("LOAD ERROR " .. spec .. ": " .. tostring(tests) .. "\n")
  os.exit(1)
end

local passed, failed = 0, 0
local name_of = vim.fn.fnamemodify(spec, ":t:r")
for _, case in ipairs(tests) do
  local name, fn = case[1], case[2]
  if not filter or name:find(filter, 1, true) then
    t.notes = {}
    local t0 = vim.uv.hrtime()
    local ok, err = xpcall(fn, debug.traceback)
    local ms = (vim.uv.hrtime() - t0) / 1e6
    if ok then
      passed = passed + 1
      io.stdout:write(("ok   %s: %s (%.0f ms)\n"):format(name_of, name, ms))
    else
      failed = failed + 1
      io.stdout:write(("FAIL %s: %s\n%s\n"):format(name_of, name, tostring(err)))
      if #t.notes > 0 then
        io.stdout:write("  notifications:\n")
        for _, n in ipairs(t.notes) do
          io.stdout:write("    [" .. tostring(n.level) .. "] " .. n.msg .. "\n")
        end
      end
    end
    io.stdout:flush()
  end
end
pcall(t.cleanup)
io.stdout:write(("%s: %d passed, %d failed\n"):format(name_of, passed, failed))
io.stdout:flush()
os.exit(failed == 0 and 0 or 1)
