-- End to end, real host: applying output. The output is placed where the host keeps it
-- (`.bb7/chats/<id>/output/<path>`), so these tests do not depend on a model; the streamed path
-- (`send` → `M` → apply) is covered in e2e_send_spec.lua.
local t = require("helpers")
local W, I, E = vim.log.levels.WARN, vim.log.levels.INFO, vim.log.levels.ERROR
local env, session

local function out_dir()
  return env.project .. "/.bb7/chats/" .. session.chat.id .. "/output/"
end

local function status(path)
  for _, e in ipairs(require("bb7.ui.files").entries()) do
    if e.file.path == path and not e.file.start_line then
      return e.status
    end
  end
end

--- Every case starts here, in its own Neovim: a project, a chat, two files in context (LF and
--- CRLF), the UI open.
local function setup()
  env = t.env()
  session = require("bb7.session")
  t.write(env.project .. "/src/a.txt", "alpha\nbeta\ngamma\n")
  t.write(env.project .. "/win.txt", "one\r\ntwo\r\n")
  t.cmd("BB7Init")
  t.cmd("BB7NewChat")
  t.cmd("edit src/a.txt")
  t.cmd("BB7Add")
  t.cmd("BB7Add win.txt")
  t.clear_notes()
  t.cmd("BB7")
  t.ok(require("bb7.ui").is_open(), "UI open")
end

