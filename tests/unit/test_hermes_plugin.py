"""The Hermes plugin: hiding per model at the three points, live reload, bad files.

The callbacks are driven with the keyword arguments Hermes 0.19.0 passes (recorded
from real runs) through a fake ``ctx`` that only records registrations.  Where Hermes
can render the same thing itself (the skills index with ``skills.disabled``,
``skills_list``), the plugin's output is compared with Hermes' own, in process.  The
plugin in the real ``hermes -z`` is in ``tests/e2e/test_hermes_plugin.py``.
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import Any, Callable

import pytest

from pytest_skillcourt import hermes
from pytest_skillcourt.core import quarantine as q
from pytest_skillcourt.core.quarantine_file import QuarantineEntry, hermes_path
from pytest_skillcourt.hermes import hiding
from pytest_skillcourt.hermes.hiding import ModelMemory, QuarantineView, SkillCourtPlugin
from pytest_skillcourt.hermes.skill_index import filter_skills_list, hide_in_prompt, hide_in_request
from pytest_skillcourt.hermes.skill_lookup import view_names
from tests.support.hermes_setups import SALES, SKILLS, write_skills


class FakeCtx:
    """Records what ``register(ctx)`` registers, like Hermes' PluginContext."""

    def __init__(self) -> None:
        self.hooks: dict[str, list[Callable[..., Any]]] = {}
        self.middleware: dict[str, list[Callable[..., Any]]] = {}
        self.cli_commands: dict[str, dict[str, Any]] = {}

    def register_hook(self, name: str, callback: Callable[..., Any]) -> None:
        self.hooks.setdefault(name, []).append(callback)

    def register_middleware(self, kind: str, callback: Callable[..., Any]) -> None:
        self.middleware.setdefault(kind, []).append(callback)

    def register_cli_command(self, name: str, help: str, setup_fn: Callable[..., Any],
                             handler_fn: Callable[..., Any] | None = None, description: str = "") -> None:
        self.cli_commands[name] = {"help": help, "setup_fn": setup_fn, "handler_fn": handler_fn}


# Keyword arguments as Hermes 0.19.0 passes them (recorded from `hermes -z`).
def llm_request_kwargs(request: dict, model: str, session: str = "s1", task: str = "t1", api_mode: str = "chat_completions") -> dict:
    return dict(
        request=request, original_request=request, task_id=task, turn_id=f"{session}:{task}:x",
        api_request_id=f"{session}:{task}:x:api:1", session_id=session, platform="cli", model=model,
        provider="custom", base_url="http://127.0.0.1:1/v1", api_mode=api_mode, api_call_count=1,
        telemetry_schema_version="hermes.observer.v1", middleware_schema_version="hermes.middleware.v1",
    )


def tool_kwargs(tool_name: str, args: dict, session: str = "s1", task: str = "t1", **more: Any) -> dict:
    return dict(
        tool_name=tool_name, args=args, task_id=task, session_id=session, tool_call_id="call_0_0",
        turn_id=f"{session}:{task}:x", api_request_id=f"{session}:{task}:x:api:1",
        telemetry_schema_version="hermes.observer.v1", **more,
    )


@pytest.fixture
def hermes_homes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[list[str]], Path]:
    """Make a HERMES_HOME with the test skills and ``skills.disabled`` and switch to it."""
    pytest.importorskip("agent.prompt_builder", reason="hermes-agent is not installed (pip install hermes-agent)")

    def make(disabled: list[str]) -> Path:
        home = tmp_path / ("home-" + "-".join(disabled or ["none"]))
        write_skills(home / "skills")
        (home / "config.yaml").write_text(json.dumps({"skills": {"disabled": disabled}}))
        monkeypatch.setenv("HERMES_HOME", str(home))
        return home

    return make


def hermes_index(make: Callable[[list[str]], Path], disabled: list[str]) -> str:
    from agent.prompt_builder import build_skills_system_prompt

    make(disabled)
    return build_skills_system_prompt()


def hermes_skills_list(make: Callable[[list[str]], Path], disabled: list[str], category: str | None = None) -> str:
    from tools.skills_tool import skills_list

    make(disabled)
    return skills_list(category=category)


# -- the system prompt -----------------------------------------------------------------


