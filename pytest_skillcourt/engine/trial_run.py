"""``skill-court trial``: a trial without a pytest project (README "A trial without a pytest project").

It is not a second court: it runs the court of ``pytest --skill-court``
itself, in this process, on a pytest session it sets up for the library
(``layout.Layout``):

- a configuration file it writes into the library's data folder
  (``skill-court.toml``: the library, the suite folder's name, the store, the
  skills the Hermes profile disables) passed with ``-c``, ``--rootdir`` set to
  the layout's root (the data folder of a Hermes library, the project of a
  repository one), ``--noconftest`` and no cache provider, so nothing of the
  folder it is run from takes part;
- the chosen skills' suite files as the test paths, and every option mapped
  one to one onto its ``--skill-court-*`` twin (``--parallel N`` onto
  pytest-xdist's ``-n N``: the engine's concurrency is its workers);
- ``--skill-court-json`` into a temporary file, read back for the table or the
  ``--json`` output; pytest's own output goes to ``last-trial.log`` in the
  data folder, a line per run to stderr.

So the items, the run cache, the store, the verdicts, the quarantine and the
reports are exactly those of ``pytest --skill-court`` with the same
configuration (a repository library's trial shares the cache of
``pytest --skill-court`` run in that project).
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import importlib.metadata
import importlib.util
import json
import os
import re
import shlex
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence, TextIO

from pluggy import HookimplMarker

from pytest_skillcourt.models.client import HOW_TO_CONFIGURE, ModelConfigError, resolve_model
from pytest_skillcourt.core.atomic import write_atomic
from pytest_skillcourt.core.layout import HERMES, Layout, agent_written, hermes_disabled, hermes_model, read_usage
from pytest_skillcourt.core.locks import held_elsewhere, locked
from pytest_skillcourt.core.printable import plain
from pytest_skillcourt.report.terminal import command_lines, cut, fit_table, prose, rows, terminal_width
from pytest_skillcourt.core.skills import Library
from pytest_skillcourt.stats.verdict import VerdictKind
from pytest_skillcourt.core.suite import SuiteError, load_suite
from pytest_skillcourt.core.suite_edit import find_suites
from pytest_skillcourt.core.trial import TrialResult

#: The exit statuses of ``pytest --skill-court`` (pytest's scheme) that a trial's session
#: ends with; :attr:`TrialRun.exit_status` is one of them, and ``cli.trial_cmd.trial_exit_status``
#: maps it onto the command line's own scheme (``cli.parser.ExitStatus``).
PYTEST_OK = 0
PYTEST_FAILED = 1  # a verdict failed (HURTS), or an item errored
PYTEST_INTERRUPTED = 2
PYTEST_INTERNAL = 3
PYTEST_USAGE = 4
PYTEST_NO_TESTS = 5
PYTEST_INCOMPLETE = 6  # session.py's: the model never answered any run (or runs were left for want of a price)

#: How the session's errors say the judge could not run at all (``controller.produce_verdicts``).
JUDGE_COULD_NOT_RUN = "the judge could not run"

DEFAULT_PARALLEL = 4
CONFIG_NAME = "skill-court.toml"
LOG_NAME = "last-trial.log"
#: Held by every trial of a library while its session runs (README "Automatic trials").
TRIAL_LOCK = "trial.lock"
PLUGIN_MODULE = "pytest_skillcourt.plugin"
#: ``--items``: the values of ``options.ItemLayout``, named here so that the command line
#: does not import pytest to build its parser (a unit test holds the two equal).
ITEM_LAYOUTS = ("run", "skill")

#: ``pytest.hookimpl`` without importing pytest (the command line builds its parser without it).
pytest_hookimpl = HookimplMarker("pytest")


class TrialUsageError(ValueError):
    """The trial cannot start as asked; the message says what to do."""


class RunnerUnavailable(TrialUsageError):
    """The agent runner the trial is to use cannot run here; the message says why and the
    fix.  Never a reason to try the skills in another agent: a verdict is about the agent
    that ran."""

    def __init__(self, message: str, *, agent: str = "", backend: str = "", reason: str = "") -> None:
        super().__init__(message)
        self.agent = agent
        self.backend = backend
        #: the runner's own words (``--skill-court-*`` option names), for a caller that
        #: says the fix in its own terms (automatic trials: ``auto on ...``)
        self.reason = reason


#: The runner a Hermes library is tried in when ``--agent`` names none: Hermes itself.
HERMES_RUNNER = "hermes"

#: ``pytest --skill-court`` option names in a message, as ``trial`` spells them.
TRIAL_FLAGS = (("--skill-court-sandbox", "--sandbox"), ("--skill-court-agent", "--agent"),
               ("--skill-court-image", "--image"), ("--skill-court-base-url", "--base-url"),
               ("--skill-court-hermes-profile", "--hermes-home"),
               # named by runs' skip reasons
               ("--skill-court-run-undecidable", "--run-undecidable"), ("--skill-court-budget", "--budget"),
               ("--skill-court-allow-unpriced", "--allow-unpriced"), ("--skill-court-timeout", "--timeout"))


def trial_flags(text: str) -> str:
    """``text`` with the ``--skill-court-*`` options ``trial`` has under another name renamed
    (whole option names only: ``--skill-court-agent-preset`` is not ``--agent-preset``)."""
    for pytest_flag, trial_flag in TRIAL_FLAGS:
        text = re.sub(re.escape(pytest_flag) + r"(?![\w-])", trial_flag, text)
    return text


@dataclass(frozen=True)
class TrialOptions:
    """What ``skill-court trial`` was asked, before it is mapped onto pytest."""

    skills: tuple[str, ...] = ()
    all_agent: bool = False
    models: tuple[str, ...] = ()
    base_url: str | None = None
    agent: str | None = None
    sandbox: str | None = None
    tasks: int | None = None
    reps: int | None = None
    parallel: int | None = None
    budget: float | None = None
    allow_unpriced: bool = False
    timeout: float | None = None
    apply: bool = False
    keep_sandboxes: bool = False
    judge_model: str | None = None
    judge_tokens: int | None = None
    fresh: bool = False
    run_undecidable: bool = False  # run a suite too small ever to reach a verdict anyway
    as_json: bool = False
    quarantine: Path | None = None
    hermes_profile: Path | None = None  # for --agent hermes
    items: str | None = None  # --skill-court-items: "run" (default) or "skill"
    image: str | None = None  # --skill-court-image: the Docker image of runs whose suite names none
    #: how the command line named the library (``--hermes-home DIR`` / ``--skills DIR``, quoted),
    #: carried into the commands the trial prints, so each works as printed from anywhere
    library_args: str = ""


@dataclass(frozen=True)
class Selection:
    """The skills on trial, their suite files, and what the user should know."""

    skills: tuple[str, ...]
    suites: tuple[Path, ...]
    runs: int  # runs the session will hold (with --items run, its items: for the worker count)
    notes: tuple[str, ...] = ()


# -- choosing skills and suites ------------------------------------------------------------


def select(layout: Layout, library: Library, options: TrialOptions, *, prog: str) -> Selection:
    """The skills to try and their suites.

    Raises:
        TrialUsageError: an unknown skill, a skill without tasks, nothing to try.
    """
    if options.all_agent and options.skills:
        raise TrialUsageError("name skills or pass --all, not both")
    if not options.all_agent and not options.skills:
        raise TrialUsageError("name the skills to try, or pass --all for every skill the agent wrote")
    found = find_suites(layout.suites_dir)
    notes: list[str] = []
    where = options.library_args
    add_hint = (f"add one with `{prog} tasks add SKILL{where} --prompt '...' [--check CMD]`, or mine Hermes' "
                f"history with `{prog} tasks mine SKILL{where}`")
    if options.all_agent:
        usage_file = layout.skills_dir / ".usage.json"
        written = agent_written(read_usage(layout.skills_dir))
        if not written:
            raise TrialUsageError(
                f"--all: no skill of {layout.skills_dir} was written by the agent ({usage_file} has no "
                "record with created_by 'agent' or 'learn'); name the skills to try instead")
        names = []
        for name in written:
            if library.get(name) is None:
                notes.append(f"{name}: written by the agent but no longer in {layout.skills_dir}; skipped")
            elif not found.of(name):
                notes.append(f"{name}: no tasks yet, skipped; {add_hint.replace('SKILL', shlex.quote(name))}")
            else:
                names.append(name)
        if not names:
            raise TrialUsageError("--all: none of the skills the agent wrote has tasks:\n  " + "\n  ".join(notes))
    else:
        names = list(dict.fromkeys(options.skills))
        for name in names:
            broken = library.broken()
            if name in broken:
                raise TrialUsageError(f"the skill {name!r} is left out of the library: {broken[name]}")
            if library.get(name) is None:
                close = difflib.get_close_matches(name, library.names(), n=3)
                hint = (f"did you mean {', '.join(repr(c) for c in close)}?" if close else
                        f"known skills: {', '.join(library.names())}" if library.names() else "the library is empty")
                raise TrialUsageError(f"no skill named {name!r} in {layout.skills_dir}; {hint}")
            if not found.of(name):
                raise TrialUsageError(f"{name!r} has no tasks in {layout.suites_dir}; "
                                      + add_hint.replace("SKILL", shlex.quote(name)))
    suites: list[Path] = []
    runs = 0
    models = max(1, len(options.models))
    for name in names:
        paths = found.of(name)
        if len(paths) > 1:
            notes.append(f"{name}: its tasks are in {len(paths)} suites ({', '.join(map(str, paths))}), "
                         "so it gets one verdict per suite; move them into one file for one verdict")
        for path in paths:
            try:
                suite = load_suite(path, library.names(), library.broken())
            except SuiteError as err:
                raise TrialUsageError(f"{err}") from None
            suites.append(path)
            reps = options.reps or suite.reps or 1
            runs += min(len(suite.tasks), options.tasks or 6) * reps * 2 * models
    return Selection(tuple(names), tuple(suites), runs, tuple(notes))


# -- the agent runner -------------------------------------------------------------------------


def with_runner(layout: Layout, options: TrialOptions) -> TrialOptions:
    """The options with their runner chosen: ``--agent`` when given, else for a Hermes
    library the hermes runner (Hermes itself, with the home as its profile), else the
    court's default (``builtin``)."""
    agent = options.agent
    if agent is None and layout.kind == HERMES:
        agent = HERMES_RUNNER
    profile = options.hermes_profile
    if agent == HERMES_RUNNER and profile is None and layout.hermes_home is not None:
        profile = layout.hermes_home
    return dataclasses.replace(options, agent=agent, hermes_profile=profile)


