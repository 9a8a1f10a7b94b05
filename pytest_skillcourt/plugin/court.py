"""The court's shared state for one pytest process (``--skill-court``).

One :class:`Court` per process, made by ``plugin/__init__.py``'s ``pytest_configure``
and handed to the one hook object it registers there: a ``controller.Controller``
(a session without xdist is the controller that also runs items) or a
``worker.Worker`` (an xdist worker).  It holds what both roles read: the settings,
the trial, the library and the suites as this session reads them (and their
``SuiteFacts``), the store, the models, the sandbox backend and images, the model
gateway, the targets (verdicts to produce), and what the controller gathers for the
reports; it decides nothing and implements no hook.
"""

from __future__ import annotations

import dataclasses
import sys
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_skillcourt.agent.context import RunContext, SessionGateway
from pytest_skillcourt.core.frozen import FrozenError, SuiteReader, SuiteSource
from pytest_skillcourt.core.library_cache import LIBRARY_CACHE_NAME, LibraryCache
from pytest_skillcourt.core.settings import DEFAULT_TASKS, FailOn, Settings
from pytest_skillcourt.core.skills import Library, load_library
from pytest_skillcourt.core.store import Store
from pytest_skillcourt.core.suite import SUITE_CACHE_NAME, Suite, SuiteCache, using_cache
from pytest_skillcourt.core.trial import Outcome, SuiteFacts, Target, TrialHead, TrialResult, TrialRun
from pytest_skillcourt.models.client import ModelSpec, resolve_model
from pytest_skillcourt.models.llm import TokenBudget
from pytest_skillcourt.plugin.collect import OneRun, SkillCourtError, with_settings
from pytest_skillcourt.plugin.concurrency import LockedStore
from pytest_skillcourt.plugin.progress import Progress
from pytest_skillcourt.sandbox import SandboxError, image_id, resolve_backend

#: How a run skipped for want of a price begins its reason (``runs.Runs``); the session
#: ends with ``controller.EXIT_INCOMPLETE`` when one was, and the verdict's hint says it.
UNPRICED = "no price known for"
#: How a run skipped at the budget begins its reason.
BUDGET_REACHED = "budget reached"


def _start_gateway(settings: Settings) -> Any:
    """The session's gateway, started (imported here, not at load: workers stay light)."""
    from pytest_skillcourt.agent.sandboxed import start_gateway

    return start_gateway(settings)


@dataclasses.dataclass(frozen=True)
class Role:
    """What tells a worker's court from the controller's: where the trial and backend
    come from, how many processes run items, and how the store is opened."""

    #: the trial id (a worker's is its controller's)
    trial: str
    #: the sandbox backend, when the controller resolved it already
    backend: str | None = None
    #: how many processes run items at once (xdist's workers; 1 without xdist)
    workers: int = 1
    #: whether opening the store checks it (the controller's does, once per session)
    check_store: bool = True
    #: whether closing the store folds its write-ahead log into the file (the controller's
    #: does, last: ``Store(fold=...)``)
    fold_store: bool = True
    #: how long the store holds the marks of cached runs (None: until it must write them)
    mark_max_age_s: float | None = None


