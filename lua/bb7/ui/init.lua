--- The UI: four floating panes (chats, files, preview, input) laid out over the editor, opened and
--- closed by `:BB7`. Buffers live for the whole session; windows are created on open.
local agent = require("bb7.agent")
local config = require("bb7.config")
local session = require("bb7.session")
local keymaps = require("bb7.ui.keymaps")
local util = require("bb7.util")

local M = {}

M.order = { "chats", "files", "preview", "input" }
M.panes = {} ---@type table<string, table>  pane modules
M.bufs = {} ---@type table<string, integer>
M.wins = {} ---@type table<string, integer>

local augroup = nil
local tick -- the footer's spinner while streaming (below)

local function pane(name)
  if not M.panes[name] then
    M.panes[name] = require("bb7.ui." .. name)
  end
  return M.panes[name]
end

local HIGHLIGHTS = {
  BB7User = "Title",
  BB7Assistant = "Function",
  BB7Reasoning = "Comment",
  BB7StatusM = "DiffChange",
  BB7StatusA = "DiffAdd",
  BB7StatusConflict = "DiffDelete",
  BB7StatusSync = "WarningMsg",
  BB7Active = "CursorLine",
  BB7Pinned = "Special",
  BB7Spinner = "DiagnosticInfo",
}

--- Defines the plugin's highlight groups as defaults (a user's own definitions win).
local function link_highlights()
  for k, v in pairs(HIGHLIGHTS) do
    vim.api.nvim_set_hl(0, k, { link = v, default = true })
  end
end

--- Defines the highlight groups, and again after every colour scheme (which clears them).
--- Registered when the UI is first built, never at require time.
local function set_highlights()
  link_highlights()
  if not M.hl_autocmd then
    M.hl_autocmd = vim.api.nvim_create_autocmd("ColorScheme", {
      group = vim.api.nvim_create_augroup("bb7_highlights", { clear = true }),
      callback = link_highlights,
    })
  end
end

--- Creates the pane buffers and their keymaps (once).
function M.setup_buffers()
  if M.ready and M.bufs.chats and vim.api.nvim_buf_is_valid(M.bufs.chats) then
    return
  end
  -- What a failed earlier attempt left (buffers without keymaps) is dropped, never reused; a buffer
  -- still displayed somewhere is left alone.
  for name, b in pairs(M.bufs) do
    if vim.api.nvim_buf_is_valid(b) and #vim.fn.win_findbuf(b) == 0 then
      pcall(vim.api.nvim_buf_delete, b, { force = true })
    end
    M.bufs[name] = nil
  end
  M.ready = false
  keymaps.registered = {} -- the help lists each key once
  set_highlights()
  -- What the session needs of the UI, without requiring it: whether it is open, the buffer it was
  -- opened from, closing it (before a view in a tab of its own), opening it again (plan mode's steps
  -- buffer, after :w).
  session.view = {
    open = function(focus)
      return M.open(focus)
    end,
    is_open = function()
      return M.is_open()
    end,
    origin_buf = function()
      return M.origin_buf()
    end,
    close = function()
      M.close()
    end,
  }
  agent.attach() -- sends start in the panes: their agent events (tool log, questions) are handled
  for _, name in ipairs(M.order) do
    local buf = vim.api.nvim_create_buf(false, true)
    vim.api.nvim_buf_set_name(buf, "bb7://" .. name)
    vim.bo[buf].bufhidden = "hide"
    vim.bo[buf].swapfile = false
    vim.bo[buf].filetype = "bb7_" .. name
    vim.b[buf].bb7_pane = name
    M.bufs[name] = buf
  end
  for _, name in ipairs(M.order) do
    local buf = M.bufs[name]
    local p = pane(name)
    p.attach(buf, M)
    keymaps.apply(buf, name, "all", {
      close = { M.close, "close BB-7" },
      next_pane = { function() M.cycle(1) end, "next pane" },
      prev_pane = { function() M.cycle(-1) end, "previous pane" },
      help = { function() keymaps.show_help(name) end, "show keys" },
      cancel = { session.cancel, "cancel the streaming reply", modes = { "n", "i" } },
      model = { function() require("bb7.ui.models").open() end, "pick the model" },
      focus_chats = { function() M.focus("chats") end, "go to the Chats pane" },
      focus_files = { function() M.focus("files") end, "go to the Files pane" },
      focus_preview = { function() M.focus("preview") end, "go to the Preview pane" },
      focus_input = { function() M.focus("input") end, "go to the Input pane" },
    })
  end
  if M._fail_setup then -- tests: a failure while the panes are being set up
    error(M._fail_setup)
  end
  M.ready = true
  session.subscribe("status", M.update_titles)
  session.subscribe("chat", M.update_titles)
  session.subscribe("chat_title", M.update_titles)
  session.subscribe("stream_start", function()
    tick(true)
    M.update_titles()
  end)
  session.subscribe("stream_end", M.update_titles)
  session.subscribe("question", M.update_titles)