def check_image(options: TrialOptions) -> None:
    """``--image`` names a Docker image: refused with ``--sandbox local``, which runs none.

    Raises:
        TrialUsageError: the two together, or an empty image name.
    """
    if options.image is None:
        return
    if not options.image.strip():
        raise TrialUsageError("--image: empty; name a Docker image (`docker images` lists those here), "
                              "or leave it out for the default (python:3.12-slim)")
    if options.sandbox == "local":
        raise TrialUsageError(f"--image {options.image} names the Docker image of the runs, but --sandbox local "
                              "runs none (bubblewrap shows this machine's own system): drop --image, or pass "
                              "--sandbox docker")


def check_runner(layout: Layout, options: TrialOptions, *, chosen: bool) -> None:
    """Before anything runs: say when the hermes runner cannot run on the sandbox the trial
    gets (hermes-agent missing, not importable, unreadable to the jail's user ...), with the
    fix.  ``chosen``: the user named the runner (else it is the Hermes library's default).
    A sandbox that is not there is left to the session, which says so for every runner.

    Raises:
        RunnerUnavailable: the runner cannot run; the trial is not started in another agent.
    """
    if options.agent != HERMES_RUNNER:
        return
    from pytest_skillcourt import sandbox
    from pytest_skillcourt.agent.runner import get_runner

    try:
        backend = sandbox.resolve_backend(options.sandbox or "auto")
    except (sandbox.SandboxUnavailable, ValueError):
        return
    reason = get_runner(HERMES_RUNNER).check(backend)
    if not reason:
        return
    why = ("--agent hermes: Hermes" if chosen else
           f"{layout.skills_dir} is a Hermes library, so it is tried in Hermes itself (the hermes runner), and Hermes")
    other = ("" if chosen else
             " Or pass --agent builtin to try it with the built-in agent instead: its verdicts are about that "
             "agent, not your Hermes.")
    raise RunnerUnavailable(f"{why} cannot run on the {backend} sandbox here, so nothing was tried: "
                            f"{trial_flags(reason)}{other}", agent=HERMES_RUNNER, backend=backend, reason=reason)


