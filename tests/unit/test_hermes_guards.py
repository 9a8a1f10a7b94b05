"""Issue 32 row 5: every path by which Hermes 0.19 loads a skill's text honours the
quarantine, and a constrained model's tools cannot reach the hidden skill's folder or
the court's data.

Hermes' own loaders run in process (``build_skill_invocation_message``, stacked and
bundle invocations, ``build_preloaded_skills_prompt``, the gateway's auto-skill
composition, ``cron.scheduler._build_job_prompt``) with the plugin's wrappers
installed, and their messages go through the plugin's ``llm_request`` middleware as
Hermes sends them; tool calls are judged by the ``pre_tool_call`` and
``transform_tool_result`` callbacks with the arguments Hermes passes.  Every test
also checks that another model keeps everything.  The real ``hermes`` CLI is run in
``tests/e2e/test_hermes_guards.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from pytest_skillcourt import hermes
from pytest_skillcourt.core import quarantine as q
from pytest_skillcourt.hermes import hiding, wrappers
from pytest_skillcourt.hermes.hiding import SkillCourtPlugin
from pytest_skillcourt.hermes.scrub import SCRUB_MARKER, map_request_texts, scrub_text
from pytest_skillcourt.hermes.wrappers import LoadLog
from tests.support import REPO
from tests.support.hermes_setups import HIDDEN, write_library

#: Lines of the hidden skill's files (SKILL.md body and description, NOTES.md).
SECRETS = ("Write totals in tens.", "Round every total to tens.", "Format the house report")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A HERMES_HOME with the bypass library, a bundle, and house-format quarantined for model-a."""
    pytest.importorskip("tools.skills_tool", reason="hermes-agent is not installed (pip install hermes-agent)")
    root = tmp_path / "hermes"
    write_library(root / "skills")
    (root / "config.yaml").write_text("plugins:\n  enabled:\n  - skill-court\n")
    (root / "skill-bundles").mkdir()
    (root / "skill-bundles" / "pack.yaml").write_text("name: pack\nskills:\n  - house-format\n  - tone\n")
    monkeypatch.setenv("HERMES_HOME", str(root))
    monkeypatch.delenv("SKILL_COURT_QUARANTINE", raising=False)
    monkeypatch.delenv("HERMES_BUNDLES_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    # Hermes keeps a few module-level caches of the home it saw first; point them here.
    import agent.skill_bundles as bundles
    import agent.skill_commands as commands
    import tools.skills_tool as skills_tool

    monkeypatch.setattr(skills_tool, "SKILLS_DIR", root / "skills")
    monkeypatch.setattr(commands, "_skill_commands", {})
    monkeypatch.setattr(bundles, "_bundles_cache", {})
    monkeypatch.setattr(bundles, "_bundles_cache_mtime", None)
    q.quarantine(root / "plugin-data" / "skill-court" / "quarantine.json", HIDDEN, model="model-a", reason="it hurts")
    wrappers.install_wrappers()
    yield root


def plugin() -> SkillCourtPlugin:
    p = SkillCourtPlugin(loads=wrappers.LOADS)
    p.remember_model(model="model-a", session_id="sa", task_id="ta")
    p.remember_model(model="model-b", session_id="sb", task_id="tb")
    return p


def sent(p: SkillCourtPlugin, model: str, message: str, role: str = "user") -> str:
    """What reaches ``model`` of a request holding ``message`` (as Hermes sends it)."""
    request = {"model": model, "messages": [{"role": "system", "content": "You are Hermes."},
                                            {"role": role, "content": message}]}
    out = p.on_llm_request(request=request, model=model, session_id="s" + model[-1], task_id="t" + model[-1])
    return json.dumps((out or {"request": request})["request"], ensure_ascii=False)


def assert_hidden_from_a_only(p: SkillCourtPlugin, message: str, role: str = "user") -> str:
    assert "Write totals in tens." in message  # Hermes did load it
    to_a, to_b = sent(p, "model-a", message, role), sent(p, "model-b", message, role)
    for secret in SECRETS[:1]:
        assert secret not in to_a
    assert "quarantined by skill-court" in to_a and "hermes court release house-format --model model-a" in to_a
    assert "Write totals in tens." in to_b and "quarantined" not in to_b
    return to_a


# -- 4: loads outside the skill_view tool -------------------------------------------------


def test_slash_command_text_is_removed_but_the_users_instruction_stays(home: Path) -> None:
    from agent.skill_commands import build_skill_invocation_message

    message = build_skill_invocation_message("/house-format", "use the March numbers", task_id="sa", runtime_note="rn")
    to_a = assert_hidden_from_a_only(plugin(), message)
    assert "use the March numbers" in to_a and "[Runtime note: rn]" in to_a


def test_stacked_slash_commands_keep_the_other_skill(home: Path) -> None:
    from agent.skill_commands import build_stacked_skill_invocation_message

    message, loaded, _ = build_stacked_skill_invocation_message(["/tone", "/house-format"], "go", task_id="sa")
    assert loaded == ["tone", "house-format"]
    to_a = assert_hidden_from_a_only(plugin(), message)
    assert "Be kind." in to_a and "User instruction: go" in to_a


def test_bundle_members_are_removed(home: Path) -> None:
    from agent.skill_bundles import build_bundle_invocation_message

    message, loaded, _ = build_bundle_invocation_message("/pack", "go", task_id="sa")
    assert set(loaded) == {"house-format", "tone"}
    assert "Be kind." in assert_hidden_from_a_only(plugin(), message)


@pytest.mark.parametrize("identifier", ["house-format", "cat/house-format", "cat/house-format/SKILL.md"])
def test_preloaded_skill_is_removed_from_the_system_prompt(home: Path, identifier: str) -> None:
    from agent.skill_commands import build_preloaded_skills_prompt

    prompt, loaded, missing = build_preloaded_skills_prompt([identifier], task_id="sa")
    assert loaded == ["house-format"] and not missing
    assert_hidden_from_a_only(plugin(), prompt, role="system")


def test_gateway_auto_skill_is_removed(home: Path) -> None:
    # gateway/run.py, "Auto-load skill(s) for topic/channel bindings": the same two calls.
    from agent.skill_commands import _build_skill_message, _load_skill_payload

    loaded, skill_dir, name = _load_skill_payload("house-format", task_id="q")
    part = _build_skill_message(loaded, skill_dir, f'[IMPORTANT: The "{name}" skill is auto-loaded.]')
    assert "Hello there" in assert_hidden_from_a_only(plugin(), part + "\n\nHello there")


def test_cron_job_skill_is_removed(home: Path) -> None:
    from cron.scheduler import _build_job_prompt

    prompt = _build_job_prompt({"id": "j1", "name": "fmt", "prompt": "Format the March report", "skills": [HIDDEN]})
    assert "Format the March report" in assert_hidden_from_a_only(plugin(), prompt)


def test_templated_skill_text_is_removed_as_rendered(home: Path) -> None:
    from agent.skill_commands import build_skill_invocation_message

    skill = home / "skills" / "cat" / "house-format" / "SKILL.md"
    skill.write_text("---\nname: house-format\ndescription: Format the house report\n---\n"
                     "Run ${HERMES_SKILL_DIR}/fmt.sh\nWrite totals in tens.\n")
    message = build_skill_invocation_message("/house-format", "", task_id="sa")
    assert str(skill.parent) + "/fmt.sh" in message  # Hermes rendered the template
    to_a = assert_hidden_from_a_only(plugin(), message)
    assert "fmt.sh" not in to_a


def test_text_recorded_in_another_process_is_still_cut_line_by_line(home: Path) -> None:
    # A resumed session (the load happened in an earlier process): no recorded block,
    # the lines of the skill's files still go.
    message = ("[IMPORTANT: The user has invoked the \"house-format\" skill.]\n\n---\nname: house-format\n"
               "description: Format the house report\n---\nWrite totals in tens.\n\nok go")
    p = SkillCourtPlugin(loads=LoadLog())
    p.remember_model(model="model-a", session_id="sa", task_id="ta")
    to_a = sent(p, "model-a", message)
    assert "Write totals in tens." not in to_a and "Format the house report" not in to_a
    assert SCRUB_MARKER in to_a and "ok go" in to_a
    assert "Write totals in tens." in sent(p, "model-b", message)


def test_every_model_entry_hides_from_an_unknown_model(home: Path) -> None:
    from agent.skill_commands import build_skill_invocation_message

    q.quarantine(home / "plugin-data" / "skill-court" / "quarantine.json", HIDDEN, model="*")
    message = build_skill_invocation_message("/house-format", "", task_id="x")
    p = SkillCourtPlugin()
    request = {"messages": [{"role": "user", "content": message}]}
    out = p.on_llm_request(request=request, session_id="new", task_id="new")
    assert "Write totals in tens." not in json.dumps(out["request"])


def test_tool_results_in_history_are_cut_in_every_request_shape(home: Path) -> None:
    p = plugin()
    leaked = json.dumps({"output": "     5\tWrite totals in tens.\nfine", "exit_code": 0})
    shapes = [
        {"messages": [{"role": "tool", "tool_call_id": "c1", "content": leaked}]},
        {"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": leaked}]}]},
        {"input": [{"type": "function_call_output", "call_id": "c1", "output": leaked}]},
        {"system": [{"type": "text", "text": "cat:5:Write totals in tens."}], "messages": []},
    ]
    for request in shapes:
        out = p.on_llm_request(request=request, model="model-a", session_id="sa", task_id="ta")
        assert out is not None and "Write totals" not in json.dumps(out["request"]), request
        assert p.on_llm_request(request=request, model="model-b", session_id="sb", task_id="tb") is None