end

--- The buffer of the window that was current when the UI opened (the file being edited).
function M.origin_buf()
  local w = M.origin_win
  if w and vim.api.nvim_win_is_valid(w) then
    return vim.api.nvim_win_get_buf(w)
  end
end

--- Whether the UI is open (in the current tab page).
function M.is_open()
  local w = M.wins.preview
  return w ~= nil
    and vim.api.nvim_win_is_valid(w)
    and vim.api.nvim_win_get_tabpage(w) == vim.api.nvim_get_current_tabpage()
end

-- Pane windows left in another tab page, closed when that tab page is current again. Closing a
-- float of a tab page that is not current (its current window, typically) leaves Neovim with a
-- dangling window pointer: the tabline then reads freed memory and Neovim crashes (SIGSEGV), or
-- the next API call finds an invalid current window. So a close from another tab page waits.
local stale = {} ---@type integer[]

local function close_stale()
  local here = vim.api.nvim_get_current_tabpage()
  local keep = {}
  for _, w in ipairs(stale) do
    if vim.api.nvim_win_is_valid(w) then
      if vim.api.nvim_win_get_tabpage(w) == here then
        pcall(vim.api.nvim_win_close, w, true)
      else
        keep[#keep + 1] = w
      end
    end
  end
  stale = keep
  if #stale == 0 then
    pcall(vim.api.nvim_del_augroup_by_name, "bb7_ui_stale")
  end
end

local function leave_stale(w)
  stale[#stale + 1] = w
  vim.api.nvim_create_autocmd("TabEnter", {
    group = vim.api.nvim_create_augroup("bb7_ui_stale", { clear = true }),
    callback = function()
      vim.schedule(close_stale) -- never while the tab page is being entered
    end,
  })
end

local function geometry()
  local o = config.options.ui
  local cols, rows = vim.o.columns, vim.o.lines - vim.o.cmdheight - 1
  local W = math.max(40, math.floor(cols * o.width))
  local H = math.max(12, math.floor(rows * o.height))
  local top = math.max(0, math.floor((rows - H) / 2))
  local left = math.max(0, math.floor((cols - W) / 2))
  local LW = math.max(20, math.floor(W * o.left))
  local CH = math.floor(H / 2)
  local IH = math.min(o.input_height, H - 6)
  return {
    chats = { row = top, col = left, width = LW - 2, height = CH - 2 },
    files = { row = top + CH, col = left, width = LW - 2, height = H - CH - 2 },
    preview = { row = top, col = left + LW, width = W - LW - 2, height = H - IH - 2 },
    input = { row = top + H - IH, col = left + LW, width = W - LW - 2, height = IH - 2 },
  }
end

local TITLES = { chats = " Chats ", files = " Files ", preview = " Preview ", input = " Input " }

--- The line shown under the input: model, tokens and cost of the last reply, balance, agent mode
--- and, while a reply streams, its state (spinner, what runs, elapsed time). With `width`, the
--- longest form that fits: the least useful parts are shortened or dropped first (the balance, the
--- last reply's details, the cancel hint, the reasoning effort, the model's provider, the model),
--- a running tool's arguments are cut to the room left, and the state itself is never dropped.
---@param width integer|nil display cells (nil: no limit)
function M.status_text(width)
  local dw = vim.fn.strdisplaywidth
  local model = session.current_model()
  local effort = session.chat and session.chat.reasoning_effort or ""
  local u = session.last_usage
  local b = session.balance
  local mode = agent.footer_part()
  local st = session.stream
  local q = session.question
  local function build(level, tool)
    local parts = {}
    if model and level < 7 then
      local name = util.oneline(model)
      if level >= 6 then
        name = name:match("[^/]+$") or name
      end
      parts[#parts + 1] = name .. ((effort ~= "" and level < 4) and (" (reasoning " .. util.oneline(effort) .. ")") or "")
    end
    if u and level < 5 then
      local secs = tonumber(session.last_duration)
      if level < 2 then
        parts[#parts + 1] = ("last: %s in / %s out, %s%s"):format(
          util.tokens(u.prompt_tokens),
          util.tokens(u.completion_tokens),
          util.money(u.cost),
          secs and (", %.1f s"):format(secs) or ""
        )
      else
        parts[#parts + 1] = "last " .. util.money(u.cost)
      end
    end
    local cap = require("bb7.session.fetch").spend_left()
    if cap and level < 2 then
      parts[#parts + 1] = ("cap %s/%s, %s left"):format(util.money(cap.limit), cap.cap, util.money(math.max(0, cap.left)))
    end
    if b and b.total_credits and level < 1 then
      parts[#parts + 1] = "balance " .. util.money((b.total_credits or 0) - (b.total_usage or 0))
    end
    if mode and level < 8 then
      parts[#parts + 1] = mode
    end
    if st then
      local secs = (vim.uv.hrtime() - (st.started or vim.uv.hrtime())) / 1e9
      local frame = M.SPINNER[math.floor(secs * 10) % #M.SPINNER + 1]
      local what
      if q then
        what = "? waiting for your answer"
      elseif tool then
        what = frame .. " running " .. tool
      else
        what = frame .. " streaming"
      end
      what = ("%s %.1f s"):format(what, secs)
      if level < 3 then
        local cancel = (config.options.keymaps.all or {}).cancel
        if cancel then
          what = what .. " · " .. cancel .. " cancels"
        end
      end
      parts[#parts + 1] = what
    end
    return " " .. table.concat(parts, "  ·  ") .. " "
  end
  local tool = agent.current
  if not width then
    return build(0, tool)
  end
  local text
  for level = 0, 8 do
    text = build(level, tool)
    local over = dw(text) - width
    if over <= 0 then
      return text
    end
    if tool and not q then
      -- The tool's arguments are cut to the room left (its name stays).
      local name = tool:match("^%S+") or tool
      local keep = dw(tool) - over
      if keep >= dw(name) + 5 then
        return build(level, M.fit_title(tool, keep))
      end
    end
  end
  if tool then
    text = build(8, tool:match("^%S+") or tool)
  end
  return text
end

M.SPINNER = { "⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏" }
local ticker = nil

--- While a reply streams, the footer's spinner and elapsed time move (10 times a second).
tick = function(on)
  if on and not ticker then
    ticker = vim.uv.new_timer()
    ticker:start(100, 100, vim.schedule_wrap(function()
      if not session.stream then
        return tick(false)
      end
      M.update_titles()
      if M.panes.chats then
        M.panes.chats.tick()
      end
    end))
  elseif not on and ticker then
    ticker:stop()
    ticker:close()
    ticker = nil
  end
end

--- `title` shortened to `width` display cells without cutting its own indicators: a suffix after
--- " — " (what <BS> does, ...) is kept, the part before it loses its start ("…ng/path.rs").
function M.fit_title(title, width)
  local dw = vim.fn.strdisplaywidth
  if width < 4 or dw(title) <= width then
    return title
  end
  local main, suffix = title:match("^(.-)( — .*)$")
  if not main then
    main, suffix = title, ""
  end
  local room = width - dw(suffix) - 1
  if room < 4 then
    main, suffix, room = title, "", width - 1
  end
  local chars = vim.fn.split(main, "\\zs")
  local out, used = {}, 0
  if suffix == "" then
    -- A plain name keeps its start.
    for _, c in ipairs(chars) do
      local w = dw(c)
      if used + w > room then
        break
      end
      out[#out + 1] = c
      used = used + w
    end
    return table.concat(out) .. "…"
  end
  for i = #chars, 1, -1 do
    local w = dw(chars[i])
    if used + w > room then
      break
    end
    table.insert(out, 1, chars[i])
    used = used + w
  end
  return "…" .. table.concat(out) .. suffix
end

--- Refreshes window titles and the status footer.
function M.update_titles()
  if not M.is_open() then
    return
  end
  local name = util.oneline(session.chat and session.chat.name or "no chat")
  local mode = M.panes.preview and M.panes.preview.mode_title and M.panes.preview.mode_title() or nil
  local pw = vim.api.nvim_win_get_width(M.wins.preview)
  pcall(vim.api.nvim_win_set_config, M.wins.preview, {
    title = " " .. M.fit_title(mode or name, pw - 4) .. " ",
    title_pos = "center",
  })
  local est = session.chat and session.estimate
  local files_title = " Files "
  if est and est.total then
    -- The longest form that fits the pane: a title is never cut in the middle of what it says.
    local total = util.tokens(est.total)
    local cands = {}
    if (est.potential_savings or 0) > 0 then
      local saving = util.tokens(est.potential_savings)
      cands = {
        (" Files · %s tokens (apply to save %s) "):format(total, saving),
        (" Files · %s tok, apply: -%s "):format(total, saving),
        (" %s tok, apply: -%s "):format(total, saving),
      }
    end
    vim.list_extend(cands, {
      (" Files · %s tokens "):format(total),
      (" %s tokens "):format(total),
      (" %s tok "):format(total),
    })
    local fw = vim.api.nvim_win_get_width(M.wins.files) - 2
    for _, cand in ipairs(cands) do
      files_title = cand
      if vim.fn.strdisplaywidth(cand) <= fw then
        break
      end
    end
  end
  pcall(vim.api.nvim_win_set_config, M.wins.files, { title = files_title, title_pos = "center" })
  local iw = vim.api.nvim_win_get_width(M.wins.input)
  local q = session.question
  local input_title = TITLES.input
  if q and session.chat and session.chat.id == q.chat_id and not session.chat.global == not q.global then
    -- The input is the answer field of the agent's question while it waits.
    local keys = keymaps.hint("input", { { "send", "answers" }, { "skip_question", "skips" } }, ", ")
    local ask = "Answer: " .. util.oneline(q.question)
    local full = ask .. (keys ~= "" and (" — " .. keys) or "")
    input_title = " " .. (vim.fn.strdisplaywidth(full) <= iw - 4 and full or M.fit_title(ask, iw - 4)) .. " "
  end
  pcall(vim.api.nvim_win_set_config, M.wins.input, {
    title = input_title,
    title_pos = "center",
    footer = M.status_text(math.max(10, iw - 2)),
    footer_pos = "right",
  })
end

--- Opens the windows (if closed) and focuses `focus`. The layout is built completely or not at all:
--- when any step fails, whatever was opened is closed again and the error is reported.
function M.open(focus)
  local ok, err = pcall(M._open, focus)
  if not ok then
    pcall(M.close)
    session.notify("Failed to open the UI: " .. util.oneline(err), vim.log.levels.ERROR)
    return false
  end
  return true
end

function M._open(focus)
  M.setup_buffers()
  if not M.is_open() then
    local cur = vim.api.nvim_get_current_win()
    if vim.api.nvim_win_get_config(cur).relative == "" then
      M.origin_win = cur
    end
    local g = geometry()
    for _, name in ipairs(M.order) do
      local c = g[name]
      local win = vim.api.nvim_open_win(M.bufs[name], false, {
        relative = "editor",
        row = c.row,
        col = c.col,
        width = math.max(1, c.width),
        height = math.max(1, c.height),
        border = config.options.ui.border,
        style = "minimal",
        title = TITLES[name],
        title_pos = "center",
        zindex = 50,
      })
      M.wins[name] = win
      vim.wo[win].wrap = name == "preview" or name == "input"
      vim.wo[win].linebreak = name == "preview" or name == "input"
      vim.wo[win].cursorline = name == "chats" or name == "files"
      vim.wo[win].winfixbuf = true
    end
    augroup = vim.api.nvim_create_augroup("bb7_ui", { clear = true })
    vim.api.nvim_create_autocmd("VimResized", {
      group = augroup,
      callback = function()
        M.relayout()
        M.update_titles() -- titles and the footer are fitted to the new widths
      end,
    })
    vim.api.nvim_create_autocmd("WinClosed", {
      group = augroup,
      callback = function(ev)
        local closed = tonumber(ev.match)
        for _, w in pairs(M.wins) do
          if w == closed then
            vim.schedule(M.close)
            return
          end
        end
      end,
    })
    vim.api.nvim_create_autocmd("WinEnter", {
      group = augroup,
      callback = function()
        -- Leaving the layout for a normal window closes it (floats stay on top otherwise).
        local cur = vim.api.nvim_get_current_win()
        local cfg = vim.api.nvim_win_get_config(cur)
        if cfg.relative == "" then
          for _, w in pairs(M.wins) do
            if w == cur then
              return
            end
          end
          vim.schedule(M.close)
        end
      end,
    })
    for _, name in ipairs(M.order) do
      pane(name).render()
    end
    if M._fail_open then -- tests: a failure in the middle of opening
      error(M._fail_open)
    end
    M.update_titles()
    if not session.balance then
      session.fetch_balance()
    end
  end
  M.focus(focus or "input")
end

function M.relayout()
  if not M.is_open() then
    return
  end
  local g = geometry()
  for name, c in pairs(g) do
    pcall(vim.api.nvim_win_set_config, M.wins[name], {
      relative = "editor",
      row = c.row,
      col = c.col,
      width = math.max(1, c.width),
      height = math.max(1, c.height),
    })
  end
end

--- Closes the windows (buffers and state stay).
function M.close()
  if augroup then
    pcall(vim.api.nvim_del_augroup_by_id, augroup)
    augroup = nil
  end
  if M.panes.input then
    M.panes.input.save_draft()
  end
  if M.panes.chats and M.panes.chats.query then
    M.panes.chats.query, M.panes.chats.results = nil, nil
    M.panes.chats.render()
  end
  local here = vim.api.nvim_get_current_tabpage()
  for name, w in pairs(M.wins) do
    if vim.api.nvim_win_is_valid(w) then
      if vim.api.nvim_win_get_tabpage(w) == here then
        pcall(vim.api.nvim_win_close, w, true)
      else
        leave_stale(w)
      end
    end
    M.wins[name] = nil
  end
  if vim.fn.mode() == "i" then
    vim.cmd("stopinsert")
  end
end

--- Focuses pane `name`.
function M.focus(name)
  local w = M.wins[name]
  if w and vim.api.nvim_win_is_valid(w) then
    vim.api.nvim_set_current_win(w)
  end
end

--- The pane whose window is current, if any.
function M.current_pane()
  local cur = vim.api.nvim_get_current_win()
  for name, w in pairs(M.wins) do
    if w == cur then
      return name
    end
  end
end

function M.cycle(dir)
  local cur = M.current_pane() or "input"
  local i = 1
  for k, n in ipairs(M.order) do
    if n == cur then
      i = k
    end
  end
  i = (i - 1 + dir) % #M.order + 1
  M.focus(M.order[i])
end

--- `:BB7`: toggles the UI, following the state table of SPEC.md.
function M.toggle()
  if M.is_open() then
    M.close()
    return
  end
  if not session.ensure_initialized() then
    return
  end
  local chats = session.list_chats()
  if session.chat then
    M.open("input")
  elseif #chats > 0 then
    M.open("chats") -- none active: the chat list is the picker
  else
    M.open("chats") -- empty state
  end
end

return M