@pytest.mark.parametrize(
    "hidden",
    [[SALES], ["tone"], [SALES, "csv-clean"], [SALES, "csv-clean", "tone"]],
    ids=["one", "last-of-category", "whole-category", "all"],
)
def test_index_matches_hermes_own_rendering_with_the_skill_disabled(hermes_homes: Any, hidden: list[str]) -> None:
    full = hermes_index(hermes_homes, [])
    expected = hermes_index(hermes_homes, hidden)
    assert all(name in full for name in hidden)
    assert hide_in_prompt(full, set(hidden)) == expected


def test_index_inside_a_whole_system_prompt() -> None:
    index = (
        "## Skills (mandatory)\nBefore replying, scan the skills below.\n\n<available_skills>\n"
        "  data: Data wrangling\n    - csv-clean: Clean CSV files\n    - sales-csv-totals: Sum...\n"
        "  misc [names only]: alpha, sales-csv-totals, zeta\n"
        "</available_skills>\n\n"
        "Only proceed without loading a skill if genuinely none are relevant to the task."
    )
    prompt = "You are Hermes Agent.\n\n" + index + "\n\nHost: Linux"
    out = hide_in_prompt(prompt, {SALES})
    assert SALES not in out
    assert "  data: Data wrangling\n    - csv-clean: Clean CSV files\n  misc [names only]: alpha, zeta\n" in out
    assert out.startswith("You are Hermes Agent.\n\n## Skills") and out.endswith("\n\nHost: Linux")
    everything = hide_in_prompt(prompt, {SALES, "csv-clean", "alpha", "zeta"})
    assert everything == "You are Hermes Agent.\n\nHost: Linux"
    assert hide_in_prompt(prompt, {"not-there"}) == prompt
    # A skill named like the start of another is not touched.
    assert "csv-clean" in hide_in_prompt(prompt, {"csv"})


INDEX = (
    "You are Hermes Agent.\n\n## Skills (mandatory)\nscan\n\n<available_skills>\n  data:\n"
    "    - csv-clean: Clean CSV files\n    - sales-csv-totals: Sum the amount\n</available_skills>\n\n"
    "Only proceed without loading a skill if genuinely none are relevant to the task."
)


@pytest.mark.parametrize(
    ("api_mode", "request_", "system_of"),
    [
        ("chat_completions",
         {"model": "m", "messages": [{"role": "system", "content": INDEX}, {"role": "user", "content": "sales-csv-totals?"}]},
         lambda r: r["messages"][0]["content"]),
        ("chat_completions",
         {"model": "m", "messages": [{"role": "system", "content": [{"type": "text", "text": INDEX}]},
                                     {"role": "user", "content": "hi"}]},
         lambda r: r["messages"][0]["content"][0]["text"]),
        ("anthropic_messages",
         {"model": "m", "system": INDEX, "messages": [{"role": "user", "content": "hi"}]},
         lambda r: r["system"]),
        ("anthropic_messages",
         {"model": "m", "system": [{"type": "text", "text": INDEX, "cache_control": {"type": "ephemeral"}}],
          "messages": [{"role": "user", "content": "hi"}]},
         lambda r: r["system"][0]["text"]),
        ("codex_responses",
         {"model": "m", "instructions": INDEX, "input": [{"role": "user", "content": "hi"}]},
         lambda r: r["instructions"]),
        ("codex_responses",
         {"model": "m", "input": [{"role": "developer", "content": [{"type": "input_text", "text": INDEX}]}]},
         lambda r: r["input"][0]["content"][0]["text"]),
    ],
    ids=["chat-string", "chat-parts", "anthropic-string", "anthropic-blocks", "codex-instructions", "responses-developer"],
)
def test_llm_request_shapes(tmp_path: Path, api_mode: str, request_: dict, system_of: Callable[[dict], str]) -> None:
    path = tmp_path / "q.json"
    q.quarantine(path, SALES, model="openai/Model-A", reason="it hurt")
    plugin = SkillCourtPlugin(QuarantineView(lambda: path))
    original = json.loads(json.dumps(request_))
    result = plugin.on_llm_request(**llm_request_kwargs(request_, "model-a", api_mode=api_mode))
    assert request_ == original  # the request handed in is not mutated
    new = result["request"]
    assert SALES not in system_of(new) and "csv-clean" in system_of(new)
    assert "Only proceed without loading a skill" in system_of(new)
    if "messages" in request_ and len(request_["messages"]) > 1:
        assert new["messages"][1:] == request_["messages"][1:]  # user text is never edited
    if api_mode == "anthropic_messages" and isinstance(request_["system"], list):
        assert new["system"][0]["cache_control"] == {"type": "ephemeral"}
    # Another model keeps seeing the skill: the request is left alone.
    assert plugin.on_llm_request(**llm_request_kwargs(request_, "model-b", session="s2", task="t2")) is None


