"""Collection: suite files become pytest items (README: "How items are named").

``skills_tests/x.yaml::task[with]`` / ``[without]`` run items (adjacent, so
both arms of a pair run at the same time on different xdist workers) and one
``verdict[model]`` item per skill and model.  Verdict items are never run by
a worker: the controller produces their reports after every run (see
``controller.py``), with or without xdist.

With ``--skill-court-items skill`` the run items of one skill and model are
one ``runs[model]`` item instead (:class:`RunsItem`), which does the runs of
its :class:`RunSpec` list one after the other: a library of thousands of
skills is then thousands of items, not tens of thousands.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pytest

from pytest_skillcourt.core.frozen import FrozenError
from pytest_skillcourt.core.settings import ItemLayout, Settings
from pytest_skillcourt.core.records import ARMS
from pytest_skillcourt.core.skills import Library, LibraryError
from pytest_skillcourt.core.suite import Suite, SuiteError, Task


#: The mark every court item carries (``-m skill_court``), made once: asking
#: ``pytest.mark`` for it again per item was 2 ms per thousand items.  It is set on the
#: suite file, whose items inherit it (``iter_markers``, ``-m``, ``-k`` and the reports'
#: keywords read a node's parents too): one mark per file, not one per item.
SKILL_COURT_MARK = pytest.mark.skill_court


class SkillCourtError(Exception):
    """A harness failure shown as a readable message, without traceback."""


class Court(Protocol):
    """What collection needs of the session's court (``runs.Runs``).

    It is handed to the suite files the session collects, so items reach it
    without importing the modules that import this one."""

    settings: Settings

    def library(self) -> Library: ...

    def rel(self, path: Path) -> str: ...

    def remember_suite(self, suite: Suite) -> None: ...

    def read_suite(self, path: Path) -> Suite: ...

    def run_item(self, item: "RunItem") -> None: ...

    def run_batch(self, item: "RunsItem") -> None: ...


@dataclass(frozen=True)
class RunId:
    """What a run item stands for."""

    suite_rel: str
    skill: str
    task_id: str
    task_index: int
    arm: str
    rep: int
    model: str


@dataclass(slots=True, eq=False)
class RunSpec:
    """One run of a :class:`RunsItem`: what a :class:`RunItem` carries for the session
    (``suite``, ``task``, ``run``, ``looked_up``, ``name``), without being a pytest item.
    Compared by identity, as items are."""

    suite: Suite
    task: Task
    run: RunId
    looked_up: tuple[Any, str, Any] | None = None

    @property
    def name(self) -> str:
        """The name its run item would have (``t1[with]``), as the reports name the run."""
        run = self.run
        return f"{run.task_id}[{run_item_params(run.arm, run.rep, self.suite.reps or 1, '', 1)}]"


_new = object.__new__


def run_id(suite_rel: str, skill: str, task_id: str, task_index: int, arm: str, rep: int, model: str) -> RunId:
    """``RunId(...)`` made without its frozen ``__init__`` (one ``object.__setattr__`` per
    field): a 2,000-skill collection makes 12,000 to 24,000 of them.  Equal, hashed and
    shown as the one ``RunId(...)`` makes (``test_collect_paths``)."""
    run = _new(RunId)
    run.__dict__.update(suite_rel=suite_rel, skill=skill, task_id=task_id, task_index=task_index, arm=arm,
                        rep=rep, model=model)
    return run  # type: ignore[no-any-return]


@functools.lru_cache(maxsize=16)
def _model_ids(models: tuple[str, ...]) -> dict[str, str]:
    """:func:`model_ids` once per session's models (every suite file asks); not changed by callers."""
    return model_ids(models)


def model_ids(models: tuple[str, ...]) -> dict[str, str]:
    """Short, unique id per model for node ids: the name without provider
    (``gpt-4.1-mini``), or the whole label when two models share it."""
    short = {m: m.split("/", 1)[-1] for m in models}
    values = list(short.values())
    return {m: (s if values.count(s) == 1 else m) for m, s in short.items()}


def run_item_params(arm: str, rep: int, reps: int, model_id: str, n_models: int) -> str:
    """A run item's parameter id: the arm, then the rep and the model where there are several."""
    if reps <= 1 and n_models <= 1:  # the common case, asked once per run of a session
        return arm
    parts = [arm]
    if reps > 1:
        parts.append(f"r{rep}")
    if n_models > 1:
        parts.append(model_id)
    return "-".join(parts)


