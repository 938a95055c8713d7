-- `:checkhealth bb7`'s local provider check (issue 28 §10) against the real mock server: a server
-- that lists the model is ok, one that does not list it and one that does not answer are errors.
local t = require("helpers")

--- A stand-in for vim.health that records each call.
local function recorder()
  local calls = {}
  local h = {}
  for _, k in ipairs({ "start", "ok", "info", "warn", "error" }) do
    h[k] = function(msg)
      calls[#calls + 1] = { k, msg }
    end
  end
  return h, calls
end

local function models(ids)
  local data = {}
  for _, id in ipairs(ids) do
    data[#data + 1] = { id = id, object = "model" }
  end
  return { status = 200, body = { object = "list", data = data } }
end

return {
  {
    "the local server is reachable and lists the model",
    function()
      if vim.fn.executable("curl") ~= 1 then
        error("curl is needed for this check")
      end
      local url = t.mock({ replies = {}, models = models({ "qwen2.5-coder:7b" }) })
      local h, calls = recorder()
      local problem = require("bb7.health").check_local({ base_url = url, model = "qwen2.5-coder:7b" }, h)
      t.eq(nil, problem, vim.inspect(calls))
      t.eq("ok", calls[#calls][1], vim.inspect(calls))
      local h2, calls2 = recorder()
      problem = require("bb7.health").check_local({ base_url = url, model = "llama3" }, h2)
      t.eq("model not listed", problem, vim.inspect(calls2))
      t.ok(calls2[#calls2][2]:find("qwen2.5-coder:7b", 1, true), vim.inspect(calls2))
    end,
  },
  {
    "an unreachable local server is an error",
    function()
      local h, calls = recorder()
      local problem = require("bb7.health").check_local({ base_url = "http://127.0.0.1:9/v1", model = "m" }, h)
      t.eq("unreachable", problem, vim.inspect(calls))
      t.eq("error", calls[#calls][1], vim.inspect(calls))
    end,
  },
  {
    "a provider fallback is a line in the tool log",
    function()
      local line = require("bb7.agent").on_event({
        kind = "provider.fallback",
        data = { from = "local", to = "remote", reason = "schema_failures" },
      })
      t.eq("↪ local → remote (schema_failures)\n", line)
      t.eq(nil, require("bb7.agent").on_event({ kind = "provider.selected", data = { provider = "local" } }))
    end,
  },
  {
    ":BB7Routing saves the chat's routing with the host; a bad one is refused; a refused send keeps its text",
    function()
      t.env({ script = { replies = {} }, config = { default_model = "mock/model" } })
      local session = require("bb7.session")
      t.cmd("BB7Init")
      t.cmd("BB7")
      t.cmd("BB7NewChat routing test")
      t.wait(function()
        return session.chat ~= nil
      end, 10000, "the new chat")
      t.eq("remote", require("bb7.routing").current())
      t.cmd("BB7Routing hybrid_auto")
      t.wait(function()
        return session.chat.routing == "hybrid_auto"
      end, 10000, "the routing saved")
      local r = require("bb7.host").call("chat_get", {}, { timeout = 5000 })
      t.eq("hybrid_auto", r.routing, vim.inspect(r))
      -- No local provider is configured: the send is refused before anything streamed, and the
      -- typed text goes back into the input.
      local input = require("bb7.ui.input")
      vim.api.nvim_buf_set_lines(input.buf(), 0, -1, false, { "keep this text" })
      input.send()
      t.wait(function()
        return session.stream == nil and t.buf_text(input.buf()):find("keep this text", 1, true)
      end, 30000, "the refused send's text back in the input: " .. t.buf_text(input.buf()))
      t.expect_error("needs a local provider")
      t.cmd("BB7Routing cloud")
      t.expect_error("Usage: :BB7Routing")
      t.eq("hybrid_auto", session.chat.routing)
    end,
  },
}