def test_hide_in_request_leaves_unrelated_requests_alone() -> None:
    assert hide_in_request({"messages": [{"role": "user", "content": INDEX}]}, {SALES}) is None
    assert hide_in_request({"messages": [{"role": "system", "content": "no index"}]}, {SALES}) is None
    assert hide_in_request({"messages": "weird"}, {SALES}) is None


# -- skills_list and skill_view ----------------------------------------------------------


@pytest.mark.parametrize(
    ("hidden", "category"),
    [([SALES], None), (["tone"], None), ([SALES], "data"), ([SALES, "csv-clean", "tone"], None), (["tone"], "writing")],
)
def test_skills_list_matches_hermes_with_the_skill_disabled(hermes_homes: Any, hidden: list[str], category: str | None) -> None:
    full = hermes_skills_list(hermes_homes, [], category)
    expected = hermes_skills_list(hermes_homes, hidden, category)
    args = {"category": category} if category else {}
    filtered = filter_skills_list(full, set(hidden), args)
    assert filtered is not None
    assert json.loads(filtered) == json.loads(expected)


def test_skills_list_untouched_when_nothing_hidden() -> None:
    result = json.dumps({"success": True, "skills": [{"name": "tone", "category": "w"}], "categories": ["w"], "count": 1})
    assert filter_skills_list(result, {SALES}) is None
    assert filter_skills_list("not json", {SALES}) is None
    assert filter_skills_list(json.dumps({"success": False, "error": "x"}), {SALES}) is None


def test_view_names_resolve_like_skill_view(tmp_path: Path) -> None:
    skills = tmp_path / "skills"
    write_skills(skills, {**SKILLS, "ops/short": ("deploy-checklist", "Deploy", "Steps\n")})
    for name in (SALES, "data/sales-csv-totals", "data:sales-csv-totals", "sales-csv-totals.md"):
        assert SALES in view_names(name, [skills]), name
    # The folder name differs from the frontmatter name: both lead to the skill.
    assert "deploy-checklist" in view_names("short", [skills])
    assert "deploy-checklist" in view_names("ops/short", [skills])
    assert SALES not in view_names("csv-clean", [skills])
    assert view_names("", [skills]) == set()
    assert SALES not in view_names("../data/sales-csv-totals-other", [skills])


def test_tool_hooks_hide_only_from_the_quarantined_model(tmp_path: Path) -> None:
    path = tmp_path / "q.json"
    q.quarantine(path, SALES, model="model-a", reason="success fell from 100% to 0% (3 tasks)")
    plugin = SkillCourtPlugin(QuarantineView(lambda: path))
    listing = json.dumps({"success": True, "skills": [
        {"name": "csv-clean", "description": "Clean", "category": "data"},
        {"name": SALES, "description": "Sum", "category": "data"},
        {"name": "tone", "description": "Kind", "category": "writing"}],
        "categories": ["data", "writing"], "count": 3, "hint": "Use skill_view(name)"})

    # Hermes announces each model before its tools run.
    plugin.remember_model(session_id="sa", model="model-a", platform="cli", telemetry_schema_version="hermes.observer.v1")
    plugin.remember_model(session_id="sb", task_id="tb", model="MODEL-B", platform="cli", user_message="x",
                          conversation_history=[], is_first_turn=True, sender_id="", turn_id="x")
    plugin.on_llm_request(**llm_request_kwargs({"messages": []}, "model-a", session="sa", task="ta"))

    out = plugin.on_transform_tool_result(**tool_kwargs("skills_list", {}, "sa", "ta", result=listing,
                                                        duration_ms=5, status="ok", error_type=None, error_message=None))
    data = json.loads(out)
    assert [s["name"] for s in data["skills"]] == ["csv-clean", "tone"] and data["count"] == 2
    assert data["hint"] == "Use skill_view(name)"
    assert plugin.on_transform_tool_result(**tool_kwargs("skills_list", {}, "sb", "tb", result=listing)) is None
    assert plugin.on_transform_tool_result(**tool_kwargs("terminal", {}, "sa", "ta", result=listing)) is None

    block = plugin.on_pre_tool_call(**tool_kwargs("skill_view", {"name": SALES}, "sa", "ta", middleware_trace=[]))
    assert block["action"] == "block"
    message = block["message"]
    assert "quarantined" in message and "success fell from 100% to 0% (3 tasks)" in message
    assert f"hermes court release {SALES} --model model-a" in message and str(path) in message
    assert plugin.on_pre_tool_call(**tool_kwargs("skill_view", {"name": "data/" + SALES}, "sa", "ta"))["action"] == "block"
    assert plugin.on_pre_tool_call(**tool_kwargs("skill_view", {"name": "csv-clean"}, "sa", "ta")) is None
    assert plugin.on_pre_tool_call(**tool_kwargs("skill_view", {"name": SALES}, "sb", "tb")) is None
    # Only the session is known (task never seen): the session's model decides.
    assert plugin.on_pre_tool_call(**tool_kwargs("skill_view", {"name": SALES}, "sa", "unknown-task")) is not None


