"""The run cache's rule: what makes two runs the same run, and when a stored run still holds.

A run is reused when its key matches (:func:`run_key`) and every skill whose
files its agent could reach still has the bytes it had, no more and no fewer
skills (:func:`still_valid`).  Judgments and causes are
keyed the same way, from the runs they are about (:func:`judgment_key`,
:func:`cause_key`); a verdict by the evidence it is decided from and the rule
that decides it (:func:`verdict_key`).  The README's "Store, cache and budget" section describes
the rule for users.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from pytest_skillcourt.models.client import ModelSpec
from pytest_skillcourt.agent.context import RunContext
from pytest_skillcourt.agent.prompt import template_hash
from pytest_skillcourt.agent.runner import get_runner
from pytest_skillcourt.core.records import RunFacts
from pytest_skillcourt.core.skills import bucket_digest
from pytest_skillcourt.stats.verdict import PairOutcome


def run_key(ctx: RunContext) -> str:
    """Everything that can change a run's result, and where the run belongs.

    The suite (its path from the rootdir) and the task id are part of a run's
    identity: a run is one task's run, so two tasks of equal content never
    share a run record (the verdict counts each task once).

    The visible library enters by what every run sees of it: each visible
    skill's name, category and description (the skills index and
    ``skills_list``).  Skill *bodies* and files are not in the key: a run
    records every skill whose files its agent could reach
    (``RunRecord.reach``, from ``Runner.skills_in_reach``) and is
    reused only while exactly those hold (:func:`still_valid`).  Which skills
    the transcript shows it reading does not matter: a shell command can read
    a file without naming it (``grep -rh PATTERN /root``).
    """
    return RunKeys(ctx).key(ctx.task.id, ctx.task.content_hash(ctx.suite.setup), ctx.rep)


#: Stand-ins for the parts of a run key that are not the session's (a suite's, an arm's, a
#: run's own) in :class:`RunKeys`' templates: no skill, model or path holds them, a new
#: random text per process.
_PLACES = {name: f"{name}-{os.urandom(16).hex()}"
           for name in ("suite", "task_id", "task", "arm", "skill", "visible", "image", "rep", "limits")}
#: ... of which a run's own: its task and rep.
_RUN_OWN = ("task_id", "task", "rep")


class RunKeys:
    """:func:`run_key` of the runs that share a suite, an arm and a model, which differ
    only in their task and rep.  The key's text is written in two steps: the session's
    parts (model, endpoint, runner, prompt template, backend, preset) into a template
    once per session (:data:`_TEMPLATES`), then a suite's and an arm's parts into a
    template of this group's text, and each run fills in its own three.  A cached
    session of 2,000 skills keys 24,000 runs in 4,000 groups; a JSON dump of the whole
    dict for each run was a tenth of its time.

    The one place a run key is made: :func:`run_key` is this with one run.  Its text is
    the JSON dump of the whole dict, byte for byte (``tests/unit/test_run_identity.py``).
    """

    __slots__ = ("_pieces", "_prefix")

    def __init__(self, ctx: RunContext) -> None:
        s = ctx.settings
        runner = get_runner(s.agent.value)
        shared: dict[str, Any] = {
            "model": ctx.model.label,
            "base_url": ctx.model.base_url,
            "runner": f"{runner.name}/{runner.version}",
            "template": template_hash(),
            "backend": ctx.backend,
        }
        if s.agent_preset is not None:  # the command runner's agent: its preset and executable
            shared["preset"] = s.agent_preset.identity(s.rootdir)
        # where the run belongs: two tasks of equal content are two runs, each with its own
        # record (in one suite, or a hand and a mined suite of a skill); the visible
        # skills' names, categories and descriptions as one digest (``skills.bucket_digest``):
        # the library's, less the hidden skills' entries
        group = {
            "suite": ctx.suite_rel, "arm": ctx.arm, "skill": ctx.suite.skill,
            "visible": ctx.library.view_index.digest_without(ctx.hidden), "image": ctx.image_id,
            "limits": [ctx.timeout, s.max_iterations, s.memory_mb, s.pids, s.cpus],
        }
        template = _template(shared)
        pieces = [template[0]]
        for index in range(1, len(template), 2):
            name, text = template[index], template[index + 1]
            if name in _RUN_OWN:
                pieces += [name, text]
            else:
                value = group[name]
                pieces[-1] += (_json_str(value) if type(value) is str else json.dumps(value)) + text
        self._pieces = tuple(pieces)  # text, own part, text, own part, text, own part, text
        self._prefix = hashlib.sha256(pieces[0].encode())  # hashed once, copied for each run

    def key(self, task_id: str, task_hash: str, rep: int) -> str:
        """The run key of this suite's task ``task_id`` (its ``Task.content_hash``) at ``rep``."""
        # what ``json.dumps`` writes for each (a str: this very function; an int: its digits)
        own = {"task_id": _json_str(task_id), "task": _json_str(task_hash),
               "rep": str(rep) if type(rep) is int else json.dumps(rep)}
        p = self._pieces
        digest = self._prefix.copy()
        digest.update((own[p[1]] + p[2] + own[p[3]] + p[4] + own[p[5]] + p[6]).encode())
        return digest.hexdigest()


