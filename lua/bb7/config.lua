--- Configuration: the documented defaults and the merge done by `require("bb7").setup(opts)`.
---
--- Every option is described in `:help bb7-configuration`.
local M = {}

--- The defaults. Do not edit this table; pass options to `setup()` instead.
M.defaults = {
  -- Path to the `bb7` host binary. `nil`: the plugin's own build output
  -- (`<plugin root>/target/release/bb7`), then `bb7` on `PATH`.
  bin = nil,
  -- Full command to start the host (a list); overrides `bin` when set.
  cmd = nil,
  -- Extra environment for the host process (e.g. `{ HOME = "/tmp/x", BB7_CACHE_DIR = "/tmp/c" }`).
  env = nil,
  -- Project root: a directory, or a function returning one. `nil`: the nearest directory upwards
  -- with `.bb7/` (not `~/.bb7`), else the current working directory.
  root = nil,
  -- Request timeout (ms) for synchronous calls to the host.
  timeout = 10000,
  -- The UI: size of the floating layout as a fraction of the editor.
  ui = {
    width = 0.9,
    height = 0.85,
    -- Width of the left column (chats and files) as a fraction of the layout.
    left = 0.28,
    -- Height of the input pane in lines.
    input_height = 8,
    border = "rounded",
  },
  -- Streaming: how often (ms) buffered chunks are flushed into the preview.
  stream_interval = 30,
  -- Reasoning blocks start collapsed in the chat view.
  collapse_reasoning = true,
  -- Largest file (bytes) `:BB7Add` sends; larger files, binaries and non-UTF-8 files are refused.
  max_file_bytes = 1024 * 1024,
  -- The file pickers (`A` in Files, `@` completion in Input) also list the files of the agent's
  -- deny list (`.env`, keys, credentials: lua/bb7/deny.lua), which they hide by default.
  show_denied = false,
  -- Keymaps inside the plugin's windows (buffer-local). Set a key to `false` to disable it.
  keymaps = {
    all = {
      close = "q",
      next_pane = "<Tab>",
      prev_pane = "<S-Tab>",
      help = "g?", -- not `?`: that is backward search
      cancel = "<C-c>",
      model = "gm",
      focus_chats = "gc",
      focus_files = "gf",
      focus_preview = "gp",
      focus_input = "gi",
    },
    chats = {
      select = "<CR>",
      new = "n",
      rename = "r",
      delete = "d",
      fork = "c",
      search = "/",
      clear_search = "<Esc>",
      pin = "p",
      scope = "t", -- the global chats / the project's chats
      move = "m", -- move the chat to the global chats / into the project (asks first)
    },
    files = {
      open = "<CR>",
      add = "a",
      remove = "d",
      readonly = "r",
      update = "u",
      apply = "p",
      apply_all = "P",
      reject = "x",
      diff = "D",
      diff_local = "L",
      review = "R", -- per-hunk review of the output (:BB7Review)
      pick = "A", -- pick files with vim.ui.select (your Telescope / fzf-lua / snacks / mini.pick)
    },
    preview = {
      toggle = "<CR>",
      -- Never Vim's scrolling keys (<C-e>, <C-f>): `c` forks, `i` edits (asks first).
      fork = "c",
      edit = "i",
      chat = "<BS>",
      follow = "G",
      next_message = "]]",
      prev_message = "[[",
      yank_code = "yc", -- the code block under the cursor, into the unnamed and + registers
      apply = "p", -- in a file or diff view: apply that file's output
      apply_all = "P",
      retry = "R", -- after edits failed: let the model retry them
      -- Plan mode (:BB7Plan): the chat's proposed plan.
      plan_approve = "A",
      plan_edit = "E", -- the steps in a scratch buffer; :w approves them
      plan_reject = "X", -- asks for feedback
    },
    input = {
      send = "<CR>",
      send_insert = "<C-s>",
      edit_last = "<M-e>", -- asks first
      fork_last = "<M-f>",
      skip_question = "<M-s>", -- skip the agent's waiting question (it goes on without an answer)
      mention = "<M-m>", -- pick a file with vim.ui.select and insert @path (normal and insert)
    },
    -- The help window of `all.help` (the `all.help` key closes it too).
    help = {
      close = "q",
      close_alt = "<Esc>",
      close_alt2 = "?",
    },
    -- The model picker (:BB7Model, `all.model`).
    models = {
      pick = "<CR>",
      favorite = "f",
      effort = "e", -- cycles the chat's reasoning effort: off, low, medium, high
      filter = "/",
      close = "q",
      close_alt = "<Esc>",
    },
    -- Per-hunk review (:BB7Review): in both windows, except `help_alt` (the proposal's).
    review = {
      accept = "ga",
      reject = "gr",
      accept_all = "gA",
      reject_all = "gR",
      help = "g?",
      help_alt = "?",
      close = "q",
    },
    -- Inline edits (:BB7Inline). `start` is a Visual-mode key mapped by `setup()` (not buffer-local):
    -- it puts `:'<,'>BB7Inline ` on the command line for the instruction. The hunks shown in the
    -- buffer are reviewed with the `review` keys (accept, reject, accept_all, reject_all, help).
    inline = {
      start = "<leader>bi",
    },
    -- The checkpoint list (:BB7Checkpoints).
    checkpoints = {
      open = "<CR>", -- the 3-way view of the file under the cursor
      hard = "H", -- asks first
      reload = "R",
      help = "g?",
      close = "q",
    },
    -- A checkpoint's 3-way view (base | current | proposed).
    checkpoint_view = {
      scoped = "gr", -- the hunk under the cursor; in Visual mode every hunk of the selection
      hard = "gH", -- asks first
      help = "g?",
      close = "q",
    },
    -- The tool list (:BB7Tools): on the tool under the cursor.
    tools = {
      toggle = "e", -- enable / disable in this project
      approve = "a", -- shows what it requests and asks first
      revoke = "r", -- asks first
      refresh = "R",
      help = "g?",
      close = "q",
      close_alt = "<Esc>",
    },
  },
}

--- The active options (defaults merged with the user's).
M.options = vim.deepcopy(M.defaults)

--- Options whose default is nil, and the types they accept.
local OPTIONAL = {
  bin = { "string" },
  cmd = { "table" },
  env = { "table" },
  root = { "string", "function" },
}

--- Why `opts` is not a valid set of options (naming the bad key), or nil. Every key must be one of
--- the defaults' (or an optional one) with a value of the default's type; a keymap is a string
--- (the key) or `false` (disabled).
---@param opts table
---@param defaults table
---@param path string
---@return string|nil
local function invalid(opts, defaults, path)
  if type(opts) ~= "table" then
    return ("%s must be a table, got %s"):format(path == "" and "the options" or path, type(opts))
  end
  for k, v in pairs(opts) do
    local name = path == "" and tostring(k) or (path .. "." .. tostring(k))
    local d = defaults[k]
    if path == "" and OPTIONAL[k] then
      if not vim.tbl_contains(OPTIONAL[k], type(v)) then
        return ("%s must be a %s, got %s"):format(name, table.concat(OPTIONAL[k], " or "), type(v))
      end
    elseif d == nil then
      return ("unknown option %s (see :help bb7-configuration)"):format(name)
    elseif path:match("^keymaps%.") then
      if not (type(v) == "string" or v == false) then
        return ("%s must be a key (a string) or false to disable it, got %s"):format(name, type(v))
      end
    elseif type(d) == "table" then
      local why = invalid(v, d, name)
      if why then
        return why
      end
    elseif type(v) ~= type(d) then
      return ("%s must be a %s, got %s"):format(name, type(d), type(v))
    end
  end
  return nil
end

--- Checks `opts` and merges it over the defaults, making the result the active options. A bad
--- option is an error that names it; the active options are left as they were.
---@param opts table|nil
---@return table
function M.setup(opts)
  local why = invalid(opts or {}, M.defaults, "")
  if why then
    error("bb7.setup: " .. why, 2)
  end
  M.options = vim.tbl_deep_extend("force", vim.deepcopy(M.defaults), opts or {})
  return M.options
end

--- The project root for this session: the `root` option, else the nearest directory from the
--- current one upwards that has `.bb7/` (the global state directory `~/.bb7` does not count), else
--- the current directory.
---@return string
function M.root()
  local r = M.options.root
  if type(r) == "function" then
    r = r()
  end
  if r then
    return vim.fs.normalize(r)
  end
  local cwd = vim.fs.normalize(vim.fn.getcwd())
  local state = vim.fs.normalize(M.state_dir())
  for dir in vim.fs.parents(cwd .. "/x") do
    local cand = dir .. "/.bb7"
    if vim.fn.isdirectory(cand) == 1 and vim.fs.normalize(cand) ~= state then
      return dir == "" and "/" or dir
    end
  end
  return cwd
end

--- The environment the host runs with: Neovim's own, overlaid with `env`.
---@param name string
---@return string|nil
function M.getenv(name)
  local env = M.options.env or {}
  if env[name] ~= nil then
    return env[name]
  end
  return vim.env[name]
end

--- The host's global state directory (`$BB7_HOME`, else `$HOME/.bb7`), as the host sees it.
---@return string
function M.state_dir()
  local h = M.getenv("BB7_HOME")
  if h and h ~= "" then
    return h
  end
  return (M.getenv("HOME") or vim.fn.expand("~")) .. "/.bb7"
end

--- The host's config file (`$HOME/.config/bb7/config.json`), as the host sees it.
---@return string
function M.config_file()
  return (M.getenv("HOME") or vim.fn.expand("~")) .. "/.config/bb7/config.json"
end

return M
