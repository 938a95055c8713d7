"""`bb7 mcp` driven by the official Python MCP SDK's stdio client (tests/mcp.rs runs this).

Usage: scenarios.py SCENARIO BB7 PROJECT [ARG]. Each scenario asserts what it checks and prints
one JSON line of facts for the Rust test; any failed assertion exits non-zero with its message.
The environment (HOME, BB7_HOME, BB7_CACHE_DIR) is the test's isolated one.
"""

import json
import os
import sys
import tempfile
import time

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp import types
from mcp.shared.exceptions import MCPError

SCENARIO, BB7, PROJECT = sys.argv[1], sys.argv[2], sys.argv[3]
EXTRA = sys.argv[4] if len(sys.argv) > 4 else ""


def params(extra=()):
    return StdioServerParameters(
        command=BB7, args=["mcp", "--project", PROJECT, *extra], env=dict(os.environ)
    )


def is_error(r):
    v = getattr(r, "is_error", None)
    if v is None:
        v = getattr(r, "isError", None)
    return bool(v)


def text(r):
    return "".join(getattr(c, "text", "") for c in r.content)


class Client:
    """One `bb7 mcp` process and an initialized session; its stderr is kept in a file."""

    def __init__(self, name="pytest-mcp", extra=()):
        self.name = name
        self.extra = extra
        self.errlog = tempfile.TemporaryFile(mode="w+")

    async def __aenter__(self):
        self._t = stdio_client(params(self.extra), errlog=self.errlog)
        read, write = await self._t.__aenter__()
        self._s = ClientSession(
            read, write, client_info=types.Implementation(name=self.name, version="1.0")
        )
        self.s = await self._s.__aenter__()
        self.init = await self.s.initialize()
        return self

    async def __aexit__(self, *exc):
        await self._s.__aexit__(*exc)
        await self._t.__aexit__(*exc)
        self.errlog.seek(0)
        self.stderr = self.errlog.read()
        return False

    async def call(self, name, args):
        return await self.s.call_tool(name, args)


async def ok(c, name, args):
    r = await c.call(name, args)
    assert not is_error(r), f"{name} {args} failed: {text(r)}"
    return text(r)


async def err(c, name, args):
    r = await c.call(name, args)
    assert is_error(r), f"{name} {args} should have failed, got: {text(r)}"
    return text(r)


async def basics():
    async with Client() as c:
        caps = c.init.capabilities.tools
        listed = await c.s.list_tools()
        names = [t.name for t in listed.tools]
        read = await ok(c, "read_file", {"file_path": "src/a.txt"})
        assert read.startswith("path=src/a.txt file_id="), read
        assert "alpha beta" in read, read
        search = json.loads(await ok(c, "search_project", {"query": "alpha"}))
        found = [r["file_path"] for r in search["results"]]
        assert "src/a.txt" in found, search
        files = json.loads(await ok(c, "list_files", {}))
        listed_files = [f if isinstance(f, str) else f.get("path", f.get("file_path")) for f in files["files"]]
        # The deny list and .git/ are hidden from every built-in.
        for hidden in [".env", ".git/config", ".bb7/"]:
            assert not any(p.startswith(hidden) for p in listed_files), (hidden, listed_files)
        secret = json.loads(await ok(c, "search_project", {"query": "hunter2"}))
        assert secret["results"] == [], secret
        refusals = {}
        for path in [".env", ".git/config", "../outside.txt", "/etc/passwd", "link.txt", "linkdir/b.txt"]:
            refusals[path] = await err(c, "read_file", {"file_path": path})
        wc = None
        if "wordcount__count_words" in names:
            wc = json.loads(await ok(c, "wordcount__count_words", {"path": "."}))
    print(json.dumps({
        "tools": names,
        "list_changed": getattr(caps, "list_changed", getattr(caps, "listChanged", None)),
        "refusals": refusals,
        "wordcount": wc,
        "files": listed_files,
        "stderr": c.stderr,
    }))


async def time_limit():
    async with Client() as c:
        t0 = time.monotonic()
        over = await err(c, "bomb__hostile", {"attack": "loop"})
        # The server keeps serving.
        after = await ok(c, "bomb__hostile", {"attack": "ok"})
        read = await ok(c, "read_file", {"file_path": "src/a.txt"})
    print(json.dumps({"over": over, "after": after, "read_ok": "alpha" in read,
                      "secs": time.monotonic() - t0, "stderr": c.stderr}))


async def cancel():
    async with Client() as c:
        cancelled = False
        with anyio.move_on_after(0.5) as scope:
            await c.call("bomb__hostile", {"attack": "loop"})
        cancelled = scope.cancelled_caught
        t0 = time.monotonic()
        read = await ok(c, "read_file", {"file_path": "src/a.txt"})
        next_secs = time.monotonic() - t0
    print(json.dumps({"cancelled": cancelled, "read_ok": "alpha" in read,
                      "next_secs": next_secs, "stderr": c.stderr}))


