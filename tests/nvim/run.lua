-- A small test runner for headless Neovim:
--   nvim --headless -u NONE -l tests/nvim/run.lua tests/nvim/<file>_spec.lua [filter]
-- A spec file returns a list of { name, fn }. Each case runs in a fresh Neovim of its own, always.
-- A case fails on any ERROR notification, scheduled-callback error or Vim error (v:errmsg, e.g.
-- from an autocommand callback) it did not expect (helpers.lua).
-- Exits non-zero when any test fails.
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

-- Each case runs in a fresh Neovim (its own process, host and temp dirs), so no state leaks from
-- one case to the next: this process starts one child per case (`--case N`) and sums up. A story
-- told step by step is one case that runs its steps in order (see e2e_review_spec.lua).
local only = nil
if filter and filter:match("^%-%-case=%d+$") then
  only, filter = tonumber(filter:match("%d+")), nil
end
if only == nil then
  local me = debug.getinfo(1, "S").source:sub(2)
  local nvim = vim.v.progpath
  for i, case in ipairs(tests) do
    if not filter or case[1]:find(filter, 1, true) then
      local res = vim.system({ nvim, "--headless", "-u", "NONE", "-i", "NONE", "-l", me, spec, "--case=" .. i }, { text = true }):wait(170000)
      local out = res.stdout or ""
      -- The child's own summary line is dropped; its case lines are passed on.
      out = out:gsub("[^\n]*: %d+ passed, %d+ failed\n?$", "")
      io.stdout:write(out)
      if res.stderr and res.stderr ~= "" then
        io.stdout:write(res.stderr)
      end
      if res.code == 0 then
        passed = passed + 1
      else
        failed = failed + 1
        if not out:find("FAIL ", 1, true) then
          io.stdout:write(("FAIL %s: %s (the Neovim running it exited with %s)\n"):format(name_of, case[1], tostring(res.code)))
        end
      end
      io.stdout:flush()
    end
  end
  io.stdout:write(("%s: %d passed, %d failed\n"):format(name_of, passed, failed))
  io.stdout:flush()
  os.exit(failed == 0 and 0 or 1)
end

for i, case in ipairs(tests) do
  local name, fn = case[1], case[2]
  if (only == nil or only == i) and (not filter or name:find(filter, 1, true)) then
    t.notes, t.errors = {}, {}
    vim.v.errmsg = "" -- errors in autocommand callbacks and keys land here
    local t0 = vim.uv.hrtime()
    local ok, err = xpcall(fn, debug.traceback)
    -- Let callbacks already scheduled run, then fail on any error nobody expected.
    vim.wait(20, function()
      return false
    end, 5)
    if vim.v.errmsg ~= "" then
      table.insert(t.errors, { msg = "Vim error: " .. vim.v.errmsg, level = vim.log.levels.ERROR, callback = true })
    end
    local unexpected = t.unexpected_errors()
    if ok and #unexpected > 0 then
      ok, err = false, "unexpected errors (ERROR notifications or callback errors):\n  " .. table.concat(unexpected, "\n  ")
    end
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
