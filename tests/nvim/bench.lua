-- Benchmarks of the plugin (run by scripts/bench-nvim; prints numbers, asserts nothing on time):
--  1. rendering a 2,000-chunk streamed reply through the real host and mock server: total Lua time on
--     the main loop (stdout handling, dispatch, flushes) and the longest single callback ("frame");
--     the same 2,000 chunks fed synthetically (no network) for a host-independent number;
--  2. time from `:BB7` to an interactive UI in a project with 1,000 chats, cold (host not running) and
--     warm (host running, UI closed).
local repo = vim.fn.fnamemodify(debug.getinfo(1, "S").source:sub(2), ":p:h:h:h")
vim.opt.runtimepath:prepend(repo)
package.path = repo .. "/tests/nvim/?.lua;" .. package.path
vim.o.swapfile = false
vim.cmd("runtime plugin/bb7.lua")
local t = require("helpers")
vim.schedule = t.real_schedule -- measure the plugin, not the tests' error trap
t.repo = repo
local real_notify = vim.notify

local CHUNKS = tonumber(vim.env.BENCH_CHUNKS or "") or 2000
local CHATS = tonumber(vim.env.BENCH_CHATS or "") or 1000

local function out(s)
  io.stdout:write(s .. "\n")
  io.stdout:flush()
end