def test_unknown_model_only_sees_every_model_entries(tmp_path: Path) -> None:
    path = tmp_path / "q.json"
    q.quarantine(path, SALES, model="model-a")
    q.quarantine(path, "tone", model="*", reason="bad for all")
    plugin = SkillCourtPlugin(QuarantineView(lambda: path))
    assert plugin.on_pre_tool_call(**tool_kwargs("skill_view", {"name": SALES}, "never", "seen")) is None
    block = plugin.on_pre_tool_call(**tool_kwargs("skill_view", {"name": "tone"}, "never", "seen"))
    assert "every model" in block["message"] and "--model '*'" in block["message"]


def test_model_memory_is_bounded_and_safe_across_threads(tmp_path: Path) -> None:
    memory = ModelMemory(size=50)
    for i in range(500):
        memory.remember(f"model-{i}", task_id=f"t{i}", session_id=f"s{i}")
    assert len(memory) == 50
    assert memory.lookup(task_id="t499") == "model-499" and memory.lookup(task_id="t0") is None

    path = tmp_path / "q.json"
    q.quarantine(path, SALES, model="model-a")
    plugin = SkillCourtPlugin(QuarantineView(lambda: path), ModelMemory(size=64))
    wrong: list[str] = []

    def session(n: int) -> None:
        model = "model-a" if n % 2 else "model-b"
        for turn in range(30):
            sid, tid = f"s{n}", f"t{n}-{turn}"
            plugin.on_llm_request(**llm_request_kwargs({"messages": []}, model, session=sid, task=tid))
            blocked = plugin.on_pre_tool_call(**tool_kwargs("skill_view", {"name": SALES}, sid, tid)) is not None
            if blocked != (model == "model-a"):
                wrong.append(f"{sid}/{tid}")

    threads = [threading.Thread(target=session, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []


# -- the file: live reload, missing, corrupt ------------------------------------------------


def test_live_reload_after_release_and_quarantine(tmp_path: Path) -> None:
    path = tmp_path / "q.json"
    plugin = SkillCourtPlugin(QuarantineView(lambda: path))

    def hidden() -> bool:
        new = plugin.on_llm_request(**llm_request_kwargs({"messages": [{"role": "system", "content": INDEX}]}, "model-a"))
        return new is not None and SALES not in new["request"]["messages"][0]["content"]

    assert not hidden()  # no file yet: nothing hidden
    q.quarantine(path, SALES, model="model-a")
    assert hidden()
    q.release(path, SALES)
    assert not hidden()
    q.apply_trial(path, hurts=[QuarantineEntry(SALES, "model-a", "", "hurts", "r", None, None, "trial", None, "")],
                  cleared=[])
    assert hidden()
    path.unlink()
    assert not hidden()


def test_reads_only_when_the_file_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "q.json"
    q.quarantine(path, SALES, model="model-a")
    reads: list[Path] = []
    real = hiding.read_entries
    monkeypatch.setattr(hiding, "read_entries", lambda p: (reads.append(p), real(p))[1])
    view = QuarantineView(lambda: path)
    for _ in range(20):
        assert len(view.entries()) == 1
    assert len(reads) == 1
    q.quarantine(path, "tone")
    assert len(view.entries()) == 2 and len(reads) == 2
    path.write_text("{broken")
    for _ in range(5):
        assert len(view.entries()) == 2  # last good state
    assert len(reads) == 3  # the broken version is parsed once


def test_corrupt_file_keeps_last_good_state_and_logs_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "q.json"
    q.quarantine(path, SALES, model="model-a")
    plugin = SkillCourtPlugin(QuarantineView(lambda: path))
    plugin.remember_model(session_id="s1", task_id="t1", model="model-a")
    assert plugin.on_pre_tool_call(**tool_kwargs("skill_view", {"name": SALES})) is not None
    path.write_text('{"version": 1, "entries": [')
    with caplog.at_level(logging.WARNING, logger="skill_court"):
        for _ in range(5):
            assert plugin.on_pre_tool_call(**tool_kwargs("skill_view", {"name": SALES})) is not None
            assert plugin.on_llm_request(**llm_request_kwargs({"messages": [{"role": "system", "content": INDEX}]},
                                                              "model-a")) is not None
    warnings = [r for r in caplog.records if r.name == "skill_court"]
    assert len(warnings) == 1
    assert str(path) in warnings[0].getMessage() and "not valid JSON" in warnings[0].getMessage()
    assert "last good state" in warnings[0].getMessage()
    path.write_text('{"version": 1, "entries": []}')  # fixed: read again
    assert plugin.on_pre_tool_call(**tool_kwargs("skill_view", {"name": SALES})) is None


def test_corrupt_file_from_the_start_hides_nothing(tmp_path: Path) -> None:
    path = tmp_path / "q.json"
    path.write_text("garbage")
    plugin = SkillCourtPlugin(QuarantineView(lambda: path))
    assert plugin.on_llm_request(**llm_request_kwargs({"messages": [{"role": "system", "content": INDEX}]}, "model-a")) is None
    assert path.read_text() == "garbage"


def test_callbacks_never_raise(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    def broken() -> Path:
        raise RuntimeError("cannot locate")

    plugin = SkillCourtPlugin(QuarantineView(broken))
    with caplog.at_level(logging.WARNING, logger="skill_court"):
        for _ in range(3):
            assert plugin.on_llm_request(**llm_request_kwargs({"messages": []}, "m")) is None
            assert plugin.on_pre_tool_call(**tool_kwargs("skill_view", {"name": SALES})) is None
            assert plugin.on_transform_tool_result(**tool_kwargs("skills_list", {}, result="{}")) is None
    assert len([r for r in caplog.records if r.name == "skill_court"]) == 3  # once per callback
    ok = SkillCourtPlugin(QuarantineView(lambda: tmp_path / "none.json"))
    assert ok.on_llm_request(request=None) is None
    assert ok.on_pre_tool_call(tool_name="skill_view", args="not a dict") is None
    assert ok.on_transform_tool_result(tool_name="skills_list", result=123) is None
    assert ok.remember_model(model=None, session_id=None) is None
    assert ok.on_llm_request(unexpected_future_kwarg=1) is None


# -- registration ---------------------------------------------------------------------------


def test_register_uses_hooks_hermes_knows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plugins = pytest.importorskip("hermes_cli.plugins", reason="hermes-agent is not installed")
    from hermes_cli.middleware import VALID_MIDDLEWARE

    ctx = FakeCtx()
    hermes.register(ctx)
    assert set(ctx.middleware) == {"llm_request"}
    assert set(ctx.hooks) == {"pre_llm_call", "on_session_start", "transform_tool_result", "pre_tool_call",
                              "post_tool_call", "on_session_end", "on_session_finalize", "pre_gateway_dispatch"}
    assert set(ctx.hooks) <= plugins.VALID_HOOKS and set(ctx.middleware) <= VALID_MIDDLEWARE
    assert set(ctx.cli_commands) == {"court"}

    # The registered callbacks read the file under HERMES_HOME (or $SKILL_COURT_QUARANTINE).
    monkeypatch.delenv("SKILL_COURT_QUARANTINE", raising=False)
    monkeypatch.setenv("HERMES_HOME", str(tmp_path))
    q.quarantine(hermes_path(), SALES, model="model-a")
    (mw,) = ctx.middleware["llm_request"]
    new = mw(**llm_request_kwargs({"messages": [{"role": "system", "content": INDEX}]}, "model-a"))
    assert SALES not in new["request"]["messages"][0]["content"]
    monkeypatch.setenv("SKILL_COURT_QUARANTINE", str(tmp_path / "other.json"))
    assert mw(**llm_request_kwargs({"messages": [{"role": "system", "content": INDEX}]}, "model-a")) is None
