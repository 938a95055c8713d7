-- End to end, real host and the mock LLM server: `#buffer`, `#buffers` and `@path` mentions in the
-- Input pane (lua/bb7/mentions.lua) put their files in the context of the send — the request the mock
-- server receives carries them — and the pickers hide the agent's deny list (lua/bb7/deny.lua).
local t = require("helpers")
local I = vim.log.levels.INFO
local TITLE_MODEL = "mock/title"

local function text_reply(text)
  return { stream = { { content = text }, { finish = "stop" }, { usage = { prompt_tokens = 50, completion_tokens = 5 } }, "done" } }
end

--- The host's file id: the first 8 hex digits of sha256(path NUL content).
local function file_id(path, content)
  local r = vim.system({ "sha256sum" }, { stdin = path .. "\0" .. content }):wait()
  return r.stdout:sub(1, 8)
end

local function setup(replies)
  local env = t.env({
    script = {
      replies = replies,
      fallback = text_reply("fallback reply"),
      by_model = { [TITLE_MODEL] = text_reply("Mentions") },
    },
    config = { title_model = TITLE_MODEL },
  })
  t.write(env.project .. "/notes.txt", "alpha\n")
  t.write(env.project .. "/src/main.rs", "fn main() {}\n")
  t.write(env.project .. "/.env", "SECRET=1\n")
  t.write(env.project .. "/certs/server.PEM", "x\n")
  t.cmd("BB7Init")
  return env
end

local function send(text)
  local session = require("bb7.session")
  local input = require("bb7.ui.input")
  vim.api.nvim_buf_set_lines(input.buf(), 0, -1, false, { text })
  input.send()
  t.eq("", t.buf_text(input.buf()), "input cleared: the message went out")
  t.wait(function()
    return session.stream == nil
  end, 15000, "the reply")
end

local function context_versions()
  local r = require("bb7.host").call("context_list", {})
  local out = {}
  for _, f in ipairs(r.files or {}) do
    out[f.path] = f.version
  end
  return out
end

