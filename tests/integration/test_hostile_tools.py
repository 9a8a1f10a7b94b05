"""A model's ordinary mistakes are tool errors, never harness failures (issue 17, finding 4).

A scripted hostile model (``tests.support.llm_server.hostile``) makes tool
calls a careless or hostile model makes: ``write_file`` to a read-only path
or onto a directory, ``read_file`` of a directory, a FIFO, ``/dev/zero`` or
``/proc/self/mem``, arguments no process can take, a run that makes the
answer path (``/tmp/skill-court/answer``) itself, file names that are not
UTF-8.  Each comes back to the model as a tool error, and the run is
recorded with its own outcome; the last test is a property test over random
sequences of such calls: whatever the model does, the harness does not fail.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from pytest_skillcourt.models.client import resolve_model
from pytest_skillcourt.agent.context import RunContext
from pytest_skillcourt.agent.tools import Toolbox
from pytest_skillcourt.core.records import ANSWERED, HARNESS_ERROR, RunRecord
from pytest_skillcourt.engine.run import execute_run
from pytest_skillcourt.sandbox import Sandbox, SandboxSpec, open_sandbox
from pytest_skillcourt.core.skills import Library, load_library
from pytest_skillcourt.core.store import Store
from pytest_skillcourt.core.suite import Suite, Task
from tests.support.builders import settings, write_skill
from tests.support.llm_server import LLMServer, ToolCall, hostile
from tests.support.sandbox_image import ensure_test_image, require_bwrap, require_docker

SKILL = "house-format"
CHECK = 'grep -qx DONE "$SKILL_COURT_ANSWER"'

BACKENDS = [pytest.param("local", id="local"),
            pytest.param("docker", id="docker", marks=pytest.mark.docker)]


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "docker":
        require_docker()
    else:
        require_bwrap()
    return request.param


def _image(backend: str) -> str:
    return ensure_test_image() if backend == "docker" else ""


#: What the hostile tool calls find in the sandbox.
PREPARE = (
    "mkdir -p /workspace/dir/sub && echo x > /workspace/file && mkfifo /workspace/fifo && "
    "ln -s /dev/zero /workspace/zero && ln -s /workspace/fifo /workspace/fifo-link"
)


@pytest.fixture(scope="module")
def sb(backend: str) -> Iterator[Sandbox]:
    with open_sandbox(backend, SandboxSpec(image=_image(backend) or None, name_hint="hostile-tools")) as sandbox:
        assert sandbox.exec(PREPARE).ok
        yield sandbox


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Library:
    root = tmp_path_factory.mktemp("hostile-library")
    write_skill(root / "skills", SKILL, "How we format totals", body="Answer DONE.")
    return load_library(root / "skills")


def _toolbox(sb: Sandbox, library: Library) -> Toolbox:
    return Toolbox(sandbox=sb, library=library, visible=library.skills, hidden=frozenset(),
                   skill_under_test=SKILL, deadline=time.monotonic() + 600)


#: (tool, arguments, what the error says); None: any answer, as long as it is one.
TOOL_ERRORS: list[tuple[str, Any, str | None]] = [
    ("read_file", {"path": "/workspace/dir"}, "is a directory"),
    ("read_file", {"path": "."}, "is a directory"),
    ("read_file", {"path": "/workspace/fifo"}, "not a regular file"),
    ("read_file", {"path": "/workspace/fifo-link"}, "not a regular file"),
    ("read_file", {"path": "/dev/zero"}, "not a regular file"),
    ("read_file", {"path": "/workspace/zero"}, "not a regular file"),
    ("read_file", {"path": "/dev/stdin"}, "not a regular file"),
    ("read_file", {"path": "/proc/self/mem"}, "cannot be read"),
    ("read_file", {"path": "/workspace/file/child"}, "no such file"),
    ("read_file", {"path": "a\x00b"}, "NUL"),
    ("read_file", {"path": "x" * 10_000}, "at most 4096"),
    ("read_file", {"path": "/workspace/\udcff"}, None),
    ("write_file", {"path": "/workspace/file/child", "content": "x"}, "refused"),
    ("write_file", {"path": "/workspace/dir", "content": "x"}, "is a directory"),
    ("write_file", {"path": "/workspace", "content": "x"}, "is a directory"),
    ("write_file", {"path": "/workspace/\udcff-name.txt", "content": "x"}, None),
    ("write_file", {"path": "/workspace/\ud800", "content": "x"}, None),
    ("write_file", {"path": "ok.txt", "content": "lone \udcff surrogate"}, None),
    ("write_file", {"path": "a\x00b", "content": "x"}, "NUL"),
    ("terminal", {"command": "echo a\x00b"}, "NUL"),
    ("terminal", {"command": "echo " + "x" * 200_000}, "at most"),
    ("terminal", {"command": "true", "timeout": "soon"}, None),
    ("terminal", {"command": ["ls"]}, "must be a string"),
    ("skill_view", {"name": "x" * 5_000}, "File name too long: '/root/.skills/xxx"),  # Hermes' text
    ("skill_view", {"name": SKILL, "file_path": "../../../etc/passwd"}, "Path traversal ('..') is not allowed"),
    ("skill_view", {"name": ["a"]}, "Skill name must be a string"),
    ("skills_list", {"category": {"a": 1}}, None),
    ("no_such_tool", {}, "unknown tool"),
    ("read_file", '{"path": ', "invalid arguments"),
    ("read_file", "[1, 2]", "must be a JSON object"),
]

# A path the local backend cannot write (its system is read-only); Docker's
# container filesystem is writable everywhere, so there it simply works.
LOCAL_ONLY: list[tuple[str, Any, str | None]] = [
    ("write_file", {"path": "/usr/skill-court-x", "content": "x"}, "refused"),
    ("write_file", {"path": "/etc/skill-court-x", "content": "x"}, "refused"),
    ("write_file", {"path": "/proc/x", "content": "x"}, "refused"),
]


@pytest.mark.parametrize("tool,arguments,says", TOOL_ERRORS + LOCAL_ONLY,
                         ids=[f"{t}-{i}" for i, (t, _, _) in enumerate(TOOL_ERRORS + LOCAL_ONLY)])
def test_a_hostile_tool_call_is_a_tool_error(sb: Sandbox, library: Library, tool: str, arguments: Any,
                                             says: str | None) -> None:
    if (tool, arguments, says) in LOCAL_ONLY and sb.backend != "local":
        pytest.skip("the docker container's filesystem is writable everywhere")
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    started = time.monotonic()
    out = _toolbox(sb, library).call(tool, raw)  # never raises
    assert time.monotonic() - started < 15, "a FIFO or device must not stall the tool"
    out.encode("utf-8")  # valid text, storable and sendable
    answer = json.loads(out)
    if says is not None:
        assert says in str(answer.get("error", "")), answer
    assert sb.exec("echo alive").stdout == "alive\n"  # the sandbox is fine afterwards


def test_write_file_never_replaces_a_directory(sb: Sandbox, library: Library) -> None:
    sb.exec("mkdir -p /workspace/keep && echo precious > /workspace/keep/data")
    out = json.loads(_toolbox(sb, library).call("write_file", json.dumps({"path": "keep", "content": "x"})))
    assert "is a directory" in out["error"]
    assert sb.read_file("/workspace/keep/data") == b"precious\n"


# -- whole runs ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[LLMServer]:  # one for the module (the conftest one is per test)
    with LLMServer() as srv:
        yield srv


def _context(root: Path, backend: str, base_url: str, *, check: str | None, timeout: float = 60) -> RunContext:
    if not (root / "skills" / SKILL).exists():
        write_skill(root / "skills", SKILL, "How we format totals", body="Answer DONE.")
    image = _image(backend)
    the_task = Task(id="t1", prompt="Do it, then answer DONE.", check=check)
    suite = Suite(path=root / "skills_tests" / f"{SKILL}.yaml", skill=SKILL, tasks=(the_task,), timeout=timeout)
    model = resolve_model("custom/test-model", base_url=base_url, environ={})
    return RunContext(settings=settings(root, sandbox=backend, image=image or "img"),
                      library=load_library(root / "skills"), suite=suite,
                      suite_rel=f"skills_tests/{SKILL}.yaml", task=the_task, arm="with", rep=1, model=model,
                      trial="hostile", backend=backend, image=image or "img", image_id="sha256:x")


def _stored(root: Path, rec: RunRecord) -> RunRecord:
    store = Store(root / "court.db")
    try:
        store.start_trial("hostile", rootdir=str(root), argv=[])
        store.record_run(rec, trial="hostile", cached=False)
        return store.runs_by_id([rec.run_id])[rec.run_id]
    finally:
        store.close()


@pytest.mark.parametrize("prepare", [
    "mkdir -p /tmp/skill-court/answer/inside && echo x > /tmp/skill-court/answer/inside/f",
    "rm -rf /tmp/skill-court && echo x > /tmp/skill-court",
    "mkdir -p /tmp/skill-court && echo PRE-ANSWERED > /tmp/skill-court/answer",
    "rm -rf /tmp/skill-court && ln -s /proc /tmp/skill-court",
], ids=["answer-is-a-directory", "folder-is-a-file", "answer-written-ahead", "folder-links-to-proc"])
def test_a_run_that_makes_the_answer_path_itself_is_still_checked(
        tmp_path: Path, backend: str, server: LLMServer, prepare: str) -> None:
    server.set_handler(hostile([ToolCall("terminal", {"command": prepare})], answer="DONE"))
    ctx = _context(tmp_path, backend, server.base_url, check=CHECK)
    rec = execute_run(ctx, run_id="r-answer", key="k-answer")
    assert rec.status == ANSWERED and rec.outcome is True, (rec.status, rec.error, rec.check_output)


def test_a_captured_run_with_names_that_are_not_utf8_is_recorded(
        tmp_path: Path, backend: str, server: LLMServer) -> None:
    server.set_handler(hostile([
        ToolCall("terminal", {"command": "printf made > \"$(printf 'bad-\\377-name.txt')\""}),
        ToolCall("write_file", {"path": "also-\udcfe.txt", "content": "lone \udcff surrogate"}),
    ], answer="DONE \udcff"))
    ctx = _context(tmp_path, backend, server.base_url, check=None)
    rec = execute_run(ctx, run_id="r-names", key="k-names")
    assert rec.status == ANSWERED and rec.needs_judge, (rec.status, rec.error)
    back = _stored(tmp_path, rec)
    names = [path for path, _ in back.captured["files"]]  # type: ignore[index]
    assert "/workspace/bad-\\xff-name.txt" in names, back.captured
    assert back.answer == "DONE ?"


# -- the property: no sequence of tool calls makes the harness fail -------------------------------

HOSTILE_PATHS = [
    "/dev/zero", "/dev/urandom", "/dev/stdin", "/dev/null", "/proc/self/mem", "/proc/kmsg",
    "/proc/self/environ", "/workspace/fifo", "/workspace/dir", "/workspace", ".", "/", "..",
    "/tmp/skill-court/answer", "/tmp/skill-court", "/workspace/\udcff\udcfe", "/workspace/\ud800",
    "/usr/x", "/etc/passwd", "/workspace/file/child", "/root/.skills", "/root/.skills/house-format/SKILL.md",
    "../../etc/shadow", "", "a\x00b", "x" * 5000, "/workspace/zero", "/sys/kernel/notes",
]
PREPARING = [  # what leaves the sandbox in a hostile state for the calls after it
    "mkfifo /workspace/fifo", "mkdir -p /workspace/dir/sub", "ln -sfn /dev/zero /workspace/zero",
    "mkdir -p /tmp/skill-court/answer/x", "rm -rf /tmp/skill-court; echo > /tmp/skill-court",
    "printf x > \"$(printf 'n-\\377')\"", "echo x > /workspace/file", "rm -rf /workspace/* /root/.skills",
    "chmod 000 /workspace", "kill -9 -1", "exec >&-; echo gone", "printf '\\000\\377\\376'",
    "head -c 2000000 /dev/urandom", "exit 255", "cat /proc/self/mem", "ulimit -v 1000; ls",
]
ENDLESS = ["cat /dev/zero", "yes", "cat /workspace/fifo", "sleep 30"]  # run with timeout 1

texts = st.one_of(st.sampled_from(["", "DONE", "x" * 300_000, "\udcff", "\x00\x01", "é" * 1000]),
                  st.text(max_size=50))
anything = st.one_of(st.none(), st.integers(), st.booleans(), texts, st.lists(st.integers(), max_size=3),
                     st.dictionaries(st.text(max_size=5), st.integers(), max_size=2))
paths = st.one_of(st.sampled_from(HOSTILE_PATHS), st.text(max_size=30))

tool_calls = st.one_of(
    st.builds(lambda c: ToolCall("terminal", {"command": c}), st.sampled_from(PREPARING)),
    st.builds(lambda c: ToolCall("terminal", {"command": c, "timeout": 1}), st.sampled_from(ENDLESS)),
    st.builds(lambda c, t: ToolCall("terminal", {"command": c, "timeout": t}),
              st.sampled_from(["true", "ls -la", "\x00"]), anything),
    st.builds(lambda p: ToolCall("read_file", {"path": p}), paths),
    st.builds(lambda p, c: ToolCall("write_file", {"path": p, "content": c}), paths, texts),
    st.builds(lambda n, f: ToolCall("skill_view", {"name": n, "file_path": f}),
              st.one_of(st.sampled_from([SKILL, f"x/{SKILL}/SKILL.md", "../..", "a:b"]), anything),
              st.one_of(st.none(), st.sampled_from(["../x", "/etc/passwd", "SKILL.md"]), anything)),
    st.builds(lambda c: ToolCall("skills_list", {"category": c}), anything),
    st.builds(lambda name, args: ToolCall(name, args),
              st.sampled_from(["terminal", "read_file", "write_file", "skill_view", "nope", ""]),
              st.one_of(st.sampled_from(['{"path": ', "[]", "null", '"x"', "{}", "NaN"]),
                        st.dictionaries(st.sampled_from(["path", "command", "content", "name"]), anything,
                                        max_size=3))),
)
replies = st.lists(st.one_of(tool_calls.map(lambda c: [c]), st.lists(tool_calls, min_size=2, max_size=3)),
                   min_size=1, max_size=5)


@pytest.fixture(scope="module")
def local_ready() -> None:
    require_bwrap()


@hsettings(max_examples=25, deadline=None, derandomize=True,
           suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                  HealthCheck.data_too_large])
@given(script=replies, answer=texts, checked=st.booleans())
def test_no_sequence_of_tool_calls_makes_the_harness_fail(
        local_ready: None, tmp_path_factory: pytest.TempPathFactory, server: LLMServer,
        script: list[list[ToolCall]], answer: str, checked: bool) -> None:
    root = tmp_path_factory.mktemp("prop")
    server.set_handler(hostile(script, answer=answer))
    ctx = _context(root, "local", server.base_url, check=CHECK if checked else None, timeout=60)
    rec = execute_run(ctx, run_id="r-prop", key="k-prop")  # raises nothing
    assert rec.status != HARNESS_ERROR, (rec.error, script)
    json.dumps(rec.transcript, ensure_ascii=False)  # the transcript is plain JSON
    back = _stored(root, rec)  # and it is stored whole
    assert back.status == rec.status and len(back.transcript) == len(rec.transcript)
