"""The builders every kind of test shares, one of each.

- the library: ``write_skill``, ``write_suite`` and ``task`` (a skill folder, a suite, one
  of its tasks);
- the project's ``pytest.ini``: ``ini``, every variant by keyword;
- a session of the whole plugin: ``run_court`` (in process, or in a child python);
- a model on the local test server: ``model_spec`` and ``chat_client``;
- scripted models: ``sees_skill``, ``loading_agent``, ``hurting_model`` and the answers
  ``right_total``/``wrong_total`` to ``Question N`` (``question_number``), handlers for
  the test server that decide each reply from what the agent really sent (the system
  prompt's skills index, tool results), so the plugin's own code path is exercised for real;
- reading what a session left: ``junit_properties``, ``count_rows``;
- plain values: ``settings``, ``run_record``, ``trial_entry``.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import pytest
import yaml

from pytest_skillcourt.models.client import ChatClient, ModelSpec, resolve_model
from pytest_skillcourt.agent.context import RunContext
from pytest_skillcourt.core.settings import AgentChoice, FailOn, Settings
from pytest_skillcourt.core.quarantine_file import QuarantineEntry
from pytest_skillcourt.core.records import ANSWERED, RunRecord
from pytest_skillcourt.plugin.junit import HEADER as JUNIT_HEADER
from pytest_skillcourt.plugin.junit import read_block
from pytest_skillcourt.core.skills import load_library
from pytest_skillcourt.core.suite import Suite, Task
from tests.support.llm_server import RecordedRequest, Reply, ToolCall, turn
from tests.support.sandbox_image import docker_available, ensure_test_image

# -- the library -----------------------------------------------------------------------


def write_skill(root: Path, name: str, description: str, body: str = "Follow the house rules.") -> Path:
    """``root/name/SKILL.md`` with ``name`` and ``description`` in its frontmatter; the folder."""
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: {description}\n---\n\n# {name}\n\n{body}\n", encoding="utf-8")
    return folder


def write_suite(root: Path, skill: str, tasks: Iterable[dict], **top: object) -> Path:
    """``root/skills_tests/<skill>.yaml`` holding ``tasks`` (and the ``top`` keys); its path."""
    path = root / "skills_tests" / f"{skill}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"skill": skill, **top, "tasks": list(tasks)}
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def task(tid: str, prompt: str, check: str | None = None, **kw: object) -> dict:
    """One task of a suite (``check`` left out: the task is judged)."""
    out: dict = {"id": tid, "prompt": prompt}
    if check is not None:
        out["check"] = check
    out.update(kw)
    return out


# -- the project's pytest.ini -------------------------------------------------------------


def default_sandbox() -> tuple[str, str]:
    """(backend, image) for end-to-end trials: Docker with the local test image
    where an engine answers (as the product defaults to), else bubblewrap."""
    if docker_available():
        return "docker", ensure_test_image()
    return "local", ""


def ini(base_url: str | None = None, *, skills: str | None = "skills",
        models: Sequence[str] = ("custom/test-model",), sandbox: str | None = "auto",
        image: str | None = None, timeout: float | None = 60, allow_unpriced: bool = True,
        prices: Sequence[str] = (), extra: str = "", run_undecidable: bool = True) -> str:
    """The ``[pytest]`` section of a project on trial, one line per setting given.

    ``models``: one on the line, several one per line below it, none leaves the option
    out.  ``sandbox``: ``"auto"`` is Docker with the local test image where an engine
    answers, else ``"local"`` (bubblewrap); ``"docker"`` takes the test image; any other
    name is written as it is; ``None`` leaves the option out.  ``image`` names another
    image.  ``skills``, ``base_url`` or ``timeout`` of ``None`` leave their line out;
    ``allow_unpriced`` writes ``skill_court_allow_unpriced = true``; ``prices`` are lines of
    ``skill_court_prices``; ``extra`` is appended as it is.  ``run_undecidable`` writes
    ``skill_court_run_undecidable = true``: the many one- and two-task suites of the tests
    run as they did before such a suite ran nothing by default
    (tests/e2e/test_sequential_stop.py tests that default).
    """
    lines = ["[pytest]"]
    if skills is not None:
        lines.append(f"skill_court_skills = {skills}")
    if len(models) == 1:
        lines.append(f"skill_court_models = {models[0]}")
    elif models:
        lines += ["skill_court_models ="] + [f"    {m}" for m in models]
    if base_url is not None:
        lines.append(f"skill_court_base_url = {base_url}")
    if sandbox == "auto":
        sandbox, found = default_sandbox()
        image = image or found or None
    elif sandbox == "docker":
        image = image or ensure_test_image()
    if sandbox is not None:
        lines.append(f"skill_court_sandbox = {sandbox}")
    if image:
        lines.append(f"skill_court_image = {image}")
    if timeout is not None:
        lines.append(f"skill_court_timeout = {timeout:g}")
    if allow_unpriced:
        lines.append("skill_court_allow_unpriced = true")
    if run_undecidable:
        lines.append("skill_court_run_undecidable = true")
    if prices:
        lines += ["skill_court_prices ="] + [f"    {p}" for p in prices]
    return "\n".join(lines) + "\n" + extra


# -- a session -------------------------------------------------------------------------------


def run_court(pytester: pytest.Pytester, *args: str, subprocess: bool = False,
              junitxml: str | None = "junit.xml", cacheprovider: bool = False,
              timeout: float = 600) -> pytest.RunResult:
    """``pytest --skill-court`` in ``pytester``'s folder, then ``args``.

    In process, or with ``subprocess`` in a child python (killed after ``timeout``
    seconds).  The JUnit file goes to ``junitxml`` (``None``: none is written); the cache
    plugin is off unless ``cacheprovider`` (``--lf`` needs it).
    """
    argv = ["--skill-court"]
    if not cacheprovider:
        argv += ["-p", "no:cacheprovider"]
    if junitxml is not None:
        argv.append(f"--junitxml={junitxml}")
    argv += args
    if subprocess:
        return pytester.runpytest_subprocess(*argv, timeout=timeout)
    return pytester.runpytest(*argv)


# -- a model on the test server ----------------------------------------------------------


def model_spec(base_url: str, label: str = "custom/test-model", *, api_key: str | None = None) -> ModelSpec:
    """``label`` at ``base_url`` (the test server) as the plugin resolves it, reading no
    environment; ``api_key`` replaces the key it resolves to (``"none"``)."""
    spec = resolve_model(label, base_url=base_url, environ={})
    return spec if api_key is None else dataclasses.replace(spec, api_key=api_key)


def chat_client(base_url: str, label: str = "custom/judge", *, max_retries: int = 1,
                backoff_base: float = 0.01) -> ChatClient:
    """A ``ChatClient`` for ``label`` on the test server at ``base_url`` that retries at once."""
    return ChatClient(model_spec(base_url, label), max_retries=max_retries, backoff_base=backoff_base)


# -- scripted models ---------------------------------------------------------------------

#: The right answers of the tasks ``skill-court init`` writes (scaffold.py), by a word of the task.
INIT_ANSWERS = {"apples": 42, "invoice": 525, "words": 5}


def sees_skill(request: RecordedRequest, skill: str) -> bool:
    """True when the skill is listed in the system prompt's skills index."""
    system = request.system
    start, end = system.find("<available_skills>"), system.find("</available_skills>")
    return start >= 0 and f"- {skill}" in system[start:end]