# -- the pytest session ----------------------------------------------------------------------


def _toml(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)


def config_text(layout: Layout, disabled: Sequence[str] = ()) -> str:
    """The pytest configuration of the library's trials (``-c``).

    A Hermes library's trials hide what its quarantine file hides from each run's model
    (ini ``skill_court_quarantine_hides``), in both arms, as the plugin hides it from the
    user's Hermes; the skill on trial is never hidden by it."""
    keys: dict[str, Any] = {
        "skill_court_skills": str(layout.skills_dir),
        "skill_court_suite_dirs": [layout.suite_dir_name],
        "skill_court_store": str(layout.store),
    }
    if disabled:
        keys["skill_court_disabled"] = list(disabled)
    if layout.kind == HERMES:
        keys["skill_court_quarantine_hides"] = "true"
    lines = [
        "# Written by `skill-court trial` before each trial of this library: the pytest",
        "# configuration its `pytest --skill-court` session runs with.",
        "[tool.pytest.ini_options]",
        *(f"{k} = {_toml(v)}" for k, v in keys.items()),
    ]
    return "\n".join(lines) + "\n"


def _plugin_autoloaded() -> bool:
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        return False
    try:
        points = importlib.metadata.entry_points(group="pytest11")
    except Exception:  # a broken distribution: load the plugin by name
        return False
    return any(ep.value.split(":", 1)[0].strip() == PLUGIN_MODULE for ep in points)


