"""The pytest face's options: ``--skill-court-*`` and ``skill_court_*`` ini keys, read once
into :class:`~pytest_skillcourt.core.settings.Settings`.

Precedence everywhere: command line > ini (``[tool.pytest.ini_options]`` or
``pytest.ini``) > default.  Invalid values are ``pytest.UsageError`` with the
fix in the message.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import pytest

from pytest_skillcourt import sandbox
from pytest_skillcourt.core.preset import Preset, PresetError, load_preset, shipped_presets
from pytest_skillcourt.core.runner_registry import COMMAND_RUNNER, DEFAULT_RUNNER, RUNNERS
from pytest_skillcourt.core.settings import (
    DEFAULT_BUDGET, DEFAULT_IMAGE, DEFAULT_TASKS, DEFAULT_TIMEOUT, MAX_CONCURRENCY,
    AgentChoice, FailOn, ItemLayout, Settings, parse_prices, parse_shard,
)


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register the ``--skill-court-*`` options and ``skill_court_*`` ini keys."""
    group = parser.getgroup("skill-court", "skill court: put agent skills on trial")
    group.addoption("--skill-court", action="store_true", default=False,
                    help="collect suite files under skills_tests/ and put their skills on trial "
                         "(each task run with and without the skill, in fresh sandboxes)")

    def opt(name: str, ini_help: str, *, ini_type: Any = "string", ini_default: Any = None,
            **kwargs: Any) -> None:
        group.addoption(f"--skill-court-{name}", dest=f"skill_court_{name.replace('-', '_')}",
                        **kwargs)
        parser.addini(f"skill_court_{name.replace('-', '_')}", ini_help, type=ini_type,
                      default=ini_default)

    opt("skills", "folder of the skill library (<name>/SKILL.md)", metavar="DIR",
        help="folder of the skill library (default: ini skill_court_skills, else ./skills)")
    parser.addini("skill_court_suite_dirs", "names of folders holding suite YAML files",
                  type="args", default=["skills_tests"])
    group.addoption("--skill-court-model", dest="skill_court_model", action="append",
                    metavar="PROVIDER/MODEL",
                    help="model to try the skills on, e.g. openai/gpt-4.1-mini, "
                         "anthropic/claude-sonnet-4-5, ollama/qwen2.5:7b; repeat for several "
                         "(default: ini skill_court_models)")
    parser.addini("skill_court_models", "models to try skills on (provider/model), one per line",
                  type="linelist", default=[])
    opt("base-url", "OpenAI-compatible endpoint for the models", metavar="URL",
        help="OpenAI-compatible endpoint (vLLM, llama.cpp, LM Studio, a proxy); "
             "overrides the provider's default")
    opt("agent", f"agent runner: {', '.join(RUNNERS)}", metavar="RUNNER",
        choices=[c.value for c in AgentChoice],
        help="agent runner: builtin (tool loop over chat completions, default), hermes "
             "(the real Hermes Agent), claude-code (the real Claude Code, inside each sandbox; "
             "binary from $SKILL_COURT_CLAUDE or `claude` on PATH), or command (any agent CLI, "
             "inside each sandbox, as --skill-court-agent-preset says)")
    opt("agent-preset", "agent preset of the command runner: a shipped name or a YAML file",
        metavar="PRESET",
        help="how the command runner runs an agent CLI: a preset file (YAML: binary, skills, "
             "env, run, answer; see README) or a shipped preset's name "
             f"({', '.join(shipped_presets()) or 'none'}); implies --skill-court-agent command")
    opt("hermes-profile", "Hermes profile folder cloned for each run", metavar="DIR",
        help="Hermes profile (a HERMES_HOME) cloned for each run of the hermes runner "
             "(default ~/.hermes)")
    opt("sandbox", f"sandbox backend: {', '.join(sandbox.BACKENDS)}", metavar="BACKEND",
        choices=list(sandbox.BACKENDS),
        help="where runs happen: docker (one fresh container per run), local "
             "(bubblewrap), auto (docker when an engine answers, else local; default)")
    opt("image", "default sandbox image", metavar="IMAGE",
        help=f"default Docker image for runs when a suite names none (default {DEFAULT_IMAGE})")
    opt("timeout", "seconds per run", metavar="S",
        help=f"seconds per run; near it the agent is asked to wrap up, past it the run has "
             f"no outcome (default {DEFAULT_TIMEOUT:.0f})")
    opt("tasks", "tasks per suite", metavar="N",
        help=f"take the first N tasks of each suite (default {DEFAULT_TASKS})")
    opt("reps", "repetitions per task and arm (over the suites' reps)", metavar="R",
        help="run each task R times in each arm, whatever the suites say (default: each "
             "suite's reps, else 1)")
    opt("fail-on", "which verdicts fail: hurts, inconclusive or never", metavar="WHAT",
        choices=[c.value for c in FailOn],
        help="verdicts that fail their verdict item: hurts (default), inconclusive "
             "(hurts or inconclusive), never")
    opt("judge-model", "model that judges check-less pairs", metavar="PROVIDER/MODEL",
        help="model that judges tasks without a check (default: the run model)")
    opt("judge-tokens", "token cap for the judge per session", metavar="N",
        help="cap on the judge's tokens per session; pairs still waiting then get no outcome "
             "(default 2000000)")
    group.addoption("--skill-court-keep-sandboxes", action="store_true", default=None,
                    dest="skill_court_keep_sandboxes",
                    help="keep the sandboxes of the last pair for inspection")
    opt("store", "path of the SQLite store", metavar="PATH",
        help="SQLite store of runs, judgments and verdicts (default .skill-court/court.db "
             "under the rootdir)")
    group.addoption("--skill-court-fresh", action="store_true", default=False,
                    help="ignore cached runs and judgments (they are still written)")
    group.addoption("--skill-court-checks-from", dest="skill_court_checks_from", metavar="REF",
                    help="read every suite's tasks and checks as they are at git revision REF "
                         "(e.g. the pull request's base), so a change cannot weaken the suite "
                         "that judges it")
    opt("budget", "USD spend cap per session", metavar="USD",
        help=f"no new run starts once this session spent this much (default {DEFAULT_BUDGET})")
    group.addoption("--skill-court-allow-unpriced", action="store_true", default=None,
                    dest="skill_court_allow_unpriced",
                    help="keep starting runs when the provider reports no price and ini "
                         "skill_court_prices has none for the model")
    parser.addini("skill_court_allow_unpriced", "keep running without prices", type="bool",
                  default=False)
    parser.addini("skill_court_prices",
                  "USD per million tokens, one model per line: 'gpt-4.1-mini = 0.40 1.60' "
                  "(input output)", type="linelist", default=[])
    parser.addini("skill_court_disabled",
                  "skills your agent configuration already hides: hidden in both arms",
                  type="linelist", default=[])
    parser.addini("skill_court_quarantine_hides",
                  "skills the quarantine file hides from a model are hidden from that model's runs "
                  "too, in both arms (as the Hermes plugin hides them from the user); the skill "
                  "on trial is never hidden by it", type="bool", default=False)
    group.addoption("--skill-court-apply", action="store_true", default=False,
                    help="write HURTS verdicts to the quarantine file (and lift entries a trial "
                         "set that no longer hurt)")
    opt("quarantine", "path of the quarantine file", metavar="PATH",
        help="quarantine file (default .skill-court/quarantine.json under the rootdir)")
    group.addoption("--skill-court-json", dest="skill_court_json", metavar="PATH",
                    help="write machine-readable results to PATH")
    group.addoption("--skill-court-html", dest="skill_court_html", metavar="PATH",
                    help="write one self-contained HTML page of the verdicts to PATH")
    group.addoption("--skill-court-junit-properties", action="store_true", default=None,
                    dest="skill_court_junit_properties",
                    help="with --junitxml: each run's and verdict's data as per-testcase <properties> "
                         "(needs ini junit_family = xunit1) instead of lines in its <system-out> "
                         "(valid xunit2, the default)")
    parser.addini("skill_court_junit_properties", "JUnit run data as per-testcase <properties> "
                  "(needs junit_family = xunit1)", type="bool", default=False)
    group.addoption("--skill-court-no-early-stop", action="store_true", default=False,
                    help="run every task: no sequential stop (a verdict from the first tasks once "
                         "they decide, or once the rest could not), the fixed rule over every task")
    group.addoption("--skill-court-run-undecidable", action="store_true", default=None,
                    help="run the runs of a suite that can never reach a verdict (too few tasks "
                         "selected); by default they are skipped, with why")
    parser.addini("skill_court_run_undecidable", "run a suite that can never reach a verdict anyway",
                  type="bool", default=False)
    group.addoption("--skill-court-shard", metavar="I/N",
                    help="run only shard I of N (1-based) of the suites, for CI matrices; "
                         "join the stores with 'skill-court merge'")
    opt("memory", "sandbox memory limit in MB", metavar="MB",
        help="memory limit per sandbox in MB (default 2048)")
    opt("pids", "sandbox process limit", metavar="N", help="process limit per sandbox (default 256)")
    opt("cpus", "sandbox CPU limit", metavar="N", help="CPUs per sandbox (default 1)")
    opt("heartbeat", "seconds between progress lines off a terminal (0: none)", metavar="S",
        help="seconds between progress lines while a run is going on, when the output is not a "
             "terminal (CI logs); 0 turns them off (default 30)")
    opt("concurrency", "runs at once within one process (1 to 64)", metavar="N",
        help="run up to N runs at once in this process, e.g. while they wait on a slow "
             "model (1 to 64, default 1; README, \"Concurrency\")")
    opt("items", "what one item stands for: run (default) or skill", metavar="LAYOUT",
        choices=[c.value for c in ItemLayout],
        help="run: one pytest item per run (t1[with], t1[without]..., the default); skill: one "
             "item per skill and model (runs[MODEL]) that does all its runs, for libraries of "
             "thousands of skills (README, \"Item layouts\")")


