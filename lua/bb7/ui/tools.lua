--- `:BB7Tools`: every tool the model may be offered, in a floating window. Third-party components
--- (`bb7 tools add`) show their state in the project, what they request and what is granted; from
--- the list the user enables or disables one for the project, approves one (after seeing exactly
--- what it requests and its sha256) or revokes its grant. Built-in tools are listed read-only. The
--- list is re-rendered from each reply of the host (every action answers with the updated list).
local config = require("bb7.config")
local keymaps = require("bb7.ui.keymaps")
local session = require("bb7.session")
local util = require("bb7.util")
local L = vim.log.levels

local M = {}

--- The keys of the list, {action, what it does}: the key is `config.keymaps.tools[action]`.
M.keys = {
  { "toggle", "enable / disable the tool under the cursor in this project" },
  { "approve", "approve the tool under the cursor (shows what it requests, asks first)" },
  { "revoke", "revoke the grant of the tool under the cursor (asks first)" },
  { "refresh", "reload the list" },
  { "help", "list these keys" },
  { "close", "close the list" },
  { "close_alt", "close the list" },
}

--- What a user types in a terminal to install a component.
M.ADD_HINT = "bb7 tools add <file.wasm|dir>"

local FILES = {
  ["none"] = "no directory at all",
  ["project-read"] = "a read-only view of the project",
  ["output-write"] = "an empty directory whose files become proposed new files",
}

local ns = vim.api.nvim_create_namespace("bb7_tools")
local state = nil ---@type table|nil {buf, win, tools, rows, heads}

local function notify(msg, level)
  vim.notify("BB-7: " .. msg, level or L.INFO)
end

local function builtin(t)
  return t.source == "builtin"
end

--- The component a request names: the component's name (the tool's name when there is none).
local function component(t)
  return util.oneline(t.component or t.name)
end

local function items(xs)
  if type(xs) ~= "table" or #xs == 0 then
    return "none"
  end
  local out = {}
  for i, x in ipairs(xs) do
    out[i] = util.oneline(x)
  end
  return table.concat(out, ", ")
end

--- One line of capabilities: `files project-read · network api.x:443 · env none`, then
--- ` · http https://api.x` when it has HTTP origins; `nothing` when there is no grant at all.
function M.caps(c)
  if type(c) ~= "table" then
    return "nothing"
  end
  local line = ("files %s · network %s · env %s"):format(util.oneline(c.files or "none"), items(c.network), items(c.env))
  if type(c.http) == "table" and #c.http > 0 then
    line = line .. " · http " .. items(c.http)
  end
  return line
end

local function set_of(xs)
  local s = {}
  for _, x in ipairs(type(xs) == "table" and xs or {}) do
    s[x] = true
  end
  return s
end

local function same_set(a, b)
  return vim.deep_equal(set_of(a), set_of(b))
end

--- Whether `granted` is everything `requested` asks for.
local function covers(granted, requested)
  if type(granted) ~= "table" then
    return false
  end
  requested = requested or {}
  return (granted.files or "none") == (requested.files or "none")
    and same_set(granted.network, requested.network)
    and same_set(granted.env, requested.env)
    and same_set(granted.http, requested.http)
end

--- The component's binary changed since it was approved: its old grant no longer holds.
local function changed(t)
  return t.state == "changed" or t.grant_stale == true
end

