"""Issue 17.12: model names match what users mean, and the plugin scales.

The rule (README, "Quarantine and the Hermes Agent plugin"): a provider prefix
with ``/`` or a known ``provider:`` is dropped and case is folded; a dated
snapshot (``-YYYY-MM-DD`` or ``-YYYYMMDD``) is hidden by the entry for its
undated name, but an entry for a snapshot hides only that snapshot.  One
implementation: ``quarantine.model_key`` and ``quarantine.model_matches``; the
CLI, the plugin and ``find`` use it.

The plugin's cost must not grow with the square of the quarantine: one model
call with 20,000 entries is checked against a generous bound only.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from pytest_skillcourt import cli
from pytest_skillcourt.core import quarantine as q
from pytest_skillcourt.hermes.hiding import QuarantineView, SkillCourtPlugin, hidden_skills
from pytest_skillcourt.hermes.skill_index import hide_in_prompt
from pytest_skillcourt.core.quarantine_file import (
    QuarantineEntry,
    QuarantineIndex,
    find,
    model_key,
    model_matches,
    undated_key,
)


def entry(skill: str, model: str, reason: str = "r") -> QuarantineEntry:
    return QuarantineEntry(skill=skill, model=model, skill_hash="", verdict="hurts", reason=reason, cause=None,
                           line=None, set_by="trial", trial=None, since="")


@pytest.mark.parametrize(
    ("model", "key"),
    [
        ("openai:gpt-4.1-mini", "gpt-4.1-mini"),
        ("OpenAI:GPT-4.1-mini", "gpt-4.1-mini"),
        ("openrouter:anthropic/claude-sonnet-4.5", "claude-sonnet-4.5"),
        ("anthropic:claude-sonnet-4-5-20250929", "claude-sonnet-4-5-20250929"),
        ("ollama:qwen2.5:7b", "qwen2.5:7b"),
        # a ":" that is not a provider prefix is part of the name
        ("ollama/qwen2.5:7b", "qwen2.5:7b"),
        ("mistral:7b", "mistral:7b"),
        ("qwen:0.5b", "qwen:0.5b"),
        ("llama3:latest", "llama3:latest"),
        ("deepseek:latest", "deepseek:latest"),
        ("anthropic/claude-3.5-sonnet:beta", "claude-3.5-sonnet:beta"),
        ("openai:chatgpt-4o-latest", "chatgpt-4o-latest"),
        # unchanged from before
        ("openai/GPT-4.1-mini", "gpt-4.1-mini"),
        (" GPT-4.1-MINI ", "gpt-4.1-mini"),
        ("openrouter/meta-llama/llama-3", "llama-3"),
        ("*", "*"),
    ],
)
def test_model_key(model: str, key: str) -> None:
    assert model_key(model) == key


@pytest.mark.parametrize(
    ("key", "undated"),
    [
        ("gpt-4.1-mini-2025-04-14", "gpt-4.1-mini"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("gpt-4.1-mini", None),
        ("claude-3-5-sonnet-latest", None),
        ("model-2025-13-40", None),  # not a calendar date
        ("model-12345678", None),
        ("2025-04-14", None),  # nothing before the date
    ],
)
def test_undated_key(key: str, undated: str | None) -> None:
    assert undated_key(key) == undated


@pytest.mark.parametrize(
    ("entry_model", "model", "hides"),
    [
        ("gpt-4.1-mini", "openai:gpt-4.1-mini", True),
        ("openai:gpt-4.1-mini", "gpt-4.1-mini", True),
        ("gpt-4.1-mini", "gpt-4.1-mini-2025-04-14", True),
        ("gpt-4.1-mini", "openai/gpt-4.1-mini-2025-04-14", True),
        ("claude-sonnet-4-5", "anthropic:claude-sonnet-4-5-20250929", True),
        ("gpt-4.1-mini-2025-04-14", "gpt-4.1-mini-2025-04-14", True),
        ("gpt-4.1-mini-2025-04-14", "gpt-4.1-mini", False),  # a snapshot entry: only that snapshot
        ("gpt-4.1-mini-2025-04-14", "gpt-4.1-mini-2025-06-01", False),
        ("gpt-4.1", "gpt-4.1-mini-2025-04-14", False),
        ("gpt-4.1-mini", "gpt-4.1-mini-high", False),
        ("qwen2.5:7b", "qwen2.5:14b", False),
        ("*", "anything", True),
    ],
)
def test_model_matches(entry_model: str, model: str, hides: bool) -> None:
    assert model_matches(entry_model, model) is hides
    assert entry("s", entry_model).hides_from(model) is hides
    assert (find([entry("s", entry_model)], "s", model) is not None) is hides
    assert (QuarantineIndex([entry("s", entry_model)]).find("s", model) is not None) is hides


def test_the_most_specific_entry_wins() -> None:
    every, undated, dated = entry("s", "*", "all"), entry("s", "gpt-4.1-mini", "undated"), entry("s", "gpt-4.1-mini-2025-04-14", "dated")
    for entries in ([every, undated, dated], [dated, undated, every], [undated, every, dated]):
        index = QuarantineIndex(entries)
        for model, reason in [("gpt-4.1-mini-2025-04-14", "dated"), ("gpt-4.1-mini-2025-06-01", "undated"),
                              ("gpt-4.1-mini", "undated"), ("claude", "all")]:
            assert find(entries, "s", model).reason == reason, (model, entries)
            assert index.find("s", model).reason == reason
            assert index.hidden(model)["s"].reason == reason
    assert QuarantineIndex([undated, every]).hidden(None)["s"].reason == "all"  # unknown model: "*" only
    assert QuarantineIndex([undated]).hidden(None) == {}


def test_cli_list_filters_by_the_rule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "q.json"
    q.quarantine(path, "sales", model="gpt-4.1-mini")
    q.quarantine(path, "tone", model="gpt-4.1-mini-2025-04-14")
    assert cli.main(["--quarantine", str(path), "list", "--json", "--model", "openai:gpt-4.1-mini-2025-04-14"]) == 0
    assert [e["skill"] for e in json.loads(capsys.readouterr().out)["entries"]] == ["sales", "tone"]
    assert cli.main(["--quarantine", str(path), "list", "--json", "--model", "openai:gpt-4.1-mini"]) == 0
    assert [e["skill"] for e in json.loads(capsys.readouterr().out)["entries"]] == ["sales"]


INDEX = (
    "## Skills (mandatory)\nscan\n\n<available_skills>\n  data:\n    - sales: Sum\n    - tone: Kind\n"
    "</available_skills>\n\nOnly proceed without loading a skill if genuinely none are relevant to the task."
)


@pytest.mark.parametrize("model", ["openai:gpt-4.1-mini", "gpt-4.1-mini-2025-04-14", "GPT-4.1-MINI-20250414"])
def test_the_plugin_hides_from_prefixed_and_dated_names(tmp_path: Path, model: str) -> None:
    path = tmp_path / "q.json"
    q.quarantine(path, "sales", model="gpt-4.1-mini")
    plugin = SkillCourtPlugin(QuarantineView(lambda: path))
    out = plugin.on_llm_request(request={"messages": [{"role": "system", "content": INDEX}]}, model=model,
                                session_id="s", task_id="t")
    assert out is not None and "sales" not in out["request"]["messages"][0]["content"]
    assert plugin.on_pre_tool_call(tool_name="skill_view", args={"name": "sales"}, session_id="s", task_id="t")


def test_the_plugin_keeps_a_dated_entry_to_its_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "q.json"
    q.quarantine(path, "sales", model="gpt-4.1-mini-2025-04-14")
    plugin = SkillCourtPlugin(QuarantineView(lambda: path))
    assert plugin.on_llm_request(request={"messages": [{"role": "system", "content": INDEX}]},
                                 model="openai:gpt-4.1-mini", session_id="s", task_id="t") is None


# -- scale ---------------------------------------------------------------------------------------


def big_quarantine(path: Path, n: int) -> None:
    entries = [{"skill": f"skill-{i:05d}", "model": "gpt-4.1-mini" if i % 2 else "*"} for i in range(n)]
    path.write_text(json.dumps({"version": 1, "entries": entries}))


def big_index(n: int) -> str:
    lines = "\n".join(f"  cat-{i // 50:04d}:\n" * (i % 50 == 0) + f"    - skill-{i:05d}: Does thing {i}"
                      for i in range(n))
    return ("You are Hermes.\n\n## Skills (mandatory)\nscan\n\n<available_skills>\n" + lines + "\n    - kept: Kept\n"
            "</available_skills>\n\nOnly proceed without loading a skill if genuinely none are relevant to the task.")


def test_twenty_thousand_entries_cost_lookups_not_a_pass_each(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    n = 20_000
    path = tmp_path / "q.json"
    big_quarantine(path, n)
    prompt = big_index(n)
    plugin = SkillCourtPlugin(QuarantineView(lambda: path))
    builds: list[int] = []
    real_init = QuarantineIndex.__init__
    monkeypatch.setattr(QuarantineIndex, "__init__", lambda self, e: (builds.append(1), real_init(self, e))[1])

    started = time.perf_counter()
    out = plugin.on_llm_request(request={"messages": [{"role": "system", "content": prompt}]},
                                model="openai:gpt-4.1-mini-2025-04-14", session_id="s", task_id="t")
    first = time.perf_counter() - started
    assert out is not None
    system = out["request"]["messages"][0]["content"]
    assert "skill-0" not in system and "    - kept: Kept" in system
    assert "and 19980 more" in out["reason"]  # the reason stays short

    started = time.perf_counter()
    for _ in range(5):
        plugin.on_llm_request(request={"messages": [{"role": "system", "content": prompt}]},
                              model="gpt-4.1-mini", session_id="s", task_id="t")
        assert plugin.on_pre_tool_call(tool_name="skill_view", args={"name": "skill-12345"}, session_id="s", task_id="t")
    later = (time.perf_counter() - started) / 5
    # Generous bounds: the quadratic version took 10-12 s per call; this takes well under one.
    assert first < 5.0, f"first call took {first:.1f} s"
    assert later < 3.0, f"later calls took {later:.1f} s each"
    assert len(builds) == 1  # indexed once for this version of the file


def test_hiding_is_linear_in_the_prompt() -> None:
    n = 40_000
    prompt = big_index(n)
    hidden = {f"skill-{i:05d}" for i in range(n)}
    started = time.perf_counter()
    out = hide_in_prompt(prompt, hidden)
    assert time.perf_counter() - started < 5.0
    assert "skill-" not in out and "    - kept: Kept" in out


def test_hidden_skills_helper_matches_the_index() -> None:
    entries = [entry(f"s{i}", "m" if i % 3 else "*") for i in range(3000)]
    started = time.perf_counter()
    hidden = hidden_skills(entries, "openai:m")
    assert time.perf_counter() - started < 2.0
    assert set(hidden) == {f"s{i}" for i in range(3000)}
    assert set(hidden_skills(entries, None)) == {f"s{i}" for i in range(0, 3000, 3)}
