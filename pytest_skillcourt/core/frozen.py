"""Where a suite's tasks and checks come from: the working tree, or a frozen git revision.

With ``--skill-court-checks-from REF`` (README, "Frozen checks") every suite is
read as it is at ``REF`` (``git archive REF`` of its folder, so its fixtures
come from ``REF`` too): a change that edits a skill and weakens that skill's
own suite is judged by the suite as it was.  The skill library is always the
working tree's; only the suites are frozen.

A suite that is not at ``REF``:

- its skill is not at ``REF`` either (a new skill with its new suite): nothing
  to freeze, so the working tree's suite is used and the verdict says so
  (``SuiteSource.kind == NEW``);
- its skill is at ``REF``: a per-suite error (the suite was moved, renamed or
  deleted in the same change as its skill might have been edited; judging
  it by its own new text would defeat the freeze).

Without the option, a suite that changed together with its skill in the
working tree (``git status`` against ``HEAD``: both modified, added or
untracked) is still used, and the verdict says so
(``SuiteSource.changed_with_skill``), in its JUnit properties and the summary.
"""

from __future__ import annotations

import dataclasses
import io
import os
import subprocess
import tarfile
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_skillcourt.core.skills import Library
from pytest_skillcourt.core.suite import Suite, SuiteError, load_suite

#: Where the suite came from.
WORKING_TREE = "working-tree"
AT_REF = "ref"
NEW = "new-at-ref"

#: Seconds any one git command may take.
GIT_TIMEOUT = 120


class FrozenError(Exception):
    """``--skill-court-checks-from`` cannot be used here; the message says why and the fix."""


@dataclass(frozen=True)
class SuiteSource:
    """Where a verdict's suite came from (stored with the verdict, shown in its properties)."""

    kind: str = WORKING_TREE
    ref: str | None = None  # as the user gave it
    commit: str | None = None  # what it named
    changed_with_skill: bool = False  # working tree only: suite and skill both changed vs HEAD

    def label(self) -> str:
        """One line for properties and summaries."""
        if self.kind == AT_REF:
            return f"{self.ref} ({(self.commit or '')[:12]})"
        if self.kind == NEW:
            return f"working tree (not in {self.ref}: a new skill)"
        if self.changed_with_skill:
            return "working tree (changed together with its skill)"
        return "working tree"

    def to_dict(self) -> dict[str, Any]:
        # its fields by hand: ``dataclasses.asdict`` deep-copies each value, for every suite of a session
        return {"kind": self.kind, "ref": self.ref, "commit": self.commit,
                "changed_with_skill": self.changed_with_skill}


#: The source of a suite read from the working tree that did not change with its skill.
_WORKING_TREE_SOURCE = SuiteSource()


def _git(top: Path, *args: str, binary: bool = False) -> subprocess.CompletedProcess[Any]:
    return subprocess.run(["git", "-C", str(top), *args], capture_output=True, text=not binary,
                          timeout=GIT_TIMEOUT, check=False, stdin=subprocess.DEVNULL)


def git_top(folder: Path) -> Path | None:
    """The top of the git work tree holding ``folder``, or None (no git, not a repository)."""
    try:
        done = _git(folder, "rev-parse", "--show-toplevel")
    except (OSError, subprocess.TimeoutExpired):
        return None
    return Path(done.stdout.strip()).resolve() if done.returncode == 0 and done.stdout.strip() else None


def resolve_ref(rootdir: Path, ref: str) -> tuple[Path, str]:
    """(the git work tree's top, the commit ``ref`` names).

    Raises:
        FrozenError: no git repository here, or ``ref`` names no commit."""
    top = git_top(rootdir)
    if top is None:
        raise FrozenError(f"--skill-court-checks-from {ref}: {rootdir} is not in a git work tree "
                          "(or git is not installed); the suites' frozen version is read with git. "
                          "Fix: run in a clone, or drop the option")
    done = _git(top, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}")
    if done.returncode != 0 or not done.stdout.strip():
        raise FrozenError(f"--skill-court-checks-from {ref}: no such revision in {top}. Fix: name a "
                          "commit, branch or tag that exists here (in CI, fetch the base branch "
                          "first, e.g. git fetch origin main, and pass origin/main)")
    return top, done.stdout.strip()


#: The ini keys that decide whether the build turns red: with --skill-court-checks-from they
#: are read from the configuration file as it is at REF, so a pull request cannot loosen them
#: (``skill_court_fail_on = never``, ``skill_court_tasks = 1``) in its own tree.
GATE_KEYS = ("skill_court_fail_on", "skill_court_tasks")


