"""The trial model: what a trial is made of, as plain data and pure logic.

A *target* is one verdict to produce (a skill's suite on one model); its runs
group into *pairs* (same task and rep, both arms); a pair's outcome comes from
the check or from the judge (a :class:`Judgment`); the verdict and everything shown
about it is an *outcome*, the one shape of a verdict from the engine to the JSON
edge (its judged pairs as :class:`PairJudgment` values); a whole session's outcomes
with what the reports show is a :class:`TrialResult`.  Nothing here does I/O: the
controller, ``merge``, ``appeal``, the quarantine policy and every report build on
these values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from pytest_skillcourt.core.clock import utc_now
from pytest_skillcourt.core.records import ANSWERED, ARM_WITH, ARM_WITHOUT, INCOMPLETE, RunFacts, RunHead, RunRecord
from pytest_skillcourt.stats.verdict import PairOutcome, Verdict, VerdictKind

#: Winners a judgment can name (None: the judge gave no outcome).
WINNERS = (ARM_WITH, ARM_WITHOUT, "tie")


@dataclass(frozen=True)
class SuiteFacts:
    """What a verdict and the reports record of its suite: the skill it tries, the
    suite's and the skill's hashes (``skill_hash`` "": the skill is not in the library),
    where the suite came from (``frozen.SuiteSource.to_dict()`` with its ``label``) and
    its tasks as (id, prompt, check; "" for none)."""

    skill: str
    suite_hash: str
    skill_hash: str
    source: Mapping[str, Any] = field(default_factory=dict, hash=False)
    tasks: tuple[tuple[str, str, str], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"skill": self.skill, "suite_hash": self.suite_hash, "skill_hash": self.skill_hash,
                "source": dict(self.source), "tasks": [list(t) for t in self.tasks]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SuiteFacts:
        tasks = tuple((str(t[0]), str(t[1]), str(t[2])) for t in d.get("tasks") or ())
        return cls(skill=str(d["skill"]), suite_hash=str(d["suite_hash"]), skill_hash=str(d["skill_hash"]),
                   source=dict(d.get("source") or {}), tasks=tasks)


@dataclass(frozen=True)
class Target:
    """A verdict to produce: one skill (suite) on one model."""

    nodeid: str
    suite_rel: str
    model: str
    first_tasks: tuple[str, ...]
    #: why this selection can never give HELPS or HURTS (``stats.verdict.unreachable``), or ""
    unreachable: str = ""
    #: the suite's facts as collection read them (None: it could not), so that deciding
    #: need not read every suite and the library again: an xdist controller collects nothing
    facts: SuiteFacts | None = None
    #: every selected task in suite order: the order the sequential rule looks at them in
    #: (``stats/sequential.py``); empty for a target written before it was kept
    order: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (it travels from xdist workers in ``workeroutput``)."""
        return {"nodeid": self.nodeid, "suite_rel": self.suite_rel, "model": self.model,
                "first_tasks": list(self.first_tasks), "unreachable": self.unreachable,
                "facts": None if self.facts is None else self.facts.to_dict(), "order": list(self.order)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Target:
        """Rebuild a target written by :meth:`to_dict`."""
        facts = d.get("facts")
        return cls(nodeid=str(d["nodeid"]), suite_rel=str(d["suite_rel"]), model=str(d["model"]),
                   first_tasks=tuple(d.get("first_tasks") or ()), unreachable=str(d.get("unreachable") or ""),
                   facts=SuiteFacts.from_dict(facts) if isinstance(facts, Mapping) else None,
                   order=tuple(str(t) for t in d.get("order") or ()))


@dataclass(frozen=True)
class Cause:
    """The cause of a HURTS verdict and the SKILL.md line behind it (None if not verified)."""

    cause: str  # one line, at most 300 characters, links removed
    line: str | None  # as it stands in SKILL.md; None when the quoted line is not there
    input_tokens: int = 0
    output_tokens: int = 0
    #: the cause finder's prompt version (kept in the store, not part of equality)
    prompt_version: str = field(default="", compare=False)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; :meth:`from_dict` reads it back."""
        return {"cause": self.cause, "line": self.line,
                "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "prompt_version": self.prompt_version}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Cause:
        """Rebuild a cause written by :meth:`to_dict`.

        Raises:
            ValueError: ``cause`` missing or not a string.
        """
        if not isinstance(d.get("cause"), str):
            raise ValueError(f"stored cause: expected a string field 'cause', got {dict(d)!r}")
        line = d.get("line")
        return cls(cause=d["cause"], line=line if isinstance(line, str) else None,
                   input_tokens=int(d.get("input_tokens", 0)),
                   output_tokens=int(d.get("output_tokens", 0)),
                   prompt_version=str(d.get("prompt_version") or ""))


#: The judge's prompts' version (``engine/judge.py``): part of the judgment cache key
#: (``cache.judgment_key``) and of every judgment; bump whenever the prompts or parsing change.
JUDGE_PROMPT_VERSION = "judge-1"


@dataclass(frozen=True)
class Judgment:
    """The judge's decision on one pair, with everything needed to audit it."""

    winner: str | None  # "with" | "without" | "tie" | None (no outcome)
    picks: tuple[str, str]  # raw pick of each order: "A" | "B" | "tie" | "" (failed / not asked)
    reasons: tuple[str, str]
    order: tuple[str, str]  # which arm was A in each call, e.g. ("with", "without")
    judge_model: str
    input_tokens: int = 0
    output_tokens: int = 0
    error: str | None = None  # why there is no outcome
    prompt_version: str = JUDGE_PROMPT_VERSION

    def outcomes(self) -> tuple[bool, bool] | None:
        """``(with_success, without_success)``, or None when there is no outcome."""
        if self.winner == ARM_WITH:
            return (True, False)
        if self.winner == ARM_WITHOUT:
            return (False, True)
        if self.winner == "tie":
            return (True, True)
        return None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; :meth:`from_dict` reads it back."""
        return {
            "winner": self.winner,
            "picks": list(self.picks),
            "reasons": list(self.reasons),
            "order": list(self.order),
            "judge_model": self.judge_model,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "error": self.error,
            "prompt_version": self.prompt_version,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Judgment:
        """Rebuild a judgment written by :meth:`to_dict`.

        Raises:
            ValueError: a field is missing or has the wrong shape.
        """
        try:
            picks = tuple(d["picks"])
            reasons = tuple(d["reasons"])
            order = tuple(d["order"])
            if len(picks) != 2 or len(reasons) != 2 or len(order) != 2:
                raise ValueError("picks, reasons and order must hold two items each")
            winner = d["winner"]
            if winner not in (None, ARM_WITH, ARM_WITHOUT, "tie"):
                raise ValueError(f"winner must be with/without/tie/null, got {winner!r}")
            return cls(
                winner=winner,
                picks=(str(picks[0]), str(picks[1])),
                reasons=(str(reasons[0]), str(reasons[1])),
                order=(str(order[0]), str(order[1])),
                judge_model=str(d["judge_model"]),
                input_tokens=int(d.get("input_tokens", 0)),
                output_tokens=int(d.get("output_tokens", 0)),
                error=d.get("error"),
                prompt_version=str(d.get("prompt_version", JUDGE_PROMPT_VERSION)),
            )
        except (KeyError, TypeError) as err:
            raise ValueError(f"stored judgment: expected the fields of Judgment.to_dict(), "
                             f"got {dict(d)!r} ({err})") from err


@dataclass(frozen=True)
class PairJudgment:
    """The judgment of one pair of a verdict (its task and rep), as the reports show it."""

    task: str
    rep: int
    judgment: Judgment

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``task``, ``rep`` and the judgment's own fields (``Judgment.to_dict``)."""
        return {"task": self.task, "rep": self.rep, **self.judgment.to_dict()}


@dataclass(frozen=True)
class TrialRun:
    """A run a trial used, and whether it came from the cache."""

    record: RunRecord
    cached: bool


@dataclass(frozen=True, slots=True)
class TrialHead:
    """A run a trial used, as its head (``records.RunHead``), and whether it came from the cache."""

    head: RunHead
    cached: bool


# --------------------------------------------------------------------------- pairs


def scorable(rec: RunFacts) -> bool:
    """A run that ended in a way the judge can score (answered, or did not complete)."""
    return rec.status in (ANSWERED, INCOMPLETE)


@dataclass(frozen=True)
class Pair:
    """The two runs of one task and rep (either may be missing), and the pair's judgment.

    ``judgment`` is a judgment as a dict (``Judgment.to_dict()``: ``winner`` is
    "with", "without", "tie" or None) for a check-less pair that has one.
    """

    task_id: str
    rep: int
    with_run: RunFacts | None
    without_run: RunFacts | None
    judgment: Mapping[str, Any] | None = None

    def run(self, arm: str) -> RunFacts | None:
        """The run of ``arm``."""
        return self.with_run if arm == ARM_WITH else self.without_run

    @property
    def needs_judge(self) -> bool:
        """Both runs are there and scorable, and at least one has no check outcome."""
        w, wo = self.with_run, self.without_run
        return (w is not None and wo is not None and (w.needs_judge or wo.needs_judge)
                and scorable(w) and scorable(wo))

    @property
    def source(self) -> str | None:
        """Where the pair's outcome comes from: "check", "judge", or None (left out)."""
        w, wo = self.with_run, self.without_run
        if w is None or wo is None:
            return None
        if w.outcome is not None and wo.outcome is not None:
            return "check"
        if self.needs_judge and self.judgment is not None and self.judgment.get("winner") in WINNERS:
            return "judge"
        return None

    def arm_outcomes(self) -> tuple[bool, bool] | None:
        """``(with_success, without_success)``, or None when the pair is left out.

        A check decides when both runs have an outcome; else the judgment (a
        tie is success for both); a run that did not complete is a failure
        whatever the judge said."""
        source = self.source
        w, wo = self.with_run, self.without_run
        if source is None or w is None or wo is None:
            return None
        if source == "check":
            return bool(w.outcome), bool(wo.outcome)
        winner = (self.judgment or {}).get("winner")
        return (winner in (ARM_WITH, "tie") and w.status == ANSWERED,
                winner in (ARM_WITHOUT, "tie") and wo.status == ANSWERED)

    def outcome(self) -> PairOutcome | None:
        """The pair as evidence for the verdict, or None when it is left out."""
        got = self.arm_outcomes()
        if got is None or self.with_run is None or self.without_run is None:
            return None
        return PairOutcome(task_id=self.task_id, rep=self.rep, with_success=got[0],
                           without_success=got[1], with_tokens=self.with_run.tokens,
                           without_tokens=self.without_run.tokens, source=str(self.source))


JudgmentLookup = Callable[[RunFacts, RunFacts], "Mapping[str, Any] | None"]


def group_pairs(runs: Iterable[RunFacts], judgment_of: JudgmentLookup | None = None) -> list[Pair]:
    """The runs grouped into pairs (by task and rep, sorted), each with its judgment.

    ``judgment_of(with_run, without_run)`` is asked only for pairs that need
    the judge and returns the judgment as a dict, or None when there is none.
    The one grouping used by the controller, ``merge``, appeals and the reports.
    """
    by_key: dict[tuple[str, int], dict[str, RunFacts]] = {}
    for rec in runs:
        by_key.setdefault((rec.task_id, int(rec.rep)), {})[rec.arm] = rec
    pairs = []
    for (task_id, rep), arms in sorted(by_key.items()):
        pair = Pair(task_id, rep, arms.get(ARM_WITH), arms.get(ARM_WITHOUT))
        if judgment_of is not None and pair.needs_judge:
            assert pair.with_run is not None and pair.without_run is not None
            found = judgment_of(pair.with_run, pair.without_run)
            if found is not None:
                pair = Pair(task_id, rep, pair.with_run, pair.without_run, dict(found))
        pairs.append(pair)
    return pairs


def pair_outcomes(pairs: Iterable[Pair]) -> list[PairOutcome]:
    """The evidence of ``pairs``: the pairs where both arms have an outcome."""
    return [o for o in (p.outcome() for p in pairs) if o is not None]


# --------------------------------------------------------------------------- outcomes


@dataclass(frozen=True)
class Outcome:
    """A verdict and everything shown about it."""

    target: Target
    skill: str
    verdict: Verdict
    skill_hash: str
    suite_hash: str
    cached_runs: int
    fresh_runs: int
    #: USD this session spent on the verdict: its fresh runs, judgments and cause.
    spend: float
    cause: Cause | None = None
    #: the judged pairs the verdict used, by task and rep
    judgments: tuple[PairJudgment, ...] = ()
    failed: bool = False
    made_at: str = field(default_factory=utc_now)
    #: where the suite came from (``frozen.SuiteSource.to_dict()`` and its ``label``)
    suite_source: Mapping[str, Any] = field(default_factory=dict)

    @property
    def kind(self) -> VerdictKind:
        """The verdict's kind."""
        return self.verdict.kind

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description of the verdict (store, JSON report, HTML)."""
        return {
            "skill": self.skill, "model": self.target.model, "suite": self.target.suite_rel,
            "nodeid": self.target.nodeid, "skill_hash": self.skill_hash,
            "suite_hash": self.suite_hash, "verdict": self.verdict.to_dict(),
            "cached_runs": self.cached_runs, "fresh_runs": self.fresh_runs,
            "spend_usd": round(self.spend, 6), "failed": self.failed,
            "cause": self.cause.to_dict() if self.cause is not None else None,
            "judgments": [j.to_dict() for j in self.judgments],
            "first_tasks": list(self.target.first_tasks),
            # the order the sequential rule looked at the tasks in (merge decides again by it)
            "task_order": list(self.target.order),
            "made_at": self.made_at,
            "suite_source": dict(self.suite_source),
        }


@dataclass(frozen=True)
class TrialResult:
    """One session's trial as the reports see it: immutable values, no session.

    Paths are as the user should read them (relative to the rootdir where
    they lie under it).  ``runs`` holds, per verdict nodeid, the runs it used, whole (their
    transcripts and files), for the reports that show them (JSON, HTML): empty when the
    session asked for neither; ``prompts`` the task prompts per suite in suite order.
    """

    trial: str
    outcomes: tuple[Outcome, ...]
    models: tuple[str, ...] = ()
    backend: str | None = None
    agent: str = ""
    judge_model: str | None = None
    store: str = ""
    quarantine_file: str = ""
    started_at: str | None = None
    spend: float = 0.0
    early_skipped: int = 0
    errors: tuple[str, ...] = ()
    quarantined: tuple[tuple[str, str], ...] = ()  # (skill, model) set by this session
    lifted: tuple[tuple[str, str], ...] = ()
    runs: Mapping[str, tuple[TrialRun, ...]] = field(default_factory=dict)
    prompts: Mapping[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    #: per suite, (task id, its check command or "") in suite order
    checks: Mapping[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    #: per verdict nodeid, task id -> why its runs were skipped (pytest's skip reason:
    #: the budget, no price, early stop, no outcome)
    skip_reasons: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