def _value(config: pytest.Config, name: str) -> Any:
    """CLI value if given, else the ini value (which carries its own default)."""
    cli = config.getoption(f"skill_court_{name}", default=None)
    if cli not in (None, "", []):
        return cli
    ini = config.getini(f"skill_court_{name}")
    return ini if ini not in ("", []) else None


def _number(raw: Any, name: str, default: float, *, kind: type = float, minimum: float = 0,
            strictly: bool = True) -> Any:
    if raw is None:
        return kind(default)
    try:
        value = kind(raw)
    except (TypeError, ValueError, OverflowError):
        raise pytest.UsageError(
            f"--skill-court-{name}: expected a {'whole ' if kind is int else ''}number, got {raw!r}"
        ) from None
    if not math.isfinite(value):  # nan and inf would switch the limit off
        raise pytest.UsageError(
            f"--skill-court-{name}: expected a finite number, got {raw!r}; "
            f"give a real limit (default {default:g})")
    if value < minimum or (strictly and value == minimum):
        raise pytest.UsageError(
            f"--skill-court-{name}: expected a number {'above' if strictly else 'of at least'} "
            f"{minimum:g}, got {raw!r}")
    return value


def _reps(raw: Any) -> int | None:
    """``--skill-court-reps``/ini ``skill_court_reps``: 1 to 100, or None when not given."""
    if raw is None:
        return None
    reps = _number(raw, "reps", 1, kind=int)
    if reps > 100:
        raise pytest.UsageError(f"--skill-court-reps: expected a whole number from 1 to 100, got {raw!r}")
    return int(reps)