def xdist_installed() -> bool:
    """True when pytest-xdist can run the session's workers."""
    return importlib.util.find_spec("xdist") is not None


def workers(options: TrialOptions, runs: int) -> int:
    """How many xdist workers the session gets (1: none, everything in this process)."""
    wanted = options.parallel or DEFAULT_PARALLEL
    if wanted <= 1 or not xdist_installed():
        return 1
    return max(1, min(wanted, runs))


def pytest_args(layout: Layout, selection: Selection, options: TrialOptions, *, config: Path,
                json_path: Path, quarantine: Path, base_url: str | None, models: Sequence[str],
                disabled_plugin_autoload: bool | None = None) -> list[str]:
    """The arguments of the trial's ``pytest`` session."""
    autoload = _plugin_autoloaded() if disabled_plugin_autoload is None else not disabled_plugin_autoload
    args: list[str] = [] if autoload else ["-p", PLUGIN_MODULE]
    # With --items skill an item is one skill on one model: no more workers than those.
    items = len(selection.skills) * max(1, len(models)) if options.items == "skill" else selection.runs
    n = workers(options, items)
    if n > 1:
        if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
            args += ["-p", "xdist"]
        args += ["-n", str(n)]
    args += ["-c", str(config), f"--rootdir={layout.rootdir}", "--noconftest", "-p", "no:cacheprovider",
             "--assert=plain", "-q", "--skill-court"]
    args += [f"--skill-court-model={m}" for m in models]
    one_to_one: list[tuple[str, Any]] = [
        ("base-url", base_url), ("agent", options.agent), ("sandbox", options.sandbox),
        ("tasks", options.tasks), ("reps", options.reps), ("budget", options.budget),
        ("timeout", options.timeout), ("judge-model", options.judge_model),
        ("judge-tokens", options.judge_tokens),
        ("hermes-profile", options.hermes_profile), ("items", options.items), ("image", options.image),
    ]
    args += [f"--skill-court-{name}={value}" for name, value in one_to_one if value is not None]
    flags = [("allow-unpriced", options.allow_unpriced), ("apply", options.apply),
             ("keep-sandboxes", options.keep_sandboxes), ("fresh", options.fresh),
             ("run-undecidable", options.run_undecidable)]
    args += [f"--skill-court-{name}" for name, on in flags if on]
    args += [f"--skill-court-quarantine={quarantine}", f"--skill-court-json={json_path}"]
    args += [str(p) for p in selection.suites]
    return args


