"""Nothing read out of a sandbox can fill host memory (issue 17, finding 1).

Every path that brings sandbox output into the host caps it while reading:
``read_file`` (``head -c`` in the sandbox, never the whole file), the
stdout/stderr of ``exec`` (text and binary), the agent's ``terminal`` and
``read_file`` tools, and the file capture's archive.  Each case runs in a
child process under ``RLIMIT_AS`` (600 MB of address space), so a regression
dies there with a ``MemoryError`` in a second or two instead of eating the
machine, and the child reports the peak resident memory of each case
(``VmHWM``, reset between cases through ``/proc/self/clear_refs``).

The model gateway is held to the same (issue 32, row 1): an agent's hostile
model calls, sent 4 at a time to a gateway in a child under the same limit,
are refused unparsed when their JSON would take hundreds of MB, parsed one
at a time otherwise, and kept only up to the run's record cap.  (The whole
attack, from a sandbox, is ``tests/e2e/test_gateway_attacks.py``.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support import REPO
from tests.support.sandbox_image import ensure_test_image, require_bwrap, require_docker


#: Address space the child may use: far below what reading /dev/zero or a
#: 300 MB file whole would take, far above what the capped paths need.
ADDRESS_SPACE_MB = 600
#: Peak resident memory a capped case may add on top of the child's own.
PEAK_MB = 150

CHILD = r'''
import json, resource, sys, time
from pathlib import Path
from pytest_skillcourt.agent.tools import Toolbox
from pytest_skillcourt.sandbox import SandboxSpec, open_sandbox
from pytest_skillcourt.sandbox import capture
from pytest_skillcourt.core.skills import Library

backend, image, limit_mb = sys.argv[1], sys.argv[2] or None, int(sys.argv[3])

def hwm_mb():
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM"):
                return int(line.split()[1]) // 1024
    return -1

def reset_peak():
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")

results = {}
with open_sandbox(backend, SandboxSpec(image=image, name_hint="hostile-memory")) as sb:
    sb.exec("ln -s /dev/zero /workspace/zero-link; "
            "dd if=/dev/zero of=/workspace/sparse bs=1 count=1 seek=314572799 2>/dev/null; "
            "for i in 1 2 3 4 5 6 7 8 9 10; do head -c 60000 /dev/zero | tr '\\0' x > /workspace/f$i.txt; done")
    tools = Toolbox(sandbox=sb, library=Library(root=Path("/nonexistent"), skills=()),
                    visible=(), hidden=frozenset(), skill_under_test="s",
                    deadline=time.monotonic() + 3600)
    since = time.time() - 3600
    base = hwm_mb()
    resource.setrlimit(resource.RLIMIT_AS, (limit_mb << 20, limit_mb << 20))

    def case(name, fn):
        reset_peak()
        started = time.monotonic()
        try:
            value = fn()
        except BaseException as exc:
            value = {"raised": type(exc).__name__, "message": str(exc)[:300]}
        results[name] = {"value": value, "peak_mb": hwm_mb(), "seconds": round(time.monotonic() - started, 2)}

    case("read /dev/zero", lambda: len(sb.read_file("/dev/zero")))
    case("read link to /dev/zero", lambda: len(sb.read_file("/workspace/zero-link")))
    case("read 300 MB sparse file", lambda: len(sb.read_file("/workspace/sparse")))
    case("read 300 MB sparse file, limit 1000", lambda: len(sb.read_file("/workspace/sparse", limit=1000)))
    case("tool read_file /dev/zero", lambda: json.loads(tools.call("read_file", json.dumps({"path": "/dev/zero"}))))
    case("tool read_file sparse", lambda: {k: (len(v) if k == "content" else v) for k, v in
         json.loads(tools.call("read_file", json.dumps({"path": "/workspace/sparse"}))).items()})
    case("tool terminal cat /dev/zero", lambda: len(json.loads(tools.call(
        "terminal", json.dumps({"command": "cat /dev/zero", "timeout": 3})))["output"]))
    case("exec cat /dev/zero", lambda: sb.exec("cat /dev/zero", timeout=3).stdout[-80:])
    case("exec yes", lambda: sb.exec("yes", timeout=3).stdout[-80:])
    case("exec yes on stderr", lambda: sb.exec("yes >&2", timeout=3).stderr[-80:])
    def binary():
        r = sb.exec("cat /dev/zero", timeout=3, binary=True, binary_limit=1 << 20)
        return [len(r.stdout_bytes), r.stdout_bytes_dropped > 0]
    case("exec binary cat /dev/zero", binary)
    def capture_big():
        got = capture.capture_changed_files(sb, since)
        return {p: len(t) for p, t in got.files if "sparse" in p} or list(got.binary)
    case("capture a 300 MB sparse file", capture_big)
    def capture_cap():
        capture.MAX_ARCHIVE_BYTES = 100_000  # ten 60 KB files do not fit
        try:
            capture.capture_changed_files(sb, since)
        finally:
            capture.MAX_ARCHIVE_BYTES = 8 * 1024 * 1024
    case("capture archive past its cap", capture_cap)
print(json.dumps({"base_mb": base, "results": results}))
'''


def _run_child(backend: str) -> dict:
    image = ensure_test_image() if backend == "docker" else ""
    proc = subprocess.run([sys.executable, "-c", CHILD, backend, image, str(ADDRESS_SPACE_MB)],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module", params=[pytest.param("local", id="local"),
                                        pytest.param("docker", id="docker", marks=pytest.mark.docker)])
def report(request: pytest.FixtureRequest) -> dict:
    if request.param == "docker":
        require_docker()
    else:
        require_bwrap()
    return _run_child(request.param)


def _value(report: dict, case: str) -> object:
    result = report["results"][case]
    assert result["peak_mb"] < report["base_mb"] + PEAK_MB, (case, result, report["base_mb"])
    return result["value"]


def _refused(value: object) -> bool:
    return isinstance(value, dict) and value.get("raised") == "PathRefused"


def test_read_file_of_dev_zero_is_refused_without_reading_it(report: dict) -> None:
    value = _value(report, "read /dev/zero")
    assert _refused(value) and "not a regular file" in value["message"], value  # type: ignore[index]
    value = _value(report, "read link to /dev/zero")
    assert _refused(value) and "not a regular file" in value["message"], value  # type: ignore[index]
    assert report["results"]["read /dev/zero"]["seconds"] < 10


def test_read_file_of_a_huge_file_reads_only_its_limit(report: dict) -> None:
    from pytest_skillcourt.sandbox.base import DEFAULT_BINARY_LIMIT

    assert _value(report, "read 300 MB sparse file") == DEFAULT_BINARY_LIMIT
    assert _value(report, "read 300 MB sparse file, limit 1000") == 1000


def test_the_read_file_tool_caps_and_says_so(report: dict) -> None:
    from pytest_skillcourt.agent.tools import READ_LIMIT

    zero = _value(report, "tool read_file /dev/zero")
    assert isinstance(zero, dict) and "not a regular file" in zero["error"], zero
    sparse = _value(report, "tool read_file sparse")
    # The sparse file is all NUL bytes: reported as binary, from its first bytes only.
    assert isinstance(sparse, dict) and sparse == {
        "error": f"/workspace/sparse is a binary file (more than {READ_LIMIT} bytes)"}, sparse


def test_endless_command_output_is_cut_with_the_marker(report: dict) -> None:
    from pytest_skillcourt.agent.tools import TOOL_OUTPUT_LIMIT

    for case in ("exec cat /dev/zero", "exec yes", "exec yes on stderr"):
        tail = _value(report, case)
        assert isinstance(tail, str) and "more bytes ...]" in tail and "output cut by skill-court" in tail, (case, tail)
    assert _value(report, "tool terminal cat /dev/zero") <= TOOL_OUTPUT_LIMIT + 200  # type: ignore[operator]
    assert _value(report, "exec binary cat /dev/zero") == [1 << 20, True]


def test_file_capture_reads_a_bounded_archive(report: dict) -> None:
    from pytest_skillcourt.sandbox.capture import MAX_FILE_BYTES

    assert _value(report, "capture a 300 MB sparse file") == ["/workspace/sparse"]  # binary: name only
    failed = _value(report, "capture archive past its cap")
    assert isinstance(failed, dict) and failed.get("raised") == "CaptureFailed", failed
    assert "grew past 100000 bytes" in failed["message"]
    assert MAX_FILE_BYTES < 100_000


# -- the model gateway ------------------------------------------------------------------------------

GATEWAY_CHILD = r"""
import http.client, json, resource, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pytest_skillcourt.models.client import ModelSpec
from pytest_skillcourt.gateway import MAX_REQUEST_BYTES, Gateway, RunLimits