return {
  {
    "#buffer (unsaved) and @path: added to the context, their text in the request the mock receives; #buffers updates a changed one",
    function()
      -- The mock fills in the id the request showed for each file: the reply proves what was sent.
      setup({ text_reply("ids {{file_id:notes.txt}} {{file_id:src/main.rs}}"), text_reply("second") })
      local session = require("bb7.session")
      t.cmd("edit src/main.rs")
      local buf = vim.api.nvim_get_current_buf()
      vim.api.nvim_buf_set_lines(buf, 0, -1, false, { 'fn main() { println!("unsaved"); }' })
      local unsaved = 'fn main() { println!("unsaved"); }\n'
      t.cmd("BB7")
      t.cmd("BB7NewChat")
      t.clear_notes()

      send("Compare #buffer with @notes.txt.")
      t.note("BB-7: Added src/main.rs", I)
      t.note("BB-7: Added notes.txt", I)
      local want_notes, want_main = file_id("notes.txt", "alpha\n"), file_id("src/main.rs", unsaved)
      t.eq({ ["notes.txt"] = want_notes, ["src/main.rs"] = want_main }, context_versions(), "in context, the unsaved text")
      local msgs = session.chat.messages
      local user, reply
      for _, m in ipairs(msgs) do
        if m.role == "user" then
          user = m.content
        elseif m.role == "assistant" then
          reply = m.content
        end
      end
      t.eq("Compare `src/main.rs` with `notes.txt`.", user, "mentions became paths")
      t.eq(("ids %s %s"):format(want_notes, want_main), reply, "the request carried both files (ids resolved by the mock)")

      -- The buffer changes again; #buffers (every listed file buffer) updates its snapshot.
      vim.api.nvim_buf_set_lines(buf, 0, -1, false, { "fn main() { two(); }" })
      t.clear_notes()
      send("And now #buffers")
      t.note("BB-7: Updated src/main.rs", I)
      t.eq(file_id("src/main.rs", "fn main() { two(); }\n"), context_versions()["src/main.rs"], "updated before the send")
      t.eq("And now `src/main.rs`", session.chat.messages[#session.chat.messages - 1].content, "user message")
    end,
  },
  {
    "a mention that cannot be resolved: nothing is sent, the text stays; text without mentions asks nothing",
    function()
      setup({})
      local mentions = require("bb7.mentions")
      t.cmd("BB7")
      t.cmd("BB7NewChat")
      local input = require("bb7.ui.input")
      vim.api.nvim_buf_set_lines(input.buf(), 0, -1, false, { "Look at #buffer" })
      t.clear_notes()
      input.send() -- the UI was opened from no file: #buffer means nothing
      t.note("BB-7: #buffer: open the UI from the file you mean", vim.log.levels.WARN)
      t.eq("Look at #buffer", t.buf_text(input.buf()), "the text stays")
      t.eq(nil, require("bb7.session").stream, "nothing sent")
      t.eq("mail a@b.c about #buffered, @nobody", mentions.prepare("mail a@b.c about #buffered, @nobody"), "no mentions")
      t.eq({
        { kind = "buffer", s = 1, e = 8 },
        { kind = "path", s = 9, e = 21, path = "src/main.rs" },
        { kind = "buffers", s = 23, e = 31 },
      }, mentions.parse("#buffer @src/main.rs, #buffers."), "parse")
    end,
  },
  {
    "pickers: @ completion and the Files pane's A hide the deny list (.env, keys) unless show_denied",
    function()
      setup({})
      local session = require("bb7.session")
      local mentions = require("bb7.mentions")
      local function words(items)
        local out = {}
        for _, it in ipairs(items) do
          out[#out + 1] = it.word
        end
        table.sort(out)
        return out
      end
      t.eq({ "@notes.txt", "@src/main.rs" }, words(mentions.items("@")), "@ completion")
      t.eq({ "@src/main.rs" }, words(mentions.items("@MAIN")), "narrowed")
      t.eq({ "#buffer", "#buffers" }, words(mentions.items("#b")), "# completion")
      t.eq({ "notes.txt", "src/main.rs" }, session.project_files(), "picker files")
      -- The omnifunc completes the mention before the cursor.
      t.cmd("BB7")
      t.cmd("BB7NewChat")
      local input = require("bb7.ui.input")
      vim.api.nvim_set_current_win(vim.fn.bufwinid(input.buf()))
      vim.api.nvim_buf_set_lines(input.buf(), 0, -1, false, { "see @no" })
      vim.api.nvim_win_set_cursor(0, { 1, 7 })
      t.eq(4, mentions.omnifunc(1, ""), "start of the mention")
      t.eq({ "@notes.txt" }, words(mentions.omnifunc(0, "@no")), "omnifunc items")
      t.eq("v:lua.require'bb7.mentions'.omnifunc", vim.bo[input.buf()].omnifunc, "omnifunc set")
      require("bb7.config").setup(vim.tbl_extend("force", require("bb7.config").options, { show_denied = true }))
      t.eq({ ".env", "certs/server.PEM", "notes.txt", "src/main.rs" }, session.project_files(), "show_denied")

      -- The deny matcher: the host's patterns and gitignore rules, in any case.
      local deny = require("bb7.deny").compile(require("bb7.deny").DEFAULT)
      for _, p in ipairs({ ".env", ".env.local", "cfg/.env", "a/b/tls.key", "home/id_rsa.pub", ".ENV", "home/.AWS/Credentials", ".kube/config" }) do
        t.ok(deny(p), "denied: " .. p)
      end
      for _, p in ipairs({ "env", "src/key.rs", "README.md", ".envrc", ".aws/config", "docker/config.json" }) do
        t.eq(nil, deny(p), "allowed: " .. p)
      end
      local custom = require("bb7.deny").compile({ "secrets/", "/top.txt" })
      t.ok(custom("secrets/a.txt") and custom("x/Secrets/a.txt") and custom("TOP.txt"), "custom")
      t.eq(nil, custom("a/top.txt"), "anchored")
      t.eq(nil, custom("secrets"), "a file named like a folder pattern")
    end,
  },
}