def _concurrency(raw: Any) -> int:
    """``--skill-court-concurrency``/ini ``skill_court_concurrency``: 1 to 64 (default 1)."""
    if raw is None:
        return 1
    try:
        value = int(str(raw).strip())
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_CONCURRENCY:
        raise pytest.UsageError(
            f"--skill-court-concurrency (or ini skill_court_concurrency): expected a whole number "
            f"from 1 to {MAX_CONCURRENCY}, got {raw!r}; e.g. --skill-court-concurrency 4")
    return value


def _items(raw: Any) -> ItemLayout:
    """``--skill-court-items``/ini ``skill_court_items``: ``run`` (default) or ``skill``."""
    if raw is None:
        return ItemLayout.RUN
    try:
        return ItemLayout(str(raw).strip().lower())
    except ValueError:
        raise pytest.UsageError(
            f"--skill-court-items (or ini skill_court_items): expected one of "
            f"{', '.join(c.value for c in ItemLayout)}, got {raw!r}; e.g. --skill-court-items skill "
            "(one item per skill and model)") from None


#: The most runs one process runs at once (each holds a sandbox and a model request).
def _sandbox_choice(raw: Any) -> str:
    """``--skill-court-sandbox``/ini ``skill_court_sandbox``: ``auto`` (default) or
    a registered backend.  The command line is also checked by argparse; the ini
    value only here."""
    choice = str(raw) if raw else "auto"
    if choice not in sandbox.BACKENDS:
        raise pytest.UsageError(
            f"--skill-court-sandbox: expected one of {', '.join(sandbox.BACKENDS)}, got {choice!r}")
    return choice