--- A component's tools when it offers more than one or skipped some (a generic component: one tool
--- per exported function): each `<component>__<function> — description`, then each skipped export
--- with its reason, given to `add` line by line.
function M.offered_lines(t, add)
  local tools = type(t.tools) == "table" and t.tools or {}
  local skipped = type(t.skipped) == "table" and t.skipped or {}
  if #tools <= 1 and #skipped == 0 then
    return
  end
  add(("      tools (%d):"):format(#tools))
  for _, x in ipairs(tools) do
    local d = x.description ~= nil and x.description ~= "" and (" — " .. util.oneline(x.description)) or ""
    if x.undocumented then
      d = " (undocumented)"
    end
    add("        " .. util.oneline(x.name or "?") .. d)
  end
  for _, k in ipairs(skipped) do
    add(("      skipped: %s (%s)"):format(util.oneline(k.export or "?"), util.oneline(k.reason or "?")))
  end
end

local STATE_HL = {
  offered = "DiagnosticOk",
  disabled = "Comment",
  ["needs-approval"] = "DiagnosticWarn",
  changed = "DiagnosticError",
  ["built-in"] = "Comment",
}

--- The list's lines for `tools` (a `tools` reply's list). `opts.root`: the project, or nil when
--- there is none. Returns the lines, `rows` (line number -> tool), `heads` (tool name -> the line
--- of its header) and highlights {line, col, end_col, group} (0-based line and columns).
function M.render_lines(tools, opts)
  opts = opts or {}
  local lines, rows, heads, marks = {}, {}, {}, {}
  local function add(l, t)
    lines[#lines + 1] = l
    if t then
      rows[#lines] = t
    end
  end
  local hint = keymaps.hint("tools", {
    { "toggle", "enable/disable" },
    { "approve", "approve" },
    { "revoke", "revoke" },
    { "refresh", "refresh" },
    { "help", "keys" },
    { "close", "close" },
  }, " · ")
  if opts.root then
    add("Project: " .. util.oneline(opts.root))
  else
    add("No project here (run :BB7Init): tools are enabled per project; approvals are per user")
  end
  if hint ~= "" then
    add(hint)
  end
  local third, builtins = {}, {}
  for _, t in ipairs(tools or {}) do
    if builtin(t) then
      builtins[#builtins + 1] = t
    else
      third[#third + 1] = t
    end
  end
  local function head(t, st, rest)
    add(("  %-14s  %s  %s"):format(st, util.oneline(t.name), rest), t)
    heads[t.name] = #lines
    if STATE_HL[st] then
      marks[#marks + 1] = { #lines - 1, 2, 2 + #st, STATE_HL[st] }
    end
  end
  add("")
  add("Third-party components")
  if #third == 0 then
    add("  None installed. To install one, run in a terminal:")
    add("    " .. M.ADD_HINT .. "   (add --project to also enable it here)")
  end
  for _, t in ipairs(third) do
    local enabled
    if not opts.root then
      enabled = "no project"
    else
      enabled = t.enabled and "enabled here" or "disabled here"
    end
    local version = t.version and (" " .. util.oneline(t.version)) or ""
    head(t, util.oneline(t.state or "?"), ("third-party%s  %s"):format(version, enabled))
    if t.description and t.description ~= "" then
      add("      " .. util.oneline(t.description), t)
    end
    if t.kind == "hook" then
      add("      hook: " .. items(t.hook), t)
    end
    M.offered_lines(t, function(l)
      add(l, t)
    end)
    add("      requested: " .. M.caps(t.requested), t)
    add("      granted:   " .. M.caps(t.granted), t)
    local wit = t.wit and ("  wit " .. util.oneline(t.wit)) or ""
    add(("      sha256 %s%s"):format(util.oneline(t.sha256 or "?"), wit), t)
    if changed(t) then
      add("      ! the binary changed since it was approved: its old grant no longer holds", t)
      marks[#marks + 1] = { #lines - 1, 6, #lines[#lines], "DiagnosticError" }
    end
  end
  add("")
  add("Built-in tools (read-only: always enabled, their sandbox is fixed)")
  for _, t in ipairs(builtins) do
    head(t, "built-in", "builtin  always enabled")
    add("      requested: " .. M.caps(t.requested), t)
    add("      granted:   " .. M.caps(t.granted), t)
  end
  return lines, rows, heads, marks
end

--- The confirmation text shown before approving `t`: exactly what it requests, and its sha256.
function M.approve_prompt(t)
  local r = t.requested or {}
  local out = {}
  if changed(t) then
    out[#out + 1] = ("The binary of %s changed since it was approved: its old grant no longer holds. %s"):format(
      component(t),
      "Review what changed before approving it again."
    )
    out[#out + 1] = ""
  end
  out[#out + 1] = ("Approve %s%s (tool %s)? It requests:"):format(
    component(t),
    t.version and (" " .. util.oneline(t.version)) or "",
    util.oneline(t.name)
  )
  local files = r.files or "none"
  out[#out + 1] = ("  files:   %s (%s)"):format(util.oneline(files), FILES[files] or "?")
  local net, env = r.network or {}, r.env or {}
  if #net == 0 then
    out[#out + 1] = "  network: none"
  else
    out[#out + 1] = "  network: TCP connections to"
    for _, hp in ipairs(net) do
      out[#out + 1] = "    " .. util.oneline(hp)
    end
  end
  if #env == 0 then
    out[#out + 1] = "  env:     none"
  else
    out[#out + 1] = "  env:     reads the variables"
    for _, v in ipairs(env) do
      out[#out + 1] = "    " .. util.oneline(v)
    end
  end
  local http = type(r.http) == "table" and r.http or {}
  if #http > 0 then
    out[#out + 1] = "  http:    HTTP requests (wasi:http) to the origins"
    for _, o in ipairs(http) do
      out[#out + 1] = "    " .. util.oneline(o)
    end
  end
  local l = t.limits
  if type(l) == "table" and l.memory_bytes then
    out[#out + 1] = ("  limits:  memory %d MiB, %d ms per call, result %d KiB"):format(
      math.floor(l.memory_bytes / 1048576),
      l.wall_time_ms or 0,
      math.floor((l.result_bytes or 0) / 1024)
    )
  end
  out[#out + 1] = "  sha256:  " .. util.oneline(t.sha256 or "?")
  if changed(t) and type(t.approved_sha256) == "string" then
    out[#out + 1] = "  (approved before: " .. util.oneline(t.approved_sha256) .. ")"
  end
  out[#out + 1] = ""
  out[#out + 1] = "Approving grants all of this, to this binary only."
  return table.concat(out, "\n")
end

--- Whether the list is open.
function M.is_open()
  return state ~= nil and vim.api.nvim_win_is_valid(state.win) and vim.api.nvim_buf_is_valid(state.buf)
end

--- The list shown now (tests): {buf, win, tools, rows, heads}.
function M.current()
  return M.is_open() and state or nil
end

local function find(tools, name)
  for _, t in ipairs(tools or {}) do
    if t.name == name then
      return t
    end
  end
end

--- The tool under the cursor.
local function at()
  if not M.is_open() then
    return nil
  end
  return state.rows[vim.api.nvim_win_get_cursor(state.win)[1]]
end

local function layout(lines)
  local width = 40
  for _, l in ipairs(lines) do
    -- Not strdisplaywidth: that counts the current window's `linebreak` padding.
    width = math.max(width, vim.api.nvim_strwidth(l) + 1)
  end
  width = math.min(width, math.max(20, vim.o.columns - 4))
  local height = math.min(#lines, math.max(3, vim.o.lines - vim.o.cmdheight - 4))
  return {
    relative = "editor",
    width = width,
    height = height,
    row = math.floor((vim.o.lines - height) / 2) - 1,
    col = math.floor((vim.o.columns - width) / 2),
  }
end

--- Shows `tools` (keeping the cursor on the tool it was on).
local function render(tools)
  if not M.is_open() then
    return
  end
  local keep = at()
  state.tools = tools
  local lines, rows, heads, marks = M.render_lines(tools, { root = session.initialized and session.root or nil })
  state.rows, state.heads = rows, heads
  local buf = state.buf
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].modified = false
  vim.api.nvim_buf_clear_namespace(buf, ns, 0, -1)
  for _, m in ipairs(marks) do
    pcall(vim.api.nvim_buf_set_extmark, buf, ns, m[1], m[2], { end_col = m[3], hl_group = m[4] })
  end
  pcall(vim.api.nvim_win_set_config, state.win, layout(lines))
  local line = keep and heads[keep.name]
  if not line then
    -- The first tool: a third-party one when there is any.
    line = math.huge
    for _, l in pairs(heads) do
      line = math.min(line, l)
    end
    line = line ~= math.huge and line or 1
  end
  pcall(vim.api.nvim_win_set_cursor, state.win, { line, 0 })
end

--- Handles an action's reply: the updated list, or the failure (`what` names the action).
--- Returns the updated tool `name` (nil on failure).
local function apply_reply(r, what, name)
  if not r then
    return nil
  end
  if r.type == "error" or type(r.tools) ~= "table" then
    session.fail(what, r.type == "error" and r or { message = "unexpected reply " .. tostring(r.type) })
    return nil
  end
  render(r.tools)
  return find(r.tools, name) or {}
end

--- Reloads the list from the host.
function M.refresh()
  if not M.is_open() then
    return false
  end
  return apply_reply(session.tools_list(), "list the tools", "") ~= nil
end

local function readonly(t)
  notify(("%s is a built-in tool: it is always enabled and its sandbox is fixed"):format(util.oneline(t.name)), L.WARN)
end

--- Enables or disables the tool under the cursor in the project.
function M.toggle()
  local t = at()
  if not t then
    return
  end
  if builtin(t) then
    return readonly(t)
  end
  if not session.initialized then
    notify("Not initialized. Run :BB7Init (a tool is enabled per project)", L.WARN)
    return
  end
  local on = not t.enabled
  local comp = component(t)
  local u = apply_reply(session.tool_set_enabled(comp, on), (on and "enable " or "disable ") .. comp, t.name)
  if not u then
    return
  end
  if not on then
    notify(comp .. " disabled in this project")
  elseif u.granted then
    notify(comp .. " enabled in this project")
  else
    local key = keymaps.key("tools", "approve")
    notify(("%s enabled in this project; it is offered to the model once you approve it%s"):format(
      comp,
      key and (" (" .. key .. ")") or ""
    ))
  end
end

--- Approves the tool under the cursor: shows exactly what it requests, asks (default no), then grants
--- all of it.
function M.approve()
  local t = at()
  if not t then
    return
  end
  if builtin(t) then
    return readonly(t)
  end
  local comp = component(t)
  if not changed(t) and covers(t.granted, t.requested) then
    notify(comp .. " is already approved for everything it requests")
    return
  end
  -- The one confirmation style (vim.ui.select: the user's picker), "No" first.
  vim.ui.select({ "No", "Yes" }, { prompt = M.approve_prompt(t) }, function(choice)
    session.clear_prompt()
    if choice ~= "Yes" then
      notify("Not approved: " .. comp)
      return
    end
    local u = apply_reply(session.tool_grant(comp, t), "approve " .. comp, t.name)
    if u then
      notify(("Approved %s: %s"):format(comp, M.caps(u.granted)))
    end
  end)
end

--- Revokes the grant of the tool under the cursor, after a confirmation.
function M.revoke()
  local t = at()
  if not t then
    return
  end
  if builtin(t) then
    return readonly(t)
  end
  local comp = component(t)
  if not t.granted then
    notify(comp .. " has no grant to revoke", L.WARN)
    return
  end
  session.confirm(
    ("Revoke the grant of %s (%s)? It stays installed but is not offered to the model until you approve it again."):format(
      comp,
      M.caps(t.granted)
    ),
    function()
      if apply_reply(session.tool_revoke(comp), "revoke " .. comp, t.name) then
        notify("Revoked the grant of " .. comp)
      end
    end
  )
end

--- Closes the list.
function M.close()
  local st = state
  state = nil
  if st and vim.api.nvim_win_is_valid(st.win) then
    pcall(vim.api.nvim_win_close, st.win, true)
  end
end

--- `:BB7Tools`.
function M.open()
  session.hook()
  local r = session.tools_list()
  if not r then
    return false
  end
  if r.type == "error" or type(r.tools) ~= "table" then
    session.fail("list the tools", r.type == "error" and r or { message = "unexpected reply " .. tostring(r.type) })
    return false
  end
  if M.is_open() then
    vim.api.nvim_set_current_win(state.win)
    render(r.tools)
    return true
  end
  M.close()
  local buf = vim.api.nvim_create_buf(false, true)
  vim.bo[buf].bufhidden = "wipe"
  vim.bo[buf].filetype = "bb7tools"
  local cfg = layout({ "" })
  cfg.border = config.options.ui.border
  cfg.style = "minimal"
  cfg.title = " BB-7 tools "
  cfg.title_pos = "center"
  cfg.zindex = 70
  local win = vim.api.nvim_open_win(buf, true, cfg)
  vim.wo[win].cursorline = true
  vim.wo[win].wrap = true
  vim.wo[win].linebreak = true
  state = { buf = buf, win = win, tools = {}, rows = {}, heads = {} }
  vim.api.nvim_create_autocmd("BufWipeout", {
    buffer = buf,
    once = true,
    callback = function()
      if state and state.buf == buf then
        state = nil
      end
    end,
  })
  keymaps.registered.tools = nil -- the help lists this window's keys once
  local fns = {
    toggle = M.toggle,
    approve = M.approve,
    revoke = M.revoke,
    refresh = M.refresh,
    help = function()
      keymaps.show_help("tools")
    end,
    close = M.close,
    close_alt = M.close,
  }
  local actions = {}
  for _, k in ipairs(M.keys) do
    actions[k[1]] = { fns[k[1]], k[2] }
  end
  keymaps.apply(buf, "tools", "tools", actions)
  render(r.tools)
  return true
end

return M
