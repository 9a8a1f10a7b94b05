"""What a process runs, in which order: the selected items after every other plugin
chose (``-k``, ``-m``, ``--lf``), given their verdicts' runs back, sharded, turned into
targets (the verdicts to produce) and ordered for the sequential rule."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from pytest_skillcourt.core.settings import FailOn
from pytest_skillcourt.core.trial import Target
from pytest_skillcourt.plugin.collect import RunItem, RunsItem, VerdictItem
from pytest_skillcourt.plugin.court import Court
from pytest_skillcourt.plugin.runs import RunGroup, Runs
from pytest_skillcourt.stats.verdict import EARLY_STOP_TASKS, unreachable


def give_verdicts_their_runs(collected: list[Any], items: list[Any]) -> list[Any]:
    """A verdict selected without any of its runs (``--lf`` after a failed
    verdict, ``-k verdict``) would be decided on nothing; select its runs
    again (unchanged ones come from the cache).  Returns the runs selected again.
    ``collected`` is only read; ``items`` is changed in place."""
    if items == collected:  # nothing filtered (items compare by identity): as for nearly every call
        return []

    def key(item: Any) -> tuple[str, str] | None:
        if isinstance(item, RunItem):
            return (item.run.suite_rel, item.run.model)
        if isinstance(item, (VerdictItem, RunsItem)):
            return (item.suite_rel, item.model)
        return None

    wanted = {key(it) for it in items if isinstance(it, VerdictItem)}
    have = {key(it) for it in items if isinstance(it, (RunItem, RunsItem))}
    missing = wanted - have
    if not missing:
        return []
    chosen = set(map(id, items))
    back = [it for it in collected if id(it) not in chosen and isinstance(it, (RunItem, RunsItem))
            and key(it) in missing]
    again = set(map(id, back))
    items[:] = [it for it in collected if id(it) in chosen or id(it) in again]
    return back


def refuse_unreachable_gates(court: Court) -> None:
    """Under ``--skill-court-fail-on inconclusive`` a verdict that can never be HELPS or
    HURTS would fail after every run was paid for: a usage error before any run instead."""
    gates = court.unreachable_gates()
    if gates and court.settings.fail_on == FailOn.INCONCLUSIVE:
        raise pytest.UsageError(
            "skill court: --skill-court-fail-on inconclusive, but these verdicts can never be "
            "HELPS or HURTS, so they would fail whatever the runs do:\n  " + "\n  ".join(gates))


def _shard(court: Court, config: pytest.Config, items: list[pytest.Item]) -> list[pytest.Item]:
    """The items of this shard (``--skill-court-shard I/N``: by suite); the rest deselected."""
    shard = court.settings.shard
    keep: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        if shard and isinstance(item, (RunItem, RunsItem, VerdictItem)):
            rel = item.run.suite_rel if isinstance(item, RunItem) else item.suite_rel
            bucket = int(hashlib.sha256(rel.encode()).hexdigest(), 16) % shard[1]
            if bucket != shard[0] - 1:
                dropped.append(item)
                continue
        keep.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    return keep


def _tasks_of(item: pytest.Item) -> tuple[tuple[str, str], list[str], int] | None:
    """The (suite, model) of ``item``'s runs, their tasks in order and their highest rep;
    None for an item without runs.  A runs item's runs share one suite and model."""
    if isinstance(item, RunItem):
        return (item.run.suite_rel, item.run.model), [item.run.task_id], item.run.rep
    if isinstance(item, RunsItem) and item.tasks:
        return (item.suite_rel, item.model), [task.id for task in item.tasks], item.reps
    return None


def arrange(court: Court, runs: Runs, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Shard ``items``, make the court's targets of the selected verdict items and the
    runs' plan (each suite's selected tasks, in order), and leave in ``items`` the run
    queue: the verdict items out of it (the controller reports them), in run order."""
    keep = _shard(court, config, items)
    first: dict[tuple[str, str], list[str]] = {}
    reps: dict[tuple[str, str], int] = {}
    for item in keep:
        found = _tasks_of(item)
        if found is None:
            continue
        key, task_ids, rep = found
        tasks = first.setdefault(key, [])
        tasks += [t for t in task_ids if t not in tasks]
        reps[key] = max(reps.get(key, 0), rep)
    for item in keep:
        if isinstance(item, VerdictItem):
            key = (item.suite_rel, item.model)
            chosen = first.get(key, [])
            target = court.targets[item.nodeid] = Target(
                item.nodeid, item.suite_rel, item.model, tuple(chosen[:EARLY_STOP_TASKS]),
                unreachable=unreachable(len(chosen), reps.get(key, 1),
                                        total=court.suite_size(item.suite_rel)) or "",
                facts=None if config.option.collectonly else court.facts_or_none(item.suite_rel),
                order=tuple(chosen))
            if target.unreachable:
                runs.undecidable[key] = target.unreachable
    runs.first_tasks = {k: tuple(v[:EARLY_STOP_TASKS]) for k, v in first.items()}
    runs.orders = {k: tuple(v) for k, v in first.items()}
    refuse_unreachable_gates(court)
    if config.option.collectonly:
        items[:] = keep
        return

    # The sequential rule looks at each suite's tasks in its order, so the earlier tasks
    # of every suite run first: the first four tasks of every suite (in collection
    # order, as always), then task 5 of each suite, task 6 of each, ... (a task's arms
    # and reps together); other items (a skill's runs item, plain tests) where the fifth
    # tasks begin.  A later task's check then waits only for runs already started, and
    # a suite that stops early releases its later runs while the others go on.  Without
    # the stop: the first four tasks first, then collection order.
    early_stop = court.settings.early_stop

    def phase(item: RunItem) -> int:
        return 0 if item.run.task_id in runs.first_tasks.get((item.run.suite_rel, item.run.model), ()) else 1

    def position(pair: tuple[int, pytest.Item]) -> tuple[int, int]:
        index, item = pair
        if not isinstance(item, RunItem):
            return (EARLY_STOP_TASKS if early_stop else 1, index)
        if not early_stop:
            return (phase(item), index)
        order = runs.orders.get((item.run.suite_rel, item.run.model), ())
        at = order.index(item.run.task_id) if item.run.task_id in order else len(order)
        return (0 if at < EARLY_STOP_TASKS else at, index)

    queue = [(i, it) for i, it in enumerate(keep) if not isinstance(it, VerdictItem)]
    items[:] = [it for _, it in sorted(queue, key=position)]
    groups: dict[tuple[str, str, int], RunGroup] = {}
    batches = RunGroup()  # every runs item: a served one asks for the next ones' runs too
    for item in items:
        if isinstance(item, RunItem):
            group = groups.setdefault((item.run.suite_rel, item.run.model, phase(item)), RunGroup())
            runs.after[item] = (group, len(group.items))
            group.items.append(item)
        elif isinstance(item, RunsItem):
            runs.after[item] = (batches, len(batches.items))
            batches.items.append(item)
