"""Drives the real `bb7` host over its protocol and prints a readable transcript (scripts/demo)."""

import difflib
import json
import subprocess
import sys
import threading
import queue

BOLD, DIM, CYAN, GREEN, RED, OFF = "\033[1m", "\033[2m", "\033[36m", "\033[32m", "\033[31m", "\033[0m"
if not sys.stdout.isatty():
    BOLD = DIM = CYAN = GREEN = RED = OFF = ""

bb7, project = sys.argv[1], sys.argv[2]
proc = subprocess.Popen([bb7], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
lines = queue.Queue()
threading.Thread(target=lambda: [lines.put(l) for l in proc.stdout] + [lines.put(None)], daemon=True).start()
stderr = []
threading.Thread(target=lambda: [stderr.append(l) for l in proc.stderr], daemon=True).start()
next_id = 0


def say(title):
    print(f"\n{BOLD}== {title}{OFF}")


def request(action, show=True, **fields):
    """Sends one request; returns its final reply, printing streamed events as they come."""
    global next_id
    next_id += 1
    rid = str(next_id)
    msg = {"request_id": rid, "action": action, **fields}
    if show:
        shown = {k: (v if not isinstance(v, str) or len(v) < 60 else v[:57] + "...") for k, v in msg.items()}
        print(f"{DIM}> {json.dumps(shown)}{OFF}")
    proc.stdin.write(json.dumps(msg) + "\n")
    proc.stdin.flush()
    in_thinking = False
    while True:
        line = lines.get(timeout=120)
        if line is None:
            sys.exit(f"bb7 exited unexpectedly: {''.join(stderr)}")
        ev = json.loads(line)
        if ev.get("request_id") != rid:
            if ev.get("type") == "title_updated":
                print(f"{DIM}< title_updated: {ev['title']!r}{OFF}")
            continue
        kind = ev.get("type")
        if kind == "thinking":
            if not in_thinking:
                print(f"{DIM}[thinking] ", end="")
                in_thinking = True
            print(ev["content"], end="", flush=True)
            continue
        if in_thinking:
            print(OFF)
            in_thinking = False
        if kind == "chunk":
            print(f"{CYAN}{ev['content']}{OFF}", end="", flush=True)
            continue
        if action == "send":
            print()
        if kind == "error":
            print(f"{RED}< error: {ev['message']}{OFF}")
        elif show:
            brief = {k: v for k, v in ev.items() if k not in ("request_id",)}
            text = json.dumps(brief)
            print(f"{DIM}< {text if len(text) < 400 else text[:397] + '...'}{OFF}")
        return ev


say("Start the host and open the project")
request("version")
request("bb7_init", project_root=project)
request("init", project_root=project)
chat = request("chat_new")

say("Put src/main.rs in the chat's context (a snapshot; the model sees only what you add)")
path = "src/main.rs"
with open(f"{project}/{path}") as f:
    original = f.read()
request("context_add", path=path, content=original)
request("context_add", path="Cargo.toml", content=open(f"{project}/Cargo.toml").read(), readonly=True)
est = request("estimate_tokens", show=False)
print(f"{DIM}  context: {est['total']} tokens estimated (cl100k){OFF}")

say("Send a message; the reply streams, the model's edit runs in the wasm sandbox")
done = request("send", content="Make main.rs greet from BB-7 instead of saying hello.")
if done.get("type") == "done":
    u = done.get("usage", {})
    print(f"{GREEN}done in {done['duration']:.2f} s: output {done['output_files']}, "
          f"{u.get('prompt_tokens')} prompt + {u.get('completion_tokens')} completion tokens, ${u.get('cost', 0):.5f}{OFF}")
elif done.get("type") == "diff_error":
    print(f"{RED}the model's edits failed and were not applied: {done['errors']}{OFF}")

say("File statuses (M = the model changed a file in context)")
st = request("get_file_statuses", show=False)
for f in st["files"]:
    print(f"  {f['status'] or ' ':3} {f['path']}{'  (read-only)' if f['readonly'] else ''}")

changed = [f for f in st["files"] if f.get("has_output")]
for f in changed:
    say(f"The diff for {f['path']} (context -> output); your file is untouched so far")
    diff = difflib.unified_diff(
        (f.get("context_content") or "").splitlines(True), f["output_content"].splitlines(True),
        f"context/{f['path']}", f"output/{f['path']}")
    for line in diff:
        color = GREEN if line.startswith("+") else RED if line.startswith("-") else ""
        print(f"{color}{line.rstrip()}{OFF}")

if changed:
    say("Apply it: now the project file changes")
    request("apply_file", path=changed[0]["path"], show=True)
    with open(f"{project}/{changed[0]['path']}") as f:
        print(f.read(), end="")
    st = request("get_file_statuses", show=False)
    print(f"{DIM}  statuses now: {[(f['path'], f['status']) for f in st['files']]}{OFF}")

say("The chat as stored in .bb7/chats/<id>/chat.json")
c = request("chat_get", show=False)
for m in c["messages"]:
    text = (m.get("content") or "").strip().replace("\n", " ")
    events = [p for p in m.get("parts", []) if p.get("type") == "context_event"]
    label = ", ".join(f"{e['action']} {e['path']}" for e in events)
    role = "event" if (m["role"] == "assistant" and not text and events) else m["role"]
    print(f"  {role:9} {text[:70]}{' [' + label + ']' if label else ''}")

proc.stdin.write(json.dumps({"action": "shutdown"}) + "\n")
proc.stdin.flush()
proc.wait(timeout=10)
if stderr:
    print(f"{RED}stderr: {''.join(stderr)}{OFF}")
print(f"\n{BOLD}The host's tool-call audit log and usage log live in ~/.bb7/ (here a temporary HOME).{OFF}")
