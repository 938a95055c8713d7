-- End to end, real host: `:BB7Tools` with a third-party component (examples/tool-components,
-- `wordcount`) installed by the real `bb7 tools add` into the case's own HOME / BB7_HOME before the
-- host starts. Driven by keys; assertions are on the list's text and on files (`.bb7/tools.lock`).
-- The confirmations are `vim.ui.select` (the one confirmation style): each case replaces it with a
-- function that records the question and gives the answer.
local t = require("helpers")
local I, W = vim.log.levels.INFO, vim.log.levels.WARN

local DIST = t.repo .. "/examples/tool-components/dist/word-count"
local WASM = DIST .. "/word_count.wasm"
local TOOL = "wordcount__count_words"
local HTTP_DIST = t.repo .. "/examples/tool-components/dist/http-fetch"
local HTTP_TOOL = "httpfetch__fetch_url"

-- Built once, when the spec is loaded (by the runner, before any case's Neovim starts): cargo.
if not vim.uv.fs_stat(WASM) or not vim.uv.fs_stat(HTTP_DIST .. "/http_fetch.wasm") then
  local res = vim.system({ "bash", "examples/tool-components/build.sh" }, { cwd = t.repo, text = true }):wait()
  if res.code ~= 0 or not vim.uv.fs_stat(WASM) or not vim.uv.fs_stat(HTTP_DIST .. "/http_fetch.wasm") then
    error("examples/tool-components/build.sh failed:\n" .. (res.stdout or "") .. (res.stderr or ""))
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

--- A fresh environment; `project`: with `.bb7/` (as :BB7Init makes it, without starting the host);
--- `install`: `bb7 tools add` of wordcount (`--project` when there is a project).
local function setup(opts)
  local env = t.env()
  if opts.project then
    vim.fn.mkdir(env.project .. "/.bb7/chats", "p")
  end
  if opts.install then
    cli(env, opts.project and { "tools", "add", DIST, "--project" } or { "tools", "add", DIST })
  end
  t.ok(not require("bb7.host").running(), "the host is not started before :BB7Tools")
  return env
end

local function ui()
  return require("bb7.ui.tools")
end

--- The list's lines of tool `name`: its header and the indented lines below it.
local function block(name)
  local st = ui().current()
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

local function lacks(text, needle, what)
  t.ok(not text:find(needle, 1, true), ("%s: no %q in:\n%s"):format(what or "text", needle, text))
end

--- Puts the cursor on `name`'s line (a line below its header: any line of the block works).
local function on(name, below)
  local st = ui().current()
  vim.api.nvim_set_current_win(st.win)
  vim.api.nvim_win_set_cursor(st.win, { st.heads[name] + (below or 0), 0 })
end

--- Replaces vim.ui.select (the one confirmation style) while `fn` runs: answers "Yes" for 1,
--- "No" for 2, records each question (`choices` joined by newlines; `default`: the first item).
local function answering(answer, fn)
  local asked = {}
  local orig = vim.ui.select
  vim.ui.select = function(items, o, cb)
    asked[#asked + 1] = { msg = o.prompt, choices = table.concat(items, "\n"), default = items[1] }
    cb(answer == 1 and "Yes" or "No")
  end
  local ok, err = pcall(fn)
  vim.ui.select = orig
  if not ok then
    error(err, 0)
  end
  return asked
end

local function lockfile(env)
  return t.read(env.project .. "/.bb7/tools.lock") or ""
end

local function the_tool(name)
  for _, x in ipairs(ui().current().tools) do
    if x.name == name then
      return x
    end
  end
end

return {
  {
    "installed with --project: needs-approval; a approves after showing exactly what it requests (no: nothing); e disables and enables; r revokes; the lockfile follows",
    function()
      local env = setup({ project = true, install = true })
      t.cmd("BB7Tools")
      local b = block(TOOL)
      has(b, "  needs-approval  " .. TOOL .. "  third-party 0.1.0  enabled here", "header")
      has(b, "Counts lines, words and bytes of project files.", "description")
      has(b, "requested: files project-read · network none · env none", "requested")
      has(b, "granted:   nothing", "granted")
      local sha = the_tool(TOOL).sha256
      t.ok(type(sha) == "string" and #sha == 64, "sha256 " .. tostring(sha))
      has(b, "sha256 " .. sha, "sha256 shown")
      has(t.buf_text(ui().current().buf), "Project: " .. env.project, "the project named")
      has(block("write_file"), "  built-in        write_file  builtin  always enabled", "built-ins listed read-only")

      -- Approve, answered "no" (the default): nothing is granted.
      on(TOOL, 2)
      t.clear_notes()
      local asked = answering(2, function()
        press("a")
      end)
      t.eq(1, #asked, "asked once")
      t.eq("No\nYes", asked[1].choices, "no / yes")
      t.eq("No", asked[1].default, "default no")
      local q = asked[1].msg
      has(q, "Approve wordcount 0.1.0 (tool " .. TOOL .. ")? It requests:", "question")
      has(q, "  files:   project-read (a read-only view of the project)", "files")
      has(q, "  network: none", "network")
      has(q, "  env:     none", "env")
      has(q, "  sha256:  " .. sha, "sha256")
      lacks(q, "changed since", "not a changed binary")
      t.note("BB-7: Not approved: wordcount", I)
      has(block(TOOL), "granted:   nothing", "still nothing granted")
      lacks(lockfile(env), "wordcount", "lockfile")

      -- Approve, answered "yes": everything requested is granted; offered; in the lockfile.
      t.clear_notes()
      answering(1, function()
        press("a")
      end)
      t.note("BB-7: Approved wordcount: files project-read · network none · env none", I)
      b = block(TOOL)
      has(b, "  offered         " .. TOOL .. "  third-party 0.1.0  enabled here", "offered")
      has(b, "granted:   files project-read · network none · env none", "granted")
      local lock = lockfile(env)
      has(lock, 'name = "wordcount"', "lockfile names it")
      has(lock, sha, "lockfile pins the sha256")
      t.eq(vim.api.nvim_win_get_cursor(0)[1], ui().current().heads[TOOL], "cursor kept on the tool")

      -- a again: nothing to do.
      t.clear_notes()
      asked = answering(1, function()
        press("a")
      end)
      t.eq(0, #asked, "not asked again")
      t.note("BB-7: wordcount is already approved for everything it requests", I)

      -- e: disabled here (granted, not enabled): not offered, so not in the lockfile.
      t.clear_notes()
      press("e")
      t.note("BB-7: wordcount disabled in this project", I)
      has(block(TOOL), "  disabled        " .. TOOL .. "  third-party 0.1.0  disabled here", "disabled")
      lacks(lockfile(env), "wordcount", "lockfile after disabling")
      press("e")
      has(block(TOOL), "  offered         " .. TOOL .. "  third-party 0.1.0  enabled here", "enabled again")
      has(lockfile(env), 'name = "wordcount"', "lockfile after enabling")

      -- r: asks, then revokes: granted nothing, gone from the lockfile.
      t.clear_notes()
      asked = answering(1, function()
        press("r")
      end)
      t.eq(1, #asked, "revoke asks")
      t.eq("No", asked[1].default, "default cancel")
      has(asked[1].msg, "Revoke the grant of wordcount (files project-read · network none · env none)?", "question")
      t.note("BB-7: Revoked the grant of wordcount", I)
      b = block(TOOL)
      has(b, "  needs-approval  " .. TOOL, "needs approval again")
      has(b, "granted:   nothing", "granted after revoke")
      lacks(lockfile(env), "wordcount", "lockfile after revoke")

      -- e: disabled here.
      press("e")
      has(block(TOOL), "disabled here", "disabled")
      t.ok(not the_tool(TOOL).enabled, "the host's reply says disabled")

      -- R reloads from the host; q closes.
      press("R")
      has(block(TOOL), "disabled here", "after reload")
      press("q")
      t.eq(nil, ui().current(), "closed")
      t.no_errors()
    end,
  },
  {
    "an http component: the list and the approval show its origins; approving grants them, and the lockfile has them",
    function()
      local env = setup({ project = true })
      cli(env, { "tools", "add", HTTP_DIST, "--project" })
      t.cmd("BB7Tools")
      local b = block(HTTP_TOOL)
      has(b, "requested: files none · network none · env none · http https://example.com", "requested origins")
      has(b, "granted:   nothing", "nothing granted yet")
      on(HTTP_TOOL, 2)
      local asked = answering(1, function()
        press("a")
      end)
      t.eq(1, #asked, "asked once")
      has(asked[1].msg, "  http:    HTTP requests (wasi:http) to the origins\n    https://example.com", "the origins asked about")
      b = block(HTTP_TOOL)
      has(b, "granted:   files none · network none · env none · http https://example.com", "granted origins")
      has(b, "  offered         " .. HTTP_TOOL, "offered")
      has(lockfile(env), "https://example.com", "the lockfile has the granted origin")
      t.no_errors()
    end,
  },
  {
    "a changed binary: changed, and says so; approving it again shows the new sha256",
    function()
      local env = setup({ project = true, install = true })
      t.cmd("BB7Tools")
      on(TOOL)
      answering(1, function()
        press("a")
      end)
      local old = the_tool(TOOL).sha256
      -- Another build under the same name: the same component with one more custom section.
      local dir = t.tmpdir("wc2")
      t.write(dir .. "/bb7-tool.toml", t.read(DIST .. "/bb7-tool.toml"))
      local pad = "bb7-test-pad"
      t.write(dir .. "/word_count.wasm", t.read(WASM) .. "\0" .. string.char(1 + #pad + 1, #pad) .. pad .. "x")
      cli(env, { "tools", "add", dir })
      press("R")
      local b = block(TOOL)
      local new = the_tool(TOOL).sha256
      t.ok(new ~= old, "a new sha256")
      has(b, "  changed         " .. TOOL, "changed")
      has(b, "! the binary changed since it was approved: its old grant no longer holds", "says so")
      has(b, "granted:   nothing", "the old grant does not hold")
      has(lockfile(env), old, "`add` never writes the lockfile: it still pins the approved binary")
      local asked = answering(1, function()
        press("a")
      end)
      has(asked[1].msg, "The binary of wordcount changed since it was approved", "the question says so")
      has(asked[1].msg, "  sha256:  " .. new, "the new sha256")
      has(block(TOOL), "  offered         " .. TOOL, "offered again")
      has(lockfile(env), new, "the lockfile pins the new binary")
      lacks(lockfile(env), old, "and not the old one")
      t.no_errors()
    end,
  },
  {
    "nothing installed, no project: the built-ins read-only and the hint to install one",
    function()
      setup({})
      t.cmd("BB7Tools")
      local text = t.buf_text(ui().current().buf)
      has(text, "No project here (run :BB7Init)", "no project")
      has(text, "None installed. To install one, run in a terminal:", "hint")
      has(text, "bb7 tools add <file.wasm|dir>", "the command")
      has(block("read_file"), "requested: files project-read · network none · env none", "read_file requests")
      has(block("read_file"), "granted:   files project-read · network none · env none", "read_file granted")
      has(block("write_file"), "requested: files output-write", "write_file requests")
      on("read_file")
      t.clear_notes()
      press("e")
      t.note("BB-7: read_file is a built-in tool: it is always enabled and its sandbox is fixed", W)
      answering(1, function()
        press("a")
        press("r")
      end)
      t.eq(3, #t.notes, "one warning per key: " .. vim.inspect(t.notes))
      press("<Esc>")
      t.eq(nil, ui().current(), "<Esc> closed the list")
      t.no_errors()
    end,
  },
  {
    "no project: a component can be approved (per user), enabling asks for :BB7Init; host errors are reported",
    function()
      local env = setup({ install = true })
      t.cmd("BB7Tools")
      has(block(TOOL), "  needs-approval  " .. TOOL .. "  third-party 0.1.0  no project", "header")
      on(TOOL)
      t.clear_notes()
      press("e")
      t.note("BB-7: Not initialized. Run :BB7Init (a tool is enabled per project)", W)
      answering(1, function()
        press("a")
      end)
      has(block(TOOL), "granted:   files project-read · network none · env none", "approved without a project")
      t.eq(nil, t.read(env.project .. "/.bb7/tools.lock"), "no lockfile without a project")
      -- Removed behind the list's back: the host refuses, the plugin says so.
      cli(env, { "tools", "remove", "wordcount" })
      t.clear_notes()
      answering(1, function()
        press("r")
      end)
      t.expect_error("BB-7: Failed to revoke wordcount: ")
      press("R")
      t.eq(nil, ui().current().heads[TOOL], "gone after reload")
      has(t.buf_text(ui().current().buf), "None installed.", "hint")
    end,
  },
  {
    "a generic component: every exported function is listed as a tool with its description, the skipped ones with the reason",
    function()
      local env = setup({ project = true, install = true })
      cli(env, { "tools", "add", t.repo .. "/examples/tool-components/dist/generic-types", "--project" })
      t.cmd("BB7Tools")
      local b = block("gen__add_u8")
      has(b, "tools (", "the tool count")
      has(b, "gen__add_u8 — Adds two bytes; the sum must fit in a byte.", "the first tool")
      has(b, "gen__types_echo", "an interface's tool")
      has(b, "gen__divide", "the last tool")
      has(b, "skipped: example:generic-types/types@0.1.0#bump (", "the skipped function")
      has(b, "resource", "why it is skipped")
      lacks(block(TOOL), "tools (", "one tool: no list")
    end,
  },
}