def test_map_request_texts_leaves_names_ids_and_arguments() -> None:
    request = {"messages": [{"role": "assistant", "content": "x", "tool_calls": [
        {"id": "x", "type": "function", "function": {"name": "x", "arguments": "{\"text\": \"x\"}"}}]}]}
    out = map_request_texts(request, lambda s: s.replace("x", "y"))
    assert out == {"messages": [{"role": "assistant", "content": "y", "tool_calls": [
        {"id": "x", "type": "function", "function": {"name": "x", "arguments": "{\"text\": \"x\"}"}}]}]}
    assert map_request_texts(request, lambda s: s) is None


def test_scrub_text_forms_and_markers() -> None:
    lines = frozenset({"Write totals in tens.", "Round every total to tens."})
    text = "a\nWrite totals in tens.\n  4|Round every total to tens.\nb\n/x/SKILL.md:5:Write totals in tens.\n+Write totals in tens."
    assert scrub_text(text, lines) == f"a\n{SCRUB_MARKER}\nb\n{SCRUB_MARKER}"
    assert scrub_text("short\ntens", lines) == "short\ntens"
    as_json = json.dumps({"content": "1|Write totals in tens.\n2|ok"})
    assert json.loads(scrub_text(as_json, lines)) == {"content": f"{SCRUB_MARKER}\n2|ok"}
    assert scrub_text(as_json, frozenset()) is as_json