PATH_OPTIONS = ("--skill-court-skills", "--skill-court-store", "--skill-court-quarantine",
                "--skill-court-json", "--skill-court-html", "--skill-court-hermes-profile")


def _check_rootdir(config: pytest.Config) -> None:
    """Refuse a rootdir that pytest chose from one of our options' values.

    pytest picks its rootdir (and so the project's configuration) from the
    command line's paths before plugins' options are known, so the value of
    ``--skill-court-skills /elsewhere`` counts as a path there and can move the
    rootdir out of the project.  The ``=`` form is not mistaken.
    """
    if getattr(config.option, "rootdir", None) or getattr(config.option, "inifilename", None):
        return  # --rootdir or -c chose the rootdir, not the command line's paths
    args = list(config.invocation_params.args)
    here = Path(config.invocation_params.dir).resolve()
    ini = Path(config.inipath).resolve().parent if config.inipath else None
    if ini is not None and (here == ini or ini in here.parents):
        return  # the configuration pytest found is this folder's own
    # Else (no configuration file, or one found above the value rather than here) the
    # value moved the common ancestor pytest roots the session at, and so the store.
    for i, arg in enumerate(args[:-1]):
        if arg not in PATH_OPTIONS:
            continue
        value = Path(os.path.expanduser(args[i + 1]))
        value = (value if value.is_absolute() else here / value).resolve()
        if value != here and here not in value.parents:
            raise pytest.UsageError(
                f"{arg} {args[i + 1]}: pytest read the value given apart as a test path and chose "
                f"its rootdir from it ({config.rootpath}), away from this project's configuration. "
                f"Write it with '=': {arg}={args[i + 1]}")


def check_output_path(path: Path, what: str) -> None:
    """Refuse, before the first run, an output path that could never be written.

    Raises:
        pytest.UsageError: ``path`` is a directory, or a folder on its way is a file.
    """
    if path.is_dir():
        raise pytest.UsageError(f"{what} {path}: is a directory; give a file path in it, "
                                f"e.g. {path / ('skill-court' + (path.suffix or '.out'))}")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise pytest.UsageError(f"{what} {path}: {parent} is a file, not a folder; "
                                        "give a path whose folders are folders")
            return


def _agent_and_preset(config: pytest.Config, root: Path) -> tuple[AgentChoice, Preset | None]:
    """The runner, and the ``command`` runner's preset (a preset alone means that runner)."""
    named = _value(config, "agent")
    spec = _value(config, "agent_preset")
    if spec is None:
        if named == COMMAND_RUNNER:
            raise pytest.UsageError(
                "--skill-court-agent command: no preset says how to run the agent. Fix: add "
                "--skill-court-agent-preset FILE (a YAML preset, see README \"Any agent CLI: the command "
                f"runner\") or a shipped preset's name ({', '.join(shipped_presets()) or 'none'})")
        return AgentChoice(named or DEFAULT_RUNNER), None
    if named not in (None, COMMAND_RUNNER):
        raise pytest.UsageError(
            f"--skill-court-agent-preset {spec}: a preset is for the command runner, but the agent is "
            f"{named!r}. Fix: drop --skill-court-agent {named}, or the preset")
    try:
        preset = load_preset(str(spec), root)
    except PresetError as err:
        raise pytest.UsageError(f"--skill-court-agent-preset: {err}") from None
    return AgentChoice(COMMAND_RUNNER), preset


