"""End to end: a hostile agent in a real sandbox cannot bend the model gateway (issue 32, rows 1 and 2).

A ``command`` preset runs a small agent program inside bubblewrap (for one
task of three; the others make one plain call).  The court session that runs
it is a pytest process of its own under an address-space limit
(``RLIMIT_AS``, soft, 1500 MB; its sandboxes are not limited) and a watchdog
that ends it once its resident memory passes 600 MB, so a regression fails in
seconds instead of eating the machine; it reports its peak resident memory
(``VmHWM``), which must stay under 600 MB.  The agent, from inside the
sandbox, through the run's socket:

- holds 256 idle connections without a token, then trickles a request head
  a byte every 1.5 s: its real model call still gets through at once, and the
  trickle is cut at the header deadline;
- sends 4 token-count calls of almost 16 MiB each (JSON that takes ~380 MB
  each once parsed), 3 at a time, one body over the cap (413, a readable
  JSON error), 3 model calls of 4 MiB that are not JSON objects, 6 of 4 MiB
  with a wrong token, model-list calls until their limit, and 2 more 16 MiB
  token counts past it;
- reports what it got in a model call (the provider stand-in here keeps it);
- makes model calls up to the run's limit, two of them of hostile 4 MiB JSON,
  then 12 more of 4 MiB, each refused.

The provider stand-in reads and drops big bodies, so the test process stays small.
Skipped without bubblewrap (failed instead in CI).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_skillcourt.gateway import DEFAULT_MAX_AUX_CALLS, HEADER_TIMEOUT, MAX_REQUEST_BYTES
from tests.support.builders import junit_properties, task, write_skill, write_suite
from tests.support.listeners import serving_api
from tests.support.sandbox_image import require_bwrap

REAL_KEY = "sk-real-provider-key-attack-0123456789"
#: The court session's address space (soft limit); the agent's attack would take several GB unbounded.
ADDRESS_SPACE_MB = 1500
#: The court session's peak resident memory, whatever the agent sends.
PEAK_MB = 600

AGENT = r'''#!/usr/bin/env python3
"""attack-agent --config FILE PROMPT: attacks the gateway, reports what it got, exits 0."""
import http.client, json, os, select, socket, sys, threading, time
args = sys.argv[1:]
config = dict(line.split(" = ", 1) for line in open(args[args.index("--config") + 1]).read().splitlines())
base = config["url"]                      # http://127.0.0.1:PORT/v1
host, port = base.split("//", 1)[1].split("/", 1)[0].split(":")
port = int(port)
token = os.environ["ATTACK_KEY"]
def call(method, path, body=b"", auth=token, timeout=60):
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        headers = {"Content-Type": "application/json", "Content-Length": str(len(body))}
        if auth:
            headers["Authorization"] = "Bearer " + auth
        conn.request(method, path, body=body if method == "POST" else None, headers=headers)
        answer = conn.getresponse()
        return answer.status, answer.read(2000).decode("utf-8", "replace")
    except Exception as err:
        return 0, type(err).__name__ + ": " + str(err)[:200]
    finally:
        conn.close()

report = {}
if "ATTACK" not in args[-1]:  # the suite's other tasks: one plain call
    print(json.dumps({"plain": call("POST", "/v1/chat/completions", json.dumps(
        {"model": config["model"], "messages": [{"role": "user", "content": "hi"}]}).encode())[0]}))
    sys.exit(0)

def chat(text, messages=None):
    body = json.dumps({"model": config["model"], "messages": messages or [{"role": "user", "content": text}]})
    return call("POST", "/v1/chat/completions", body.encode())

def many(n, fn, threads=3):
    out = [None] * n
    def work(i):
        out[i] = fn()[0]
    pending = list(range(n))
    while pending:
        batch, pending = pending[:threads], pending[threads:]
        ts = [threading.Thread(target=work, args=(i,)) for i in batch]
        [t.start() for t in ts]
        [t.join() for t in ts]
    return out

# 1. 256 idle connections without a token, then a trickled head.
idle = [socket.create_connection((host, port)) for _ in range(256)]
time.sleep(0.5)
trickle = {}
def trickle_head():
    sock = socket.create_connection((host, port))
    started = time.monotonic()
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + token.encode() + b"\r\n"
    for byte in head:
        try:
            sock.sendall(bytes([byte]))
            ready, _, _ = select.select([sock], [], [], 1.5)
            if ready and sock.recv(4096) == b"":
                break
        except OSError:
            break
        if time.monotonic() - started > 25:
            break
    trickle["closed_after_s"] = round(time.monotonic() - started, 2)
    sock.close()
trickler = threading.Thread(target=trickle_head)
trickler.start()
time.sleep(0.3)
started = time.monotonic()
status, text = chat("hello under the flood")
report["under_flood"] = [status, round(time.monotonic() - started, 2)]

# 2. Token counts of almost 16 MiB each, 3 at a time.
cap = int(config["cap"])
def hostile(size, head=b'{"model": "m", "messages": [', tail=b"[]]}"):
    return head + b"[]," * ((size - len(head) - len(tail)) // 3) + tail
big = hostile(cap - 64)
report["count_tokens"] = many(4, lambda: call("POST", "/v1/messages/count_tokens", big))
del big
with socket.create_connection((host, port), timeout=30) as sock:  # the claim alone: answered unread
    sock.sendall(("POST /v1/messages/count_tokens HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + token
                  + "\r\nContent-Type: application/json\r\nContent-Length: " + str(cap + 1)
                  + "\r\n\r\n").encode())
    answer = b""
    while True:
        piece = sock.recv(65536)
        if not piece:
            break
        answer += piece
head, _, text = answer.partition(b"\r\n\r\n")
try:
    report["oversized"] = [int(head.split()[1]), json.loads(text)["error"]["type"]]
except (ValueError, IndexError):
    report["oversized"] = [0, answer[:200].decode("utf-8", "replace")]

# 3. Model calls that are not JSON objects, and calls with a wrong token: 4 MiB each.
flat = b"[" + b"[]," * (4 * 1024 * 1024 // 3) + b"[]]"
report["not_objects"] = many(3, lambda: call("POST", "/v1/chat/completions", flat))
report["bad_token"] = many(6, lambda: call("POST", "/v1/chat/completions", flat, auth="sk-court-wrong"))

# 4. Model listings up to their limit, then 16 MiB token counts past it.
listings = []
keep_alive = http.client.HTTPConnection(host, port, timeout=60)
for _ in range(1000):
    try:
        keep_alive.request("GET", "/v1/models", headers={"Authorization": "Bearer " + token})
        answer = keep_alive.getresponse()
        answer.read()
        listings.append(answer.status)
    except Exception as err:
        listings.append(type(err).__name__)
    if listings[-1] != 200:
        break
keep_alive.close()
report["listings"] = [listings.count(200), listings[-1]]
big = hostile(cap - 64)
report["past_limit"] = many(2, lambda: call("POST", "/v1/messages/count_tokens", big))
del big

trickler.join(30)
report["trickle_closed_after_s"] = trickle.get("closed_after_s")
for sock in idle:
    sock.close()

# 5. The report, then model calls up to the run's limit and past it.
status, _ = chat("REPORT " + json.dumps(report))
calls, statuses = 2, []
heavy = hostile(4 * 1024 * 1024)
for _ in range(2):
    statuses.append(call("POST", "/v1/chat/completions", heavy)[0])
while calls < 200:
    statuses.append(chat("filler")[0])
    if statuses[-1] != 200:
        break
statuses += many(12, lambda: call("POST", "/v1/chat/completions", heavy))
print(json.dumps({"after_report": statuses}))
'''

PRESET = {
    "name": "attack-agent",
    "binary": {"find": ["$ATTACK_AGENT"], "install": "set ATTACK_AGENT"},
    "skills": {"dir": "/root/.attack/skills"},
    "files": {"/root/.attack/config": "url = {openai_base_url}\nmodel = {model}\ncap = " + str(MAX_REQUEST_BYTES)
                                      + "\n"},
    "env": {"ATTACK_KEY": "{token}"},
    "run": {"args": ["--config", "/root/.attack/config"], "prompt": "arg"},
    "answer": {"from": "stdout"},
}

#: Runs the court session under the address-space limit; its descendants (the sandboxes) get none.
CHILD = r'''
import json, os, resource, subprocess, sys, threading, time
limit, watch_mb = int(sys.argv[1]) << 20, int(sys.argv[2])
threading.stack_size(1 << 20)  # threads' stacks count toward the address space
resource.setrlimit(resource.RLIMIT_AS, (limit, resource.RLIM_INFINITY))
out = os.fdopen(os.dup(1), "w")  # pytest captures fd 1 during the session

def status():
    with open("/proc/self/status") as fh:
        return {line.split(":")[0]: int(line.split()[1]) // 1024 for line in fh
                if line.startswith(("VmHWM", "VmPeak", "VmRSS"))}

def watch():  # a regression ends the session at once, not after its runs' time-outs
    while True:
        now = status()
        if now["VmRSS"] > watch_mb:
            print("SKILL-COURT-PEAK " + json.dumps({**now, "aborted": True}), file=out, flush=True)
            os._exit(3)
        time.sleep(0.05)
threading.Thread(target=watch, daemon=True).start()

def unlimited():
    resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))

popen_init = subprocess.Popen.__init__
def init(self, *args, **kwargs):
    if kwargs.get("preexec_fn") is None:
        kwargs["preexec_fn"] = unlimited
    popen_init(self, *args, **kwargs)
subprocess.Popen.__init__ = init

import pytest
code = pytest.main(sys.argv[3:])
print("SKILL-COURT-PEAK " + json.dumps(status()), file=out, flush=True)
sys.exit(int(code))
'''


class _Provider(BaseHTTPRequestHandler):
    """The provider's stand-in: answers every call, keeps the agent's reports, drops big bodies unread."""

    protocol_version = "HTTP/1.1"
    wbufsize = 1 << 16  # head and body in one write: no Nagle wait on keep-alive connections
    reports: list[dict[str, Any]] = []
    big_bodies = 0

    def log_message(self, *args: Any) -> None:
        return None

    def _send(self, body: dict[str, Any]) -> None:
        raw = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def do_GET(self) -> None:
        self._send({"object": "list", "data": [{"id": "test-model", "object": "model", "owned_by": "test"}]})

    def do_POST(self) -> None:
        left = int(self.headers.get("Content-Length") or 0)
        kept = b""
        while left > 0:
            piece = self.rfile.read(min(left, 1 << 20))
            if not piece:
                break
            left -= len(piece)
            if len(kept) < 1 << 20:
                kept += piece
        if len(kept) >= 1 << 20:
            type(self).big_bodies += 1
        if self.path.endswith("/count_tokens"):
            self._send({"input_tokens": 5})
            return
        if len(kept) < 1 << 20:
            text = json.dumps(json.loads(kept).get("messages"))
            if "REPORT " in text:
                message = json.loads(kept)["messages"][-1]["content"]
                type(self).reports.append(json.loads(message.split("REPORT ", 1)[1]))
        self._send({"id": "c", "object": "chat.completion", "created": 0, "model": "test-model",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
                                 "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}})


@pytest.fixture
def provider() -> Iterator[str]:
    _Provider.reports, _Provider.big_bodies = [], 0
    with serving_api(_Provider) as url:
        yield url


def test_a_hostile_agent_in_a_sandbox_cannot_bend_the_gateway(provider: str, tmp_path: Path,
                                                                request: pytest.FixtureRequest) -> None:
    require_bwrap()
    home = Path(tempfile.mkdtemp(prefix="skill-court-attack-agent-"))  # reachable by the sandbox's uid
    request.addfinalizer(lambda: shutil.rmtree(home, ignore_errors=True))
    home.chmod(0o755)
    agent = home / "attack-agent"
    agent.write_text(AGENT)
    agent.chmod(0o755)
    write_skill(tmp_path / "skills", "calm-skill", "Stay calm")
    write_suite(tmp_path, "calm-skill", [task("t1", "ATTACK the gateway.", "true"), task("t2", "Say ok.", "true"),
                                         task("t3", "Say ok too.", "true")])
    (tmp_path / "attack.yaml").write_text(yaml.safe_dump(PRESET))
    (tmp_path / "pytest.ini").write_text(
        f"[pytest]\nskill_court_skills = skills\nskill_court_models = custom/test-model\n"
        f"skill_court_base_url = {provider}\nskill_court_agent_preset = attack.yaml\nskill_court_sandbox = local\n"
        f"skill_court_timeout = 90\nskill_court_allow_unpriced = true\nskill_court_pids = 4096\n"
        f"skill_court_memory = 16384\n")
    env = {**os.environ, "SKILL_COURT_API_KEY": REAL_KEY, "ATTACK_AGENT": str(agent), "MALLOC_ARENA_MAX": "2"}
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("PYTEST_ADDOPTS", None)
    proc = subprocess.run([sys.executable, "-c", CHILD, str(ADDRESS_SPACE_MB), str(PEAK_MB), "--skill-court",
                           "--skill-court-fresh", "-p", "no:cacheprovider", "--junitxml=junit.xml", "-q", "-rs"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    output = proc.stdout[-4000:] + proc.stderr[-3000:]
    peak_line = [line for line in proc.stdout.splitlines() if line.startswith("SKILL-COURT-PEAK ")]
    assert peak_line, output
    peak = json.loads(peak_line[-1].split(" ", 1)[1])
    print("court session peak:", peak, "MB")
    assert not peak.get("aborted") and peak["VmHWM"] < PEAK_MB, (peak, output)

    # Both runs (with and without the skill) made the whole attack and reported it.
    assert len(_Provider.reports) == 2, output
    for report in _Provider.reports:
        status, seconds = report["under_flood"]
        assert status == 200 and seconds < 5, report  # 256 idle tokenless connections locked nothing out
        assert HEADER_TIMEOUT - 1 < report["trickle_closed_after_s"] < HEADER_TIMEOUT + 3, report
        assert report["count_tokens"] == [200] * 4, report
        assert report["oversized"] == [413, "request_too_large"], report
        assert report["not_objects"] == [400] * 3, report
        # A wrong token is answered 401 and the connection closed unread (tokenless work stays
        # cheap): a client still sending its 4 MiB sees the reset first.
        assert len(report["bad_token"]) == 6 and set(report["bad_token"]) <= {401, 0}, report
        assert report["listings"] == [DEFAULT_MAX_AUX_CALLS - 4, 400] and report["past_limit"] == [400] * 2, report
    props = junit_properties(tmp_path / "junit.xml")
    runs = {k: v for k, v in props.items() if "verdict" not in k}
    attacks = {k: v for k, v in runs.items() if "::t1[" in k}
    assert len(runs) == 6 and len(attacks) == 2, props
    for run in attacks.values():  # stopped by the model-call limit, every one of its 60 calls billed
        assert run["status"] == "incomplete" and (run["input_tokens"], run["output_tokens"]) == ("420", "180"), run
    assert _Provider.big_bodies == 2 * (4 + 2), _Provider.big_bodies  # only the admitted ones went upstream