def gate_ini_at(rootdir: Path, ref: str, inipath: Path | None) -> dict[str, str]:
    """The :data:`GATE_KEYS` values of pytest's configuration file (``inipath``: pytest.ini,
    tox.ini, setup.cfg or pyproject.toml) as it is at ``ref``; a key it does not set is
    left out (its default applies), as is every key when the file is not at ``ref``.

    Raises:
        FrozenError: no git here, no such revision, or the file at ``ref`` cannot be read.
    """
    if inipath is None:
        return {}
    top, commit = resolve_ref(rootdir, ref)
    try:
        rel = Path(inipath).resolve().relative_to(top).as_posix()
    except ValueError:
        return {}
    done = _git(top, "show", f"{commit}:{rel}")
    if done.returncode != 0:
        return {}  # the file is new in this tree: REF had none of these settings
    return _gate_values(done.stdout, Path(rel).name, f"{rel} at {ref}")


def _gate_values(text: str, name: str, where: str) -> dict[str, str]:
    values: dict[str, Any] = {}
    try:
        if name == "pyproject.toml":
            import tomllib

            table = tomllib.loads(text).get("tool", {}).get("pytest", {}).get("ini_options", {})
            values = table if isinstance(table, dict) else {}
        else:
            import configparser

            parser = configparser.ConfigParser(interpolation=None)
            parser.read_string(text)
            for section in ("pytest", "tool:pytest"):
                if parser.has_section(section):
                    values = dict(parser.items(section))
                    break
    except Exception as err:  # noqa: BLE001 - tomllib / configparser errors
        raise FrozenError(f"--skill-court-checks-from: {where} cannot be read ({err}); the gate "
                          "settings are read from it. Fix the file at that revision or drop the option") from None
    return {key: str(values[key]).strip() for key in GATE_KEYS if key in values}


