"""Getting one run (README "How a run is reused"): early stop, the cache, the budget,
``engine.run.execute_run``, the store; and the typed summary of what a run item did.

:class:`Runs` does the runs of the run items of one process (a worker, or a session
without xdist) through the session's :class:`~pytest_skillcourt.plugin.court.Court`.  What
a run item did is a :class:`RunSummary` (a ``runs[MODEL]`` item's, a
:class:`BatchSummary`): set on the item while it runs, carried on its reports as
``report.skill_court_run`` (``hooks.ItemHooks.pytest_runtest_makereport``; xdist sends it
as :func:`summary_to_dict`), and read as it is by the controller (skip reasons, early
stops, the progress line, ``-v``'s words, the JUnit judgments' run names).  It becomes
strings once, at the edge: ``junit.run_properties`` (the item's ``user_properties``).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Sequence

import pytest

from pytest_skillcourt.agent.context import RunContext
from pytest_skillcourt.core.records import ANSWERED, ARMS, HARNESS_ERROR, INCOMPLETE, NO_ANSWER, RunFacts
from pytest_skillcourt.core.settings import Settings
from pytest_skillcourt.core.skills import Library
from pytest_skillcourt.core.store import Store, StoreError
from pytest_skillcourt.core.suite import Suite
from pytest_skillcourt.core.trial import group_pairs, pair_outcomes
from pytest_skillcourt.engine.cache import RunKeys, reach_of, still_valid
from pytest_skillcourt.plugin.collect import OneRun, RunId, RunItem, RunsItem, RunSpec, SkillCourtError
from pytest_skillcourt.plugin.concurrency import RunAhead
from pytest_skillcourt.plugin.court import BUDGET_REACHED, UNPRICED, Court
from pytest_skillcourt.stats.sequential import FIRST_LOOK
from pytest_skillcourt.stats.verdict import Stop, sequential_path

#: How often a worker looks at the store while it waits for the earlier tasks' runs.
POLL_S = 0.25
#: A served run item asks the store for the records of at most this many next run items too.
LOOK_AHEAD = 64
#: ... and a served runs item (``--skill-court-items skill``) for the runs of this many next
#: runs items: about one query of the store's 500 keys.
BATCH_LOOK_AHEAD = 40
#: The order a ``runs[MODEL]`` item counts its runs' outcomes in (``outcomes``: "8 success, 4 skipped").
BATCH_OUTCOMES = ("success", "failure", "pending-judge", "none", "skipped", "error")


# -- what a run item did ----------------------------------------------------------------------


@dataclass(frozen=True)
class RunSummary:
    """What one run did, as its item's reports carry it.  Without a record (``recorded``
    False) the run never got one: skipped before it started, or failed."""

    run: RunId
    #: the item's name as the terminal and JUnit show it (``t1[with]``)
    name: str
    run_id: str = ""
    status: str = ""
    #: success, failure, pending-judge or none ("" without a record)
    outcome: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    tokens: int = 0
    cost_usd: float | None = None
    skill_loaded: bool = False
    cached: bool = False
    duration_s: float = 0.0
    check_exit: int | None = None
    #: skipped by the sequential rule (or the seed's early stop)
    early_stop: bool = False
    #: why the item is skipped (pytest's skip reason), None when it is not
    skip_reason: str | None = None
    #: why the item fails (a harness error), None when it does not
    error: str | None = None

    @property
    def recorded(self) -> bool:
        return bool(self.status)

    @property
    def cost(self) -> float:
        """What it cost in USD, to the micro-dollar its properties show."""
        return round(self.cost_usd or 0.0, 6)

    def with_record(self, record: RunFacts, cached: bool) -> RunSummary:
        """The summary of the run ``record`` (its head, when reused from the cache:
        ``cached``): its skip (no outcome) or failure (a harness error) included."""
        return RunSummary.of_record(self.run, self.name, record, cached, early_stop=self.early_stop)

    @staticmethod
    def of_record(run: RunId, name: str, record: RunFacts, cached: bool, *, early_stop: bool = False) -> RunSummary:
        """:meth:`with_record` of the summary of ``run`` named ``name``, made at once."""
        error = skip = None
        if record.status == HARNESS_ERROR:
            error = f"{run.skill} / {run.task_id} [{run.arm}]: {record.error}"
        elif record.status not in (ANSWERED, INCOMPLETE) or (record.outcome is None and not record.needs_judge):
            reason = record.error or record.status
            if record.status == NO_ANSWER:
                reason = f"left out, not held against the skill: {reason}"
            skip = f"no outcome: {reason}"
        # every field named, filled at once (``_made``): a cached session makes one of these
        # per run, 24,000 for 2,000 skills
        return RunSummary._made(
            run=run, name=name, run_id=record.run_id, status=record.status,
            outcome=("pending-judge" if record.needs_judge else "none" if record.outcome is None else
                     "success" if record.outcome else "failure"),
            input_tokens=record.input_tokens, output_tokens=record.output_tokens, tokens=record.tokens,
            cost_usd=record.cost_usd, skill_loaded=record.skill_loaded, cached=cached,
            duration_s=record.duration_s, check_exit=record.check_exit, early_stop=early_stop,
            skip_reason=skip, error=error)

    def tally(self) -> tuple[int, int, int, float]:
        """(runs, cached runs, tokens, USD) for the progress line."""
        return 1, int(self.cached), self.tokens, self.cost

    @classmethod
    def _made(cls, **fields: Any) -> RunSummary:
        """``RunSummary(**fields)`` given every field: the same object (equal, its repr,
        ``dataclasses.replace`` and pickling alike), its ``__dict__`` filled at once.  A
        frozen dataclass's ``__init__`` sets its 19 fields one ``object.__setattr__`` at a
        time: 2.9 us a summary against 0.3 us."""
        if fields.keys() != _SUMMARY_FIELDS:
            wrong = sorted(_SUMMARY_FIELDS ^ fields.keys())
            raise TypeError(f"RunSummary._made takes every field, and no other: {wrong}")
        made = object.__new__(cls)
        made.__dict__.update(fields)
        return made


#: The fields of a :class:`RunSummary` (``_made`` is given every one).
_SUMMARY_FIELDS = frozenset(f.name for f in dataclasses.fields(RunSummary))


@dataclass(frozen=True)
class BatchSummary:
    """What a ``runs[MODEL]`` item did: each of its runs' summaries, in run order
    (``finished`` False: it stopped on an error before the last)."""

    suite_rel: str
    skill: str
    model: str
    runs: tuple[RunSummary, ...] = ()
    finished: bool = False

    @functools.cached_property
    def done(self) -> tuple[RunSummary, ...]:
        """The runs that reached an outcome (neither skipped nor failed).  Found once: the
        totals, the properties and the progress line each ask (a frozen instance's runs
        never change; ``cached_property`` keeps it beside the fields, not among them)."""
        return tuple(r for r in self.runs if r.skip_reason is None and r.error is None)

    @property
    def cached(self) -> int:
        return sum(1 for r in self.done if r.cached)

    @property
    def tokens(self) -> int:
        return sum(r.tokens for r in self.done)

    @property
    def cost(self) -> float:
        return sum(r.cost for r in self.done)

    @property
    def duration_s(self) -> float:
        return sum(r.duration_s for r in self.done)

    @property
    def early_stopped(self) -> int:
        return sum(1 for r in self.runs if r.skip_reason is not None and r.early_stop)

    @property
    def errors(self) -> list[str]:
        return [r.error for r in self.runs if r.skip_reason is None and r.error is not None]

    @property
    def skip_reasons(self) -> dict[str, str]:
        """Task id -> why its runs were skipped (the first reason of the task's runs)."""
        out: dict[str, str] = {}
        for r in self.runs:
            if r.skip_reason is not None:
                out.setdefault(r.run.task_id, r.skip_reason)
        return out

    def counts(self) -> dict[str, int]:
        """How many runs ended each way, in :data:`BATCH_OUTCOMES` order (not to be changed:
        counted once)."""
        return self._counts

    @functools.cached_property
    def _counts(self) -> dict[str, int]:
        found: dict[str, int] = {}
        for r in self.runs:
            what = "skipped" if r.skip_reason is not None else "error" if r.error is not None else r.outcome
            found[what] = found.get(what, 0) + 1
        return {what: found[what] for what in BATCH_OUTCOMES if what in found}

    def tally(self) -> tuple[int, int, int, float]:
        """(runs, cached runs, tokens, USD) for the progress line."""
        if not self.finished:
            return 1, 0, 0, 0.0
        return len(self.runs), self.cached, self.tokens, self.cost


Summary = RunSummary | BatchSummary


def summary_to_dict(summary: Summary) -> dict[str, Any]:
    """``summary`` as plain data (xdist sends reports as such): what ``dataclasses.asdict``
    gives, field by field (its fields hold no container but the run's :class:`RunId` and a
    batch's runs), without its recursive deep copy (under cProfile, 0.045 s of an xdist
    worker's 0.68 s for its 268 summaries)."""
    if isinstance(summary, BatchSummary):
        return {"kind": "batch", "suite_rel": summary.suite_rel, "skill": summary.skill, "model": summary.model,
                "runs": tuple(_run_dict(r) for r in summary.runs), "finished": summary.finished}
    return {"kind": "run", **_run_dict(summary)}


def _run_dict(summary: RunSummary) -> dict[str, Any]:
    fields = summary.__dict__
    made = {name: fields[name] for name in _SUMMARY_ORDER}
    made["run"] = {name: getattr(summary.run, name) for name in _RUN_ID_ORDER}
    return made


#: The fields of a :class:`RunSummary` and a :class:`RunId`, in their order.
_SUMMARY_ORDER = tuple(f.name for f in dataclasses.fields(RunSummary))
_RUN_ID_ORDER = tuple(f.name for f in dataclasses.fields(RunId))


def summary_from_dict(data: dict[str, Any]) -> Summary:
    """Rebuild what :func:`summary_to_dict` wrote."""
    data = dict(data)
    kind = data.pop("kind")
    if kind == "batch":
        data["runs"] = tuple(summary_from_dict({"kind": "run", **r}) for r in data["runs"])
        return BatchSummary(**data)
    data["run"] = RunId(**data["run"])
    return RunSummary(**data)


# -- getting one run ----------------------------------------------------------------------------


class Got(NamedTuple):
    """A run recorded in the store for this trial: reused from the cache (``cached``), as
    its head (``records.RunHead``), or executed now, its whole record.  A named tuple: a
    cached session makes one per run."""

    record: RunFacts
    cached: bool


@dataclass(frozen=True)
class NotRun:
    """A run that will not be had in this session, and why (pytest's skip reason)."""

    reason: str
    early_stop: bool = False


def _not_had(item: OneRun, why: NotRun) -> RunSummary:
    """The summary of ``item``'s run that will not be had in this session (a skip)."""
    return RunSummary(item.run, item.name, early_stop=why.early_stop, skip_reason=why.reason)


def _why(err: BaseException) -> str:
    """What a run that failed with no record ended with, for the store (``record_ended``)."""
    return str(getattr(err, "msg", "") or err) or type(err).__name__


@dataclasses.dataclass
class RunGroup:
    """The run items of one suite, model and early-stop phase, in run order; or every runs
    item of the session, in run order (``served``)."""

    items: list[RunItem | RunsItem] = dataclasses.field(default_factory=list)
    #: whether the last of them asked for was served; if not, the next ones ask only for
    #: themselves (a session that runs them would ask for the rest over and over)
    served: bool = True


class Runs:
    """The runs of one process's run items.  It is the ``collect.Court`` its suite files
    and items are given: they read suites through it and run through it."""

    def __init__(self, court: Court) -> None:
        self.court = court
        #: (suite, model) -> its first four selected tasks (``selection.arrange``)
        self.first_tasks: dict[tuple[str, str], tuple[str, ...]] = {}
        #: (suite, model) -> every selected task in suite order (the sequential rule's looks)
        self.orders: dict[tuple[str, str], tuple[str, ...]] = {}
        #: (suite, model) -> why it can never reach a verdict (``stats.verdict.unreachable``)
        self.undecidable: dict[tuple[str, str], str] = {}
        #: run item -> the group of its (suite, model, phase) and its place in it (a runs item:
        #: the group of every runs item): the store is asked for the next ones' records with
        #: its own (``served``)
        self.after: dict[RunItem | RunsItem, tuple[RunGroup, int]] = {}
        #: (suite, model) -> where the sequential rule stopped, once the tasks before it are
        #: final, and the place in the order of the last task it used
        self._stops: dict[tuple[str, str], tuple[Stop, int]] = {}
        #: with --skill-court-concurrency N > 1: the threads running the items ahead
        self.ahead: RunAhead[OneRun, Got | NotRun] | None = None

    # -- what collection needs (``collect.Court``) -------------------------------------------------

    @property
    def settings(self) -> Settings:
        return self.court.settings

    def library(self) -> Library:
        return self.court.library()

    def rel(self, path: Any) -> str:
        return self.court.rel(path)

    def remember_suite(self, suite: Suite) -> None:
        self.court.remember_suite(suite)

    def read_suite(self, path: Any) -> Suite:
        return self.court.read_suite(path)

    # -- the items' runtest ----------------------------------------------------------------------

    def run_item(self, item: RunItem) -> None:
        """Execute (or reuse) one run and turn it into the item's outcome; a damaged
        store is the item's readable failure, not a ``sqlite3`` traceback."""
        item.skill_court_run = RunSummary(item.run, item.name)
        try:
            summary = item.skill_court_run = self.run_one(item)
        except StoreError as err:
            raise SkillCourtError(str(err)) from None
        if summary.error is not None:
            raise SkillCourtError(summary.error)
        if summary.skip_reason is not None:
            pytest.skip(summary.skip_reason)

    def run_batch(self, item: RunsItem) -> None:
        """Do every run of one skill on one model (``--skill-court-items skill``), as the
        run items would one by one, into the item's :class:`BatchSummary`.  The item fails
        when a run hit a harness error, and is skipped when every run was."""
        batch = BatchSummary(item.suite_rel, item.suite.skill, item.model)
        item.skill_court_run = batch
        if self.ahead is None and any(spec.looked_up is None for spec in item.runs):
            # looked up together (``served`` may have; the threads look up each run they take)
            try:
                for spec, found in zip(item.runs, self.look_up_many(item.runs)):
                    spec.looked_up = found
            except Exception:  # noqa: BLE001 - raised again by each run's own look-up, as its error
                pass
        # every run found in the store (``served``): each one reused, without the steps of a run to make
        reuse = self.ahead is None and all(spec.looked_up is not None and spec.looked_up[2] is not None
                                           for spec in item.runs)
        summaries = []
        one: Callable[[RunSpec], RunSummary] = (
            functools.partial(self.reuse, store=self.court.store(), trial=self.court.trial) if reuse
            else self.run_one)
        for spec in item.runs:
            try:
                try:
                    summaries.append(one(spec))
                except StoreError as err:
                    raise SkillCourtError(str(err)) from None
            except SkillCourtError as err:
                summaries.append(dataclasses.replace(RunSummary(spec.run, spec.name), error=str(err)))
        batch = item.skill_court_run = dataclasses.replace(batch, runs=tuple(summaries), finished=True)
        errors = batch.errors
        if errors:
            raise SkillCourtError(f"{len(errors)} of {len(item.runs)} runs failed:\n" + "\n".join(errors))
        if item.runs and batch.counts().get("skipped") == len(item.runs):
            pytest.skip(next(iter(batch.skip_reasons.values())))

    def run_one(self, item: OneRun) -> RunSummary:
        """The summary of ``item``'s run, had now or by a thread ahead: a skip or a harness
        error is in it, not raised."""
        got = self.ahead.result(item) if self.ahead is not None and self.ahead.has(item) else self.obtain(item)
        if isinstance(got, NotRun):
            return _not_had(item, got)
        return RunSummary.of_record(item.run, item.name, got.record, got.cached)

    def reuse(self, item: OneRun, store: Store, trial: str) -> RunSummary:
        """:meth:`run_one` of a run whose head the look-up found (``item.looked_up``): what
        :meth:`obtain` does for it, without the steps of a run to make (a cached session
        of 24,000 runs went through them for each).  ``store`` and ``trial``: the court's,
        asked once per runs item by its caller."""
        stop = self._stop(item)
        found = item.looked_up
        item.looked_up = None
        if stop is not None:
            self._ended_without_record(item, stop.reason)
            return _not_had(item, stop)
        assert found is not None and found[2] is not None
        try:
            store.record_run(found[2], trial=trial, cached=True)
        except BaseException as err:  # as obtain: failed with no record, nobody may wait for it
            self._ended_without_record(item, _why(err))
            raise
        return RunSummary.of_record(item.run, item.name, found[2], True)

    # -- getting the run -------------------------------------------------------------------------

    def obtain(self, item: OneRun) -> Got | NotRun:
        """The run of ``item`` from the cache or executed now, recorded in the store; or
        why it is not had (early stop; for a run to execute, the budget: a run from the
        cache spends nothing).  Thread-safe (``--skill-court-concurrency`` calls it from
        its threads)."""
        store = self.court.store()
        try:
            got = self._obtain(item, store)
        except BaseException as err:  # failed with no record: nobody may wait for it
            self._ended_without_record(item, _why(err))
            raise
        if isinstance(got, NotRun):
            self._ended_without_record(item, got.reason)
            return got
        store.record_run(got.record, trial=self.court.trial, cached=got.cached)
        return got

    def _stop(self, item: OneRun) -> NotRun | None:
        """Why ``item``'s run is not had, whether or not the store holds it: its suite can
        never decide, or the sequential rule already ended its trial."""
        return self._undecidable_stop(item) or (self._early_stop(item) if self.settings.early_stop else None)

    def _obtain(self, item: OneRun, store: Any) -> Got | NotRun:
        run = item.run
        stop = self._stop(item)
        if stop is not None:
            return stop
        ctx, key, record = item.looked_up or self.look_up(item)
        item.looked_up = None
        cached = record is not None
        if record is None:
            assert ctx is not None  # a run to make has its context (``look_up_many``)
            stop = self._budget_stop(store)
            if stop is not None:
                return stop
            store.flush_marks()  # nothing held while a run takes minutes (another worker may wait)
            from pytest_skillcourt.engine.run import execute_run  # only where a run executes: a cached worker never needs it

            record = execute_run(ctx, run_id=f"{self.court.trial}-{key[:16]}", key=key)
        if self.ahead is not None and self.ahead.cancelled.is_set():
            # the session stopped while it ran: its sandbox was closed under it
            raise SkillCourtError(f"{run.skill} / {run.task_id} [{run.arm}]: cancelled, the session stopped")
        return Got(record, cached)

    def _ended_without_record(self, item: OneRun, reason: str) -> None:
        """Tell the store (every worker reads it) that ``item``'s run will never be recorded
        in this session, so early stop does not wait for it (README "Early stop")."""
        run = item.run
        try:
            self.court.store().record_ended(trial=self.court.trial, suite=run.suite_rel, task_id=run.task_id,
                                            arm=run.arm, rep=run.rep, model=run.model, reason=reason)
        except Exception:  # noqa: BLE001 - the item's own error is the one to report
            pass

    def look_up(self, item: OneRun) -> tuple[RunContext | None, str, RunFacts | None]:
        """The run's key and its head in the cache, or its context and None: it must run."""
        return self.look_up_many([item])[0]

    def look_up_many(self, items: Sequence[OneRun]) -> list[tuple[RunContext | None, str, RunFacts | None]]:
        """:meth:`look_up` of each item, with one store query for them all.  The runs of one
        suite, arm and model share everything but their task and rep: one context, key
        template (``cache.RunKeys``) and reach digest serve them all; a run's own context
        is made only when it must run."""
        shared: dict[tuple[int, str, str], tuple[RunKeys, str]] = {}
        keys, reaches = [], []
        for item in items:
            run = item.run
            group = (id(item.suite), run.arm, run.model)
            found = shared.get(group)
            if found is None:
                ctx = self.court.run_context(item)
                found = shared[group] = (RunKeys(ctx), reach_of(ctx))
            keys.append(found[0].key(item.task.id, item.task.content_hash(item.suite.setup), run.rep))
            reaches.append(found[1])
        heads = {} if self.settings.fresh else self.court.store().cached_heads(keys)
        out: list[tuple[RunContext | None, str, RunFacts | None]] = []
        for item, key, reach in zip(items, keys, reaches):
            head = heads.get(key)
            if head is not None and not still_valid(head, reach):
                head = None  # a skill within its reach has changed since
            out.append((None, key, head) if head is not None else (self.court.run_context(item), key, None))
        return out

    def served(self, item: RunItem | RunsItem) -> bool:
        """Whether ``item``'s runs all come from the store (looked up now and kept for its
        ``runtest``, or already done ahead): nothing to capture, it may skip pytest's
        per-phase hooks (``protocol.py``)."""
        runs: list[OneRun] = list(item.runs) if isinstance(item, RunsItem) else [item]
        if self.ahead is not None:
            done = [self.ahead.finished(run) for run in runs]
            return all(isinstance(d, Got) and d.cached for d in done)
        ask = [run for run in runs if run.looked_up is None]
        mine = len(ask)
        group, at = self.after.get(item, (None, 0))
        if ask and group is not None and group.served:  # and the next runs of its group, in the same query
            ahead = group.items[at + 1:at + 1 + (LOOK_AHEAD if isinstance(item, RunItem) else BATCH_LOOK_AHEAD)]
            ask += [run for other in ahead for run in (other.runs if isinstance(other, RunsItem) else (other,))
                    if run.looked_up is None]
        try:
            found = self.look_up_many(ask) if ask else []
        except Exception:  # noqa: BLE001 - raised again in runtest: the full protocol reports it as the item's
            return False
        for index, (run, looked_up) in enumerate(zip(ask, found)):
            if index < mine or looked_up[2] is not None:  # a run yet to do asks again in its turn
                run.looked_up = looked_up
        served = all(run.looked_up is not None and run.looked_up[2] is not None for run in runs)
        if ask and group is not None:  # a group that runs is not asked for ahead until one of it is served
            group.served = served
        return served

    def start_ahead(self, items: Sequence[pytest.Item]) -> None:
        """``--skill-court-concurrency N``: N threads execute the selected runs ahead, in
        the order pytest will report them (the first four tasks of each suite first, so a
        later task's early-stop wait only waits for runs already started)."""
        n = self.settings.concurrency
        if n <= 1:
            return
        runs: list[OneRun] = [it for it in items if isinstance(it, RunItem)]
        runs += [spec for it in items if isinstance(it, RunsItem) for spec in it.runs]
        if len(runs) > 1:
            self.ahead = RunAhead(self.obtain, runs, n)

    # -- why a run is not had ------------------------------------------------------------------

    def _budget_stop(self, store: Any) -> NotRun | None:
        s = self.settings
        spent = store.spend(self.court.trial)
        if spent >= s.budget:
            return NotRun(f"{BUDGET_REACHED}: ${spent:.4f} of ${s.budget:.2f} spent in this session "
                          "(raise it with --skill-court-budget)")
        if not s.allow_unpriced:
            unpriced = store.unpriced_models(self.court.trial)
            if unpriced:
                return NotRun(
                    f"{UNPRICED} {', '.join(unpriced)}: the provider reported none, so "
                    "spend cannot be held to the budget; add 'MODEL = IN OUT' (USD per million "
                    "tokens) to ini skill_court_prices or pass --skill-court-allow-unpriced")
        return None

    def _undecidable_stop(self, item: OneRun) -> NotRun | None:
        """Every run of a suite that can never reach a verdict (too few tasks selected) is
        skipped: its runs would be paid for and the verdict INCONCLUSIVE whatever they do.
        The reason is the collection's (``stats.verdict.unreachable``)."""
        why = self.undecidable.get((item.run.suite_rel, item.run.model))
        if why and not self.settings.run_undecidable:
            return NotRun(f"never decidable: {why} (--skill-court-run-undecidable runs it anyway)")
        return None

    def _early_stop(self, item: OneRun) -> NotRun | None:
        """A run whose trial the sequential rule already ended is not had (``stats/sequential.py``).

        The rule looks at the selected tasks in suite order; once the tasks before this
        item's are final (recorded, or ended with no record) and one of their looks stopped
        (HELPS or HURTS on a stricter tail, NEUTRAL when the rest could not decide, or the
        seed's early stop when the first four ended alike), this task cannot change the
        verdict.  Waits (bounded) for the runs of those earlier tasks: on other xdist
        workers or threads they run ahead of this item."""
        run = item.run
        key = (run.suite_rel, run.model)
        order = self.orders.get(key, ())
        if run.task_id not in order:
            return None
        position = order.index(run.task_id)
        found = self._stops.get(key)
        if found is None and position >= FIRST_LOOK:
            found = self._sequential_stop(item, order, position)
        if found is None or position <= found[1]:
            return None
        stop = found[0]
        if stop.kind == "early-stop":
            return NotRun("early stop: the first four tasks ended the same way in both arms with "
                          "tokens within the margin; verdict NEUTRAL from those four "
                          "(--skill-court-no-early-stop runs every task)", early_stop=True)
        said = {"helps": "HELPS", "hurts": "HURTS",
                "futility": "NEUTRAL: the other tasks were unlikely to decide"}[stop.kind]
        return NotRun(f"sequential stop: the first {stop.look} of {stop.planned} tasks decided it, "
                      f"verdict {said} (--skill-court-no-early-stop runs every task)", early_stop=True)

    def _sequential_stop(self, item: OneRun, order: tuple[str, ...], position: int) -> tuple[Stop, int] | None:
        """Where the sequential rule stopped over the tasks before ``position`` of ``order``,
        and the place in ``order`` of the last task it used, remembered (a stop over final
        tasks cannot change); None when it did not stop there,
        or the runs of those tasks were not all final in time, or one of their pairs waits
        for the judge (judged after the runs: its outcome is not known yet).  Never waits in
        a session with no other worker."""
        run = item.run
        key = (run.suite_rel, run.model)
        before = set(order[:position])
        reps = item.suite.reps or 1
        needed = {(t, arm, rep) for t in before for arm in ARMS for rep in range(1, reps + 1)}
        deadline = time.monotonic() + 2 * float(item.suite.timeout or self.settings.timeout) + 60
        store = self.court.store()
        trial = self.court.trial
        # Alone (no other xdist worker, no threads running ahead), the earlier tasks' items came
        # before this one: what is not recorded now never will be.
        alone = self.ahead is None and self.court.role.workers <= 1
        while True:
            runs = [th.head for th in store.trial_heads(trial, suite=run.suite_rel, model=run.model)
                    if th.head.task_id in before]
            have = {(r.task_id, r.arm, r.rep) for r in runs}
            if needed <= have or alone or needed <= have | store.ended_runs(trial, suite=run.suite_rel,
                                                                           model=run.model):
                break
            if time.monotonic() > deadline:
                return None
            time.sleep(POLL_S)
        pairs = group_pairs(runs)
        if any(p.needs_judge for p in pairs):
            return None
        stop = sequential_path(pair_outcomes(pairs), order)
        if not stop.kind:
            return None
        found = (stop, max(order.index(p.task_id) for p in stop.pairs))
        self._stops[key] = found
        return found