class Progress:
    """A pytest plugin of this command: one line per finished run on ``out`` (wrapped to
    ``width``, default :func:`terminal_width`), and the count of runs that errored."""

    def __init__(self, out: TextIO, width: int | None = None) -> None:
        self.out = out
        self.width = width or terminal_width()
        self.total: int | None = None
        self.done = 0
        self.failed = 0  # run items that ended in an error (not a skip): the result is short of them

    def _say(self, text: str) -> None:
        for line in prose(text, self.width):
            print(line, file=self.out, flush=True)

    def pytest_collection_finish(self, session: Any) -> None:
        if session.items:
            self.total = len(session.items)

    # Only pytest-xdist defines this hook: optional, so that a session without xdist
    # (not installed, or -p no:xdist) accepts the plugin.
    @pytest_hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: Sequence[str]) -> None:
        self.total = len(ids)

    def pytest_runtest_logreport(self, report: Any) -> None:
        props = dict(report.user_properties or ())
        if "skill_court_run" not in props and "skill_court_runs" not in props:
            return  # a verdict item (the table says it) or not ours
        if not (report.when == "call" or (report.when == "setup" and not report.passed)):
            return
        self.done += 1
        if report.skipped:
            longrepr = report.longrepr
            reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
            what = "skipped: " + trial_flags(reason.removeprefix("Skipped: "))
        elif report.failed:
            self.failed += 1
            what = "error (see the log)"
        elif "skill_court_runs" in props:  # one skill's runs on one model
            what = f"{props.get('runs')} runs: {props.get('outcomes') or 'none'}, {props.get('cached_runs')} cached"
        else:
            what = str(props.get("outcome") or "done").replace("pending-judge", "answered, for the judge")
            if props.get("cached") == "true":
                what += ", cached"
        count = f"{self.done}/{self.total}" if self.total else str(self.done)
        self._say(f"[{count}] {report.nodeid.split('::', 1)[-1]} {props.get('skill', '')}: {what}"[:300])


class KeepResult:
    """A pytest plugin of this command: keeps the session's ``TrialResult`` as its verdicts
    built it (``engine.verdicts.RESULT``), the value its JSON file was written from, so the
    table is printed from the values themselves, never read back from the file."""

    def __init__(self) -> None:
        self.result: TrialResult | None = None

    def pytest_sessionfinish(self, session: Any) -> None:
        from pytest_skillcourt.engine.verdicts import RESULT  # loaded with the session's court

        self.result = session.config.stash.get(RESULT, None)


@contextlib.contextmanager
def _stdout_to(log: TextIO) -> Iterator[None]:
    """pytest's terminal output into ``log``; anything else written to fd 1 to stderr,
    so stdout holds only this command's result."""
    saved = None
    with contextlib.suppress(OSError, ValueError, AttributeError):
        sys.stdout.flush()
        saved = os.dup(1)
        os.dup2(2, 1)
    try:
        with contextlib.redirect_stdout(log):
            yield
    finally:
        if saved is not None:
            os.dup2(saved, 1)
            os.close(saved)


def release_command(prog: str, skill: str, model: str, quarantine_file: str | os.PathLike[str] | None = None) -> str:
    """The command that lifts ``skill``'s quarantine for ``model``, as a user types it
    (``--quarantine FILE`` when the file is not the one ``prog`` finds by itself)."""
    where = f" --quarantine {shlex.quote(str(quarantine_file))}" if quarantine_file else ""
    return f"{prog} release {shlex.quote(skill)} --model {shlex.quote(model)}{where}"


def summary_lines(result: TrialResult, *, apply: bool, prog: str, width: int | None = None) -> list[str]:
    """The verdict table of the trial and what follows it (causes, quarantine, errors),
    every line within ``width`` (default :func:`terminal_width`): the session's own
    ``TrialResult``, as its ``--skill-court-json`` file holds it."""
    width = width or terminal_width()
    outcomes = result.outcomes
    lines = prose(f"skill court trial {result.trial}: agent {result.agent}, sandbox {result.backend}", width)
    if outcomes:
        lines += fit_table(rows(result), width)
    else:
        lines.append("no verdict was made")
    hurts = [o for o in outcomes if o.kind is VerdictKind.HURTS]
    for o in outcomes:
        v = o.verdict
        if o.kind is VerdictKind.HURTS or v.hint:
            lines.append("")
            lines += prose(f"{o.skill} on {o.target.model}: {v.kind.value}: {v.line}", width)
            if o.cause is not None:
                lines += prose(f"cause: {o.cause.cause}", width, "  ")
                if o.cause.line:
                    lines += prose(f"skill line: {o.cause.line}", width, "  ")
            if v.hint:
                lines += prose(f"hint: {v.hint}", width, "  ")
    qfile = result.quarantine_file
    for skill, model in result.quarantined:
        lines += prose(f"quarantined {skill} for model {model} in {qfile}", width)
        # Always the file itself: ``skill-court`` defaults to the folder it is run from, and
        # ``hermes court`` to the profile Hermes runs with, which need not be the trial's
        # (``--hermes-home``, ``$SKILL_COURT_QUARANTINE``): the undo must work as printed.
        lines += command_lines("undo: ", release_command(prog, skill, model, qfile), width, "  ")
    for skill, model in result.lifted:
        lines += prose(f"lifted the quarantine of {skill} for model {model}", width)
    if hurts and not apply:
        lines += prose(f"not quarantined: pass --apply to hide a skill that hurts from the model it hurts "
                       f"(file: {qfile})", width)
    if result.early_skipped:
        lines.append(f"early stop saved {result.early_skipped} runs")
    lines.append(f"spend ${round(result.spend, 6):.4f}")  # as the JSON file says it
    for error in result.errors:
        lines += prose(f"skill court: {trial_flags(str(error))}", width)
    return lines