class SuiteReader:
    """Reads each suite file of a session from the working tree or from ``ref``.

    One per process (xdist workers each have their own; they resolve ``ref``
    to the same commit).  Extracted folders live under a temporary folder
    removed by :meth:`close`.
    """

    def __init__(self, rootdir: Path, ref: str | None) -> None:
        self.rootdir = Path(rootdir)
        self.ref = ref
        self._lock = threading.Lock()
        self._top: Path | None = None
        self._commit: str | None = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._extracted: dict[str, Path] = {}
        #: folder -> its git work tree's top (None: none), asked once per folder
        self._tops: dict[str, Path | None] = {}
        #: work tree top -> the paths ``git status`` lists as changed and every folder
        #: above them (``a/``, ``a/b/``); None: it failed
        self._changed: dict[Path, frozenset[str] | None] = {}
        if ref is not None:
            self._resolve(ref)

    def _resolve(self, ref: str) -> None:
        """Raises FrozenError: no git repository here, or ``ref`` names no commit."""
        self._top, self._commit = resolve_ref(self.rootdir, ref)

    def close(self) -> None:
        """Remove the extracted folders."""
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def read(self, path: Path, library: Library) -> tuple[Suite, SuiteSource]:
        """The suite at ``path`` (a working-tree path) and where it came from.

        Raises:
            SuiteError: the suite (as read from wherever it comes) is not valid, or it
                is not at ``ref`` while its skill is.
        """
        suite, source = self.read_suite(path, library)
        return suite, source if source is not None else self.working_source(suite, library)

    def working_source(self, suite: Suite, library: Library) -> SuiteSource:
        """Where a suite read from the working tree came from: whether it changed together
        with its skill is asked of git here (once per work tree, then per suite)."""
        if not self._changed_with_skill(suite.path, suite, library):
            return _WORKING_TREE_SOURCE
        return SuiteSource(changed_with_skill=True)

    def read_suite(self, path: Path, library: Library) -> tuple[Suite, SuiteSource | None]:
        """:meth:`read`, but None for the source of a suite read from the working tree:
        :meth:`working_source` says it when it is wanted (a ``--co`` never wants it, and
        then asks git nothing).

        Raises:
            SuiteError: as :meth:`read`.
        """
        path = path if isinstance(path, Path) else Path(path)
        working = load_suite(path, library.name_set, library.broken_map)
        if self.ref is None:
            return working, None
        assert self._top is not None and self._commit is not None
        rel = path.resolve().relative_to(self._top).as_posix()
        if not self._exists(rel):
            skill = library.get(working.skill)
            skill_rel = (skill.folder.resolve().relative_to(self._top).as_posix() + "/SKILL.md"
                         if skill is not None and skill.folder.resolve().is_relative_to(self._top) else None)
            if skill_rel is not None and self._exists(skill_rel):
                raise SuiteError(path, f"is not in {self.ref} ({self._commit[:12]}), but its skill "
                                       f"{working.skill!r} is: a suite moved, renamed or new in this change "
                                       "cannot be judged by the checks it wrote itself "
                                       "(--skill-court-checks-from). Fix: keep the suite at its path "
                                       f"in {self.ref}, or run without --skill-court-checks-from")
            return working, SuiteSource(kind=NEW, ref=self.ref, commit=self._commit)
        copy = self._extract(rel)
        try:
            frozen = load_suite(copy, library.name_set, library.broken_map, by_stat=False)  # a folder of this session
        except SuiteError as err:
            raise SuiteError(path, f"as of {self.ref} ({self._commit[:12]}): "
                                   f"{str(err).split(': ', 1)[-1]}", line=err.line) from err
        return (dataclasses.replace(frozen, path=path),
                SuiteSource(kind=AT_REF, ref=self.ref, commit=self._commit))

    def _exists(self, rel: str) -> bool:
        assert self._top is not None
        return _git(self._top, "cat-file", "-e", f"{self._commit}:{rel}").returncode == 0

    def _extract(self, rel: str) -> Path:
        """The suite's folder as it is at the commit, extracted once; the suite's path in it."""
        assert self._top is not None and self._commit is not None
        folder = rel.rsplit("/", 1)[0] if "/" in rel else "."
        with self._lock:
            if folder not in self._extracted:
                if self._tmp is None:
                    self._tmp = tempfile.TemporaryDirectory(prefix="skillcourt-frozen-")
                out = Path(self._tmp.name) / str(len(self._extracted))
                out.mkdir()
                done = _git(self._top, "archive", "--format=tar", self._commit, "--", folder, binary=True)
                if done.returncode != 0:
                    raise SuiteError(self._top / rel, f"cannot be read from {self.ref}: "
                                     f"{done.stderr.decode(errors='replace').strip()[:300]}")
                with tarfile.open(fileobj=io.BytesIO(done.stdout)) as tar:
                    if hasattr(tarfile, "data_filter"):  # Python 3.10.12+: no links out, no devices
                        tar.extractall(out, filter="data")
                    else:  # git archive of a commit holds only the commit's own files
                        tar.extractall(out)
                self._extracted[folder] = out
        return self._extracted[folder] / rel

    def _top_of(self, folder: str) -> Path | None:
        """:func:`git_top` of ``folder`` (its path text), asked once per folder of the session."""
        found = self._tops.get(folder, self)
        if found is not self:  # asked before: no lock for a look-up (thousands of suites share a folder)
            return found  # type: ignore[return-value]
        with self._lock:
            if folder not in self._tops:
                self._tops[folder] = git_top(Path(folder))
            return self._tops[folder]

    def _changed_paths(self, top: Path) -> frozenset[str] | None:
        """Every path ``git status`` lists in the work tree ``top`` (modified, added,
        untracked; relative to ``top``) and the folders above them: one ``git status``
        per session, not one per suite."""
        with self._lock:
            if top not in self._changed:
                try:
                    done = _git(top, "status", "--porcelain", "--untracked-files=all")
                except (OSError, subprocess.TimeoutExpired):
                    done = None
                if done is None or done.returncode != 0:
                    self._changed[top] = None
                else:
                    found: set[str] = set()
                    for line in done.stdout.splitlines():
                        if len(line) > 3:
                            changed = line[3:].split(" -> ")[-1].strip().strip('"')
                            parts = changed.split("/")
                            found.add(changed)
                            found.update("/".join(parts[:i]) + "/" for i in range(1, len(parts)))
                    self._changed[top] = frozenset(found)
            return self._changed[top]

    def _changed_with_skill(self, path: Path, suite: Suite, library: Library) -> bool:
        """Both the suite and its skill's folder differ from HEAD (modified, added, untracked)."""
        skill = library.get(suite.skill)
        top = self._top_of(os.path.dirname(path))
        if skill is None or top is None:
            return False
        changed = self._changed_paths(top)
        if changed is None:
            return False
        try:
            suite_rel = path.resolve().relative_to(top).as_posix()
            skill_rel = skill.folder.resolve().relative_to(top).as_posix() + "/"
        except ValueError:  # the library is outside this work tree
            return False
        return suite_rel in changed and skill_rel in changed  # a folder: a file below it changed
