"""The hook object of the controller (as xdist's own ``DSession``): of an xdist session,
which runs nothing itself, or of a session without xdist, which also collects and runs
the items (``hooks.ItemHooks``).

Only the controller judges pairs, decides verdicts, emits the verdict items' reports and
writes aggregated files (terminal section, JSON, quarantine, the JUnit judgments).  What
it needs from the workers travels through the store, through ``workeroutput`` (the
targets they collected, with the ``SuiteFacts`` they read) and on each run item's report
(its ``runs.RunSummary``: skip reasons, early stops, the progress, the run's item name).
"""

from __future__ import annotations

import time
from typing import Any, Iterator

import pytest

from pytest_skillcourt.agent.runner import get_runner
from pytest_skillcourt.core.clock import new_trial_id
from pytest_skillcourt.core.printable import plain
from pytest_skillcourt.core.records import NO_ANSWER
from pytest_skillcourt.core.settings import Settings
from pytest_skillcourt.core.store import StoreError
from pytest_skillcourt.core.trial import Target
from pytest_skillcourt.plugin.collect import verdicts_of_runs
from pytest_skillcourt.plugin.court import UNPRICED, Court, Role
from pytest_skillcourt.plugin.hooks import ItemHooks, refuse_two_concurrencies, summary_of
from pytest_skillcourt.plugin.junit import (
    JUNIT_PLUGIN, JunitRunData, RunKey, add_judgments, check_family, logxml, pair_properties, run_key,
)
from pytest_skillcourt.plugin.progress import Progress, format_tokens
from pytest_skillcourt.plugin.runs import BatchSummary, RunSummary
from pytest_skillcourt.sandbox import SandboxUnavailable

#: The exit status of a session that could not try what it was asked to: the model never
#: answered any run, or runs were not started for want of a price.  Not a verdict on any
#: skill, so neither a pass (0) nor a failed test (1).
EXIT_INCOMPLETE = 6
#: The same status, by the name of its first cause (``trial_cli`` maps it).
EXIT_NO_ANSWER = EXIT_INCOMPLETE

#: How a run item's outcome reads under ``-v``, and its colour.
RUN_WORDS = {"success": ("SUCCESS", {"green": True}), "failure": ("CHECK FAILED", {"yellow": True}),
             "pending-judge": ("TO JUDGE", {"cyan": True})}