def load_settings(config: pytest.Config) -> Settings:
    """Validate and gather every option.

    Raises:
        pytest.UsageError: a value is invalid; the message says how to fix it.
    """
    _check_rootdir(config)
    root = Path(config.rootpath)

    def path_of(raw: Any, default: str) -> Path:
        p = Path(os.path.expanduser(str(raw))) if raw else Path(default)
        return p if p.is_absolute() else root / p

    models = tuple(config.getoption("skill_court_model") or config.getini("skill_court_models"))
    models = tuple(m.strip() for m in models if m and m.strip())
    if not models:
        from pytest_skillcourt.models.client import HOW_TO_CONFIGURE

        raise pytest.UsageError(f"skill court: no model configured; {HOW_TO_CONFIGURE}")
    if len(set(models)) != len(models):
        raise pytest.UsageError(f"--skill-court-model: the same model is named twice: {models}")

    allow_unpriced = config.getoption("skill_court_allow_unpriced")
    if allow_unpriced is None:
        allow_unpriced = bool(config.getini("skill_court_allow_unpriced"))
    agent, preset = _agent_and_preset(config, root)
    keep = config.getoption("skill_court_keep_sandboxes")
    hermes_profile = _value(config, "hermes_profile")
    json_path = config.getoption("skill_court_json")
    html_path = config.getoption("skill_court_html")
    settings = Settings(
        rootdir=root,
        skills_dir=path_of(_value(config, "skills"), "skills"),
        suite_dirs=tuple(config.getini("skill_court_suite_dirs")),
        models=models,
        base_url=_value(config, "base_url"),
        agent=agent,
        agent_preset=preset,
        hermes_profile=Path(os.path.expanduser(hermes_profile)) if hermes_profile else None,
        sandbox=_sandbox_choice(_value(config, "sandbox")),
        image=_value(config, "image") or DEFAULT_IMAGE,
        timeout=_number(_value(config, "timeout"), "timeout", DEFAULT_TIMEOUT),
        tasks=_number(_value(config, "tasks"), "tasks", DEFAULT_TASKS, kind=int),
        reps=_reps(_value(config, "reps")),
        fail_on=FailOn(_value(config, "fail_on") or "hurts"),
        judge_model=_value(config, "judge_model"),
        judge_tokens=_number(_value(config, "judge_tokens"), "judge-tokens", 2_000_000, kind=int),
        keep_sandboxes=bool(keep),
        store=path_of(_value(config, "store"), ".skill-court/court.db"),
        fresh=bool(config.getoption("skill_court_fresh")),
        budget=_number(_value(config, "budget"), "budget", DEFAULT_BUDGET, minimum=0, strictly=False),
        allow_unpriced=allow_unpriced,
        prices=parse_prices(list(config.getini("skill_court_prices"))),
        disabled=tuple(config.getini("skill_court_disabled")),
        quarantine_hides=bool(config.getini("skill_court_quarantine_hides")),
        apply=bool(config.getoption("skill_court_apply")),
        quarantine=path_of(_value(config, "quarantine"), ".skill-court/quarantine.json"),
        json_path=path_of(json_path, "") if json_path else None,
        html_path=path_of(html_path, "") if html_path else None,
        early_stop=not config.getoption("skill_court_no_early_stop"),
        run_undecidable=bool(config.getini("skill_court_run_undecidable")
                             if config.getoption("skill_court_run_undecidable") is None else True),
        shard=parse_shard(config.getoption("skill_court_shard")),
        memory_mb=_number(_value(config, "memory"), "memory", 2048, kind=int, minimum=64,
                          strictly=False),
        pids=_number(_value(config, "pids"), "pids", 256, kind=int, minimum=16, strictly=False),
        cpus=_number(_value(config, "cpus"), "cpus", 1.0),
        heartbeat_s=_number(_value(config, "heartbeat"), "heartbeat", 30.0, strictly=False),
        checks_from=config.getoption("skill_court_checks_from") or None,
        concurrency=_concurrency(_value(config, "concurrency")),
        items=_items(_value(config, "items")),
        junit_properties=bool(config.getini("skill_court_junit_properties")
                              if config.getoption("skill_court_junit_properties") is None else True),
    )
    for what, out in (("--skill-court-store", settings.store), ("--skill-court-quarantine", settings.quarantine),
                      ("--skill-court-json", settings.json_path), ("--skill-court-html", settings.html_path)):
        if out is not None:
            check_output_path(out, what)
    return settings
