--- `:checkhealth bb7`: Neovim version, the host binary, its version and whether it is older than the
--- sources it is built from, the protocol handshake, the config file and API key (never printed), the
--- compiled wasm components, the local provider's server when one is configured.
local M = {}

local function cache_dir(config)
  local c = config.getenv("BB7_CACHE_DIR")
  if c and c ~= "" then
    return c
  end
  local x = config.getenv("XDG_CACHE_HOME")
  if x and x ~= "" then
    return x .. "/bb7"
  end
  return (config.getenv("HOME") or vim.fn.expand("~")) .. "/.cache/bb7"
end

--- The local provider (`providers.local`, :help bb7-providers): does its server answer `GET
--- <base_url>/models` (with curl), and does the list name the configured model? Returns the
--- problem as a string, or nil when both hold (`h` is `vim.health`, or a stand-in in tests).
function M.check_local(l, h)
  h = h or vim.health
  h.start("Local provider")
  if type(l.base_url) ~= "string" or type(l.model) ~= "string" then
    h.error("providers.local needs base_url and model")
    return "incomplete"
  end
  if vim.fn.executable("curl") ~= 1 then
    h.warn("curl not found: the local server at " .. l.base_url .. " was not checked")
    return "no curl"
  end
  local url = l.base_url:gsub("/+$", "") .. "/models"
  local cmd = { "curl", "-sS", "--max-time", "5", url }
  if type(l.api_key) == "string" and l.api_key ~= "" then
    vim.list_extend(cmd, { "-H", "Authorization: Bearer " .. l.api_key })
  end
  local res = vim.system(cmd, { text = true }):wait(8000)
  if res.code ~= 0 then
    h.error("the local server does not answer at " .. url .. ": " .. vim.trim(res.stderr or ""), {
      "Start it (ollama serve; llama-server -m model.gguf --port 8080) or fix providers.local.base_url",
    })
    return "unreachable"
  end
  local ok, list = pcall(vim.json.decode, res.stdout or "")
  if not ok or type(list) ~= "table" or type(list.data) ~= "table" then
    h.error("the local server's " .. url .. " is not an OpenAI-style model list")
    return "bad list"
  end
  local ids = {}
  for _, m in ipairs(list.data) do
    if type(m) == "table" and m.id == l.model then
      h.ok(("local server answers at %s and lists %s"):format(l.base_url, l.model))
      return nil
    end
    if type(m) == "table" and m.id then
      ids[#ids + 1] = tostring(m.id)
    end
  end
  h.error(("the local server does not list the model %s (it has: %s)"):format(l.model, table.concat(ids, ", ")), {
    "Pull it (ollama pull " .. l.model .. ") or set providers.local.model to one it lists",
  })
  return "model not listed"
end

function M.check()
  local h = vim.health
  local config = require("bb7.config")
  local host = require("bb7.host")
  local util = require("bb7.util")

  h.start("Neovim")
  if vim.fn.has("nvim-0.10") == 1 then
    h.ok("Neovim " .. tostring(vim.version()))
  else
    h.error("Neovim 0.10 or newer is required (found " .. tostring(vim.version()) .. ")")
  end

  h.start("Host binary")
  local bin, err
  if config.options.cmd then
    bin = config.options.cmd[1]
  else
    bin, err = host.find_bin()
  end
  local build = require("bb7.build")
  if not bin then
    h.error(err or "bb7 not found", {
      "Build it: " .. build.HINT .. " (cargo build --release -p bb7 in " .. host.plugin_root() .. "; see :help bb7-installation for the time it takes)",
      "or set require('bb7').setup({ bin = '/path/to/bb7' }) to a bb7 built elsewhere",
    })
    return
  end
  h.ok("found " .. bin)
  local res = vim.system({ bin, "--version" }, { text = true, env = config.options.env }):wait(5000)
  local version = res.code == 0 and (res.stdout or ""):match("^bb7 (%S+)") or nil
  if not version then
    h.error("`" .. bin .. " --version` failed: " .. vim.trim((res.stderr or "") .. (res.stdout or "")))
    return
  end
  local want = host.required_version
  local problem = host.version_problem(version, bin)
  if problem then
    h.warn(problem, {
      "The build runs in the background with its progress; :help bb7-installation says how long it takes, or how to use a bb7 built elsewhere (setup({ bin = … }))",
    })
  else
    h.ok("version " .. version .. " (plugin needs " .. want .. ".x)")
  end
  local root = host.plugin_root()
  if config.options.cmd or vim.fn.resolve(bin) ~= vim.fn.resolve(root .. "/target/release/bb7") then
    h.info("built elsewhere (setup({ bin }), cmd or PATH): only its version is compared with the plugin")
  elseif not problem then
    h.ok("built after its sources last changed (" .. table.concat(build.SOURCES, ", ") .. ")")
  end

  h.start("Protocol")
  local was_running = host.running()
  local t0 = vim.uv.hrtime()
  if not host.start() then
    h.error("could not start the host")
  else
    local r = host.call("ping", {}, { timeout = 5000 })
    local v = host.call("version", {}, { timeout = 5000 })
    if r.type == "ok" and v.type == "version" then
      h.ok(("handshake ok: ping and version (%s) in %.0f ms"):format(v.version, (vim.uv.hrtime() - t0) / 1e6))
    else
      h.error("handshake failed: " .. tostring(r.message or v.message))
    end
    if not was_running then
      host.stop()
    end
  end

  h.start("Configuration")
  local cfg_path = config.config_file()
  local text = util.read_file(cfg_path)
  if not text then
    h.error("config file not found: " .. cfg_path, { 'Create it with {"api_key": "sk-or-..."}' })
  else
    local ok, cfg = pcall(vim.json.decode, text)
    if not ok or type(cfg) ~= "table" then
      h.error("config file is not valid JSON: " .. cfg_path)
    else
      h.ok("config file " .. cfg_path)
      if type(cfg.api_key) == "string" and cfg.api_key ~= "" then
        h.ok("API key is set (not shown)")
      else
        h.error("API key not set in config", { "Add \"api_key\" to " .. cfg_path })
      end
      if cfg.base_url then
        h.info("base_url " .. tostring(cfg.base_url))
      end
      local providers = type(cfg.providers) == "table" and cfg.providers or {}
      if type(providers["local"]) == "table" then
        M.check_local(providers["local"])
      end
    end
  end
  local root = config.root()
  if vim.fn.isdirectory(root .. "/.bb7") == 1 then
    h.ok("project initialized: " .. root .. "/.bb7")
  else
    h.info("project not initialized (run :BB7Init in " .. root .. ")")
  end

  h.start("WebAssembly tool components")
  local audit = vim.system({ bin, "tools", "audit", "--json" }, { text = true, env = config.options.env }):wait(20000)
  local ok_a, report = pcall(vim.json.decode, audit.stdout or "")
  if audit.code ~= 0 or not ok_a or type(report) ~= "table" or type(report.components) ~= "table" then
    h.error("`bb7 tools audit` failed: " .. vim.trim(audit.stderr or ""), { "Rebuild the host: " .. build.HINT .. "; the wasm32-wasip2 target must be installed (rustup target add wasm32-wasip2)" })
    return
  end
  -- The built-ins' native code is precompiled into the binary when it is built; `native_code` says
  -- where each component's code came from this time ("precompiled", else "cached" or "compiled": an
  -- engine the build did not match, compiled once into the cache).
  local dir = cache_dir(config) .. "/components"
  local ready, other = 0, {}
  for _, c in ipairs(report.components) do
    if c.native_code == "precompiled" then
      ready = ready + 1
    else
      other[#other + 1] = ("%s (%s)"):format(c.name, tostring(c.native_code))
    end
  end
  if #other == 0 then
    h.ok(("%d built-in tools embedded and compiled into the binary (one component; nothing is compiled at run time)"):format(ready))
  else
    h.warn(
      ("%d of %d components precompiled; not: %s"):format(ready, #report.components, table.concat(other, ", ")),
      { "This binary's engine differs from the one its tools were built for; they are compiled once and cached in " .. dir .. ". Rebuild the host to fix it: " .. build.HINT .. "." }
    )
  end
  -- Third-party components and hooks are compiled by bb7-compile, which the build leaves beside bb7.
  local named = (config.options.env or {}).BB7_COMPILER or vim.env.BB7_COMPILER
  local compiler = (named and named ~= "") and named or (vim.fn.fnamemodify(vim.fn.exepath(bin) ~= "" and vim.fn.exepath(bin) or bin, ":p:h") .. "/bb7-compile")
  if vim.fn.executable(compiler) == 1 then
    h.ok("compiler for third-party components and hooks: " .. vim.fn.strtrans(compiler))
  else
    h.warn(
      "bb7-compile not found at " .. vim.fn.strtrans(compiler) .. ": third-party components and hooks cannot be compiled (the built-in tools need no compiler)",
      { "Keep bb7-compile (the build leaves it beside bb7) in the same directory as bb7, or set BB7_COMPILER to its path; " .. build.HINT .. " rebuilds both" }
    )
  end
end

return M