limit_mb = int(sys.argv[1])
threading.stack_size(1 << 20)

def hwm_mb():
    with open("/proc/self/status") as fh:
        return next(int(l.split()[1]) // 1024 for l in fh if l.startswith("VmHWM"))

class Provider(BaseHTTPRequestHandler):  # reads and drops every body
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        "Quiet: the test reads this process's memory, not its log."
    def do_POST(self):
        left = int(self.headers.get("Content-Length") or 0)
        while left > 0:
            left -= len(self.rfile.read(min(left, 1 << 20)) or b"x" * left)
        raw = json.dumps({"id": "c", "object": "chat.completion", "created": 0, "model": "m",
                          "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
                                       "finish_reason": "stop"}],
                          "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

upstream = ThreadingHTTPServer(("127.0.0.1", 0), Provider)
threading.Thread(target=upstream.serve_forever, daemon=True).start()
spec = ModelSpec(label="custom/m", provider="custom", name="m",
                 base_url=f"http://127.0.0.1:{upstream.server_address[1]}/v1", api_key="sk-hostile-memory-key")
gateway = Gateway().start()
grant = gateway.open_run("r1", spec, RunLimits(max_calls=1000))
port = int(gateway.url.rsplit(":", 1)[1])

def hostile(size):
    head, tail = b'{"model": "m", "messages": [', b"[]]}"
    return head + b"[]," * ((size - len(head) - len(tail)) // 3) + tail

def post(body):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request("POST", "/v1/chat/completions", body=body,
                     headers={"Authorization": "Bearer " + grant.token, "Content-Type": "application/json"})
        return conn.getresponse().status
    except Exception as err:
        return type(err).__name__
    finally:
        conn.close()

def four_at_a_time(body, times):
    statuses = []
    def work():
        statuses.append(post(body))
    for _ in range(times // 4):
        threads = [threading.Thread(target=work) for _ in range(4)]
        [t.start() for t in threads]
        [t.join() for t in threads]
    return statuses

base = hwm_mb()
resource.setrlimit(resource.RLIMIT_AS, (limit_mb << 20, limit_mb << 20))
out = {"base_mb": base}
out["huge"] = four_at_a_time(hostile(MAX_REQUEST_BYTES - 64), 8)  # ~380 MB each once parsed
out["heavy"] = four_at_a_time(hostile(4 * 1024 * 1024), 12)       # ~100 MB each once parsed
record = gateway.close_run("r1")
out["kept"] = sum(1 for c in record.calls if c.model_call and isinstance(c.request, dict)
                  and isinstance(c.request.get("messages"), list))
out["bodies_dropped"] = getattr(record, "bodies_dropped", None)
out["errors"] = gateway.errors
out["peak_mb"] = hwm_mb()
gateway.stop()
print(json.dumps(out))
"""

#: Address space of the gateway's child: its threads and httpx need more than the sandbox child.
GATEWAY_ADDRESS_SPACE_MB = 1000
#: What the attack may add to the child's peak resident memory: one hostile parse at a time
#: (~100 MB) and a record capped at 128 MB (estimated), with room to spare.
GATEWAY_PEAK_MB = 350


def test_hostile_model_calls_cannot_fill_the_gateway() -> None:
    env = {**os.environ, "MALLOC_ARENA_MAX": "2"}
    try:  # about 6 s; a gateway that keeps what it parses runs out of address space and stalls
        proc = subprocess.run([sys.executable, "-c", GATEWAY_CHILD, str(GATEWAY_ADDRESS_SPACE_MB)], cwd=REPO,
                              env=env, capture_output=True, text=True, timeout=90)
    except subprocess.TimeoutExpired as err:
        pytest.fail(f"the gateway's child stalled (out of address space?): {str(err.stderr)[-1500:]}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    print("gateway child:", out)
    assert out["errors"] == [], out
    assert out["huge"] == [413] * 8, out  # refused unparsed: their JSON would take ~380 MB each
    assert out["heavy"] == [200] * 12, out  # parsed one at a time, forwarded
    assert out["kept"] == 1 and out["bodies_dropped"] == 11, out  # the record's cap: one fits
    assert out["peak_mb"] < out["base_mb"] + GATEWAY_PEAK_MB, out
