"""The run cache's rule: what makes two runs the same run, and when a stored run still holds.

A run is reused when its key matches (:func:`run_key`) and every skill it read
still has the bytes it read (:func:`still_valid`).  Judgments and causes are
keyed the same way, from the runs they are about (:func:`judgment_key`,
:func:`cause_key`).  The README's "Store, cache and budget" section describes
the rule for users.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from .agent.client import ModelSpec
from .agent.context import RunContext
from .agent.prompt import template_hash
from .agent.runner import get_runner
from .records import RunRecord
from .skills import Library


def run_key(ctx: RunContext) -> str:
    """Everything that can change a run's result, and where the run belongs.

    The suite (its path from the rootdir) and the task id are part of a run's
    identity: a run is one task's run, so two tasks of equal content never
    share a run record (the verdict counts each task once).

    The visible library enters by what every run sees of it: each visible
    skill's name, category and description (the skills index and
    ``skills_list``).  Skill *bodies* are not in the key: a run records the
    skills it read (``RunRecord.loaded_skills``, see ``transcript.skills_read``) and
    is reused only while their hashes hold.  So editing a skill's body replays
    just the runs that read it (typically its own ``with`` arm); editing its
    description replays every run that can see it; runs it is hidden from
    (its own ``without`` arm) are never replayed.
    """
    visible = {s.name: [s.category, s.description] for s in ctx.library.visible(ctx.hidden)}
    s = ctx.settings
    runner = get_runner(s.agent.value)
    parts: dict[str, Any] = {
        # where the run belongs: two tasks of equal content are two runs, each
        # with its own record (in one suite, or a hand and a mined suite of a skill)
        "suite": ctx.suite_rel,
        "task_id": ctx.task.id,
        "task": ctx.task.content_hash(ctx.suite.setup),
        "arm": ctx.arm,
        "skill": ctx.suite.skill,
        "visible": visible,
        "model": ctx.model.label,
        "base_url": ctx.model.base_url,
        "runner": f"{runner.name}/{runner.version}",
        "template": template_hash(),
        "image": ctx.image_id,
        "backend": ctx.backend,
        "rep": ctx.rep,
        "limits": [ctx.timeout, s.max_iterations, s.memory_mb, s.pids, s.cpus],
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def judgment_key(with_run: RunRecord, without_run: RunRecord, judge: ModelSpec) -> str:
    """The key of the judgment of a pair by ``judge``: the two runs' keys, the judge, its prompt."""
    from .judge import JUDGE_PROMPT_VERSION

    raw = json.dumps([with_run.cache_key, without_run.cache_key, judge.label, judge.base_url,
                      JUDGE_PROMPT_VERSION])
    return hashlib.sha256(raw.encode()).hexdigest()


def cause_key(with_run: RunRecord, without_run: RunRecord, judge: ModelSpec, skill_hash: str) -> str:
    """The key of a cause: same runs, judge and SKILL.md bytes give the same question."""
    from .cause import CAUSE_PROMPT_VERSION

    raw = json.dumps([with_run.cache_key, without_run.cache_key, judge.label, judge.base_url,
                      skill_hash, CAUSE_PROMPT_VERSION])
    return hashlib.sha256(raw.encode()).hexdigest()


def still_valid(record: RunRecord, library: Library) -> bool:
    """A cached run holds while every skill it read still has the same bytes."""
    for name, digest in record.loaded_skills.items():
        skill = library.get(name)
        if skill is None or skill.hash != digest:
            return False
    return True