# -- 5 and 6: tools of the constrained model --------------------------------------------


def calls(home: Path) -> list[tuple[str, dict[str, Any]]]:
    """Tool calls that reach the hidden skill's folder or the court's data."""
    skill = home / "skills" / "cat" / "house-format"
    qfile = home / "plugin-data" / "skill-court" / "quarantine.json"
    rel = os.path.relpath(skill / "SKILL.md", Path.cwd())
    return [
        ("read_file", {"path": str(skill / "SKILL.md")}),
        ("read_file", {"path": str(skill / "NOTES.md")}),
        ("read_file", {"path": rel}),
        ("read_file", {"path": str(home / "skills" / "cat" / ".." / "cat" / "house-format" / "SKILL.md")}),
        ("read_file", {"path": str(qfile)}),
        ("write_file", {"path": str(qfile), "content": "{}"}),
        ("write_file", {"path": str(qfile.parent / ".quarantine.json.x.tmp"), "content": "{}"}),
        ("write_file", {"path": str(skill / "SKILL.md"), "content": "---\nname: renamed\n---\n"}),
        ("patch", {"mode": "replace", "path": str(qfile), "old_string": "house-format", "new_string": "x"}),
        ("patch", {"mode": "patch", "patch": f"*** Begin Patch\n*** Update File: {skill / 'SKILL.md'}\n-a\n+b\n*** End Patch"}),
        ("patch", {"mode": "patch", "patch": f"*** Begin Patch\n*** Move File: {qfile} -> /tmp/x.json\n*** End Patch"}),
        ("search_files", {"pattern": "tens", "path": str(skill)}),
        ("search_files", {"pattern": "*", "target": "files", "path": str(qfile.parent)}),
        ("terminal", {"command": f"cat {skill}/SKILL.md"}),
        ("terminal", {"command": "cat $HERMES_HOME/skills/cat/house-format/SKILL.md"}),
        ("terminal", {"command": "cd ~/.hermes/skills/cat && cat house-format/SKILL.md"}),
        ("terminal", {"command": "ls", "workdir": str(skill)}),
        ("terminal", {"command": "rm $HERMES_HOME/plugin-data/skill-court/quarantine.json"}),
        ("terminal", {"command": "echo '{}' > quarantine.json"}),
        ("terminal", {"command": "hermes court release house-format --model model-a"}),
        ("terminal", {"command": "skill-court release house-format"}),
        ("terminal", {"command": "hermes plugins disable skill-court"}),
        ("execute_code", {"code": f"print(open('{skill}/SKILL.md').read())"}),
        ("execute_code", {"code": "import pytest_skillcourt.core.quarantine as q; q.release(...)"}),
        ("process", {"action": "submit", "session_id": "p1", "data": "cat cat/house-format/SKILL.md"}),
        ("browser_navigate", {"url": f"file://{skill}/SKILL.md"}),
        ("vision_analyze", {"image_url": str(skill / "diagram.png"), "question": "?"}),
        ("skill_manage", {"action": "patch", "name": "house-format", "old_string": "name: house-format",
                          "new_string": "name: free-again"}),
        ("skill_manage", {"action": "edit", "name": "cat/house-format", "content": "---\nname: free-again\n---\nx"}),
        ("write_file", {"path": str(home / "config.yaml"), "content": "plugins:\n  enabled: []\n"}),
        ("patch", {"mode": "replace", "path": str(home / "config.yaml"), "old_string": "skill-court", "new_string": ""}),
    ]


