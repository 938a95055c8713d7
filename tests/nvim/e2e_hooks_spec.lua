-- End to end, real host: `:BB7Tools` lists a hook (examples/hooks, `deny_migrations`) with its points,
-- installed by the real `bb7 tools add` into the case's own HOME before the host starts, and grants
-- it like a tool. Assertions are on the list's text and on `.bb7/tools.lock`.
local t = require("helpers")

local WASM = t.repo .. "/examples/hooks/target/wasm32-wasip2/release/deny_migrations.wasm"
local NAME = "deny_migrations"

-- Built once, when the spec is loaded (by the runner, before any case's Neovim starts): cargo.
if not vim.uv.fs_stat(WASM) then
  local res = vim.system({ "sh", "examples/hooks/build.sh", "--locked" }, { cwd = t.repo, text = true }):wait()
  if res.code ~= 0 or not vim.uv.fs_stat(WASM) then
    error("examples/hooks/build.sh failed:\n" .. (res.stdout or "") .. (res.stderr or ""))
  end
end

local function press(keys)
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(keys, true, false, true), "mx", false)
end

--- Runs `bb7 <args>` in the project with the environment the plugin gives the host.
local function cli(env, args)
  local henv = require("bb7.config").options.env
  local res = vim
    .system(vim.list_extend({ t.bin() }, args), {
      cwd = env.project,
      env = { HOME = henv.HOME, BB7_HOME = henv.BB7_HOME, BB7_CACHE_DIR = henv.BB7_CACHE_DIR },
      text = true,
    })
    :wait(60000)
  if res.code ~= 0 then
    error(("bb7 %s failed (%s):\n%s%s"):format(table.concat(args, " "), tostring(res.code), res.stdout or "", res.stderr or ""), 2)
  end
  return res.stdout
end

--- The list's lines of `name`: its header and the indented lines below it.
local function block(name)
  local st = require("bb7.ui.tools").current()
  t.ok(st, "the tool list is open")
  local lines = vim.api.nvim_buf_get_lines(st.buf, 0, -1, false)
  local first = st.heads[name]
  t.ok(first, name .. " listed:\n" .. table.concat(lines, "\n"))
  local out = { lines[first] }
  for i = first + 1, #lines do
    if lines[i] == "" or lines[i]:match("^  %S") then
      break
    end
    out[#out + 1] = lines[i]
  end
  return table.concat(out, "\n")
end

local function has(text, needle, what)
  t.ok(text:find(needle, 1, true), ("%s: %q in:\n%s"):format(what or "text", needle, text))
end

return {
  {
    "a hook is listed under its own name with its points, and approved like a tool (the lockfile follows)",
    function()
      local env = t.env()
      vim.fn.mkdir(env.project .. "/.bb7/chats", "p")
      cli(env, { "tools", "add", WASM, "--project" })
      t.cmd("BB7Tools")
      local b = block(NAME)
      has(b, "  needs-approval  " .. NAME .. "  third-party 0.1.0  enabled here", "header")
      has(b, "hook: pre_tool_call, pre_apply", "its points")
      has(b, "requested: files none · network none · env none", "it asks for nothing")
      local st = require("bb7.ui.tools").current()
      vim.api.nvim_set_current_win(st.win)
      vim.api.nvim_win_set_cursor(st.win, { st.heads[NAME], 0 })
      local orig = vim.ui.select
      vim.ui.select = function(items, _, cb)
        cb("Yes")
      end
      local ok, err = pcall(press, "a")
      vim.ui.select = orig
      if not ok then
        error(err, 0)
      end
      t.wait(function()
        return block(NAME):find("  offered ", 1, true) ~= nil
      end, 20000, "approved")
      local lock = t.read(env.project .. "/.bb7/tools.lock") or ""
      has(lock, 'name = "' .. NAME .. '"', "locked like a tool")
    end,
  },
}