# -- the command --------------------------------------------------------------------------------


@dataclass
class TrialRun:
    """What one ``trial`` command did (for its output and for tests)."""

    #: the session's exit status in ``pytest --skill-court``'s scheme (``PYTEST_*``; a
    #: session that collected nothing as ``PYTEST_USAGE``); the command's own is
    #: ``cli.trial_cmd.trial_exit_status`` of this
    exit_status: int
    #: the session's ``--skill-court-json`` document: what ``--json`` prints (the JSON edge)
    document: dict[str, Any] | None = None
    pytest_args: list[str] = field(default_factory=list)
    log: Path | None = None
    #: run items that ended in an error (a failed test, not a skip): runs missing from the verdicts
    failed_runs: int = 0
    #: the session's own result (``engine.verdicts.RESULT``), which that document was written
    #: from; None when the session made no verdict
    result: TrialResult | None = None

    @property
    def verdict_failed(self) -> bool:
        """A verdict failed the session's gate (HURTS)."""
        return self.result is not None and any(o.failed for o in self.result.outcomes)

    @property
    def judge_errors(self) -> list[str]:
        """Why the judge gave no outcome: one entry per pair it failed on, and the
        session's error when it could not run at all."""
        if self.result is None:
            return []
        found = [e for e in self.result.errors if e.startswith(JUDGE_COULD_NOT_RUN)]
        for o in self.result.outcomes:
            found += [f"{o.skill} on {o.target.model}, {pj.task} r{pj.rep}: {pj.judgment.error}"
                      for pj in o.judgments if pj.judgment.error]
        return found


def _models(layout: Layout, options: TrialOptions) -> tuple[tuple[str, ...], str | None]:
    if options.models:
        return options.models, options.base_url
    why = ""
    if layout.kind == HERMES and layout.hermes_home is not None:
        profile = hermes_model(layout.hermes_home)
        if profile.label:
            return (profile.label,), options.base_url or profile.base_url
        why = f" ({profile.why_not})"
    raise TrialUsageError(f"no model{why}: pass --model PROVIDER/MODEL; {HOW_TO_CONFIGURE}".replace(
        "--skill-court-model (or ini skill_court_models)", "--model").replace("--skill-court-base-url", "--base-url"))