class Court:
    """See the module docstring."""

    def __init__(self, config: pytest.Config, settings: Settings, role: Role) -> None:
        self.config = config
        #: with --skill-court-checks-from: which gate settings REF's ini decided (said in the header)
        self.frozen_gates: list[str] = []
        self.settings = self._gates_from_ref(config, settings)
        self.trial = role.trial
        self.backend = role.backend
        self.role = role
        #: this process's model gateway, for agents inside the sandbox: started by the first
        #: run that needs it, stopped at the session's end (``close``)
        self.gateway = SessionGateway(lambda: _start_gateway(self.settings))
        self._library: Library | None = None
        self._suites: dict[str, Suite] = {}
        self._suite_sources: dict[str, SuiteSource | None] = {}
        self._facts: dict[str, SuiteFacts] = {}
        self._reader: SuiteReader | None = None
        #: suites parsed before, beside the store (``suite.SuiteCache``): saved at ``close``
        self._suite_cache = SuiteCache(Path(self.settings.store).parent / SUITE_CACHE_NAME)
        self._store: Any = None  # a Store, behind a LockedStore with --skill-court-concurrency
        self._store_lock = threading.Lock()
        #: image -> its id, or the SandboxError that getting it raised
        self.images: dict[str, Any] = {}
        self._models: dict[str, ModelSpec] = {}
        self._judge_budget: TokenBudget | None = None
        self._quarantined: list[tuple[str, str, Any]] | None = None
        self._rel: dict[str, str] = {}
        self._real_dirs: dict[str, str] = {}  # folder -> its real path (``_realpath``)
        self._root: str | None = None  # the rootdir resolved, with a trailing separator
        #: verdict nodeid -> what to decide (set at collection; under xdist, from the workers)
        self.targets: dict[str, Target] = {}
        #: suite files this process collected (none: the summary says how to add them)
        self.suite_files = 0
        #: the live progress on the terminal (the controller's, not under -q)
        self.progress: Progress | None = None
        #: the run loop is over: no run is added to the trial after it
        self.loop_done = False
        self._final_runs: dict[tuple[str, str], list[TrialHead]] | None = None
        self.started = time.monotonic()
        # What the controller gathers for the verdicts and the reports (engine/verdicts.Court)
        self.outcomes: list[Outcome] = []
        self.errors: list[str] = []
        self.files_written: list[tuple[str, Path]] = []
        self.quarantine_changes: tuple[list[Any], list[Any]] = ([], [])
        #: when the controller began judging (``time.monotonic()``): one deadline for every judge call
        self.judging_started: float | None = None
        #: why the session ends with exit status 6 though the model answered (no price, judge)
        self.incomplete: str | None = None
        #: runs the sequential rule saved (the reports say it)
        self.early_skipped = 0
        #: (suite, model) -> task id -> why its runs were skipped, for the reports
        self.skip_reasons: dict[tuple[str, str], dict[str, str]] = {}
        #: suite folders collected though ini ``testpaths`` leaves them out (said in the header)
        self.added_paths: list[str] = self._collect_suite_dirs_too()

    # -- paths, library, suites ------------------------------------------------------------

    def rel(self, path: Path) -> str:
        """``path`` as the session names it: resolved, relative to the rootdir when under it
        (worked out once per path: each suite's path is asked for several times)."""
        key = str(path)
        found = self._rel.get(key)
        if found is None:
            if self._root is None:
                root = os.path.realpath(self.settings.rootdir)
                self._root = root if root.endswith(os.sep) else root + os.sep
            full = self._realpath(key)
            if full.startswith(self._root):
                full = full[len(self._root):]
            elif full + os.sep == self._root:
                full = "."
            found = self._rel[key] = full if os.sep == "/" else full.replace(os.sep, "/")
        return found

    def _realpath(self, path: str) -> str:
        """``os.path.realpath(path)`` (Path.resolve's own answer, without its Path objects),
        its folder's worked out once: thousands of suite files share one folder, and only a
        file that is itself a link needs the whole walk again."""
        head, tail = os.path.split(path)
        if tail in ("", ".", "..") or os.path.islink(path):
            return os.path.realpath(path)
        real_head = self._real_dirs.get(head)
        if real_head is None:
            real_head = self._real_dirs[head] = os.path.realpath(head)
        return os.path.join(real_head, tail)

    def library(self) -> Library:
        if self._library is None:
            # each skill read before, beside the store (``library_cache``): saved at once, so
            # xdist workers starting after the controller read it
            cache = LibraryCache(Path(self.settings.store).parent / LIBRARY_CACHE_NAME)
            self._library = load_library(self.settings.skills_dir, cache)
            cache.save()
        return self._library

    def remember_suite(self, suite: Suite) -> None:
        self._suites[self.rel(suite.path)] = suite

    def suite_reader(self) -> SuiteReader:
        """Reads suites from the working tree or ``--skill-court-checks-from``.

        Raises:
            FrozenError: that revision cannot be read here.
        """
        if self._reader is None:
            self._reader = SuiteReader(self.settings.rootdir, self.settings.checks_from)
        return self._reader

    def read_suite(self, path: Path) -> Suite:
        """The suite file at ``path`` as this session judges by it (README, "Frozen checks").

        Raises:
            SuiteError, LibraryError, FrozenError: it cannot be read.
        """
        library = self.library()
        with using_cache(self._suite_cache):
            suite, source = self.suite_reader().read_suite(path, library)
        self._suite_sources[self.rel(path)] = source  # None: the working tree's, asked when wanted
        return suite

    def suite(self, suite_rel: str) -> Suite:
        if suite_rel not in self._suites:
            path = Path(suite_rel)
            path = path if path.is_absolute() else self.settings.rootdir / path
            self._suites[suite_rel] = with_settings(self.read_suite(path), self.settings)
        return self._suites[suite_rel]

    def suite_source(self, suite_rel: str) -> SuiteSource:
        """Where the suite ``suite_rel`` of this session came from."""
        if suite_rel not in self._suite_sources:
            self.suite(suite_rel)
        source = self._suite_sources.get(suite_rel, SuiteSource())
        if source is None:
            suite = self.suite(suite_rel)
            source = self._suite_sources[suite_rel] = self.suite_reader().working_source(suite, self.library())
        return source

    def suite_facts(self, suite_rel: str) -> SuiteFacts:
        """What a verdict of the suite ``suite_rel`` records of it: read once per session,
        or as an xdist worker read it (its targets carry it: ``add_target``).

        Raises:
            SuiteError, LibraryError, FrozenError: it cannot be read.
        """
        if suite_rel not in self._facts:
            suite = self.suite(suite_rel)
            skill = self.library().get(suite.skill)
            source = self.suite_source(suite_rel)
            self._facts[suite_rel] = SuiteFacts(
                skill=suite.skill, suite_hash=suite.hash, skill_hash=skill.hash if skill else "",
                source={**source.to_dict(), "label": source.label()},
                tasks=tuple((t.id, t.prompt, t.check or "") for t in suite.tasks))
        return self._facts[suite_rel]

    def facts_or_none(self, suite_rel: str) -> SuiteFacts | None:
        try:
            return self.suite_facts(suite_rel)
        except Exception:  # noqa: BLE001 - its own item says why; deciding reads it again and says so
            return None

    def suite_size(self, suite_rel: str) -> int | None:
        try:
            return len(self.suite(suite_rel).tasks)
        except Exception:  # its own item already says why it cannot be read
            return None

    def add_target(self, target: Target) -> None:
        """A target an xdist worker collected, with the suite facts it read: this
        controller then reads no suite for it."""
        self.targets.setdefault(target.nodeid, target)
        if target.facts is not None:
            self._facts.setdefault(target.suite_rel, target.facts)

    def unreachable_gates(self) -> list[str]:
        """One line per selected verdict that can never be HELPS or HURTS, with the fix."""
        return [f"{t.suite_rel} [{t.model}]: {t.unreachable}" for t in self.targets.values() if t.unreachable]

    # -- services ----------------------------------------------------------------------------

    def store(self) -> Store:
        opened = self._store  # once open it stays (until ``close``): no lock for each of a session's runs
        if opened is not None:
            return opened  # type: ignore[no-any-return]
        with self._store_lock:
            if self._store is None:
                store = Store(self.settings.store, check=self.role.check_store, fold=self.role.fold_store)
                # another worker's early stop may wait for a worker's marks: not for long
                store.hold_marks(max_age_s=self.role.mark_max_age_s)
                self._store = LockedStore(store) if self.settings.concurrency > 1 else store
            return self._store  # type: ignore[no-any-return]

    def store_if_open(self) -> Any:
        """The store when this process opened it, else None."""
        return self._store

    def model(self, label: str) -> ModelSpec:
        if label not in self._models:
            self._models[label] = resolve_model(label, base_url=self.settings.base_url)
        return self._models[label]

    def judge_budget(self) -> TokenBudget:
        """The session's judge token cap, shared by pair judging and cause finding."""
        if self._judge_budget is None:
            self._judge_budget = TokenBudget(self.settings.judge_tokens)
        return self._judge_budget

    def resolve_backend(self) -> str:
        """The backend of this session's runs, resolved once (a worker's comes from its
        controller)."""
        if self.backend is None:
            self.backend = resolve_backend(self.settings.sandbox)
        return self.backend

    def image_id(self, image: str) -> str:
        """Image id per process, remembered (also a failure, so one missing image fails
        its suite's items at once: each with one line pointing at the explanation, which
        ``sandbox.ImageNotices`` writes once at the end of the session)."""
        from pytest_skillcourt.sandbox import image_notices

        if image not in self.images:
            try:
                self.images[image] = image_id(self.resolve_backend(), image)
            except SandboxError as err:
                self.images[image] = err
        found = self.images[image]
        if isinstance(found, SandboxError):
            raise SkillCourtError(image_notices(self.config).failed(image, found))
        return str(found)

    def quarantined_for(self, model: str) -> frozenset[str]:
        """With ini ``skill_court_quarantine_hides``: the skills the quarantine file hides
        from ``model`` (read once per process), as the user's agent hides them."""
        if not self.settings.quarantine_hides:
            return frozenset()
        if self._quarantined is None:
            from pytest_skillcourt.core.quarantine_file import QuarantineFileError, model_matches, read_entries

            try:
                entries = read_entries(self.settings.quarantine)
            except QuarantineFileError as err:
                raise SkillCourtError(f"ini skill_court_quarantine_hides: {err}") from None
            self._quarantined = [(e.skill, e.model, model_matches) for e in entries]
        return frozenset(skill for skill, entry_model, matches in self._quarantined if matches(entry_model, model))

    def run_context(self, item: OneRun) -> RunContext:
        """Everything the run of ``item`` depends on (its cache key comes from it)."""
        s, suite, run = self.settings, item.suite, item.run
        image = suite.image or s.image
        store = self.store()
        return RunContext(settings=s, library=self.library(), suite=suite, suite_rel=run.suite_rel,
                          task=item.task, arm=run.arm, rep=run.rep, model=self.model(run.model),
                          trial=self.trial, backend=self.resolve_backend(), image=image,
                          image_id=self.image_id(image), spent_usd=lambda: store.spend(self.trial),
                          quarantined=self.quarantined_for(run.model), gateway=self.gateway)

    def unremoved(self) -> list[str]:
        """Wait for the sandboxes this process's runs closed to be removed (``execute_run``
        returns before its sandboxes are gone); why each one that could not be was left,
        with the fix.  Nothing to wait for in a process that ran nothing."""
        run = sys.modules.get("pytest_skillcourt.engine.run")  # imported only where a run executed
        return list(run.wait_for_closes()) if run is not None else []

    def say(self, text: str) -> None:
        """A line about a step after the runs (judging, a cause); none under ``-q``."""
        if self.progress is not None:
            self.progress.step(text)

    def close(self) -> None:
        """At the session's end: the gateway, the progress, the suite reader and the store."""
        self.gateway.close()  # an agent inside a sandbox may have started it
        if self.progress is not None:
            self.progress.close()
        if self._reader is not None:
            self._reader.close()
        self._suite_cache.save()
        if self._store is not None:  # checkpoints the WAL, so court.db alone is complete
            self._store.close()
            self._store = None

    # -- the trial, for the verdicts and the reports --------------------------------------------

    def runs_by_target(self) -> dict[tuple[str, str], list[TrialHead]]:
        """This trial's runs by (suite, model), as their heads (``records.RunHead``): read
        once after the run loop (nothing adds runs then) and before it every time."""
        if self._final_runs is not None:
            return self._final_runs
        found = self.store().trial_heads_by_target(self.trial)
        if self.loop_done:
            self._final_runs = found
        return found

    def not_started(self, suite_rel: str, model: str) -> str | None:
        """Why some of a target's runs were never started (no price, budget), with the fix,
        for its verdict's hint; None when every selected run started or was early-stopped."""
        reasons = self.skip_reasons.get((suite_rel, model), {})
        for prefix in (UNPRICED, BUDGET_REACHED):
            tasks = [task for task, why in reasons.items() if why.startswith(prefix)]
            if tasks:
                why = reasons[tasks[0]]
                return f"{len(tasks)} task(s) not run: {why}"
        return None

    def free_models(self) -> list[str]:
        """The session's models whose calls were counted as free for want of a price (a
        local or custom endpoint: ``pricing.counted_free``), to say so once."""
        from pytest_skillcourt.models.pricing import counted_free

        labels = dict.fromkeys([*self.settings.models, self.settings.judge_model or ""])
        out = []
        for label in labels:
            try:
                if label and counted_free(self.settings, self.model(label)):
                    out.append(label)
            except Exception:  # noqa: BLE001 - a model that cannot be resolved said so already
                continue
        return out

    def result(self) -> TrialResult:
        """This session's trial as immutable values, for the reports: built once, when the
        verdicts are made (``engine.verdicts.RESULT``), then that value with the errors found since."""
        from pytest_skillcourt.engine.verdicts import RESULT

        built = self.config.stash.get(RESULT, None)
        if built is not None:
            return built if built.errors == tuple(self.errors) else dataclasses.replace(built, errors=tuple(self.errors))
        s = self.settings
        store = self.store()
        runs: dict[str, tuple[TrialRun, ...]] = {}
        if s.json_path or s.html_path:  # the only reports that show each run: its whole record
            by_target = store.trial_runs_by_target(self.trial)
            runs = {o.target.nodeid: tuple(by_target.get((o.target.suite_rel, o.target.model), ()))
                    for o in self.outcomes}
        prompts: dict[str, tuple[tuple[str, str], ...]] = {}
        checks: dict[str, tuple[tuple[str, str], ...]] = {}
        for o in self.outcomes:
            try:
                tasks = self.suite_facts(o.target.suite_rel).tasks
            except Exception:  # the reports still show the runs without their prompts
                prompts[o.target.suite_rel] = ()
                continue
            prompts[o.target.suite_rel] = tuple((i, prompt) for i, prompt, _ in tasks)
            checks[o.target.suite_rel] = tuple((i, check) for i, _, check in tasks)
        changed, lifted = self.quarantine_changes
        return TrialResult(
            trial=self.trial, outcomes=tuple(self.outcomes), models=tuple(s.models),
            backend=self.backend, agent=s.agent.value, judge_model=s.judge_model,
            store=self.rel(s.store), quarantine_file=str(s.quarantine),
            started_at=(store.trial_info(self.trial) or {}).get("started_at"),
            spend=store.spend(self.trial), early_skipped=self.early_skipped,
            errors=tuple(self.errors),
            quarantined=tuple((e.skill, e.model) for e in changed),
            lifted=tuple((e.skill, e.model) for e in lifted),
            runs=runs, prompts=prompts, checks=checks,
            skip_reasons={n: dict(self.skip_reasons.get((t.suite_rel, t.model), {}))
                          for n, t in self.targets.items()})

    # -- configuration -----------------------------------------------------------------------

    def _gates_from_ref(self, config: pytest.Config, settings: Settings) -> Settings:
        """With ``--skill-court-checks-from REF``, the gate settings (``frozen.GATE_KEYS``)
        come from the configuration file as it is at REF, not from the tree on trial: a pull
        request must not pass by adding ``skill_court_fail_on = never``.  A value given on
        the command line still wins (CI's own command is not the pull request's)."""
        ref = settings.checks_from
        if ref is None:
            return settings
        from pytest_skillcourt.core.frozen import GATE_KEYS, gate_ini_at

        try:
            at_ref = gate_ini_at(Path(config.rootpath), ref, config.inipath)
        except FrozenError as err:
            raise pytest.UsageError(f"skill court: {err}") from None
        changes: dict[str, Any] = {}
        for key in GATE_KEYS:
            field = key.removeprefix("skill_court_")
            if config.getoption(key, default=None) not in (None, ""):
                continue
            raw = at_ref.get(key)
            try:
                value: Any = FailOn(raw or "hurts") if field == "fail_on" else int(raw or DEFAULT_TASKS)
                if field == "tasks" and value < 1:
                    raise ValueError(value)
            except (ValueError, TypeError):
                raise pytest.UsageError(
                    f"skill court: ini {key} = {raw!r} in {config.inipath} at {ref} is not valid; the gate "
                    "settings are read from that revision (--skill-court-checks-from)") from None
            mine = getattr(settings, field)
            if value != mine:
                shown = [getattr(v, "value", v) for v in (value, mine)]
                self.frozen_gates.append(f"{key} = {shown[0]} (from {ref}; this tree says {shown[1]})")
            changes[field] = value
        return dataclasses.replace(settings, **changes)

    def _collect_suite_dirs_too(self) -> list[str]:
        """With no paths on the command line pytest collects ini ``testpaths`` only; a
        project whose ``testpaths = ["tests"]`` would hide its ``skills_tests/`` from
        ``pytest --skill-court``.  The rootdir's suite folders are collected too (each
        worker does the same, so xdist's collections agree)."""
        config = self.config
        if config.args_source != pytest.Config.ArgsSource.TESTPATHS:
            return []
        here = config.invocation_params.dir
        given = [Path(os.path.abspath(here / arg.partition("::")[0])) for arg in config.args]
        added = []
        for name in self.settings.suite_dirs:
            folder = config.rootpath / name
            if folder.is_dir() and not any(folder == g or g in folder.parents for g in given):
                config.args.append(str(folder))
                added.append(name)
        return added


#: The court of this process (only with --skill-court), as junitxml keeps ``xml_key`` beside ``LogXML``.
COURT_KEY = pytest.StashKey[Court]()