def run_item_name(task_id: str, arm: str, rep: int, reps: int, model_id: str, n_models: int) -> str:
    """A run item's name as shown and as JUnit writes it: ``t1[with]``, ``t1[with-r2-gpt-4.1]``."""
    return f"{task_id}[{run_item_params(arm, rep, reps, model_id, n_models)}]"


def runs_item_name(model_id: str) -> str:
    """The name of the item of one skill's runs on one model: ``runs[gpt-4.1-mini]``."""
    return f"runs[{model_id}]"


def verdicts_of_runs(nodeids: Iterable[str], models: tuple[str, ...]) -> set[tuple[str, str]]:
    """The (suite file, model) of the verdict each run item id belongs to: what an
    xdist controller, which sees only the workers' run ids, counts verdicts by."""
    ids = model_ids(models)
    found: set[tuple[str, str]] = set()
    for nodeid in nodeids:
        path, sep, name = nodeid.partition("::")
        params = name[name.find("[") + 1:-1] if sep and name.endswith("]") and "[" in name else None
        if params is not None and name.startswith("runs["):  # one skill's runs on one model
            found.update((path, m) for m, mid in ids.items() if mid == params)
            continue
        if params is None or not params.startswith(ARMS):
            continue
        if len(models) == 1:
            found.add((path, models[0]))
            continue
        owners = [m for m, mid in ids.items() if params.endswith("-" + mid)]
        if owners:
            found.add((path, max(owners, key=lambda m: len(ids[m]))))
    return found


def verdict_item_name(model_id: str) -> str:
    """A verdict item's name: ``verdict[gpt-4.1-mini]``."""
    return f"verdict[{model_id}]"


def param_node_id(parent: pytest.Collector, name: str) -> Any:
    """The node id of an item named ``base[params]``, with its parameters apart.

    pytest 9.2 keeps node ids structured (path, names, parameters) and parses
    the ids it reads back, ``--lf``'s last failures among them, by splitting
    the parameters off at the first ``[``; so an item must carry them as
    parameters (as a parametrized test function does), not inside its name,
    or a failed item never matches itself in the next session.  The string
    form (``x.yaml::verdict[gpt-4.1-mini]``) stays the same.  ``None`` (let
    pytest derive the id from the name) for a name without parameters and on
    pytest before 9.2, whose node ids are that string.
    """
    base, bracket, params = name.partition("[")
    parent_id = getattr(parent, "id", None)
    if not bracket or parent_id is None:
        return None
    if parent_id.params is None:  # ``child(base).with_params(...)`` made at once: one NodeId, not two
        return type(parent_id)(path=parent_id.path, names=(*parent_id.names, base),
                               params=params.removesuffix("]"))
    return parent_id.child(base).with_params(params.removesuffix("]"))


def with_settings(suite: Suite, settings: Settings) -> Suite:
    """``suite`` as the session runs it: ``--skill-court-reps`` over its own ``reps``."""
    return dataclasses.replace(suite, reps=settings.reps) if settings.reps else suite


class SuiteFile(pytest.File):
    """One suite YAML file."""

    def __init__(self, *, court: Court, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.court = court
        self.add_marker(SKILL_COURT_MARK)  # every item of the file inherits it

    def collect(self) -> Iterator[pytest.Item]:
        # Kept so that a plugin filtering the collected items (``--lf``) cannot
        # separate a verdict from its runs (see hooks.ItemHooks.pytest_make_collect_report).
        self.produced: list[pytest.Item] = []
        try:
            items = list(self._items())
        except (SuiteError, LibraryError, FrozenError) as err:
            # One failed item, not a collection error: pytest would interrupt the whole
            # session for that, and every other suite must still run.
            message = f"skill library: {err}" if isinstance(err, LibraryError) else str(err)
            line = err.line if isinstance(err, SuiteError) else None
            yield SuiteErrorItem.from_parent(self, name="suite", message=message, line=line)
            return
        for item in items:
            self.produced.append(item)
            yield item

    def _items(self) -> Iterator[pytest.Item]:
        court = self.court
        settings = court.settings
        suite = with_settings(court.read_suite(self.path), settings)
        court.remember_suite(suite)
        models = settings.models
        ids = _model_ids(models)
        reps = suite.reps or 1
        suite_rel = court.rel(self.path)
        tasks = suite.tasks[: settings.tasks]
        if settings.items is ItemLayout.SKILL:
            for model in models:
                yield RunsItem.from_parent(self, name=runs_item_name(ids[model]), suite=suite, model=model,
                                           suite_rel=suite_rel, tasks=tasks, court=court)
            tasks = ()
        skill, n_models = suite.skill, len(models)
        for index, task in enumerate(tasks):
            task_id = task.id
            for model in models:
                for rep in range(1, reps + 1):
                    for arm in ARMS:
                        yield RunItem.from_parent(
                            self,
                            name=run_item_name(task_id, arm, rep, reps, ids[model], n_models),
                            suite=suite, task=task, court=court,
                            run=run_id(suite_rel, skill, task_id, index, arm, rep, model),
                        )
        for model in models:
            yield VerdictItem.from_parent(self, name=verdict_item_name(ids[model]), suite=suite,
                                          model=model, suite_rel=suite_rel)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, SuiteError):
            return str(excinfo.value)
        if isinstance(excinfo.value, LibraryError):
            return f"skill library: {excinfo.value}"
        return super().repr_failure(excinfo)


