"""The skill court session: the plugin object registered when ``--skill-court`` is on.

Workers (or the single process without xdist) collect suites and execute run
items, writing each run to the store.  Only the controller judges pairs,
decides verdicts, emits the verdict items' reports and writes aggregated
files (terminal section, JSON, quarantine).  What the controller needs from
workers travels through the store and, for the verdict items a worker
selected, through ``workeroutput``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any, Generator, Iterator, Sequence

import pytest

from pytest_skillcourt.models.client import ModelConfigError, ModelSpec, resolve_model
from pytest_skillcourt.agent.context import RunContext, SessionGateway
from pytest_skillcourt.agent.runner import get_runner
from pytest_skillcourt.engine.cache import reach_of, run_key, still_valid
from pytest_skillcourt.core.clock import new_trial_id
from pytest_skillcourt.plugin.collect import (
    OneRun,
    RunItem,
    RunsItem,
    SkillCourtError,
    SuiteFile,
    VerdictItem,
    verdicts_of_runs,
    with_settings,
)
from pytest_skillcourt.plugin.concurrency import LockedStore, RunAhead
from pytest_skillcourt.core.frozen import FrozenError, SuiteReader, SuiteSource
from pytest_skillcourt.engine.garbage import Collector
from pytest_skillcourt.models.llm import TokenBudget
from pytest_skillcourt.core.settings import DEFAULT_TASKS, FailOn, Settings
from pytest_skillcourt.plugin.protocol import has_skipping_mark, quiet_possible, run_served
from pytest_skillcourt.core.records import ANSWERED, ARMS, HARNESS_ERROR, INCOMPLETE, NO_ANSWER, RunRecord
from pytest_skillcourt.plugin.junit import JUNIT_PLUGIN, JunitRunData, add_judgments, check_family, logxml, pair_properties
from pytest_skillcourt.core.printable import plain
from pytest_skillcourt.plugin.progress import Progress, format_tokens
from pytest_skillcourt.sandbox import SandboxError, SandboxUnavailable, image_id, resolve_backend
from pytest_skillcourt.core.skills import Library, load_library
from pytest_skillcourt.stats.sequential import FIRST_LOOK
from pytest_skillcourt.stats.verdict import EARLY_STOP_TASKS, Stop, sequential_path, unreachable
from pytest_skillcourt.core.store import Store, StoreError
from pytest_skillcourt.core.suite import Suite
from pytest_skillcourt.core.trial import Outcome, SuiteFacts, Target, TrialResult, TrialRun, group_pairs, pair_outcomes

#: How often a worker looks at the store while it waits for the first four tasks.
POLL_S = 0.25
#: How long an xdist worker holds the marks of its cached runs before it writes them.
MARK_MAX_AGE_S = 0.1


def _start_gateway(settings: Settings) -> Any:
    """The session's gateway, started (imported here, not at load: workers stay light)."""
    from pytest_skillcourt.agent.sandboxed import start_gateway

    return start_gateway(settings)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the session is, so it stops as on Ctrl-C: the run in
    flight closes its sandbox (``run.execute_run``'s ``finally``), finished runs stay."""


def _on_sigterm(signum: int, frame: Any) -> None:
    # a second SIGTERM while cleaning up kills at once, as the default would
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    raise Terminated("SIGTERM")


def catch_sigterm() -> Any:
    """Make SIGTERM stop the session like SIGINT; returns the handler it replaced (None
    when it left it alone: not the main thread, or a handler of someone else's)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    if signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None):
        return None
    return signal.signal(signal.SIGTERM, _on_sigterm)


#: A served run item asks the store for the records of at most this many next run items too.
LOOK_AHEAD = 64

@dataclasses.dataclass
class RunGroup:
    """The run items of one suite, model and early-stop phase, in run order (``_served``)."""

    items: list[RunItem] = dataclasses.field(default_factory=list)
    #: whether the last of them asked for was served; if not, the next ones ask only for
    #: themselves (a session that runs them would ask for the rest over and over)
    served: bool = True


#: The order a ``runs[MODEL]`` item counts its runs' outcomes in (``outcomes``: "8 success, 4 skipped").
BATCH_OUTCOMES = ("success", "failure", "pending-judge", "none", "skipped", "error")

#: The exit status of a session that could not try what it was asked to: the model never
#: answered any run, or runs were not started for want of a price.  Not a verdict on any
#: skill, so neither a pass (0) nor a failed test (1).
EXIT_INCOMPLETE = 6
#: The same status, by the name of its first cause (``trial_cli`` maps it).
EXIT_NO_ANSWER = EXIT_INCOMPLETE

#: How a run skipped for want of a price begins its reason (``_check_budget``); the session
#: ends with ``EXIT_INCOMPLETE`` when one was, and the verdict's hint says it.
UNPRICED = "no price known for"
#: How a run skipped at the budget begins its reason.
BUDGET_REACHED = "budget reached"


class SkillCourt:
    """Plugin object for one pytest session with ``--skill-court``."""

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        #: with --skill-court-checks-from: which gate settings REF's ini decided (said in the header)
        self.frozen_gates: list[str] = []
        self.settings = self._gates_from_ref(config, settings)
        self.is_worker = hasattr(config, "workerinput")
        workers = config.getoption("numprocesses", default=None)
        if settings.concurrency > 1 and (self.is_worker or workers not in (None, 0, "0")):
            raise pytest.UsageError(
                f"--skill-court-concurrency {settings.concurrency} with xdist's -n {workers}: use one "
                "of the two (-n runs one run at a time per worker process; the concurrency runs "
                "N at once in one process, usually the lighter choice)")
        winput: dict[str, Any] = getattr(config, "workerinput", {})
        self.trial: str = winput.get("skill_court_trial") or new_trial_id()
        self.backend: str | None = winput.get("skill_court_backend")
        #: this process's model gateway, for agents inside the sandbox: started by the first
        #: run that needs it, stopped at the session's end (pytest_unconfigure)
        self.gateway = SessionGateway(lambda: _start_gateway(self.settings))
        self._library: Library | None = None
        self._suites: dict[str, Suite] = {}
        self._suite_sources: dict[str, SuiteSource] = {}
        self._facts: dict[str, SuiteFacts] = {}
        self._reader: SuiteReader | None = None
        self._store: Any = None  # a Store, behind a LockedStore with --skill-court-concurrency
        #: with --skill-court-concurrency N > 1: the threads running the items ahead
        self._ahead: RunAhead[OneRun, tuple[RunRecord, bool]] | None = None
        self._store_lock = threading.Lock()
        self._images: dict[str, Any] = {}
        self._models: dict[str, ModelSpec] = {}
        self.targets: dict[str, Target] = {}
        #: xdist controller: verdicts to add to the progress total (see the xdist hook)
        self._xdist_verdicts = 0
        self._session: pytest.Session | None = None
        #: (suite, model) -> its first four selected tasks (set at collection)
        self._first_tasks: dict[tuple[str, str], tuple[str, ...]] = {}
        #: (suite, model) -> every selected task in suite order (the sequential rule's looks)
        self._orders: dict[tuple[str, str], tuple[str, ...]] = {}
        #: (suite, model) -> where the sequential rule stopped, once the tasks before it are
        #: final, and the place in the order of the last task it used
        self._stops: dict[tuple[str, str], tuple[Stop, int]] = {}
        #: (suite, model) -> why it can never reach a verdict (``stats.verdict.unreachable``)
        self._undecidable: dict[tuple[str, str], str] = {}
        #: run item -> the group of its (suite, model, phase) and its place in it: the store is
        #: asked for the next ones' records with its own (``_served``)
        self._after: dict[RunItem, tuple[RunGroup, int]] = {}
        self.outcomes: list[Outcome] = []
        self.early_skipped = 0
        self._progress: Progress | None = None
        #: (suite, model) -> task id -> why its runs were skipped, for the reports
        self._skip_reasons: dict[tuple[str, str], dict[str, str]] = {}
        self._started = time.monotonic()
        self.files_written: list[tuple[str, Path]] = []
        self.errors: list[str] = []
        self._judge_budget: TokenBudget | None = None
        self.quarantine_changes: tuple[list[Any], list[Any]] = ([], [])
        #: when the controller began judging (``time.monotonic()``): one deadline for every judge call
        self.judging_started: float | None = None
        #: set when every run of the session got no reply from the model
        self.never_answered = False
        #: why the session ends with EXIT_INCOMPLETE though the model answered (no price)
        self.incomplete: str | None = None
        self._sigterm: Any = None  # the SIGTERM handler catch_sigterm replaced
        #: suite files this process collected (none: the summary says how to add them)
        self.suite_files = 0
        #: the run loop is over: no run is added to the trial after it
        self._loop_done = False
        #: the quarantine file's (skill, model, matcher) entries, read once (``quarantined_for``)
        self._quarantined: list[tuple[str, str, Any]] | None = None
        #: suite folders collected though ini ``testpaths`` leaves them out (said in the header)
        self.added_paths: list[str] = self._collect_suite_dirs_too()
        self._rel: dict[str, str] = {}
        self._root: str | None = None  # the rootdir resolved, with a trailing separator
        self._final_runs: dict[tuple[str, str], list[TrialRun]] | None = None
        #: why a run served from the store takes pytest's full protocol ("": it need not)
        self._quiet: str | None = None
        self._gc = Collector()  # the collector's settings, for this session's life

    # -- shared state --------------------------------------------------------

    def rel(self, path: Path) -> str:
        """``path`` as the session names it: resolved, relative to the rootdir when under it
        (worked out once per path: each suite's path is asked for several times)."""
        key = str(path)
        found = self._rel.get(key)
        if found is None:
            if self._root is None:
                root = os.path.realpath(self.settings.rootdir)
                self._root = root if root.endswith(os.sep) else root + os.sep
            full = os.path.realpath(key)  # Path.resolve's own answer, without its Path objects
            if full.startswith(self._root):
                full = full[len(self._root):]
            elif full + os.sep == self._root:
                full = "."
            found = self._rel[key] = full if os.sep == "/" else full.replace(os.sep, "/")
        return found

    def library(self) -> Library:
        if self._library is None:
            self._library = load_library(self.settings.skills_dir)
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
        suite, source = self.suite_reader().read(path, self.library())
        self._suite_sources[self.rel(path)] = source
        return suite

    def suite_source(self, suite_rel: str) -> SuiteSource:
        """Where the suite ``suite_rel`` of this session came from."""
        if suite_rel not in self._suite_sources:
            self.suite(suite_rel)
        return self._suite_sources.get(suite_rel, SuiteSource())

    def suite_facts(self, suite_rel: str) -> SuiteFacts:
        """What a verdict of the suite ``suite_rel`` records of it: read once per session,
        or as an xdist worker read it (its targets carry it).

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

    def _facts_or_none(self, suite_rel: str) -> SuiteFacts | None:
        try:
            return self.suite_facts(suite_rel)
        except Exception:  # noqa: BLE001 - its own item says why; deciding reads it again and says so
            return None

    def suite(self, suite_rel: str) -> Suite:
        if suite_rel not in self._suites:
            path = Path(suite_rel)
            path = path if path.is_absolute() else self.settings.rootdir / path
            self._suites[suite_rel] = with_settings(self.read_suite(path), self.settings)
        return self._suites[suite_rel]

    def store(self) -> Store:
        with self._store_lock:
            if self._store is None:
                store = Store(self.settings.store, check=not self.is_worker)
                # another worker's early stop may wait for a worker's marks: not for long
                store.hold_marks(max_age_s=MARK_MAX_AGE_S if self.is_worker else None)
                self._store = LockedStore(store) if self.settings.concurrency > 1 else store
            return self._store  # type: ignore[no-any-return]

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
        """The backend of this session's runs, resolved once.  On the controller of a session
        that will run, the default image is then had (pulled if missing) before any run,
        once for every worker; what failed is kept for the runs that need it (``image_id``)."""
        if self.backend is None:
            self.backend = resolve_backend(self.settings.sandbox)
            if not (self.is_worker or self.config.option.collectonly) and self.settings.skills_dir.is_dir():
                from pytest_skillcourt.sandbox import check_image, image_notices

                image_notices(self.config)  # registered now: it hears the workers' at their end
                self._images[self.settings.image] = check_image(self.backend, self.settings.image)
        return self.backend

    def image_id(self, image: str) -> str:
        """Image id per process, remembered (also a failure, so one missing image fails
        its suite's items at once: each with one line pointing at the explanation, which
        ``sandbox.ImageNotices`` writes once at the end of the session)."""
        from pytest_skillcourt.sandbox import image_notices

        if image not in self._images:
            try:
                self._images[image] = image_id(self.resolve_backend(), image)
            except SandboxError as err:
                self._images[image] = err
        found = self._images[image]
        if isinstance(found, SandboxError):
            raise SkillCourtError(image_notices(self.config).failed(image, found))
        return str(found)

    # -- configuration and collection -----------------------------------------

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if self.config.option.collectonly:
            return  # listing items needs no model key, no sandbox and no store
        self._sigterm = catch_sigterm()
        self._start_progress()
        try:
            self.suite_reader()
        except FrozenError as err:
            raise pytest.UsageError(str(err)) from None
        for label in self.settings.models:
            try:
                self.model(label)
            except ModelConfigError as err:
                raise pytest.UsageError(f"skill court: {err}") from None
        if self.settings.judge_model:
            try:
                self.model(self.settings.judge_model)
            except ModelConfigError as err:
                raise pytest.UsageError(f"--skill-court-judge-model: {err}") from None
        if not self.is_worker:
            self._junit_run_data()
            try:
                backend = self.resolve_backend()
            except SandboxUnavailable as err:
                raise pytest.UsageError(f"skill court: {err}") from None
            agent = self.settings.agent.value
            reason = get_runner(agent).check(backend)
            preset = self.settings.agent_preset
            if not reason and preset is not None:  # the command runner's agent must be there
                reason = preset.locate(self.settings.rootdir)[1]
            if reason:
                raise pytest.UsageError(f"--skill-court-agent {agent}: {reason}")
            if not self.settings.skills_dir.is_dir():
                return  # nothing to try: no store is made (the summary says what is missing)
            try:
                self.store().start_trial(self.trial, rootdir=str(self.settings.rootdir),
                                         argv=list(self.config.invocation_params.args), skills_dir=str(self.settings.skills_dir))
            except StoreError as err:
                raise pytest.UsageError(f"skill court: {err}") from None

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

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """xdist controller: every worker shares this session's trial and backend."""
        node.workerinput["skill_court_trial"] = self.trial
        node.workerinput["skill_court_backend"] = self.resolve_backend()

    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector) -> Any:
        if file_path.suffix not in (".yaml", ".yml"):
            return None
        if not any(part in self.settings.suite_dirs for part in file_path.parent.parts):
            return None
        self.suite_files += 1
        return SuiteFile.from_parent(parent, path=file_path, court=self)

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        s = self.settings
        try:
            backend = self.resolve_backend()
        except Exception as err:  # shown, then sessionstart raises the usage error
            backend = f"unavailable ({err})"
        added = ([f"skill court: also collecting {', '.join(self.added_paths)}/ (not in ini testpaths)"]
                 if self.added_paths else [])
        added += [f"skill court: gate {line}" for line in self.frozen_gates]
        return added + [
            f"skill court: models {', '.join(s.models)}; agent {s.agent.value}; sandbox "
            f"{backend}{' (' + s.image + ')' if backend == 'docker' else ''}",
            f"skill court: library {self.rel(s.skills_dir)}; store {self.rel(s.store)}; "
            f"budget ${s.budget:.2f}; trial {self.trial}",
        ]

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_make_collect_report(self, collector: pytest.Collector
                                   ) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
        """Outermost: a suite file keeps the runs of its verdict items even when
        ``--lf`` filtered the file down to a failed verdict."""
        report = yield
        produced = getattr(collector, "produced", None)
        if isinstance(collector, SuiteFile) and produced and report.result is not None:
            result = list(report.result)
            self._give_verdicts_their_runs(list(produced), result)
            report.result[:] = result
        return report

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config,
                                      items: list[pytest.Item]) -> Iterator[None]:
        """After every other plugin selected (``-k``, ``-m``, ``--lf``...): give each
        selected verdict its runs back, then shard, order and take the verdict
        items out of the run queue (the controller reports them).

        A wrapper that runs first is the outermost one, so its second half sees
        the selection of ``--lf``, which is itself a wrapper."""
        collected = list(items)
        result = yield
        back = self._give_verdicts_their_runs(collected, items)
        if back:  # ``-k`` reported them deselected: they run after all, so they are not
            reporter = config.pluginmanager.get_plugin("terminalreporter")
            stats = getattr(reporter, "stats", None)
            if isinstance(stats, dict) and stats.get("deselected"):
                again = set(map(id, back))
                stats["deselected"] = [it for it in stats["deselected"] if id(it) not in again]
                if not stats["deselected"]:
                    del stats["deselected"]
        self._arrange(config, items)
        return result

    @staticmethod
    def _give_verdicts_their_runs(collected: list[Any], items: list[Any]) -> list[Any]:
        """A verdict selected without any of its runs (``--lf`` after a failed
        verdict, ``-k verdict``) would be decided on nothing; select its runs
        again (unchanged ones come from the cache).  Returns the runs selected again."""
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

    def _suite_size(self, suite_rel: str) -> int | None:
        try:
            return len(self.suite(suite_rel).tasks)
        except Exception:  # its own item already says why it cannot be read
            return None

    def unreachable_gates(self) -> list[str]:
        """One line per selected verdict that can never be HELPS or HURTS, with the fix."""
        return [f"{t.suite_rel} [{t.model}]: {t.unreachable}" for t in self.targets.values() if t.unreachable]

    def _refuse_unreachable_gates(self) -> None:
        """Under ``--skill-court-fail-on inconclusive`` such a verdict would fail after
        every run was paid for: a usage error before any run instead."""
        gates = self.unreachable_gates()
        if gates and self.settings.fail_on == FailOn.INCONCLUSIVE:
            raise pytest.UsageError(
                "skill court: --skill-court-fail-on inconclusive, but these verdicts can never be "
                "HELPS or HURTS, so they would fail whatever the runs do:\n  " + "\n  ".join(gates))

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(self, session: pytest.Session) -> None:
        """The collector's full collections wait longer from here on (``garbage.py``)."""
        self._gc.begin()

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """A large session freezes what collection made (``garbage.py``)."""
        self._gc.collected(len(session.items))

    @pytest.hookimpl(tryfirst=True, specname="pytest_unconfigure")
    def pytest_unconfigure_freeze(self, config: pytest.Config) -> None:
        """First of all at unconfigure, before pytest's two full collections at exit
        (``unraisableexception``): a frozen session freezes what its runs made
        (``garbage.py``).  Named ``pytest_*`` because pytest only reads hook options from
        such names; ``specname`` makes it this plugin's second ``pytest_unconfigure``."""
        self._gc.ending()

    def pytest_report_collectionfinish(self, config: pytest.Config, start_path: Path,
                                       items: list[pytest.Item]) -> list[str]:
        """Said up front: the verdicts this selection can never decide."""
        gates = self.unreachable_gates()
        return [f"skill court: {line}" for line in gates]

    def _arrange(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        shard = self.settings.shard
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
        first: dict[tuple[str, str], list[str]] = {}
        reps: dict[tuple[str, str], int] = {}
        for item in keep:
            for run in (item.run,) if isinstance(item, RunItem) else (
                    [spec.run for spec in item.runs] if isinstance(item, RunsItem) else ()):
                key = (run.suite_rel, run.model)
                tasks = first.setdefault(key, [])
                if run.task_id not in tasks:
                    tasks.append(run.task_id)
                reps[key] = max(reps.get(key, 0), run.rep)
        for item in keep:
            if isinstance(item, VerdictItem):
                key = (item.suite_rel, item.model)
                chosen = first.get(key, [])
                self.targets[item.nodeid] = Target(
                    item.nodeid, item.suite_rel, item.model, tuple(chosen[:EARLY_STOP_TASKS]),
                    unreachable=unreachable(len(chosen), reps.get(key, 1),
                                            total=self._suite_size(item.suite_rel)) or "",
                    facts=None if config.option.collectonly else self._facts_or_none(item.suite_rel),
                    order=tuple(chosen))
                if self.targets[item.nodeid].unreachable:
                    self._undecidable[key] = self.targets[item.nodeid].unreachable
        self._first_tasks = {k: tuple(v[:EARLY_STOP_TASKS]) for k, v in first.items()}
        self._orders = {k: tuple(v) for k, v in first.items()}
        self._refuse_unreachable_gates()
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
        def phase(item: RunItem) -> int:
            return 0 if item.run.task_id in self._first_tasks.get((item.run.suite_rel, item.run.model), ()) else 1

        def position(pair: tuple[int, pytest.Item]) -> tuple[int, int]:
            index, item = pair
            if not isinstance(item, RunItem):
                return (EARLY_STOP_TASKS if self.settings.early_stop else 1, index)
            if not self.settings.early_stop:
                return (phase(item), index)
            order = self._orders.get((item.run.suite_rel, item.run.model), ())
            at = order.index(item.run.task_id) if item.run.task_id in order else len(order)
            return (0 if at < EARLY_STOP_TASKS else at, index)

        runs = [(i, it) for i, it in enumerate(keep) if not isinstance(it, VerdictItem)]
        items[:] = [it for _, it in sorted(runs, key=position)]
        groups: dict[tuple[str, str, int], RunGroup] = {}
        for item in items:
            if isinstance(item, RunItem):
                group = groups.setdefault((item.run.suite_rel, item.run.model, phase(item)), RunGroup())
                self._after[item] = (group, len(group.items))
                group.items.append(item)

    # -- running ---------------------------------------------------------------

    def run_item(self, item: RunItem) -> None:
        """Execute (or reuse) one run and turn it into the item's outcome; a damaged
        store is the item's readable failure, not a ``sqlite3`` traceback."""
        try:
            self._run_item(item)
        except StoreError as err:
            raise SkillCourtError(str(err)) from None

    def run_batch(self, item: RunsItem) -> None:
        """Do every run of one skill on one model (``--skill-court-items skill``), as the
        run items would one by one, and sum them up in the item's properties: one
        ``run[t1-with]`` line per run (outcome, tokens, cost, cached), the totals, and each
        skipped task's reason.  The item fails when a run hit a harness error, and is
        skipped when every run was."""
        props = item.user_properties
        props += [("skill_court_runs", ""), ("skill", item.suite.skill), ("model", item.model)]
        counts: dict[str, int] = {}
        cached = tokens = early = 0
        cost = duration = 0.0
        errors: list[str] = []
        skipped: dict[str, str] = {}
        lines: list[tuple[str, object]] = []
        if self._ahead is None and any(spec.looked_up is None for spec in item.runs):
            # looked up together (``_served`` may have; the threads look up each run they take)
            try:
                for spec, found in zip(item.runs, self._look_up_many(item.runs)):
                    spec.looked_up = found
            except Exception:  # noqa: BLE001 - raised again by each run's own look-up, as its error
                pass
        for spec in item.runs:
            spec.user_properties.clear()
            try:
                try:
                    self._run_item(spec)
                except StoreError as err:
                    raise SkillCourtError(str(err)) from None
            except pytest.skip.Exception as err:
                reason = str(err.msg)
                early += ("early_stop", "true") in spec.user_properties
                skipped.setdefault(spec.run.task_id, reason)
                counts["skipped"] = counts.get("skipped", 0) + 1
                lines.append((f"run[{spec.name}]", f"skipped: {reason}"))
                continue
            except SkillCourtError as err:
                errors.append(str(err))
                counts["error"] = counts.get("error", 0) + 1
                lines.append((f"run[{spec.name}]", f"error: {err}"))
                continue
            got = dict(spec.user_properties)
            outcome = str(got["outcome"])
            counts[outcome] = counts.get(outcome, 0) + 1
            cached += got["cached"] == "true"
            tokens += int(str(got["tokens"]))
            cost += float(str(got["cost_usd"] or 0))
            duration += float(str(got["duration_s"]))
            lines.append((f"run[{spec.name}]", ", ".join(
                [outcome, f"{float(str(got['duration_s'])):.1f}s", f"{got['tokens']} tok",
                 *([f"${got['cost_usd']}"] if got["cost_usd"] else []),
                 *(["cached"] if got["cached"] == "true" else []), f"run {got['skill_court_run']}"])))
        props += [("runs", len(item.runs)), ("cached_runs", cached),
                  ("outcomes", ", ".join(f"{counts[what]} {what}" for what in BATCH_OUTCOMES if what in counts)),
                  ("tokens", tokens), ("cost_usd", f"{cost:.6f}"), ("duration_s", round(duration, 3)),
                  ("early_stopped", early), *lines,
                  *((f"skipped[{task}]", reason) for task, reason in skipped.items())]
        if errors:
            raise SkillCourtError(f"{len(errors)} of {len(item.runs)} runs failed:\n" + "\n".join(errors))
        if item.runs and counts.get("skipped") == len(item.runs):
            pytest.skip(next(iter(skipped.values())))

    def _run_item(self, item: OneRun) -> None:
        run = item.run
        props = item.user_properties
        props += [("skill_court_run", ""), ("skill", run.skill), ("model", run.model),
                  ("arm", run.arm), ("rep", run.rep)]
        if self._ahead is not None and self._ahead.has(item):
            record, cached = self._ahead.result(item)  # run ahead on a thread
        else:
            record, cached = self._obtain_run(item)
        self._outcome_of(item, record, cached)

    def _obtain_run(self, item: OneRun) -> tuple[RunRecord, bool]:
        """The run of ``item`` from the cache or executed now, recorded in the store;
        ``pytest.skip`` when early stop or, for a run to execute, the budget says no run
        may start (a run from the cache spends nothing).  Thread-safe
        (``--skill-court-concurrency`` calls it from its threads)."""
        run = item.run
        store = self.store()
        try:
            self._check_undecidable(item)
            if self.settings.early_stop:
                self._check_early_stop(item)
            ctx, key, record = item.looked_up or self._look_up(item)
            item.looked_up = None
            cached = record is not None
            if record is None:
                self._check_budget(store)
                store.flush_marks()  # nothing held while a run takes minutes (another worker may wait)
                run_id = f"{self.trial}-{key[:16]}"
                from pytest_skillcourt.engine.run import execute_run  # only where a run executes: a cached worker never needs it

                record = execute_run(ctx, run_id=run_id, key=key)
            if self._ahead is not None and self._ahead.cancelled.is_set():
                # the session stopped while it ran: its sandbox was closed under it
                raise SkillCourtError(f"{run.skill} / {run.task_id} [{run.arm}]: cancelled, the session stopped")
        except BaseException as err:  # skipped or failed with no record: nobody may wait for it
            self._ended_without_record(item, err)
            raise
        store.record_run(record, trial=self.trial, cached=cached)
        return record, cached

    def _ended_without_record(self, item: OneRun, err: BaseException) -> None:
        """Tell the store (every worker reads it) that ``item``'s run will never be recorded
        in this session, so early stop does not wait for it (README "Early stop")."""
        run = item.run
        reason = str(getattr(err, "msg", "") or err) or type(err).__name__
        try:
            self.store().record_ended(trial=self.trial, suite=run.suite_rel, task_id=run.task_id,
                                      arm=run.arm, rep=run.rep, model=run.model, reason=reason)
        except Exception:  # noqa: BLE001 - the item's own error is the one to report
            pass

    def _look_up(self, item: OneRun) -> tuple[RunContext, str, RunRecord | None]:
        """The run's context, its key and its record in the cache (None: it must run)."""
        return self._look_up_many([item])[0]

    def _look_up_many(self, items: Sequence[OneRun]) -> list[tuple[RunContext, str, RunRecord | None]]:
        """:meth:`_look_up` of each item, with one store query for them all."""
        found = [(ctx, run_key(ctx)) for ctx in map(self.run_context, items)]
        records = {} if self.settings.fresh else self.store().cached_runs([key for _, key in found])
        out: list[tuple[RunContext, str, RunRecord | None]] = []
        for ctx, key in found:
            record = records.get(key)
            if record is not None and not still_valid(record, reach_of(ctx)):
                record = None  # a skill within its reach has changed since
            out.append((ctx, key, record))
        return out

    def _served(self, item: RunItem | RunsItem) -> bool:
        """Whether ``item``'s runs all come from the store (looked up now and kept for its
        ``runtest``, or already done ahead): nothing to capture, it may skip pytest's
        per-phase hooks (``protocol.py``)."""
        runs: list[OneRun] = list(item.runs) if isinstance(item, RunsItem) else [item]
        if self._ahead is not None:
            done = [self._ahead.finished(run) for run in runs]
            return all(d is not None and d[1] for d in done)
        ask = [run for run in runs if run.looked_up is None]
        mine = len(ask)
        group, at = self._after.get(item, (None, 0)) if isinstance(item, RunItem) else (None, 0)
        if ask and group is not None and group.served:  # and the next runs of its group, in the same query
            ask += [other for other in group.items[at + 1:at + 1 + LOOK_AHEAD] if other.looked_up is None]
        try:
            found = self._look_up_many(ask) if ask else []
        except Exception:  # noqa: BLE001 - raised again in runtest: the full protocol reports it as the item's
            return False
        for index, (run, looked_up) in enumerate(zip(ask, found)):
            if index < mine or looked_up[2] is not None:  # a run yet to do asks again in its turn
                run.looked_up = looked_up
        served = all(run.looked_up is not None and run.looked_up[2] is not None for run in runs)
        if ask and group is not None:  # a group that runs is not asked for ahead until one of it is served
            group.served = served
        return served

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
        """A run item (or a runs item) served from the store goes through ``protocol.run_served``;
        everything else through pytest's own protocol."""
        if not isinstance(item, (RunItem, RunsItem)):
            return None
        if self._quiet is None:
            self._quiet = quiet_possible(self.config, item.session) or ""
        if self._quiet or has_skipping_mark(item) or not self._served(item):
            return None
        return run_served(item, nextitem)

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

    def quarantined_for(self, model: str) -> frozenset[str]:
        """With ini ``skill_court_quarantine_hides``: the skills the quarantine file hides
        from ``model`` (read once per process), as the user's agent hides them."""
        if not self.settings.quarantine_hides:
            return frozenset()
        if self._quarantined is None:
            from pytest_skillcourt.core.quarantine import QuarantineFileError, model_matches, read_entries

            try:
                entries = read_entries(self.settings.quarantine)
            except QuarantineFileError as err:
                raise SkillCourtError(f"ini skill_court_quarantine_hides: {err}") from None
            self._quarantined = [(e.skill, e.model, model_matches) for e in entries]
        return frozenset(skill for skill, entry_model, matches in self._quarantined if matches(entry_model, model))

    def _outcome_of(self, item: OneRun, record: RunRecord, cached: bool) -> None:
        """The item's properties from its run, and its skip or failure."""
        run = item.run
        props = item.user_properties
        props[0] = ("skill_court_run", record.run_id)
        outcome = ("pending-judge" if record.needs_judge else
                   "none" if record.outcome is None else
                   "success" if record.outcome else "failure")
        props += [("status", record.status), ("outcome", outcome),
                  ("input_tokens", record.input_tokens), ("output_tokens", record.output_tokens),
                  ("tokens", record.tokens),
                  ("cost_usd", "" if record.cost_usd is None else f"{record.cost_usd:.6f}"),
                  ("skill_loaded", str(record.skill_loaded).lower()),
                  ("cached", str(cached).lower()), ("duration_s", record.duration_s)]
        if record.check_exit is not None:
            props.append(("check_exit", record.check_exit))
        if record.status == HARNESS_ERROR:
            raise SkillCourtError(f"{run.skill} / {run.task_id} [{run.arm}]: {record.error}")
        if record.status not in (ANSWERED, INCOMPLETE) or (record.outcome is None and not record.needs_judge):
            reason = record.error or record.status
            if record.status == NO_ANSWER:
                reason = f"left out, not held against the skill: {reason}"
            pytest.skip(f"no outcome: {reason}")

    def _check_budget(self, store: Any) -> None:
        s = self.settings
        spent = store.spend(self.trial)
        if spent >= s.budget:
            pytest.skip(f"{BUDGET_REACHED}: ${spent:.4f} of ${s.budget:.2f} spent in this session "
                        "(raise it with --skill-court-budget)")
        if not s.allow_unpriced:
            unpriced = store.unpriced_models(self.trial)
            if unpriced:
                pytest.skip(
                    f"{UNPRICED} {', '.join(unpriced)}: the provider reported none, so "
                    "spend cannot be held to the budget; add 'MODEL = IN OUT' (USD per million "
                    "tokens) to ini skill_court_prices or pass --skill-court-allow-unpriced")

    def _check_undecidable(self, item: OneRun) -> None:
        """Skip every run of a suite that can never reach a verdict (too few tasks selected):
        its runs would be paid for and the verdict INCONCLUSIVE whatever they do.  The
        reason is the collection's (``stats.verdict.unreachable``)."""
        why = self._undecidable.get((item.run.suite_rel, item.run.model))
        if why and not self.settings.run_undecidable:
            pytest.skip(f"never decidable: {why} (--skill-court-run-undecidable runs it anyway)")

    def _check_early_stop(self, item: OneRun) -> None:
        """Skip a run whose trial the sequential rule already ended (``stats/sequential.py``).

        The rule looks at the selected tasks in suite order; once the tasks before this
        item's are final (recorded, or ended with no record) and one of their looks stopped
        (HELPS or HURTS on a stricter tail, NEUTRAL when the rest could not decide, or the
        seed's early stop when the first four ended alike), this task cannot change the
        verdict: it is skipped.  Waits (bounded) for the runs of those earlier tasks: on
        other xdist workers or threads they run ahead of this item."""
        run = item.run
        key = (run.suite_rel, run.model)
        order = self._orders.get(key, ())
        if run.task_id not in order:
            return
        position = order.index(run.task_id)
        found = self._stops.get(key)
        if found is None and position >= FIRST_LOOK:
            found = self._sequential_stop(item, order, position)
        if found is None or position <= found[1]:
            return
        stop = found[0]
        item.user_properties.append(("early_stop", "true"))
        if stop.kind == "early-stop":
            pytest.skip("early stop: the first four tasks ended the same way in both arms with "
                        "tokens within the margin; verdict NEUTRAL from those four "
                        "(--skill-court-no-early-stop runs every task)")
        said = {"helps": "HELPS", "hurts": "HURTS",
                "futility": "NEUTRAL: the other tasks were unlikely to decide"}[stop.kind]
        pytest.skip(f"sequential stop: the first {stop.look} of {stop.planned} tasks decided it, "
                    f"verdict {said} (--skill-court-no-early-stop runs every task)")

    def _worker_count(self) -> int:
        """How many xdist workers this session has (1 without xdist)."""
        workerinput = getattr(self.config, "workerinput", None) or {}
        return int(workerinput.get("workercount", 1) or 1)

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
        store = self.store()
        # Alone (no other xdist worker, no threads running ahead), the earlier tasks' items came
        # before this one: what is not recorded now never will be.
        alone = self._ahead is None and (not self.is_worker or self._worker_count() <= 1)
        while True:
            runs = [tr.record for tr in store.trial_runs(self.trial, suite=run.suite_rel, model=run.model)
                    if tr.record.task_id in before]
            have = {(r.task_id, r.arm, r.rep) for r in runs}
            if needed <= have or alone or needed <= have | store.ended_runs(self.trial, suite=run.suite_rel,
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

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.is_worker:
            if self._store is not None:  # before xdist says this worker finished: the controller reads them
                self._store.flush_marks()
            out = getattr(self.config, "workeroutput", None)
            if out is not None:
                out["skill_court_targets"] = [t.to_dict() for t in self.targets.values()]
        elif (self.never_answered or self.incomplete) and session.exitstatus in (
                pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            session.exitstatus = EXIT_INCOMPLETE

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self._gc.restore()
        try:
            self._drop_junit_plugin(config)
        finally:
            if self._sigterm is not None and signal.getsignal(signal.SIGTERM) is _on_sigterm:
                signal.signal(signal.SIGTERM, self._sigterm)
            self.gateway.close()  # an agent inside a sandbox may have started it
            if self._progress is not None:
                self._progress.close()
            if self._reader is not None:
                self._reader.close()
            if self._store is not None:  # checkpoints the WAL, so court.db alone is complete
                self._store.close()
                self._store = None

    def _junit_run_data(self) -> None:
        """With ``--junitxml``: the court's items' data go into pytest's file as
        ``report/junit.py`` says (``<system-out>``, or ``<properties>`` by option)."""
        xml = logxml(self.config)
        check_family(xml, self.settings.junit_properties)
        if xml is not None and not self.config.pluginmanager.has_plugin(JUNIT_PLUGIN):
            self.config.pluginmanager.register(
                JunitRunData(xml, properties=self.settings.junit_properties, trial=self.trial), JUNIT_PLUGIN)

    @staticmethod
    def _drop_junit_plugin(config: pytest.Config) -> None:
        """The JUnit plugin leaves with the court (pytester sessions share the process)."""
        plugin = config.pluginmanager.get_plugin(JUNIT_PLUGIN)
        if plugin is not None:
            config.pluginmanager.unregister(plugin)

    def _judgments_into_junit(self) -> None:
        """After the verdicts, before junitxml writes its file: each judged pair's
        judgment into the testcases of its two runs."""
        xml = logxml(self.config)
        if self.is_worker or xml is None or not self.outcomes:
            return
        reps = {o.target.suite_rel: self.suite(o.target.suite_rel).reps or 1 for o in self.outcomes}
        props = pair_properties(self.outcomes, self.settings.models, reps)
        if props:
            add_judgments(xml, props, properties=self.settings.junit_properties)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        for raw in (getattr(node, "workeroutput", None) or {}).get("skill_court_targets", []):
            target = Target.from_dict(raw)
            self.targets.setdefault(target.nodeid, target)
            if target.facts is not None:  # what the worker read: this controller reads no suite
                self._facts.setdefault(target.suite_rel, target.facts)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        """xdist controller: the verdicts the workers' runs belong to, counted from their
        ids (the workers took the verdict items out of the run queue; this controller
        reports them), so the progress adds up to 100%."""
        self._xdist_verdicts = len(verdicts_of_runs(ids, self.settings.models))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Iterator[None]:
        self._session = session
        if not self.is_worker and self.targets:
            # verdict items left the run queue but will be reported: count them
            session.testscollected += len(self.targets)
        self._start_ahead(session)
        try:
            result = yield
        finally:
            if self._ahead is not None:
                self._ahead.stop()
            self._loop_done = True
        if not self.is_worker and not session.config.option.collectonly and self.settings.skills_dir.is_dir():
            interrupted = bool(session.shouldstop) and session.testsfailed == 0
            try:
                if not interrupted:
                    from pytest_skillcourt.engine.verdicts import produce_verdicts  # the controller's alone

                    produce_verdicts(self, session)
                    self._judgments_into_junit()
                self._check_answered()
                self._check_priced()
                self.store().finish_trial(self.trial)
            except StoreError as err:  # found damaged mid-session: say so, no INTERNALERROR
                raise pytest.UsageError(f"skill court: {err}") from None
        return result

    def _start_ahead(self, session: pytest.Session) -> None:
        """``--skill-court-concurrency N``: N threads execute the selected runs ahead, in
        the order pytest will report them (the first four tasks of each suite first, so a
        later task's early-stop wait only waits for runs already started)."""
        n = self.settings.concurrency
        if n <= 1 or session.config.option.collectonly or self.is_worker:
            return
        runs: list[OneRun] = [it for it in session.items if isinstance(it, RunItem)]
        runs += [spec for it in session.items if isinstance(it, RunsItem) for spec in it.runs]
        if len(runs) > 1:
            self._ahead = RunAhead(self._obtain_run, runs, n)

    def _check_answered(self) -> None:
        """A session whose runs all got no reply from the model decided nothing: say so
        loudly (and exit with ``EXIT_NO_ANSWER``) instead of a green INCONCLUSIVE."""
        runs = [tr.record for group in self.runs_by_target().values() for tr in group]
        if runs and all(r.status == NO_ANSWER for r in runs):
            self.never_answered = True
            self.errors.append(
                f"the model never answered: none of the {len(runs)} runs got a reply "
                f"(first error: {runs[0].error or 'none given'}). Check --skill-court-model, "
                f"--skill-court-base-url and the API key; exit status {EXIT_NO_ANSWER}")

    def not_started(self, suite_rel: str, model: str) -> str | None:
        """Why some of a target's runs were never started (no price, budget), with the fix,
        for its verdict's hint; None when every selected run started or was early-stopped."""
        reasons = self._skip_reasons.get((suite_rel, model), {})
        for prefix in (UNPRICED, BUDGET_REACHED):
            tasks = [task for task, why in reasons.items() if why.startswith(prefix)]
            if tasks:
                why = reasons[tasks[0]]
                return f"{len(tasks)} task(s) not run: {why}"
        return None

    def _check_priced(self) -> None:
        """Runs left unstarted for want of a price: the session says why and how to fix it
        in its last lines and ends with ``EXIT_INCOMPLETE``, never a green INCONCLUSIVE."""
        unpriced = sorted({task for reasons in self._skip_reasons.values()
                           for task, why in reasons.items() if why.startswith(UNPRICED)})
        if not unpriced:
            return
        models = ", ".join(self.store().unpriced_models(self.trial)) or "the model"
        why = (f"runs of {len(unpriced)} task(s) were not started: {UNPRICED} {models}. Add "
               "'MODEL = IN OUT' (USD per million tokens) to ini skill_court_prices, or pass "
               "--skill-court-allow-unpriced")
        self.errors.append(f"{why}; exit status {EXIT_INCOMPLETE}")
        self.incomplete = f"{self.incomplete}; {why}" if self.incomplete else why

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

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]
                                  ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        """A skipped run (budget, early stop, no outcome) points at its task in the suite
        file, not at the line of this plugin that skipped it."""
        report = yield
        if isinstance(item, (RunItem, RunsItem)) and report.skipped and isinstance(report.longrepr, tuple) \
                and len(report.longrepr) == 3:
            task = item.task if isinstance(item, RunItem) else item.runs[0].task
            line = task.line if task.line else 1
            report.longrepr = (str(item.path), line, report.longrepr[2])
        return report

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(self, report: pytest.TestReport, config: pytest.Config) -> Any:
        """``-v`` says what a run did, not just that its item passed: a run whose check
        failed is a passed item (the verdict decides), so its word is the outcome."""
        if report.when != "call" or not report.passed:  # FAILED stays FAILED (the short summary)
            return None
        props = dict(report.user_properties)
        if "skill_court_runs" in props:  # one skill's runs on one model
            details = [f"{props.get('runs')} runs", f"{props.get('cached_runs')} cached",
                       f"{int(str(props.get('tokens') or 0)):,} tok"]
            return "passed", ".", (f"RUNS: {props.get('outcomes') or 'none'} ({', '.join(details)})",
                                   {"green": True})
        if "verdict" in props and "skill_court_run" not in props:  # a passing verdict item: its verdict
            kind = str(props["verdict"])
            return "passed", ".", (kind, {"green": True} if kind in ("HELPS", "NEUTRAL") else {"yellow": True})
        if "skill_court_run" not in props or "outcome" not in props:
            return None
        outcome = str(props["outcome"])
        word, markup = {"success": ("SUCCESS", {"green": True}), "failure": ("CHECK FAILED", {"yellow": True}),
                        "pending-judge": ("TO JUDGE", {"cyan": True})}.get(outcome, (outcome.upper(), {}))
        details = [f"{float(str(props.get('duration_s') or 0)):.1f}s", f"{int(str(props.get('tokens') or 0)):,} tok"]
        if props.get("cost_usd") not in (None, ""):
            details.append(f"${float(str(props['cost_usd'])):.4f}")
        if props.get("cached") == "true":
            details.append("cached")
        return "passed", ".", (f"{word} ({', '.join(details)})", markup)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> Iterator[None]:
        """Outermost: pytest writes (``-v``: the item's id) with the live status erased."""
        progress = self._progress
        if progress is None:
            return (yield)
        with progress.paused():
            result = yield
        if "::verdict[" not in nodeid:
            progress.started(nodeid)
        return result

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Iterator[None]:
        if not self.is_worker and self._xdist_verdicts and self._session is not None:
            # xdist set testscollected to the workers' run count just before the first report
            self._session.testscollected += self._xdist_verdicts
            self._xdist_verdicts = 0
        if not self.is_worker and report.when == "call" and report.skipped and (
                ("early_stop", "true") in report.user_properties):
            self.early_skipped += 1
        props = dict(report.user_properties)
        if not self.is_worker and report.when == "call" and "skill_court_runs" in props:
            self.early_skipped += int(str(props.get("early_stopped") or 0))
            path = report.nodeid.partition("::")[0]
            reasons = self._skip_reasons.setdefault((path, str(props.get("model"))), {})
            for name, value in report.user_properties:
                if name.startswith("skipped[") and name.endswith("]"):
                    reasons.setdefault(name[len("skipped["):-1], str(value).removeprefix("Skipped: "))
        if report.skipped and "skill_court_run" in props and isinstance(report.longrepr, tuple):
            path, _, name = report.nodeid.partition("::")
            self._skip_reasons.setdefault((path, str(props.get("model"))), {}).setdefault(
                name.partition("[")[0], str(report.longrepr[-1]).removeprefix("Skipped: "))
        progress = self._progress
        if progress is None:
            return (yield)
        if report.when == "call":
            progress.finished(report.nodeid, dict(report.user_properties))
        elif report.when == "teardown":
            progress.forget(report.nodeid)
        with progress.paused():
            return (yield)

    def say(self, text: str) -> None:
        """A line about a step after the runs (judging, a cause); none under ``-q``."""
        if self._progress is not None:
            self._progress.step(text)

    def _start_progress(self) -> None:
        if self.is_worker or self.config.get_verbosity() < 0:
            return
        # written past pytest's capture of the runs' output (report/progress.py)
        self._progress = Progress.for_pytest(self.config, heartbeat_s=self.settings.heartbeat_s or float("inf"))

    def totals_line(self) -> str:
        """The session in one line: runs, cached, model calls, tokens, spend, wall time."""
        runs = [tr for group in self.runs_by_target().values() for tr in group]
        cached = sum(1 for tr in runs if tr.cached)
        calls = sum(tr.record.api_calls for tr in runs if not tr.cached)
        tokens = sum(tr.record.tokens for tr in runs)
        wall = time.monotonic() - self._started
        return (f"skill court: {len(runs)} runs ({cached} cached), {calls} model calls, "
                f"{format_tokens(tokens)} tokens, ${self.store().spend(self.trial):.4f} spent, "
                f"{int(wall) // 60}m{int(wall) % 60:02d}s")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.is_worker:
            return
        if not self.targets and not self.outcomes:
            for line in self.nothing_to_try():
                terminalreporter.write_line(line, yellow=True)
        if not (self.outcomes or self.errors):
            return
        from pytest_skillcourt.report.terminal import write_summary

        write_summary(terminalreporter, self.result())
        for what, path in self.files_written:
            terminalreporter.write_sep("-", f"generated {what}: {path}")
        if self.config.get_verbosity() >= 0:
            try:
                terminalreporter.write_line(self.totals_line())
            except StoreError:
                pass
            free = self.free_models()
            if free:  # once: a local or custom endpoint with no price in skill_court_prices
                self._write_wrapped(terminalreporter, f"skill court: {', '.join(free)} counted as free "
                                    "(a local endpoint; ini skill_court_prices prices it)")
        if self.never_answered or self.incomplete:
            why = self.incomplete or "the model never answered"
            self._write_wrapped(terminalreporter, f"skill court: exit status {EXIT_INCOMPLETE}: {why}",
                                red=True, bold=True)

    @staticmethod
    def _write_wrapped(terminalreporter: Any, text: str, **markup: bool) -> None:
        """``text`` in lines that fit the terminal (continuations indented)."""
        import textwrap

        width = max(40, int(getattr(terminalreporter._tw, "fullwidth", 80)) - 1)
        for line in textwrap.wrap(plain(text), width, subsequent_indent="  ", break_on_hyphens=False):
            terminalreporter.write_line(line, **markup)

    def nothing_to_try(self) -> list[str]:
        """What to do when a session found no skill to try."""
        s = self.settings
        lines = ["skill court: nothing to try in this session."]
        if not s.skills_dir.is_dir():
            lines.append(f"  no skill library at {self.rel(s.skills_dir)}: point ini skill_court_skills (or "
                         "--skill-court-skills=DIR) at a folder of <name>/SKILL.md")
        if not self.suite_files:
            lines.append(f"  no suite file: add one YAML file per skill under a folder named "
                         f"{' or '.join(s.suite_dirs)} (README: \"Writing suites\")")
        return lines

    def runs_by_target(self) -> dict[tuple[str, str], list[TrialRun]]:
        """This trial's runs by (suite, model), read once after the run loop (nothing adds
        runs then) and before it every time."""
        if self._final_runs is not None:
            return self._final_runs
        found = self.store().trial_runs_by_target(self.trial)
        if self._loop_done:
            self._final_runs = found
        return found

    def result(self) -> TrialResult:
        """This session's trial as immutable values, for the reports."""
        s = self.settings
        store = self.store()
        by_target = self.runs_by_target()
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
            skip_reasons={n: dict(self._skip_reasons.get((t.suite_rel, t.model), {}))
                          for n, t in self.targets.items()})


#: The running court (only with --skill-court), as junitxml keeps ``xml_key`` beside ``LogXML``.
COURT_KEY = pytest.StashKey[SkillCourt]()