return {
  {
    "output shows M; the context → output diff renders in the preview",
    function()
      setup()
      t.write(out_dir() .. "src/a.txt", "alpha\nBETA\ngamma\n")
      session.refresh_files()
      t.eq("M", status("src/a.txt"), "modified")
      t.ok(t.buf_text(require("bb7.ui").bufs.files):find("M   src/a.txt", 1, true), "rendered in the Files pane")
      t.cmd("BB7Diff src/a.txt")
      local text = t.buf_text(require("bb7.ui").bufs.preview)
      t.ok(text:find("\n%-beta\n%+BETA"), "unified diff: " .. text)
      require("bb7.ui.preview").show_chat()
    end,
  },
  {
    "~M when the buffer is modified too; apply is refused until it is saved or undone",
    function()
      setup()
      t.write(out_dir() .. "src/a.txt", "alpha\nBETA\ngamma\n")
      session.refresh_files()
      local buf = vim.fn.bufnr(env.project .. "/src/a.txt")
      vim.api.nvim_buf_set_lines(buf, 0, 1, false, { "ALPHA" })
      t.eq("~M", status("src/a.txt"), "conflict computed against the buffer")
      t.clear_notes()
      t.ok(not session.apply("src/a.txt"), "refused")
      t.eq(E, t.notes[1].level, "error level")
      t.ok(t.notes[1].msg:find("^BB%-7: Cannot write file src/a.txt"), t.notes[1].msg)
      t.expect_error("BB-7: Cannot write file src/a.txt")
      t.eq("alpha\nbeta\ngamma\n", t.read(env.project .. "/src/a.txt"), "disk untouched")
      vim.api.nvim_buf_call(buf, function()
        vim.cmd("silent edit!")
      end)
      t.eq("M", status("src/a.txt"), "back to M")
    end,
  },
  {
    "apply writes the file, updates the open buffer, syncs the snapshot",
    function()
      setup()
      t.write(out_dir() .. "src/a.txt", "alpha\nBETA\ngamma\n")
      session.refresh_files()
      t.clear_notes()
      t.ok(session.apply("src/a.txt"), "applied")
      t.note("BB-7: Applied src/a.txt", I)
      t.eq("alpha\nBETA\ngamma\n", t.read(env.project .. "/src/a.txt"), "disk")
      local buf = vim.fn.bufnr(env.project .. "/src/a.txt")
      t.eq({ "alpha", "BETA", "gamma" }, vim.api.nvim_buf_get_lines(buf, 0, -1, false), "buffer")
      t.ok(not vim.bo[buf].modified, "buffer not modified")
      t.eq("", status("src/a.txt"), "in sync, no output")
      t.eq(nil, t.read(out_dir() .. "src/a.txt"), "output consumed")
      local ctx = require("bb7.host").call("get_context_file", { path = "src/a.txt" })
      t.eq("alpha\nBETA\ngamma\n", ctx.content, "snapshot")
      t.clear_notes()
      session.apply("src/a.txt")
      t.note("BB-7: No output to apply", W)
    end,
  },
  {
    "apply keeps CRLF line endings of the local file",
    function()
      setup()
      t.write(out_dir() .. "win.txt", "one\nTWO\nthree\n")
      session.refresh_files()
      t.eq("M", status("win.txt"), "modified")
      t.ok(session.apply("win.txt"), "applied")
      t.eq("one\r\nTWO\r\nthree\r\n", t.read(env.project .. "/win.txt"), "CRLF kept")
      t.eq("", status("win.txt"), "not out of sync")
    end,
  },
  {
    "apply all: M and A files; then nothing left to apply",
    function()
      setup()
      t.write(out_dir() .. "src/a.txt", "alpha\nBETA\ngamma\ndelta\n")
      t.write(out_dir() .. "src/new.txt", "brand new\n")
      session.refresh_files()
      t.eq("A", status("src/new.txt"), "added")
      t.clear_notes()
      t.eq(2, session.apply_all(), "two applied")
      t.note("BB-7: Applied 2 files", I)
      t.eq("brand new\n", t.read(env.project .. "/src/new.txt"), "new file written")
      t.eq("", status("src/new.txt"), "new file joins the context")
      t.clear_notes()
      session.apply_all()
      t.note("BB-7: No output to apply", W)
    end,
  },
  {
    "local file already equal to the output: File already applied",
    function()
      setup()
      t.write(out_dir() .. "win.txt", "one\nTWO\nthree\nfour\n")
      t.write(env.project .. "/win.txt", "one\r\nTWO\r\nthree\r\nfour\r\n") -- the user made the same change
      session.refresh_files()
      t.eq("~M", status("win.txt"), "both changed")
      t.clear_notes()
      t.ok(session.apply("win.txt"), "applied")
      t.note("BB-7: File already applied", I)
      t.eq("", status("win.txt"), "settled")
    end,
  },
  {
    "!A for a new file that exists locally; reject deletes the output",
    function()
      setup()
      t.write(env.project .. "/exists.txt", "mine\n")
      t.write(out_dir() .. "exists.txt", "theirs\n")
      session.refresh_files()
      t.eq("!A", status("exists.txt"), "conflict added")
      t.clear_notes()
      t.ok(session.reject("exists.txt"), "rejected")
      t.note("BB-7: Rejected output for exists.txt", I)
      t.eq(nil, status("exists.txt"), "gone")
      t.eq("mine\n", t.read(env.project .. "/exists.txt"), "local untouched")
    end,
  },
  {
    ":BB7DiffLocal: take one hunk with :diffget, write → partially applied; take the rest → applied",
    function()
      setup()
      -- The local file and its snapshot as an earlier apply left them.
      t.write(env.project .. "/src/a.txt", "alpha\nBETA\ngamma\ndelta\n")
      vim.api.nvim_buf_call(vim.fn.bufnr(env.project .. "/src/a.txt"), function()
        vim.cmd("silent edit!")
      end)
      t.ok(session.update("src/a.txt"), "snapshot updated")
      t.write(out_dir() .. "src/a.txt", "ALPHA\nBETA\ngamma\nDELTA\n")
      session.refresh_files()
      t.cmd("BB7DiffLocal src/a.txt")
      t.ok(not require("bb7.ui").is_open(), "UI closed for the diff tab")
      t.eq(2, #vim.api.nvim_tabpage_list_wins(0), "two windows")
      t.ok(vim.wo.diff, "diff mode")
      t.eq(env.project .. "/src/a.txt", vim.api.nvim_buf_get_name(0), "local on the left")
      t.clear_notes()
      t.cmd("1diffget")
      t.cmd("silent write")
      t.note("BB-7: Partially applied src/a.txt", I)
      t.eq("ALPHA\nBETA\ngamma\ndelta\n", t.read(env.project .. "/src/a.txt"), "one hunk taken")
      t.eq("M", status("src/a.txt"), "output stays for the rest")
      local ctx = require("bb7.host").call("get_context_file", { path = "src/a.txt" })
      t.eq("ALPHA\nBETA\ngamma\ndelta\n", ctx.content, "snapshot follows the local file")
      t.clear_notes()
      t.cmd("%diffget")
      t.cmd("silent write")
      t.note("BB-7: Applied src/a.txt", I)
      t.eq("ALPHA\nBETA\ngamma\nDELTA\n", t.read(env.project .. "/src/a.txt"), "disk")
      t.eq("", status("src/a.txt"), "no output left")
      t.cmd("tabclose")
      t.no_errors()
    end,
  },
  {
    "files pane keys: a add, r read-only, u update, D diff, x reject, P apply all, d remove",
    function()
      setup()
      local ui = require("bb7.ui")
      ui.focus("files")
      local orig_input, orig_select = vim.ui.input, vim.ui.select
      local answer, asked
      vim.ui.input = function(_, cb)
        cb(answer)
      end
      vim.ui.select = function(_, o, cb)
        asked = o.prompt
        cb("Yes")
      end
      local function press(keys)
        vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(keys, true, false, true), "x", false)
      end
      local function on(path)
        for i, l in ipairs(vim.api.nvim_buf_get_lines(ui.bufs.files, 0, -1, false)) do
          if l:find(" " .. path .. "  ", 1, true) or l:sub(-#path - 1) == " " .. path then
            vim.api.nvim_win_set_cursor(ui.wins.files, { i, 0 })
            return i
          end
        end
        error("not in the Files pane: " .. path .. "\n" .. t.buf_text(ui.bufs.files))
      end
      local ok, err = pcall(function()
        t.write(env.project .. "/keys.txt", "k1\nk2\n")
        answer = "keys.txt"
        t.clear_notes()
        press("a")
        t.note("BB-7: Added keys.txt", I)
        on("keys.txt")
        press("r")
        t.eq("R", status("keys.txt"), "r: read-only")
        on("keys.txt")
        press("r")
        t.eq("", status("keys.txt"), "r again: writable")
        t.write(env.project .. "/keys.txt", "k1\nk2\nk3\n")
        session.refresh_files()
        t.eq("~", status("keys.txt"), "changed on disk")
        on("keys.txt")
        t.clear_notes()
        press("u")
        t.note("BB-7: Updated keys.txt", I)
        t.eq("", status("keys.txt"), "u: snapshot updated")
        t.write(out_dir() .. "keys.txt", "k1\nK2\nk3\n")
        session.refresh_files()
        on("keys.txt")
        press("D")
        t.ok(t.buf_text(ui.bufs.preview):find("+K2", 1, true), "D: diff in the preview")
        ui.focus("files")
        on("keys.txt")
        press("x")
        t.eq("Reject (delete) the output of keys.txt?", asked, "x asks first")
        t.eq("", status("keys.txt"), "x: output rejected")
        t.write(out_dir() .. "keys.txt", "k1\nK2\nk3\n")
        session.refresh_files()
        t.clear_notes()
        press("P")
        t.note("BB-7: Applied 1 files", I)
        t.eq("k1\nK2\nk3\n", t.read(env.project .. "/keys.txt"), "P: applied")
        on("keys.txt")
        press("d")
        t.eq(nil, status("keys.txt"), "d: removed")
      end)
      vim.ui.input, vim.ui.select = orig_input, orig_select
      ui.close()
      assert(ok, err)
      t.no_errors()
    end,
  },
}