local function piece(i)
  local words = { "the ", "function ", "returns ", "a ", "value; ", "`x` ", "is ", "then ", "used ", "again. " }
  return words[(i % #words) + 1] .. (i % 15 == 0 and "\n" or "")
end

-- Instrumentation: every main-loop callback the stream goes through is timed.
local frames, labels = {}, {}
local function timed(tbl, key)
  local orig = tbl[key]
  tbl[key] = function(...)
    local t0 = vim.uv.hrtime()
    local r = { orig(...) }
    frames[#frames + 1] = (vim.uv.hrtime() - t0) / 1e6
    labels[#frames] = key
    return unpack(r)
  end
  return function()
    tbl[key] = orig
  end
end

local function summarize(label, n_flushes)
  local total, max = 0, 0
  for _, f in ipairs(frames) do
    total = total + f
    max = math.max(max, f)
  end
  local sorted = vim.deepcopy(frames)
  table.sort(sorted)
  local p99 = sorted[math.max(1, math.ceil(#sorted * 0.99))] or 0
  local where = "?"
  for i, f in ipairs(frames) do
    if f == max then
      where = labels[i]
    end
  end
  out(("%-46s total Lua %7.1f ms  longest frame %6.2f ms (%s)  p99 %5.2f ms  callbacks %5d  flushes %4d"):format(
    label,
    total,
    max,
    where,
    p99,
    #frames,
    n_flushes
  ))
end

local function stream_script(delay)
  local stream = {}
  for i = 1, 200 do
    stream[#stream + 1] = { reasoning = "think " .. i .. (i % 20 == 0 and "\n" or " ") }
  end
  for i = 1, CHUNKS do
    stream[#stream + 1] = { content = piece(i) }
    if delay > 0 then
      stream[#stream + 1] = { delay_ms = delay }
    end
  end
  vim.list_extend(stream, { { finish = "stop" }, { usage = { prompt_tokens = 10, completion_tokens = CHUNKS, cost = 0.01 } }, "done" })
  return { stream = stream }
end

local function bench_stream_real()
  local script = { replies = { stream_script(0), { stream = { { content = "Bench Title" }, { finish = "stop" }, "done" } }, stream_script(1) } }
  script.fallback = { stream = { { content = "Bench Title" }, { finish = "stop" }, "done" } }
  local env = t.env({ script = script })
  vim.notify = function() end
  vim.cmd("BB7Init")
  vim.cmd("BB7NewChat")
  vim.cmd("BB7")
  local session, preview = require("bb7.session"), require("bb7.ui.preview")
  local host = require("bb7.host")
  local Stream = require("bb7.ui.stream")
  for round, label in ipairs({ "as fast as the host sends (no delay)", "1 ms between chunks" }) do
    if round == 2 then
      -- The first exchange triggers a title request; wait until it is served so replies stay in order.
      vim.wait(3000, function()
        return session.chat.name == "Bench Title"
      end)
    end
    frames, labels = {}, {}
    local undo = { timed(host, "_feed"), timed(host, "_drain"), timed(Stream, "flush") }
    local t0 = vim.uv.hrtime()
    assert(session.send("bench " .. round), "send")
    local done_at
    vim.wait(120000, function()
      if session.stream == nil and not done_at then
        done_at = vim.uv.hrtime()
      end
      return session.stream == nil
    end, 1)
    for _, u in ipairs(undo) do
      u()
    end
    local flushes = #preview.flush_times
    -- The final full render (once, at done) is part of `_drain`; report it separately too.
    local r0 = vim.uv.hrtime()
    preview.render()
    local full = (vim.uv.hrtime() - r0) / 1e6
    summarize(("real host, %d chunks, %s"):format(CHUNKS + 200, label), flushes)
    out(("%-46s wall %7.0f ms; one full chat re-render %.2f ms (%d lines)"):format(
      "",
      (done_at - t0) / 1e6,
      full,
      vim.api.nvim_buf_line_count(preview.buf())
    ))
    local text = t.buf_text(preview.buf())
    assert(text:find(vim.trim(piece(CHUNKS)), 1, true), "reply rendered")
  end
  require("bb7.ui").close()
  t.cleanup()
  return env
end

local function bench_stream_synthetic()
  -- The same pipeline without host and network: JSON lines into the stdout handler in reads of
  -- 1–8 lines, with the event loop running between reads as it would between pipe reads.
  local host = require("bb7.host")
  local Stream = require("bb7.ui.stream")
  local session = require("bb7.session")
  local buf = vim.api.nvim_create_buf(false, true)
  local win = vim.api.nvim_open_win(buf, true, { relative = "editor", row = 0, col = 0, width = 80, height = 20 })
  local s = Stream.new(buf, { interval = 30 })
  host.on("bench_chunk", function(m)
    s:push("chunk", m.content)
  end)
  local lines = {}
  for i = 1, CHUNKS do
    lines[i] = vim.json.encode({ type = "bench_chunk", content = piece(i) })
  end
  frames, labels = {}, {}
  local undo = { timed(host, "_feed"), timed(host, "_drain"), timed(Stream, "flush") }
  local i = 1
  local flushes_before = 0
  local orig_flush = Stream.flush
  local nflush = 0
  Stream.flush = function(self)
    nflush = nflush + 1
    return orig_flush(self)
  end
  while i <= CHUNKS do
    local n = (i % 8) + 1
    local batch = {}
    for k = i, math.min(CHUNKS, i + n - 1) do
      batch[#batch + 1] = lines[k]
    end
    batch[#batch + 1] = ""
    host._feed(batch)
    i = i + n
    vim.wait(0) -- let the loop run (dispatch, timers)
    if i % 200 == 0 then
      vim.wait(5)
    end
  end
  vim.wait(100)
  s:stop()
  Stream.flush = orig_flush
  for _, u in ipairs(undo) do
    u()
  end
  summarize(("synthetic, %d chunks (no host)"):format(CHUNKS), nflush - flushes_before)
  vim.api.nvim_win_close(win, true)

end

local notes = {}
local function bench_startup()
  local env = t.env()
  vim.notify = function(m)
    notes[#notes + 1] = m
  end
  vim.cmd("BB7Init")
  local host = require("bb7.host")
  local t0 = vim.uv.hrtime()
  for i = 1, CHATS do
    local r = host.call("chat_new", { name = "chat number " .. i })
    assert(r.type == "ok", r.message)
  end
  local mk = (vim.uv.hrtime() - t0) / 1e6
  -- A realistic active chat: a few files and messages.
  t.write(env.project .. "/a.txt", ("line\n"):rep(200))
  host.call("context_add", { path = "a.txt", content = ("line\n"):rep(200) })
  local session = require("bb7.session")
  local ui = require("bb7.ui")
  local function reset()
    if ui.is_open() then
      ui.close()
    end
    host.stop()
    session.root, session.initialized, session.chat, session.chats, session.statuses = nil, false, nil, nil, {}
  end
  local results = { cold = {}, warm = {} }
  for _ = 1, 5 do
    reset()
    local c0 = vim.uv.hrtime()
    vim.cmd("BB7")
    results.cold[#results.cold + 1] = (vim.uv.hrtime() - c0) / 1e6
    assert(ui.is_open(), "open")
    assert(vim.api.nvim_buf_line_count(ui.bufs.chats) >= CHATS, "all chats listed: " .. vim.api.nvim_buf_line_count(ui.bufs.chats) .. " lines; " .. vim.inspect(notes))
    ui.close()
    local w0 = vim.uv.hrtime()
    vim.cmd("BB7")
    results.warm[#results.warm + 1] = (vim.uv.hrtime() - w0) / 1e6
  end
  local function med(xs)
    table.sort(xs)
    return xs[math.ceil(#xs / 2)], xs[#xs]
  end
  -- Where a cold start goes.
  reset()
  local b0 = vim.uv.hrtime()
  host.start()
  local b1 = vim.uv.hrtime()
  session.ensure()
  local b2 = vim.uv.hrtime()
  session.list_chats()
  local b3 = vim.uv.hrtime()
  ui.open("input")
  local b4 = vim.uv.hrtime()
  out(("created %d chats through the host in %.0f ms"):format(CHATS, mk))
  out(("cold start breakdown: spawn + version %.1f ms, init + active chat %.1f ms, chat_list %.1f ms, open panes %.1f ms"):format(
    (b1 - b0) / 1e6,
    (b2 - b1) / 1e6,
    (b3 - b2) / 1e6,
    (b4 - b3) / 1e6
  ))
  local cm, cx = med(results.cold)
  local wm, wx = med(results.warm)
  out(("%-46s median %6.1f ms  max %6.1f ms  (5 runs)"):format((":BB7 → interactive, %d chats, cold host"):format(CHATS), cm, cx))
  out(("%-46s median %6.1f ms  max %6.1f ms  (5 runs)"):format((":BB7 → interactive, %d chats, warm host"):format(CHATS), wm, wx))
  ui.close()
  t.cleanup()
end

local ok, err = xpcall(function()
  out(("bench-nvim: %s, host %s"):format(vim.version and tostring(vim.version()) or "?", t.bin()))
  bench_stream_real()
  bench_stream_synthetic()
  bench_startup()
end, debug.traceback)
vim.notify = real_notify
if not ok then
  out("bench failed: " .. tostring(err))
  os.exit(1)
end
os.exit(0)