async def sequential():
    n = int(EXTRA or "100")
    async with Client() as c:
        for i in range(n):
            path = f"many/f{i % 10}.txt"
            r = await ok(c, "read_file", {"file_path": path})
            assert r.startswith(f"path={path} "), (i, r)
            assert f"content of file {i % 10}\n" in r, (i, r)
    print(json.dumps({"calls": n, "stderr": c.stderr}))


async def concurrent():
    clients = int(EXTRA or "8")
    per = 10
    results = {}
    stderrs = []

    async def one(k):
        async with Client(name=f"client-{k}") as c:
            async def call(i):
                j = (k + i) % 10
                r = await ok(c, "read_file", {"file_path": f"many/f{j}.txt"})
                assert r.startswith(f"path=many/f{j}.txt "), (k, i, r)
                assert f"content of file {j}\n" in r, (k, i, r)
                results[(k, i)] = True
            async with anyio.create_task_group() as tg:
                for i in range(per):
                    tg.start_soon(call, i)
        stderrs.append(c.stderr)

    async with anyio.create_task_group() as tg:
        for k in range(clients):
            tg.start_soon(one, k)
    assert len(results) == clients * per, len(results)
    print(json.dumps({"calls": len(results), "stderr": "".join(stderrs)}))


async def bad():
    """Protocol errors as the SDK sees them: an unknown tool and bad arguments are invalid-params."""
    async with Client() as c:
        codes = {}
        for name, args in [("no_such_tool", {}), ("read_file", {}), ("read_file", {"file_path": 7})]:
            try:
                r = await c.call(name, args)
                codes[name + json.dumps(args)] = ("result", is_error(r), text(r))
            except MCPError as e:
                codes[name + json.dumps(args)] = ("error", e.error.code, e.error.message)
        read = await ok(c, "read_file", {"file_path": "src/a.txt"})
    print(json.dumps({"codes": codes, "read_ok": "alpha" in read, "stderr": c.stderr}))


async def bench():
    """Median round trips (milliseconds) of read_file of big.txt (64 KiB) and of search_project for
    NEEDLE_TOKEN: the calls host/benches/agent.rs times through agent mode on the same tree."""
    n = int(EXTRA or "200")

    async def median(name, args, runs):
        await ok(c, name, args)
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            await ok(c, name, args)
            times.append((time.perf_counter() - t0) * 1000)
        times.sort()
        return times[len(times) // 2]

    async with Client() as c:
        read_ms = await median("read_file", {"file_path": "big.txt"}, n)
        search_ms = await median("search_project", {"query": "NEEDLE_TOKEN"}, 10)
    print(json.dumps({"read_ms": read_ms, "search_ms": search_ms, "stderr": c.stderr}))


def file_id_of(read):
    """The file_id on the first line of a read_file result."""
    first = read.split("\n", 1)[0]
    return [w.split("=", 1)[1] for w in first.split() if w.startswith("file_id=")][0]


async def stage():
    """`--stage`: an edit_file from the client after read_file, then a second edit of the staged
    version (read_file now returns the chat's output), a write_file of a new file, and an edit of a
    deny-listed file refused. The project itself is never written (the Rust test checks)."""
    async with Client(extra=["--stage"]) as c:
        listed = await c.s.list_tools()
        names = [t.name for t in listed.tools]
        read = await ok(c, "read_file", {"file_path": "src/a.txt"})
        fid = file_id_of(read)
        edit = await ok(c, "edit_file", {"edits": [
            {"path": "src/a.txt", "file_id": fid, "old_string": "beta", "new_string": "BETA"}]})
        again = await ok(c, "read_file", {"file_path": "src/a.txt"})
        assert "alpha BETA" in again, again
        edit2 = await ok(c, "edit_file", {"edits": [
            {"path": "src/a.txt", "file_id": file_id_of(again),
             "old_string": "gamma", "new_string": "GAMMA"}]})
        wrote = await ok(c, "write_file", {"path": "src/new.txt", "content": "brand new\n"})
        stale = await err(c, "edit_file", {"edits": [
            {"path": "src/a.txt", "file_id": fid, "old_string": "alpha", "new_string": "x"}]})
        secret = await err(c, "edit_file", {"edits": [
            {"path": ".env", "file_id": "x", "old_string": "SECRET", "new_string": "x"}]})
    print(json.dumps({"tools": names, "edit": edit, "edit2": edit2, "wrote": wrote,
                      "stale": stale, "secret": secret, "stderr": c.stderr}))


async def stage_locked():
    """`--stage` while a Neovim host has the client's chat open: the edit is refused, with why."""
    async with Client(extra=["--stage"]) as c:
        refused = await err(c, "write_file", {"path": "src/other.txt", "content": "x\n"})
        read = await ok(c, "read_file", {"file_path": "src/a.txt"})
    print(json.dumps({"refused": refused, "read_ok": "alpha" in read, "stderr": c.stderr}))


SCENARIOS = {f.__name__: f for f in [basics, time_limit, cancel, sequential, concurrent, bad, bench, stage,
                                     stage_locked]}

if __name__ == "__main__":
    anyio.run(SCENARIOS[SCENARIO])
