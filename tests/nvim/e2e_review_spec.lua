-- End to end, real host: per-hunk review in diff mode and checkpoints, driven by keys. The output is
-- placed where the host keeps it (`.bb7/chats/<id>/output/<path>`), so no model is needed.
local t = require("helpers")
local I, W = vim.log.levels.INFO, vim.log.levels.WARN
local env, session, review, cps

local function press(keys)
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(keys, true, false, true), "mx", false)
end

local function lines(n, f)
  local out = {}
  for i = 1, n do
    local l = f(i)
    if l then
      out[#out + 1] = l
    end
  end
  return table.concat(out, "\n") .. "\n"
end

local OLD = lines(40, function(i)
  return "line " .. i
end)
local NEW = lines(40, function(i)
  if i == 3 then
    return "line three"
  elseif i == 12 then
    return "line 12\nline 12b"
  elseif i == 25 then
    return nil
  elseif i == 36 then
    return "LINE 36"
  end
  return "line " .. i
end)

local function out_path()
  return env.project .. "/.bb7/chats/" .. session.chat.id .. "/output/m.txt"
end

local function disk()
  return t.read(env.project .. "/m.txt")
end

local function noted(needle)
  for _, n in ipairs(t.notes) do
    if n.msg:find(needle, 1, true) then
      return true
    end
  end
  return false
end

local function buf_of(path)
  return vim.fn.bufnr(env.project .. "/" .. path)
end

-- The review told step by step; each case below runs the steps it needs from the start, in its own
-- Neovim (tests/nvim/run.lua), so no case depends on another having run.
local steps = {
  {
    "setup: a chat with m.txt in context, an open buffer with undo history, and a 4-hunk output",
    function()
      env = t.env()
      session = require("bb7.session")
      review = require("bb7.ui.review")
      cps = require("bb7.ui.checkpoints")
      t.write(env.project .. "/m.txt", OLD:gsub("line 40\n", "line forty\n"))
      t.cmd("BB7Init")
      t.cmd("BB7NewChat")
      t.cmd("edit m.txt")
      -- A user edit, saved: undo history the review must keep.
      vim.api.nvim_buf_set_lines(0, 39, 40, false, { "line 40" })
      t.cmd("silent write")
      t.eq(OLD, disk(), "saved")
      t.cmd("BB7Add m.txt")
      t.write(out_path(), NEW)
      session.refresh_files()
    end,
  },
  {
    ":BB7Review opens local | proposed in diff mode with the hunks",
    function()
      t.clear_notes()
      t.cmd("BB7Review m.txt")
      local st = review.current()
      t.ok(st, "review open")
      t.eq(4, #st.hunks, "hunks")
      t.ok(vim.wo[st.local_win].diff and vim.wo[st.prop_win].diff, "both windows in diff mode")
      t.eq(vim.api.nvim_get_current_win(), st.prop_win, "cursor in the (read-only) proposal window")
      t.eq(st.local_buf, buf_of("m.txt"), "the left side is the file's own buffer")
      t.eq(NEW, t.buf_text(st.prop_buf) .. "\n", "the right side is the proposal")
      t.note("BB-7: Review m.txt: 4 hunks; ga accept, gr reject, gA / gR all, ]c / [c move, g? keys", I)
      t.eq(3, vim.api.nvim_win_get_cursor(0)[1], "the cursor starts on the first hunk")
    end,
  },
  {
    "g? lists the keys; ga accepts the hunk under the cursor, the buffer follows, undo history kept",
    function()
      t.clear_notes()
      press("g?")
      t.ok(noted("ga  accept the hunk under the cursor"), vim.inspect(t.notes))
      local buf = buf_of("m.txt")
      local undo_before = vim.fn.undotree(buf).seq_last
      t.ok(undo_before >= 1, "the user's edit is in the undo history")
      press("ga")
      t.eq(OLD:gsub("line 3\n", "line three\n"), disk(), "disk has the first hunk only")
      t.eq(disk(), t.buf_text(buf) .. "\n", "buffer updated in place")
      t.ok(not vim.bo[buf].modified, "buffer in sync with the file")
      t.ok(vim.fn.undotree(buf).seq_last > undo_before, "the apply is one more undo step; history kept")
      t.eq(3, #review.current().hunks, "three hunks left")
    end,
  },
  {
    "]c then gr rejects the next hunk: the proposal loses it, the file is untouched",
    function()
      local before = disk()
      press("]c")
      local l = vim.api.nvim_win_get_cursor(0)[1]
      t.ok(l == 12 or l == 13, "on the second hunk: " .. l)
      press("gr")
      t.eq(before, disk(), "local file untouched")
      local out = t.read(out_path())
      t.ok(not out:find("line 12b", 1, true), "output lost the hunk")
      t.eq(2, #review.current().hunks, "two hunks left")
    end,
  },
  {
    "gA accepts the rest: applied, the review closes, the output is consumed",
    function()
      t.clear_notes()
      press("gA")
      t.note("BB-7: Applied m.txt", I)
      t.eq(nil, review.current(), "review closed")
      local want = OLD:gsub("line 3\n", "line three\n"):gsub("line 25\n", ""):gsub("line 36\n", "LINE 36\n")
      t.eq(want, disk(), "disk")
      t.eq(want, t.buf_text(buf_of("m.txt")) .. "\n", "buffer")
      t.eq(nil, t.read(out_path()), "output consumed")
      t.no_errors()
    end,
  },
  {
    ":BB7Checkpoints lists the applies; <CR> opens base | current | proposed",
    function()
      t.cmd("BB7Checkpoints")
      local text = t.buf_text(0)
      local _, n = text:gsub("hunks applied", "") -- readable kind names (issue 29)
      t.eq(2, n, "two applies listed: " .. text)
      press("g?")
      t.ok(noted("H     hard rollback"), vim.inspect(t.notes))
      -- The older apply (first hunk only) is the second row.
      vim.api.nvim_win_set_cursor(0, { 4, 0 })
      press("<CR>")
      local v = cps.current_view()
      t.ok(v, "3-way view open")
      t.eq(OLD, t.buf_text(v.bufs.base) .. "\n", "base: before that apply")
      t.eq(disk(), t.buf_text(v.bufs.current) .. "\n", "current: the file now")
      t.eq(OLD:gsub("line 3\n", "line three\n"), t.buf_text(v.bufs.proposed) .. "\n", "proposed: what it applied")
      t.ok(vim.wo[v.wins.base].diff and vim.wo[v.wins.current].diff and vim.wo[v.wins.proposed].diff, "diff mode")
      t.eq(1, #v.hunks, "one hunk in that apply")
    end,
  },
  {
    "gr on the hunk rolls back just it; later changes stay; the open buffer follows",
    function()
      local v = cps.current_view()
      vim.api.nvim_set_current_win(v.wins.proposed)
      vim.api.nvim_win_set_cursor(0, { 3, 0 })
      t.clear_notes()
      press("gr")
      local want = OLD:gsub("line 25\n", ""):gsub("line 36\n", "LINE 36\n")
      t.eq(want, disk(), "only that hunk reverted")
      t.eq(want, t.buf_text(buf_of("m.txt")) .. "\n", "buffer follows")
      t.ok(noted("Rolled back 1 hunks"), vim.inspect(t.notes))
    end,
  },
  {
    "gH asks, then hard-rolls back the whole checkpoint; a rollback is a checkpoint itself",
    function()
      local asked
      local orig = vim.ui.select
      vim.ui.select = function(_, o, cb)
        asked = o.prompt
        cb("Yes")
      end
      local v = cps.current_view()
      local id = v.id
      press("gH")
      vim.ui.select = orig
      t.ok(asked and asked:find("Later edits to those files are lost", 1, true), tostring(asked))
      t.eq(OLD, disk(), "file as before that apply")
      t.eq(OLD, t.buf_text(buf_of("m.txt")) .. "\n", "buffer follows")
      local list = require("bb7.host").call("checkpoint_list", {}).checkpoints
      t.eq("rollback", list[1].kind, "newest is the rollback")
      t.eq(id, list[1].rollback_of, "of that checkpoint")
      press("q")
      t.eq(nil, cps.current_view(), "view closed")
    end,
  },
  {
    "closing the review's tab ends the review and takes its keys off the file's buffer",
    function()
      t.write(out_path(), NEW)
      t.cmd("BB7Review m.txt")
      local st = review.current()
      t.ok(st, "review open")
      t.ok(vim.fn.maparg("ga", "n", false, true).buffer == 1, "ga mapped in the local buffer")
      t.cmd("tabclose")
      t.wait(function()
        return review.current() == nil
      end, 2000, "the review to end")
      local buf = buf_of("m.txt")
      vim.api.nvim_buf_call(buf, function()
        t.ok(vim.tbl_isempty(vim.fn.maparg("ga", "n", false, true)), "ga unmapped")
      end)
      t.eq(OLD, disk(), "nothing written")
    end,
  },
  {
    "R in the Files pane opens the review of the output under the cursor",
    function()
      t.write(out_path(), NEW)
      session.refresh_files()
      local ui = require("bb7.ui")
      t.cmd("BB7")
      ui.focus("files")
      local row
      t.wait(function()
        for i, l in ipairs(vim.api.nvim_buf_get_lines(ui.bufs.files, 0, -1, false)) do
          if l:find("m.txt", 1, true) then
            row = i
          end
        end
        return row
      end, 2000, "m.txt in the Files pane")
      vim.api.nvim_win_set_cursor(ui.wins.files, { row, 0 })
      press("R")
      t.wait(function()
        return review.current() ~= nil
      end, 2000, "the review to open")
      t.eq(4, #review.current().hunks, "hunks")
      t.cmd("tabclose")
      t.eq(OLD, disk(), "nothing written")
    end,
  },
}

--- Runs steps `...` (indices into `steps`) in order; a failure names the step.
local function run(...)
  for _, i in ipairs({ ... }) do
    local ok, err = xpcall(steps[i][2], debug.traceback)
    if not ok then
      error(("step %d (%s):\n%s"):format(i, steps[i][1], tostring(err)), 0)
    end
  end
end

return {
  {
    "review by keys: :BB7Review opens local | proposed in diff mode; g? lists the keys; ga accepts (buffer follows, undo kept); ]c gr rejects; gA accepts the rest",
    function()
      run(1, 2, 3, 4, 5)
    end,
  },
  {
    "checkpoints after a review: the list and the 3-way view; gr rolls back one hunk, later changes stay; gH asks, then rolls back all (a checkpoint itself)",
    function()
      run(1, 2, 3, 4, 5, 6, 7, 8)
    end,
  },
  {
    "closing the review's tab ends the review and takes its keys off the file's buffer",
    function()
      run(1, 9)
    end,
  },
  {
    "R in the Files pane opens the review of the output under the cursor",
    function()
      run(1, 10)
    end,
  },
}