def test_constrained_models_tool_calls_into_closed_places_are_refused(home: Path) -> None:
    p = plugin()
    for tool_name, args in calls(home):
        a = p.on_pre_tool_call(tool_name=tool_name, args=args, session_id="sa", task_id="ta")
        assert a is not None and a["action"] == "block", (tool_name, args)
        assert "skill-court" in a["message"] and "model-a" in a["message"], a
        assert p.on_pre_tool_call(tool_name=tool_name, args=args, session_id="sb", task_id="tb") is None, (tool_name, args)


def test_symlinked_folder_is_closed_too(home: Path, tmp_path: Path) -> None:
    link = tmp_path / "innocent"
    link.symlink_to(home / "skills" / "cat" / "house-format")
    block = plugin().on_pre_tool_call(tool_name="read_file", args={"path": str(link / "SKILL.md")},
                                      session_id="sa", task_id="ta")
    assert block is not None and "house-format" in block["message"]


def test_ordinary_tool_calls_of_the_constrained_model_pass(home: Path, tmp_path: Path) -> None:
    p = plugin()
    ok = [
        ("read_file", {"path": str(home / "skills" / "cat" / "other" / "SKILL.md")}),
        ("write_file", {"path": str(tmp_path / "report.md"), "content": "Totals, house format pending."}),
        ("write_file", {"path": str(home / "config.yaml"), "content": "plugins:\n  enabled:\n  - skill-court\nx: 1\n"}),
        ("search_files", {"pattern": "tens", "path": str(home / "skills")}),
        ("terminal", {"command": "ls -la && python3 --version"}),
        ("terminal", {"command": "grep -rn total data/sales.csv"}),
        ("execute_code", {"code": "print(sum([1, 2]))"}),
        ("skill_view", {"name": "zeta"}),
        ("skill_manage", {"action": "create", "name": "new-skill", "content": "x"}),
        # fixing the skill that hurt is let through: the automatic trial tries the fix
        ("skill_manage", {"action": "patch", "name": "house-format", "old_string": "a", "new_string": "b"}),
        ("skill_manage", {"action": "edit", "name": "cat/house-format", "content": "---\nname: house-format\n---\ny"}),
        ("browser_navigate", {"url": "https://example.com/house-format"}),
    ]
    for tool_name, args in ok:
        assert p.on_pre_tool_call(tool_name=tool_name, args=args, session_id="sa", task_id="ta") is None, (tool_name, args)