class RunItem(pytest.Item):
    """One run: a task in one arm, rep and model."""

    def __init__(self, *, suite: Suite, task: Task, run: RunId, court: Court, **kwargs: Any) -> None:
        super().__init__(nodeid=param_node_id(kwargs["parent"], kwargs["name"]), **kwargs)
        self.court = court
        self.suite = suite
        self.task = task
        self.run = run
        #: the run's context, key and cached record when the protocol looked them up first
        self.looked_up: tuple[Any, str, Any] | None = None

    def runtest(self) -> None:
        self.court.run_item(self)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, (self.task.line - 1) if self.task.line else None, self.name

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, SkillCourtError):
            return str(excinfo.value)
        return super().repr_failure(excinfo)


class RunsItem(pytest.Item):
    """Every run of one skill on one model (``--skill-court-items skill``): ``tasks`` (the
    session's selection of the suite's tasks, in order), each in every rep and arm."""

    def __init__(self, *, suite: Suite, model: str, suite_rel: str, tasks: Sequence[Task], court: Court,
                 **kwargs: Any) -> None:
        super().__init__(nodeid=param_node_id(kwargs["parent"], kwargs["name"]), **kwargs)
        self.court = court
        self.suite = suite
        self.model = model
        self.suite_rel = suite_rel
        self.tasks = tuple(tasks)

    @property
    def reps(self) -> int:
        """The reps of each task (the session's: ``with_settings``)."""
        return self.suite.reps or 1

    @functools.cached_property
    def runs(self) -> list[RunSpec]:
        """The item's runs, task by task, each rep's arms together; made when first asked
        (by its run or the run queue), not at collection: ``--co`` of 2,000 skills made
        24,000 it never used (0.03 s of 1.2 s)."""
        suite, suite_rel, model = self.suite, self.suite_rel, self.model
        return [RunSpec(suite, task, run_id(suite_rel, suite.skill, task.id, index, arm, rep, model))
                for index, task in enumerate(self.tasks) for rep in range(1, self.reps + 1) for arm in ARMS]

    def runtest(self) -> None:
        self.court.run_batch(self)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        line = self.tasks[0].line if self.tasks else None
        return self.path, (line - 1) if line else None, self.name

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, SkillCourtError):
            return str(excinfo.value)
        return super().repr_failure(excinfo)


class VerdictItem(pytest.Item):
    """The verdict of one skill on one model; reported by the controller."""

    def __init__(self, *, suite: Suite, model: str, suite_rel: str, **kwargs: Any) -> None:
        super().__init__(nodeid=param_node_id(kwargs["parent"], kwargs["name"]), **kwargs)
        self.suite = suite
        self.model = model
        self.suite_rel = suite_rel

    def runtest(self) -> None:  # only reached with --collect-only style runs; never scheduled
        raise SkillCourtError("verdict items are reported by the controller, not run")

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, self.name


class SuiteErrorItem(pytest.Item):
    """A suite file that cannot be read, as one failed item that says why (file, line, field
    and fix); the session goes on with every other suite."""

    def __init__(self, *, message: str, line: int | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.message = message
        self.line = line

    def runtest(self) -> None:
        raise SkillCourtError(self.message)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        return self.message

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, (self.line - 1) if self.line else None, "suite"


#: One run as the session does it: a run item, or a run of a :class:`RunsItem`.
OneRun = RunItem | RunSpec