def loading_agent(skill: str, answer_with: Callable[[RecordedRequest], str],
                  answer_without: Callable[[RecordedRequest], str],
                  *, tokens: tuple[int, int] = (100, 20)) -> Callable[[RecordedRequest], Reply]:
    """A model that loads ``skill`` with skill_view when it is listed, then answers.

    Turn 0: skill_view if visible (else answer at once).  Turn 1: answer.
    """

    def handler(request: RecordedRequest) -> Reply:
        t = turn(request)
        visible = sees_skill(request, skill)
        if t == 0 and visible:
            return Reply(tool_calls=(ToolCall("skill_view", {"name": skill}),),
                         input_tokens=tokens[0], output_tokens=tokens[1])
        text = answer_with(request) if visible else answer_without(request)
        return Reply(content=text, input_tokens=tokens[0], output_tokens=tokens[1])

    return handler


def question_number(request: RecordedRequest) -> str:
    """N of the task prompt ``Question N: ...`` the agent was given ("?" when there is none)."""
    for msg in request.messages:
        if msg.get("role") == "user" and "Question" in str(msg.get("content")):
            return str(msg["content"]).split("Question ", 1)[1].split(":", 1)[0]
    return "?"


def right_total(request: RecordedRequest) -> str:
    """The right answer to ``Question N``: ``TOTAL-N`` (the house format)."""
    return f"TOTAL-{question_number(request)}"


def wrong_total(request: RecordedRequest) -> str:
    """A wrong answer to ``Question N``: ``total N00``."""
    return f"total {question_number(request)}00"


def hurting_model(skill: str = "house-format") -> Callable[[RecordedRequest], Reply]:
    """A model ``skill`` misleads: it loads the skill when it sees it and then answers wrong; as
    the judge it prefers the answer in the house format; asked for the cause, it names one."""
    agent = loading_agent(skill, wrong_total, right_total)

    def handler(request: RecordedRequest) -> Reply:
        if not request.tools:
            if "impartial judge" in request.system:  # prefers the answer in the house format
                a = "TOTAL-" in request.last_user.split("<run_B_", 1)[0].split("<run_A_", 1)[-1]
                b = "TOTAL-" in request.last_user.split("<run_B_", 1)[-1]
                winner = "tie" if a == b else ("A" if a else "B")
                return Reply(content=json.dumps({"winner": winner, "reason": "format"}))
            return Reply(content=json.dumps({"cause": "the skill's rule about totals misled the model",
                                             "line": "Follow the house rules."}))
        return agent(request)

    return handler