def test_search_results_in_closed_places_are_dropped(home: Path) -> None:
    from tools.file_tools import search_tool

    p = plugin()
    for mode in ("content", "files_only", "count"):
        result = search_tool(pattern="tens", target="content", path=str(home), output_mode=mode, task_id="ta")
        assert "house-format" in result
        new = p.on_transform_tool_result(tool_name="search_files", args={"path": str(home)}, result=result,
                                         session_id="sa", task_id="ta")
        assert new is not None and "house-format" not in new and "plugin-data" not in new, mode
        assert json.loads(new)["total_count"] == 0
        assert p.on_transform_tool_result(tool_name="search_files", args={}, result=result,
                                          session_id="sb", task_id="tb") is None


def test_terminal_output_loses_the_hidden_skills_lines(home: Path) -> None:
    from tools.terminal_tool import terminal_tool

    p = plugin()
    result = terminal_tool("find \"$HERMES_HOME/skills\" -name '*.md' | sort | xargs cat -n", task_id="ta")
    assert "Write totals in tens." in result and "Round every total to tens." in result
    new = p.on_transform_tool_result(tool_name="terminal", args={}, result=result, session_id="sa", task_id="ta")
    assert new is not None and not any(s in new for s in SECRETS)
    assert "Zeta body." in new and SCRUB_MARKER in new  # short lines and other skills stay
    assert p.on_transform_tool_result(tool_name="terminal", args={}, result=result, session_id="sb", task_id="tb") is None


