"""The hooks of a process that collects suite files and runs the court's items: an xdist
worker (``worker.Worker``), or a session without xdist (``controller.Controller``, which
also reports).  An xdist controller collects and runs nothing, so these never fire there.
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import Any, Generator, Iterator

import pytest

from pytest_skillcourt.core.frozen import FrozenError
from pytest_skillcourt.core.settings import Settings
from pytest_skillcourt.engine.garbage import Collector
from pytest_skillcourt.models.client import ModelConfigError
from pytest_skillcourt.plugin.collect import RunItem, RunsItem, SuiteFile
from pytest_skillcourt.plugin.court import Court
from pytest_skillcourt.plugin.junit import item_properties
from pytest_skillcourt.plugin.protocol import has_skipping_mark, quiet_possible, run_served
from pytest_skillcourt.plugin.runs import Runs, RunSummary, BatchSummary, summary_from_dict, summary_to_dict
from pytest_skillcourt.plugin.selection import arrange, give_verdicts_their_runs

#: The report attribute a run item's (or a ``runs[MODEL]`` item's) summary rides on.
SUMMARY = "skill_court_run"
#: The item attribute that keeps its summary's properties (``item_properties``), for its reports.
PROPERTIES = "_skill_court_properties"


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


def refuse_two_concurrencies(settings: Settings, workers: Any) -> None:
    """``--skill-court-concurrency`` above 1 in a session with xdist's ``-n``: a usage error.

    Raises:
        pytest.UsageError: both are given.
    """
    if settings.concurrency > 1:
        raise pytest.UsageError(
            f"--skill-court-concurrency {settings.concurrency} with xdist's -n {workers}: use one "
            "of the two (-n runs one run at a time per worker process; the concurrency runs "
            "N at once in one process, usually the lighter choice)")


def summary_of(report: Any) -> RunSummary | BatchSummary | None:
    """The summary a report of a run item (or a ``runs[MODEL]`` item) carries, else None."""
    found = getattr(report, SUMMARY, None)
    return found if isinstance(found, (RunSummary, BatchSummary)) else None


class ItemHooks:
    """See the module docstring.  ``court`` is the process's shared state; ``runs`` gets
    the runs of its items."""

    def __init__(self, court: Court) -> None:
        self.court = court
        self.runs = Runs(court)
        #: why a run served from the store takes pytest's full protocol ("": it need not)
        self._quiet: str | None = None
        # the collector's settings, for this session's life
        self._gc = Collector()
        self._sigterm: Any = None  # the SIGTERM handler catch_sigterm replaced
        #: folder path -> whether it is in a suite folder (``_in_suite_dir``)
        self._suite_folders: dict[str, bool] = {}

    # -- start ---------------------------------------------------------------------------------

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if session.config.option.collectonly:
            return  # listing items needs no model key, no sandbox and no store
        self._sigterm = catch_sigterm()
        court = self.court
        self.starting(session)
        try:
            court.suite_reader()
        except FrozenError as err:
            raise pytest.UsageError(str(err)) from None
        for label in court.settings.models:
            try:
                court.model(label)
            except ModelConfigError as err:
                raise pytest.UsageError(f"skill court: {err}") from None
        if court.settings.judge_model:
            try:
                court.model(court.settings.judge_model)
            except ModelConfigError as err:
                raise pytest.UsageError(f"--skill-court-judge-model: {err}") from None
        self.started(session)

    def starting(self, session: pytest.Session) -> None:
        """The role's first steps at the session's start (not with ``--collect-only``)."""

    def started(self, session: pytest.Session) -> None:
        """The role's steps once the suites and models can be read."""

    # -- collection ------------------------------------------------------------------------------

    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector) -> Any:
        if file_path.suffix not in (".yaml", ".yml"):
            return None
        if not self._in_suite_dir(os.path.dirname(file_path)):
            return None
        self.court.suite_files += 1
        return SuiteFile.from_parent(parent, path=file_path, court=self.runs)

    def _in_suite_dir(self, folder: str) -> bool:
        """Whether a folder of that path is named as a suite folder (asked once per folder:
        thousands of suite files share one)."""
        found = self._suite_folders.get(folder)
        if found is None:
            names = self.court.settings.suite_dirs
            found = self._suite_folders[folder] = any(part in names for part in Path(folder).parts)
        return found

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_make_collect_report(self, collector: pytest.Collector
                                   ) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
        """Outermost: a suite file keeps the runs of its verdict items even when
        ``--lf`` filtered the file down to a failed verdict."""
        report = yield
        produced = getattr(collector, "produced", None)
        if produced and report.result is not None and isinstance(collector, SuiteFile):
            give_verdicts_their_runs(produced, report.result)
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
        back = give_verdicts_their_runs(collected, items)
        if back:  # ``-k`` reported them deselected: they run after all, so they are not
            reporter = config.pluginmanager.get_plugin("terminalreporter")
            stats = getattr(reporter, "stats", None)
            if isinstance(stats, dict) and stats.get("deselected"):
                again = set(map(id, back))
                stats["deselected"] = [it for it in stats["deselected"] if id(it) not in again]
                if not stats["deselected"]:
                    del stats["deselected"]
        arrange(self.court, self.runs, config, items)
        return result

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(self, session: pytest.Session) -> None:
        """No full collection of the collector while collecting, and fewer after (``garbage.py``)."""
        self._gc.begin()

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """A large session freezes what collection made (``garbage.py``)."""
        self._gc.collected(len(session.items))

    def pytest_report_collectionfinish(self, config: pytest.Config, start_path: Path,
                                       items: list[pytest.Item]) -> list[str]:
        """Said up front: the verdicts this selection can never decide."""
        return [f"skill court: {line}" for line in self.court.unreachable_gates()]

    # -- running -----------------------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
        """A run item (or a runs item) served from the store goes through ``protocol.run_served``;
        everything else through pytest's own protocol."""
        if not isinstance(item, (RunItem, RunsItem)):
            return None
        if self._quiet is None:
            self._quiet = quiet_possible(item.config, item.session) or ""
        if self._quiet or has_skipping_mark(item) or not self.runs.served(item):
            return None
        return run_served(item, nextitem)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]
                                  ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        """The item's summary onto its call's report (``report.skill_court_run``), and as
        its call's and teardown's ``user_properties`` (JUnit's strings, made here once).
        A skipped run (budget, early stop, no outcome) points at its task in the suite
        file, not at the line of this plugin that skipped it."""
        report = yield
        if not isinstance(item, (RunItem, RunsItem)):
            return report
        summary = getattr(item, SUMMARY, None)
        if summary is not None and call.when != "setup":
            if call.when == "call":  # read from the call's report only: not sent twice by xdist
                setattr(report, SUMMARY, summary)
            made = getattr(item, PROPERTIES, None)  # the call's and the teardown's: made once
            if made is None or made[0] is not summary:
                made = (summary, item_properties(summary))
                setattr(item, PROPERTIES, made)
            report.user_properties = [*made[1], *report.user_properties]
        if report.skipped and isinstance(report.longrepr, tuple) and len(report.longrepr) == 3:
            task = item.task if isinstance(item, RunItem) else item.runs[0].task
            line = task.line if task.line else 1
            report.longrepr = (str(item.path), line, report.longrepr[2])
        return report

    # -- reports between processes (xdist, report logs) ------------------------------------------------

    @pytest.hookimpl(wrapper=True)
    def pytest_report_to_serializable(self, config: pytest.Config, report: Any
                                   ) -> Generator[None, Any, Any]:
        """A report's summary travels as plain data."""
        data = yield
        if isinstance(data, dict) and isinstance(data.get(SUMMARY), (RunSummary, BatchSummary)):
            data[SUMMARY] = summary_to_dict(data[SUMMARY])
        return data

    @pytest.hookimpl(wrapper=True)
    def pytest_report_from_serializable(self, config: pytest.Config, data: Any) -> Generator[None, Any, Any]:
        """... and is read back once, where the report arrives."""
        report = yield
        found = getattr(report, SUMMARY, None)
        if isinstance(found, dict):
            setattr(report, SUMMARY, summary_from_dict(found))
        return report

    # -- end ---------------------------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True, specname="pytest_unconfigure")
    def pytest_unconfigure_freeze(self, config: pytest.Config) -> None:
        """First of all at unconfigure, before pytest's collection at exit
        (``unraisableexception``) and the interpreter's: the process freezes what it holds
        (``garbage.py``).  Named ``pytest_*`` because pytest only reads hook options from
        such names; ``specname`` makes it this plugin's second ``pytest_unconfigure``."""
        self._gc.ending()

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self._gc.restore()
        try:
            self.ending(config)
        finally:
            if self._sigterm is not None and signal.getsignal(signal.SIGTERM) is _on_sigterm:
                signal.signal(signal.SIGTERM, self._sigterm)
            self.court.close()

    def ending(self, config: pytest.Config) -> None:
        """The role's last steps, before the court closes."""