# -- what a session left ---------------------------------------------------------------


def junit_properties(xml_path: Path) -> dict[str, dict[str, str]]:
    """testcase name (classname::name) -> its properties: the court's lines in its
    ``<system-out>`` (the default) or its ``<property>`` elements (``--skill-court-junit-properties``)."""
    out: dict[str, dict[str, str]] = {}
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        key = case.get("name", "")
        props: dict[str, str] = {}
        for system_out in case.findall("system-out"):
            if (system_out.text or "").startswith(JUNIT_HEADER):
                props.update(read_block(system_out.text or ""))
        props.update({p.get("name", ""): p.get("value", "") for p in case.iter("property")})
        status = "passed"
        for tag in ("failure", "error", "skipped"):
            if case.find(tag) is not None:
                status = tag
        props["__status__"] = status
        out[f"{case.get('classname')}::{key}"] = props
    return out


def newest_trial_runs(db: Path) -> tuple[int, int]:
    """(runs, of which cached) of the newest session in the store at ``db``."""
    conn = sqlite3.connect(db)
    try:
        row = conn.execute("SELECT COUNT(*), COALESCE(SUM(cached), 0) FROM trial_runs WHERE trial = "
                           "(SELECT trial FROM trials ORDER BY started_at DESC, rowid DESC LIMIT 1)").fetchone()
    finally:
        conn.close()
    return int(row[0]), int(row[1])


def count_rows(db: Path, table: str) -> int:
    """The number of rows in ``table`` of the SQLite file ``db``."""
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
    finally:
        conn.close()


# -- plain values --------------------------------------------------------------------------


def settings(root: Path, **changes: Any) -> Settings:
    """A session's settings as plain values, rooted at ``root`` (skills in ``root/skills``,
    the store and quarantine file beside them): the built-in agent on the test model in a
    local sandbox; ``changes`` replace single fields."""
    base = Settings(
        rootdir=root, skills_dir=root / "skills", suite_dirs=("skills_tests",), models=("custom/test-model",),
        base_url="http://127.0.0.1:9/v1", agent=AgentChoice.BUILTIN, hermes_profile=None, sandbox="local",
        image="img", timeout=60.0, tasks=6, fail_on=FailOn.HURTS, judge_model=None, judge_tokens=1000,
        keep_sandboxes=False, store=root / "court.db", fresh=False, budget=1.0, allow_unpriced=True, prices={},
        disabled=(), quarantine_hides=False, apply=False, quarantine=root / "q.json", json_path=None,
        early_stop=True, shard=None,
        memory_mb=2048, pids=256, cpus=1.0)
    return dataclasses.replace(base, **changes)


def run_context(root: Path, *, arm: str = "with", skill: str = "house-format", **changes: Any) -> RunContext:
    """One run of a one-task suite of ``skill`` over the library in ``root/skills`` (made
    with that one skill when missing); ``changes`` replace fields of :func:`settings`."""
    if not (root / "skills" / skill / "SKILL.md").exists():
        write_skill(root / "skills", skill, "How we format totals", body="Write totals as TOTAL.")
    the_task = Task(id="t1", prompt="Question 1: give the total.", check="true")
    suite = Suite(path=root / "skills_tests" / f"{skill}.yaml", skill=skill, tasks=(the_task,))
    return RunContext(settings=settings(root, **changes), library=load_library(root / "skills"),
                      suite=suite, suite_rel=f"skills_tests/{skill}.yaml", task=the_task, arm=arm,
                      rep=1, model=model_spec("http://127.0.0.1:9/v1"), trial="trial-1",
                      backend="local", image="img", image_id="sha256:aaa")


def run_record(run_id: str, key: str = "k", *, trial: str = "t1", status: str = ANSWERED,
               outcome: bool | None = True, cost: float | None = 0.01, task: str = "a",
               arm: str = "with", tokens: int = 100) -> RunRecord:
    """One run of skill ``s`` (suite ``skills_tests/s.yaml``) on ``custom/m``, as the store keeps it."""
    return RunRecord(run_id=run_id, cache_key=key, trial=trial, skill="s", suite="skills_tests/s.yaml",
                     task_id=task, arm=arm, rep=1, model="custom/m", status=status, outcome=outcome,
                     cost_usd=cost, priced=cost is not None, input_tokens=tokens, output_tokens=0)


def trial_entry(skill: str, model: str, **changes: Any) -> QuarantineEntry:
    """A quarantine entry a trial set (a HURTS verdict with its cause); ``changes`` replace fields."""
    fields: dict[str, Any] = dict(
        skill=skill, model=model, skill_hash="sha256:" + "a" * 64, verdict="hurts",
        reason="success fell from 100% to 0% (3 tasks)", cause="told to round", line="Round to tens.",
        set_by="trial", trial="t-1", since="2026-11-30T12:00:00Z",
    )
    fields.update(changes)
    return QuarantineEntry(**fields)