class Controller(ItemHooks):
    """See the module docstring."""

    @classmethod
    def for_config(cls, config: pytest.Config, settings: Settings) -> Controller:
        court = Court(config, settings, Role(trial=new_trial_id()))
        workers = config.getoption("numprocesses", default=None)
        if workers not in (None, 0, "0"):
            refuse_two_concurrencies(court.settings, workers)
        return cls(court)

    def __init__(self, court: Court) -> None:
        super().__init__(court)
        self.config = court.config
        #: xdist: verdicts to add to the progress total (see the xdist hook)
        self._xdist_verdicts = 0
        self._session: pytest.Session | None = None
        #: each run's item name, as its report gave it: what the JUnit judgments name
        self.run_names: dict[RunKey, str] = {}
        #: set when every run of the session got no reply from the model
        self.never_answered = False

    # -- start -----------------------------------------------------------------------------------

    def backend(self) -> str:
        """The backend of this session's runs.  The first time, on a session that will run,
        the default image is had (pulled if missing) before any run, once for every worker;
        what failed is kept for the runs that need it (``Court.image_id``)."""
        court = self.court
        first = court.backend is None
        backend = court.resolve_backend()
        if first and not self.config.option.collectonly and court.settings.skills_dir.is_dir():
            from pytest_skillcourt.sandbox import check_image, image_notices

            image_notices(self.config)  # registered now: it hears the workers' at their end
            court.images[court.settings.image] = check_image(backend, court.settings.image)
        return backend

    def starting(self, session: pytest.Session) -> None:
        if self.config.get_verbosity() >= 0:
            # written past pytest's capture of the runs' output (plugin/progress.py)
            self.court.progress = Progress.for_pytest(
                self.config, heartbeat_s=self.court.settings.heartbeat_s or float("inf"))

    def started(self, session: pytest.Session) -> None:
        court, s = self.court, self.court.settings
        self._junit_run_data()
        try:
            backend = self.backend()
        except SandboxUnavailable as err:
            raise pytest.UsageError(f"skill court: {err}") from None
        agent = s.agent.value
        reason = get_runner(agent).check(backend)
        if not reason and s.agent_preset is not None:  # the command runner's agent must be there
            reason = s.agent_preset.locate(s.rootdir)[1]
        if reason:
            raise pytest.UsageError(f"--skill-court-agent {agent}: {reason}")
        if not s.skills_dir.is_dir():
            return  # nothing to try: no store is made (the summary says what is missing)
        try:
            court.store().start_trial(court.trial, rootdir=str(s.rootdir),
                                      argv=list(self.config.invocation_params.args), skills_dir=str(s.skills_dir))
        except StoreError as err:
            raise pytest.UsageError(f"skill court: {err}") from None

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        court, s = self.court, self.court.settings
        try:
            backend = self.backend()
        except Exception as err:  # shown, then sessionstart raises the usage error
            backend = f"unavailable ({err})"
        added = ([f"skill court: also collecting {', '.join(court.added_paths)}/ (not in ini testpaths)"]
                 if court.added_paths else [])
        added += [f"skill court: gate {line}" for line in court.frozen_gates]
        return added + [
            f"skill court: models {', '.join(s.models)}; agent {s.agent.value}; sandbox "
            f"{backend}{' (' + s.image + ')' if backend == 'docker' else ''}",
            f"skill court: library {court.rel(s.skills_dir)}; store {court.rel(s.store)}; "
            f"budget ${s.budget:.2f}; trial {court.trial}",
        ]

    # -- xdist ---------------------------------------------------------------------------------

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """Every worker shares this session's trial and backend."""
        node.workerinput["skill_court_trial"] = self.court.trial
        node.workerinput["skill_court_backend"] = self.backend()

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        out = getattr(node, "workeroutput", None) or {}
        for raw in out.get("skill_court_targets", []):
            self.court.add_target(Target.from_dict(raw))
        self.court.errors.extend(str(why) for why in out.get("skill_court_unremoved", []))

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        """The verdicts the workers' runs belong to, counted from their ids (the workers
        took the verdict items out of the run queue; this controller reports them), so the
        progress adds up to 100%."""
        self._xdist_verdicts = len(verdicts_of_runs(ids, self.court.settings.models))

    # -- the run loop, then the verdicts ------------------------------------------------------------

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Iterator[None]:
        court = self.court
        self._session = session
        if court.targets:  # verdict items left the run queue but will be reported: count them
            session.testscollected += len(court.targets)
        if not session.config.option.collectonly:
            self.runs.start_ahead(session.items)
        try:
            result = yield
        finally:
            if self.runs.ahead is not None:
                self.runs.ahead.stop()
            court.loop_done = True
            court.errors.extend(court.unremoved())  # a sandbox left behind is said, with the fix
        if not session.config.option.collectonly and court.settings.skills_dir.is_dir():
            interrupted = bool(session.shouldstop) and session.testsfailed == 0
            try:
                if not interrupted:
                    from pytest_skillcourt.engine.verdicts import produce_verdicts  # the controller's alone

                    produce_verdicts(court, session)
                    self._judgments_into_junit()
                self._check_answered()
                self._check_priced()
                court.store().finish_trial(court.trial)
            except StoreError as err:  # found damaged mid-session: say so, no INTERNALERROR
                raise pytest.UsageError(f"skill court: {err}") from None
        return result

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if (self.never_answered or self.court.incomplete) and session.exitstatus in (
                pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            session.exitstatus = EXIT_INCOMPLETE

    def _check_answered(self) -> None:
        """A session whose runs all got no reply from the model decided nothing: say so
        loudly (and exit with ``EXIT_NO_ANSWER``) instead of a green INCONCLUSIVE."""
        runs = [th.head for group in self.court.runs_by_target().values() for th in group]
        if runs and all(r.status == NO_ANSWER for r in runs):
            self.never_answered = True
            self.court.errors.append(
                f"the model never answered: none of the {len(runs)} runs got a reply "
                f"(first error: {runs[0].error or 'none given'}). Check --skill-court-model, "
                f"--skill-court-base-url and the API key; exit status {EXIT_NO_ANSWER}")

    def _check_priced(self) -> None:
        """Runs left unstarted for want of a price: the session says why and how to fix it
        in its last lines and ends with ``EXIT_INCOMPLETE``, never a green INCONCLUSIVE."""
        court = self.court
        unpriced = sorted({task for reasons in court.skip_reasons.values()
                           for task, why in reasons.items() if why.startswith(UNPRICED)})
        if not unpriced:
            return
        models = ", ".join(court.store().unpriced_models(court.trial)) or "the model"
        why = (f"runs of {len(unpriced)} task(s) were not started: {UNPRICED} {models}. Add "
               "'MODEL = IN OUT' (USD per million tokens) to ini skill_court_prices, or pass "
               "--skill-court-allow-unpriced")
        court.errors.append(f"{why}; exit status {EXIT_INCOMPLETE}")
        court.incomplete = f"{court.incomplete}; {why}" if court.incomplete else why

    # -- the reports as they arrive ------------------------------------------------------------------

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> Iterator[None]:
        """Outermost: pytest writes (``-v``: the item's id) with the live status erased."""
        progress = self.court.progress
        if progress is None:
            return (yield)
        with progress.paused():
            result = yield
        if "::verdict[" not in nodeid:
            progress.started(nodeid)
        return result

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Iterator[None]:
        court = self.court
        if self._xdist_verdicts and self._session is not None:
            # xdist set testscollected to the workers' run count just before the first report
            self._session.testscollected += self._xdist_verdicts
            self._xdist_verdicts = 0
        summary = summary_of(report)
        if isinstance(summary, BatchSummary) and report.when == "call":
            court.early_skipped += summary.early_stopped
            reasons = court.skip_reasons.setdefault((summary.suite_rel, summary.model), {})
            for task, why in summary.skip_reasons.items():
                reasons.setdefault(task, why)
        elif isinstance(summary, RunSummary) and report.when == "call":
            run = summary.run
            self.run_names[run_key(summary)] = summary.name
            if report.skipped and summary.early_stop:
                court.early_skipped += 1
            if report.skipped and summary.skip_reason is not None:
                court.skip_reasons.setdefault((run.suite_rel, run.model), {}).setdefault(
                    run.task_id, summary.skip_reason)
        progress = court.progress
        if progress is None:
            return (yield)
        if report.when == "call":
            progress.finished(report.nodeid, *(summary.tally() if summary is not None else ()))
        elif report.when == "teardown":
            progress.forget(report.nodeid)
        with progress.paused():
            return (yield)

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(self, report: pytest.TestReport, config: pytest.Config) -> Any:
        """``-v`` says what a run did, not just that its item passed: a run whose check
        failed is a passed item (the verdict decides), so its word is the outcome."""
        if report.when != "call" or not report.passed:  # FAILED stays FAILED (the short summary)
            return None
        summary = summary_of(report)
        if isinstance(summary, BatchSummary):  # one skill's runs on one model
            outcomes = ", ".join(f"{n} {what}" for what, n in summary.counts().items())
            details = [f"{len(summary.runs)} runs", f"{summary.cached} cached", f"{summary.tokens:,} tok"]
            return "passed", ".", (f"RUNS: {outcomes or 'none'} ({', '.join(details)})", {"green": True})
        if isinstance(summary, RunSummary):
            if not summary.recorded:
                return None
            word, markup = RUN_WORDS.get(summary.outcome, (summary.outcome.upper(), {}))
            details = [f"{summary.duration_s:.1f}s", f"{summary.tokens:,} tok"]
            if summary.cost_usd is not None:
                details.append(f"${summary.cost:.4f}")
            if summary.cached:
                details.append("cached")
            return "passed", ".", (f"{word} ({', '.join(details)})", markup)
        props = dict(report.user_properties)
        if "verdict" not in props or "skill_court_run" in props:
            return None
        kind = str(props["verdict"])  # a passing verdict item (``engine.verdicts.emit_report``): its verdict
        return "passed", ".", (kind, {"green": True} if kind in ("HELPS", "NEUTRAL") else {"yellow": True})

    # -- the summary ------------------------------------------------------------------------------

    def totals_line(self) -> str:
        """The session in one line: runs, cached, model calls, tokens, spend, wall time."""
        court = self.court
        runs = [th for group in court.runs_by_target().values() for th in group]
        cached = sum(1 for th in runs if th.cached)
        calls = sum(th.head.api_calls for th in runs if not th.cached)
        tokens = sum(th.head.tokens for th in runs)
        wall = time.monotonic() - court.started
        return (f"skill court: {len(runs)} runs ({cached} cached), {calls} model calls, "
                f"{format_tokens(tokens)} tokens, ${court.store().spend(court.trial):.4f} spent, "
                f"{int(wall) // 60}m{int(wall) % 60:02d}s")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        court = self.court
        if not court.targets and not court.outcomes:
            for line in self.nothing_to_try():
                terminalreporter.write_line(line, yellow=True)
        if not (court.outcomes or court.errors):
            return
        from pytest_skillcourt.report.terminal import write_summary

        write_summary(terminalreporter, court.result())
        for what, path in court.files_written:
            terminalreporter.write_sep("-", f"generated {what}: {path}")
        if self.config.get_verbosity() >= 0:
            try:
                terminalreporter.write_line(self.totals_line())
            except StoreError:
                pass
            free = court.free_models()
            if free:  # once: a local or custom endpoint with no price in skill_court_prices
                self._write_wrapped(terminalreporter, f"skill court: {', '.join(free)} counted as free "
                                    "(a local endpoint; ini skill_court_prices prices it)")
        if self.never_answered or court.incomplete:
            why = court.incomplete or "the model never answered"
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
        court, s = self.court, self.court.settings
        lines = ["skill court: nothing to try in this session."]
        if not s.skills_dir.is_dir():
            lines.append(f"  no skill library at {court.rel(s.skills_dir)}: point ini skill_court_skills (or "
                         "--skill-court-skills=DIR) at a folder of <name>/SKILL.md")
        if not court.suite_files:
            lines.append(f"  no suite file: add one YAML file per skill under a folder named "
                         f"{' or '.join(s.suite_dirs)} (README: \"Writing suites\")")
        return lines

    # -- the JUnit file ---------------------------------------------------------------------------------

    def _junit_run_data(self) -> None:
        """With ``--junitxml``: the court's items' data go into pytest's file as
        ``plugin/junit.py`` says (``<system-out>``, or ``<properties>`` by option)."""
        xml = logxml(self.config)
        check_family(xml, self.court.settings.junit_properties)
        if xml is not None and not self.config.pluginmanager.has_plugin(JUNIT_PLUGIN):
            self.config.pluginmanager.register(
                JunitRunData(xml, properties=self.court.settings.junit_properties, trial=self.court.trial),
                JUNIT_PLUGIN)

    def ending(self, config: pytest.Config) -> None:
        """The JUnit plugin leaves with the court (pytester sessions share the process)."""
        plugin = config.pluginmanager.get_plugin(JUNIT_PLUGIN)
        if plugin is not None:
            config.pluginmanager.unregister(plugin)

    def _judgments_into_junit(self) -> None:
        """After the verdicts, before junitxml writes its file: each judged pair's
        judgment into the testcases of its two runs, named as their reports named them
        (no suite is read again for it)."""
        xml = logxml(self.config)
        if xml is None or not self.court.outcomes:
            return
        props = pair_properties(self.court.outcomes, self.run_names)
        if props:
            add_judgments(xml, props, properties=self.court.settings.junit_properties)