#: The session's templates of run key texts, by their parts (:func:`_template`).
_TEMPLATES: dict[tuple[tuple[str, Any], ...], tuple[str, ...]] = {}


def _template(shared: dict[str, Any]) -> tuple[str, ...]:
    """The text of a run key with the session's parts ``shared`` in place and every other
    part's place marked: text, place name, text, ..., text (in the sorted keys' order)."""
    known = tuple(sorted(shared.items()))  # the parts are text: as good a key as their JSON, and cheaper
    found = _TEMPLATES.get(known)
    if found is None:
        text = json.dumps({**shared, **_PLACES}, sort_keys=True)
        spots = sorted((text.index(json.dumps(mark)), name) for name, mark in _PLACES.items())
        pieces: list[str] = []
        at = 0
        for index, name in spots:
            pieces += [text[at:index], name]
            at = index + len(json.dumps(_PLACES[name]))
        pieces.append(text[at:])
        if len(_TEMPLATES) >= 64:  # a long-lived process (the Hermes face) meets a few models
            _TEMPLATES.clear()
        found = _TEMPLATES[known] = tuple(pieces)
    return found


#: How ``json.dumps`` writes a str (its default ``ensure_ascii``): :meth:`RunKeys.key`.
_json_str = json.encoder.encode_basestring_ascii


def reach_digest(reach: Mapping[str, str]) -> str:
    """One digest of the skills a run could reach and their hashes (``RunRecord.reach``):
    ``skills.bucket_digest``, so that :func:`reach_of` gets it from the library's
    digests without listing the reach."""
    return bucket_digest(reach)


def _reach(run: RunFacts) -> str:
    """The skills a run could reach, with their hashes: a run key leaves skill bodies out
    (:func:`run_key`), so two runs of one key may have seen different SKILL.md bytes."""
    return run.reach or ""


def judgment_key(with_run: RunFacts, without_run: RunFacts, judge: ModelSpec) -> str:
    """The key of the judgment of a pair by ``judge``: the two runs' keys and the skill
    bytes within their reach, the judge, its prompt."""
    from pytest_skillcourt.core.trial import JUDGE_PROMPT_VERSION

    raw = json.dumps([with_run.cache_key, without_run.cache_key, judge.label, judge.base_url,
                      JUDGE_PROMPT_VERSION, _reach(with_run), _reach(without_run)])
    return hashlib.sha256(raw.encode()).hexdigest()


def cause_key(with_run: RunFacts, without_run: RunFacts, judge: ModelSpec, skill_hash: str) -> str:
    """The key of a cause: same runs, judge and SKILL.md bytes give the same question."""
    from pytest_skillcourt.engine.cause import CAUSE_PROMPT_VERSION

    raw = json.dumps([with_run.cache_key, without_run.cache_key, judge.label, judge.base_url,
                      skill_hash, CAUSE_PROMPT_VERSION, _reach(with_run), _reach(without_run)])
    return hashlib.sha256(raw.encode()).hexdigest()