def test_custom_quarantine_file_and_its_siblings_are_closed(home: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    custom = tmp_path / "elsewhere" / "court.json"
    q.quarantine(custom, HIDDEN, model="model-a")
    monkeypatch.setenv("SKILL_COURT_QUARANTINE", str(custom))
    p = plugin()
    for path in (custom, custom.parent / "court.json.lock", custom.parent / ".court.json.abc.tmp"):
        assert p.on_pre_tool_call(tool_name="write_file", args={"path": str(path), "content": "{}"},
                                  session_id="sa", task_id="ta") is not None, path
    assert p.on_pre_tool_call(tool_name="terminal", args={"command": f"cp /dev/null {custom}"},
                              session_id="sa", task_id="ta") is not None
    assert p.on_pre_tool_call(tool_name="write_file", args={"path": str(custom.parent / "notes.txt"), "content": ""},
                              session_id="sa", task_id="ta") is None


def test_closed_places_are_scanned_once_per_interval(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = plugin()
    walks: list[str] = []
    real_walk = os.walk
    monkeypatch.setattr(hiding.os, "walk", lambda top, **kw: (walks.append(str(top)), real_walk(top, **kw))[1])
    for _ in range(5):
        p.on_pre_tool_call(tool_name="terminal", args={"command": "ls"}, session_id="sa", task_id="ta")
    library_walks = [w for w in walks if w.endswith("/skills")]
    assert len(library_walks) == 1  # the library is walked once; only the hidden folder is re-checked


# -- the wrappers ------------------------------------------------------------------------


def test_wrappers_are_installed_lazily_once_and_only_record(tmp_path: Path) -> None:
    pytest.importorskip("tools.skills_tool", reason="hermes-agent is not installed")
    code = (
        "import sys, json\n"
        "from pytest_skillcourt.hermes import wrappers\n"
        "wrappers.install_wrappers(); wrappers.install_wrappers()\n"
        "assert 'tools.skills_tool' not in sys.modules\n"
        "import agent.skill_commands as sc, tools.skills_tool as st\n"
        "assert st.skill_view.__skill_court__ and sc._build_skill_message.__skill_court__\n"
        "assert st.skill_view.__wrapped__.__name__ == 'skill_view' and not hasattr(st.skill_view.__wrapped__, '__wrapped__')\n"
        "assert sum(getattr(f, '__skill_court__', False) for f in sys.meta_path) == 1\n"
        "wrappers.install_wrappers()\n"
        "assert not hasattr(st.skill_view.__wrapped__, '__skill_court__')\n"
        "out = json.loads(st.skill_view('house-format', preprocess=False))\n"
        "assert out['success'] and 'Write totals in tens.' in out['content']\n"
        "assert len(wrappers.LOADS) == 1\n"
    )
    root = tmp_path / "hermes"
    write_library(root / "skills")
    env = {**os.environ, "HERMES_HOME": str(root), "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]


def test_register_installs_the_wrappers(monkeypatch: pytest.MonkeyPatch) -> None:
    called: list[int] = []
    monkeypatch.setattr(wrappers, "install_wrappers", lambda: called.append(1))

    class Ctx:
        def __getattr__(self, name: str) -> Any:
            return lambda *a, **k: None

    hermes.register(Ctx())
    assert called == [1]


def test_load_log_is_bounded_and_ignores_tiny_texts() -> None:
    log = LoadLog(size=2)
    log.record("x" * 10, ["a"])
    assert len(log) == 0
    for i in range(3):
        log.record(f"text number {i} " * 4, [f"s{i}"])
    assert len(log) == 2
    assert {name for _, name in log.texts({"s0", "s1", "s2"})} == {"s1", "s2"}


# -- auxiliary model calls (session titles, compression, ...) ---------------------------


def test_auxiliary_calls_lose_the_hidden_skills_text(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    from agent.skill_commands import build_skill_invocation_message

    message = build_skill_invocation_message("/house-format", "go", task_id="sa")
    snippet = f"User: {message[:500]}"  # what agent.title_generator sends
    seen: list[dict[str, Any]] = []

    def original(task: Any = None, **kwargs: Any) -> str:
        seen.append(kwargs)
        return "ok"

    async def original_async(task: Any = None, **kwargs: Any) -> str:
        return original(task, **kwargs)

    monkeypatch.setattr(wrappers, "_ACTIVE", plugin())
    call, acall = wrappers._scrubbing_call(original), wrappers._scrubbing_async_call(original_async)
    for model in ("model-a", "model-b"):
        messages = [{"role": "system", "content": "Title it."}, {"role": "user", "content": snippet}]
        call("title_generation", messages=messages, main_runtime={"model": model, "provider": "custom"})
        asyncio.run(acall("compression", messages=messages, model=model))
    to_a = json.dumps(seen[:2])
    assert "Write totals in tens." not in to_a and "Format the house report" not in to_a
    assert "Write totals in tens." in json.dumps(seen[2:])


def test_bindings_made_before_registration_are_rewrapped(monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    def call_llm(task: Any = None, **kwargs: Any) -> Any:
        return kwargs

    source, user = types.ModuleType("fake_aux"), types.ModuleType("fake_user")
    source.call_llm = user.call_llm = call_llm  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_aux", source)
    monkeypatch.setitem(sys.modules, "fake_user", user)
    monkeypatch.setitem(wrappers._WRAPPED, "fake_aux", (("call_llm", wrappers._scrubbing_call),))
    wrappers.install_wrappers()
    assert source.call_llm.__skill_court__ and user.call_llm is source.call_llm  # type: ignore[attr-defined]
    wrappers.install_wrappers()
    assert source.call_llm.__wrapped__ is call_llm  # type: ignore[attr-defined]