def run_trial(layout: Layout, library: Library, options: TrialOptions, *, prog: str = "skill-court",
              err: TextIO | None = None,
              main: Callable[..., int] | None = None) -> TrialRun:
    """Put the chosen skills on trial; the exit status and the result document.

    Raises:
        TrialUsageError: the trial cannot start as asked (a usage error).
    """
    err = err or sys.stderr
    check_image(options)
    select(layout, library, options, prog=prog)  # an unknown skill or one without tasks: say so first
    models, base_url = _models(layout, options)
    for label in models:
        try:
            resolve_model(label, base_url=base_url)
        except ModelConfigError as exc:
            raise TrialUsageError(f"--model {label}: {exc}".replace("--skill-court-base-url", "--base-url")
                                  .replace("pytest --skill-court", prog + " trial")) from None
    options = dataclasses.replace(options, models=models)
    chosen = options.agent is not None
    options = with_runner(layout, options)
    check_runner(layout, options, chosen=chosen)
    selection = select(layout, library, options, prog=prog)
    for note in selection.notes:
        _tell(err, prog, note)
    disabled: list[str] = []
    if layout.kind == HERMES and layout.hermes_home is not None:
        for name in hermes_disabled(layout.hermes_home):
            if name in selection.skills:
                _tell(err, prog, f"{name} is disabled in the profile (skills.disabled); it is tried as if enabled")
            else:
                disabled.append(name)
    wanted = options.parallel or DEFAULT_PARALLEL
    if wanted > 1 and not xdist_installed() and options.parallel is not None:
        _tell(err, prog, f"--parallel {wanted}: pytest-xdist is not installed, so runs go one at a time "
              "(pip install pytest-xdist)")
    layout.ensure_data_dir()
    config = layout.data_dir / CONFIG_NAME
    write_atomic(config, config_text(layout, disabled))
    quarantine = options.quarantine or layout.quarantine
    fd, tmp = tempfile.mkstemp(prefix=".trial-", suffix=".json", dir=layout.data_dir)
    os.close(fd)
    json_path = Path(tmp)
    os.unlink(json_path)  # the court writes it; an empty file must never be read as a result
    args = pytest_args(layout, selection, options, config=config, json_path=json_path, quarantine=quarantine,
                       base_url=base_url, models=models)
    log = layout.data_dir / LOG_NAME
    if main is None:
        import pytest  # the whole engine: loaded only for a trial

        main = pytest.main
    _tell(err, prog, f"{', '.join(selection.skills)} on {', '.join(models)}: {selection.runs} runs "
          f"({workers(options, selection.runs)} at a time, agent {options.agent or 'builtin'}); "
          f"pytest's output: {log}")
    if layout.kind == HERMES and held_elsewhere(layout.data_dir / TRIAL_LOCK):
        _tell(err, prog, "another trial of this profile is running; waiting for it")
    try:
        # One trial at a time per profile: the automatic runner and a hand trial share the store.
        progress, kept = Progress(err), KeepResult()
        with locked(layout.data_dir / TRIAL_LOCK), open(log, "w", encoding="utf-8") as handle, _stdout_to(handle):
            code = int(main(args, plugins=[progress, kept]))
        document = json.loads(json_path.read_text(encoding="utf-8")) if json_path.exists() else None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(json_path)
    done = TrialRun(_exit_status(code, log, err, prog), document, args, log, failed_runs=progress.failed,
                    result=kept.result)
    _say_untrusted(done, err, prog)
    return done


def _tell(err: TextIO, prog: str, text: str) -> None:
    """A message of the command on ``err``, wrapped to the terminal's width."""
    for line in prose(f"{prog} trial: {text}", terminal_width()):
        print(line, file=err, flush=True)


def _exit_status(code: int, log: Path, err: TextIO, prog: str) -> int:
    """pytest's exit status of the session, said when it is not about verdicts."""

    def say(text: str) -> None:
        _tell(err, prog, text)

    if code == PYTEST_INCOMPLETE:
        say("the session could not try what it was asked to (the model never answered, or runs were not "
            f"started for want of a price); check --model, --base-url and the API key, or --allow-unpriced "
            f"(the runs' errors are in {log})")
    elif code == PYTEST_INTERRUPTED:
        say(f"interrupted; what was recorded stays in the store (pytest's output: {log})")
    elif code == PYTEST_NO_TESTS:
        say(f"the session collected nothing; see {log}")
        return PYTEST_USAGE
    elif code not in (PYTEST_OK, PYTEST_FAILED, PYTEST_USAGE):
        say(f"pytest ended with status {code}; the end of {log}:")
        tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-40:] if log.exists() else []
        for line in tail:
            print(cut(f"  {plain(line)}", terminal_width()), file=err)
    return code


def _say_untrusted(done: TrialRun, err: TextIO, prog: str) -> None:
    """Say what keeps the verdicts from being trusted: runs that errored, pairs the judge failed on."""
    if done.failed_runs:
        _tell(err, prog, f"{done.failed_runs} run(s) ended in an error, so the verdicts lack them; see {done.log}")
    elif done.exit_status == PYTEST_FAILED and not done.verdict_failed:
        _tell(err, prog, f"the session failed without a failed verdict; see {done.log}")
    judge = done.judge_errors
    if judge:
        _tell(err, prog, f"the judge gave no outcome for {len(judge)} pair(s) (first: {judge[0]}); the verdicts "
              "rest on the others")