def verdict_key(evidence: Sequence[PairOutcome], early_stop_tasks: Sequence[str] | None) -> str | None:
    """The key of the verdict ``stats.verdict.decide(evidence, early_stop_tasks=...)`` gives:
    the pairs (in any order: the verdict does not depend on it), the early-stop tasks and
    the rule itself (:func:`rule_digest`).  A verdict is a pure function of these, so one
    stored under the key is the verdict deciding again would give.  None when the rule's
    own files cannot be read (then nothing is reused)."""
    rule = rule_digest()
    if rule is None:
        return None
    pairs = sorted([p.task_id, p.rep, bool(p.with_success), bool(p.without_success), p.with_tokens,
                    p.without_tokens, p.source] for p in evidence)
    raw = json.dumps([rule, pairs, list(early_stop_tasks) if early_stop_tasks is not None else None])
    return hashlib.sha256(raw.encode()).hexdigest()


@lru_cache(maxsize=1)
def rule_digest() -> str | None:
    """The verdict rule's identity: the bytes of every module of ``stats`` (the rule, its
    calibrated cells, its t quantiles and their defaults), this package's version and
    numpy's (the token interval's bootstrap draws through it).  None when they cannot
    all be read: an install without the modules' sources could not tell one rule from
    another."""
    from pytest_skillcourt import __version__, stats

    folder = Path(stats.__file__).parent
    digest = hashlib.sha256(f"{__version__}\0".encode())
    try:
        sources = sorted(folder.glob("*.py"))
        for path in sources:
            digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
        numpy = importlib.metadata.version("numpy")
    except (OSError, importlib.metadata.PackageNotFoundError):
        return None
    if not any(path.name == "verdict.py" for path in sources):
        return None
    digest.update(f"numpy {numpy}".encode())
    return digest.hexdigest()


def in_reach(ctx: RunContext) -> dict[str, str]:
    """Every skill whose files the run of ``ctx`` could reach, with its hash now.

    The runner says which skills those are (``Runner.skills_in_reach``): the
    visible ones for ``builtin`` (a hidden skill's files are not in its
    sandbox), the whole library for ``claude-code`` and ``hermes`` (a hidden
    skill stays installed, switched off).
    """
    names = get_runner(ctx.settings.agent.value).skills_in_reach(ctx)
    return {s.name: s.hash for s in ctx.library.skills if s.name in names}


def out_of_reach(ctx: RunContext) -> frozenset[str]:
    """The library's skills outside the reach of the run of ``ctx``.

    A runner that says so itself (``skills_out_of_reach(ctx)``, a few names: every
    runner of this package) is asked; else its ``Runner.skills_in_reach`` is, once
    per library, runner and hidden set (what that answer depends on for every
    registered runner: ``tests/unit/test_cache_scale.py`` checks it), since listing
    a library of thousands of skills for each of its thousands of runs would make a
    session quadratic (and a memo per hidden set still lists it once per skill
    under trial: 2,000 skills, 4 million steps).
    """
    runner = get_runner(ctx.settings.agent.value)
    direct = getattr(runner, "skills_out_of_reach", None)
    if direct is not None:
        return frozenset(direct(ctx))
    memo = ctx.library.reach_answers
    key = (runner.name, runner.version, ctx.hidden)
    found = memo.get(key)
    if found is None:
        found = memo[key] = ctx.library.name_set - runner.skills_in_reach(ctx)
    return found


def reach_of(ctx: RunContext) -> str:
    """``reach_digest(in_reach(ctx))``, from the library's digests (no listing of the
    library per run: a session stays linear in its runs)."""
    return ctx.library.reach_index.digest_without(out_of_reach(ctx))


def still_valid(record: RunFacts, reach: Mapping[str, str] | str) -> bool:
    """A cached run holds while the skills within its reach are exactly ``reach``
    (name and hash), as :func:`in_reach` gives them for the run about to be made, or
    its digest as :func:`reach_of` gives it.

    Safe by construction: any change to the files of a skill the run could have
    read (or a skill newly placed where it could read it) replays it, whether
    or not its transcript shows a read.  A run recorded before this rule
    (``reach`` None) is never reused.
    """
    if record.reach is None:
        return False
    return record.reach == (reach if isinstance(reach, str) else reach_digest(reach))
