"""What the user asked for, validated: the :class:`Settings` value every layer reads.

The pytest face (:mod:`pytest_skillcourt.plugin.options`) registers the options and
builds this value from the command line and ini; everything below it only reads it.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from pytest_skillcourt.core.preset import Preset
from pytest_skillcourt.core.runner_registry import RUNNERS

DEFAULT_IMAGE = "python:3.12-slim"
DEFAULT_TIMEOUT = 900.0
DEFAULT_TASKS = 6
DEFAULT_BUDGET = 3.0
DEFAULT_MAX_ITERATIONS = 60


class FailOn(str, enum.Enum):
    """Which verdicts fail their verdict item."""

    HURTS = "hurts"
    INCONCLUSIVE = "inconclusive"  # HURTS or INCONCLUSIVE fail
    NEVER = "never"


class ItemLayout(str, enum.Enum):
    """``--skill-court-items``: what one pytest item of a suite file stands for."""

    RUN = "run"  # one item per run: t1[with], t1[without]... (the default)
    SKILL = "skill"  # one item per skill and model, runs[MODEL], its runs inside it


#: ``--skill-court-agent``: one member per registered runner (``agent/registry.py``),
#: named by it in capitals (``AgentChoice.HERMES.value == "hermes"``).
AgentChoice = enum.Enum(  # type: ignore[misc]  # members come from the registry
    "AgentChoice", [(name.upper().replace("-", "_"), name) for name in RUNNERS],
    type=str, module=__name__)


@dataclass(frozen=True)
class Settings:
    """Everything the plugin needs from the command line and ini, validated."""

    rootdir: Path
    skills_dir: Path
    suite_dirs: tuple[str, ...]
    models: tuple[str, ...]
    base_url: str | None
    agent: AgentChoice
    hermes_profile: Path | None
    sandbox: str  # "auto" or a registered backend name (sandbox.BACKENDS)
    image: str
    timeout: float
    tasks: int
    fail_on: FailOn
    judge_model: str | None
    judge_tokens: int
    keep_sandboxes: bool
    store: Path
    fresh: bool
    budget: float
    allow_unpriced: bool
    prices: dict[str, tuple[float, float]]
    disabled: tuple[str, ...]
    #: ini skill_court_quarantine_hides: the quarantine file's skills hidden from their models' runs
    quarantine_hides: bool
    apply: bool
    quarantine: Path
    json_path: Path | None
    early_stop: bool
    shard: tuple[int, int] | None
    memory_mb: int
    pids: int
    cpus: float
    #: ini skill_court_heartbeat: seconds between progress lines off a terminal (0: none)
    heartbeat_s: float = 30.0
    max_iterations: int = DEFAULT_MAX_ITERATIONS
    html_path: Path | None = None
    #: --skill-court-run-undecidable: run a suite that can never reach a verdict anyway
    run_undecidable: bool = False
    #: --skill-court-reps: repetitions for every suite (None: each suite's own, else 1)
    reps: int | None = None
    #: --skill-court-agent-preset: how the ``command`` runner runs its agent
    agent_preset: Preset | None = None
    #: --skill-court-checks-from: the git revision the suites are read from (None: the working tree)
    checks_from: str | None = None
    #: --skill-court-concurrency: runs at once within one process
    concurrency: int = 1
    #: --skill-court-junit-properties: JUnit run data as <properties> (xunit1), not <system-out>
    junit_properties: bool = False
    #: --skill-court-items: one item per run, or one per skill and model
    items: ItemLayout = ItemLayout.RUN
    extra: dict[str, Any] = field(default_factory=dict)


MAX_CONCURRENCY = 64


def parse_prices(lines: list[str]) -> dict[str, tuple[float, float]]:
    """Parse ini ``skill_court_prices`` lines ``model = IN OUT`` (USD per Mtok)."""
    prices: dict[str, tuple[float, float]] = {}
    for line in lines:
        m = re.fullmatch(r"\s*(\S+)\s*=\s*([0-9.]+)[\s,/]+([0-9.]+)\s*", line)
        if not m:
            raise pytest.UsageError(
                f"ini skill_court_prices: cannot read {line!r}; expected "
                "'MODEL = INPUT OUTPUT' in USD per million tokens, e.g. "
                "'gpt-4.1-mini = 0.40 1.60'")
        prices[m.group(1).rsplit("/", 1)[-1].lower()] = (float(m.group(2)), float(m.group(3)))
    return prices


def parse_shard(raw: str | None) -> tuple[int, int] | None:
    if not raw:
        return None
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", raw)
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise pytest.UsageError(
            f"--skill-court-shard: expected I/N with 1 <= I <= N (e.g. 2/4), got {raw!r}")
    return int(m.group(1)), int(m.group(2))


#: Options whose value is a path: given apart (``--skill-court-skills DIR``), pytest
#: reads the value as a test path before it knows the option (see _check_rootdir).
