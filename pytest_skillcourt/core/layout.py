"""Where a skill library's court keeps its things (README "A trial without a pytest project").

Two kinds of library:

- a **Hermes library**, ``$HERMES_HOME/skills``: the court's data folder is
  ``$HERMES_HOME/plugin-data/skill-court/`` with the store (``court.db``), the
  suites (``suites/``, one file per skill) and ``quarantine.json``, the file the
  Hermes plugin reads, so a trial's quarantine reaches the live agent directly;
- a **repository library**, any ``--skills DIR``: laid out as a pytest project
  is (``skills_tests/`` beside the library, ``.skill-court/`` with the store and
  the quarantine), so ``pytest --skill-court`` in that folder sees the same
  suites, cache and verdicts.

Also read here, for Hermes libraries, what the profile says: which skills the
agent wrote (``skills/.usage.json``, written by Hermes' ``tools/skill_usage.py``),
the model it runs (``config.yaml`` ``model``) and the skills it already hides
(``skills.disabled``), and which home and quarantine file the Hermes process
this runs in uses (:func:`active_hermes_home`, :func:`active_hermes_quarantine`).
Nothing here writes.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import yaml

from pytest_skillcourt.core import safe_yaml
from pytest_skillcourt.core.quarantine_file import ENV_VAR, hermes_path

HERMES = "hermes"
REPOSITORY = "repository"

#: ``.usage.json`` ``created_by`` values that mean "the agent wrote this skill".
AGENT_WRITERS = frozenset({"agent", "learn"})

#: The court's folder inside a Hermes home.
HERMES_DATA = Path("plugin-data") / "skill-court"


class LayoutError(ValueError):
    """The library cannot be used; the message says what to pass instead."""


@dataclass(frozen=True)
class Layout:
    """The folders and files of one library's court."""

    kind: str  # HERMES or REPOSITORY
    skills_dir: Path
    suites_dir: Path  # one suite per skill, the YAML format of README "Writing suites"
    data_dir: Path  # store, the trial's pytest configuration, lock files
    rootdir: Path  # the pytest rootdir of its trials (suite paths are relative to it)
    hermes_home: Path | None = None

    @property
    def store(self) -> Path:
        return self.data_dir / "court.db"

    @property
    def quarantine(self) -> Path:
        """The library's own quarantine file (before ``--quarantine`` or ``$SKILL_COURT_QUARANTINE``)."""
        return self.data_dir / "quarantine.json"

    @property
    def suite_dir_name(self) -> str:
        """The name pytest's ``skill_court_suite_dirs`` must list for this library's suites."""
        return self.suites_dir.name

    @property
    def lock(self) -> Path:
        """The lock taken while a command edits the suites."""
        return self.data_dir / "suites.lock"

    def ensure_data_dir(self) -> Path:
        """The data folder, made when missing; a repository's gets the ``.gitignore``
        the store gives a folder it makes (its files are not for version control)."""
        if not self.data_dir.is_dir():
            self.data_dir.mkdir(parents=True, exist_ok=True)
            if self.kind == REPOSITORY:
                (self.data_dir / ".gitignore").write_text(
                    "# made by pytest-skillcourt: its store and reports, not for version control\n*\n",
                    encoding="utf-8")
        return self.data_dir

    def describe(self) -> dict[str, Any]:
        """The layout as JSON-ready strings."""
        return {"kind": self.kind, "skills": str(self.skills_dir), "suites": str(self.suites_dir),
                "store": str(self.store), "hermes_home": str(self.hermes_home) if self.hermes_home else None}


def default_hermes_home(environ: Mapping[str, str] = os.environ) -> Path:
    """``$HERMES_HOME``, else ``~/.hermes`` (as Hermes resolves it)."""
    home = environ.get("HERMES_HOME", "").strip()
    return Path(home).expanduser() if home else Path.home() / ".hermes"


def hermes_layout(home: Path) -> Layout:
    """The layout of the library of Hermes home ``home``."""
    home = Path(home).expanduser().absolute()
    data = home / HERMES_DATA
    return Layout(kind=HERMES, skills_dir=home / "skills", suites_dir=data / "suites", data_dir=data,
                  rootdir=data, hermes_home=home)


def quarantine_of_rootdir(rootdir: Path) -> Path:
    """The quarantine file of the library whose trials have ``rootdir``: a Hermes
    library's data folder holds it itself (the file the plugin reads), a repository
    keeps it under ``.skill-court/``."""
    rootdir = Path(rootdir)
    if rootdir.parts[-len(HERMES_DATA.parts):] == HERMES_DATA.parts:
        return hermes_layout(rootdir.parents[len(HERMES_DATA.parts) - 1]).quarantine
    return repository_layout(rootdir / "skills").quarantine


def repository_layout(skills_dir: Path) -> Layout:
    """The layout of a library in a repository: ``skills_tests/`` and ``.skill-court/`` beside it."""
    skills_dir = Path(skills_dir).expanduser().absolute()
    project = skills_dir.parent
    return Layout(kind=REPOSITORY, skills_dir=skills_dir, suites_dir=project / "skills_tests",
                  data_dir=project / ".skill-court", rootdir=project)


def resolve(*, hermes_home: Path | None = None, skills: Path | None = None,
            environ: Mapping[str, str] = os.environ) -> Layout:
    """``--skills DIR`` when given, else the Hermes home (``--hermes-home``, ``$HERMES_HOME``, ``~/.hermes``)."""
    if skills is not None:
        return repository_layout(skills)
    return hermes_layout(hermes_home if hermes_home is not None else default_hermes_home(environ))


def check_library(layout: Layout) -> None:
    """Raise a clear error when the library folder is not there.

    Raises:
        LayoutError: no such folder, with what to pass instead.
    """
    if layout.skills_dir.is_dir():
        return
    if layout.kind == HERMES:
        raise LayoutError(
            f"no skill library at {layout.skills_dir}: is {layout.hermes_home} the Hermes home "
            "you mean? Pass --hermes-home DIR (or set HERMES_HOME), or --skills DIR for a "
            "library in a repository")
    raise LayoutError(f"no skill library at {layout.skills_dir}: --skills must name the folder "
                      "holding <name>/SKILL.md (or <category>/<name>/SKILL.md)")


def quarantine_file(layout: Layout, explicit: Path | str | None = None,
                    environ: Mapping[str, str] = os.environ) -> Path:
    """The quarantine file a trial of ``layout`` writes: ``--quarantine``, else
    ``$SKILL_COURT_QUARANTINE`` (the file the Hermes plugin then reads), else the
    library's own (``Layout.quarantine``)."""
    if explicit:
        return Path(explicit).expanduser().absolute()
    env = environ.get(ENV_VAR, "").strip()
    if env:
        return Path(env).expanduser().absolute()
    return layout.quarantine


# -- what a Hermes profile says ---------------------------------------------------------


def read_usage(skills_dir: Path) -> dict[str, dict[str, Any]]:
    """``skills_dir/.usage.json`` as Hermes' ``tools/skill_usage.load_usage`` reads it:
    skill name -> record; a missing or broken file is empty."""
    path = Path(skills_dir) / ".usage.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): v for k, v in data.items() if isinstance(v, dict)}


def agent_written(usage: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The skills the agent wrote: ``created_by`` "agent" or "learn" (and Hermes'
    legacy ``agent_created: true``), sorted."""
    return sorted(name for name, record in usage.items()
                  if record.get("created_by") in AGENT_WRITERS or record.get("agent_created") is True)


def hermes_config(home: Path) -> dict[str, Any]:
    """The profile's ``config.yaml`` as a mapping; a missing, unreadable or broken file is empty."""
    path = Path(home) / "config.yaml"
    try:
        _, data = safe_yaml.load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def hermes_disabled(home: Path) -> list[str]:
    """``skills.disabled`` of the profile's ``config.yaml``: skills it hides from the agent."""
    skills = hermes_config(home).get("skills")
    disabled = skills.get("disabled") if isinstance(skills, dict) else None
    if isinstance(disabled, str):
        disabled = [disabled]
    if not isinstance(disabled, list):
        return []
    return [str(name).strip() for name in disabled if str(name).strip()]


@dataclass(frozen=True)
class ProfileModel:
    """The profile's model as the court names it, or why it cannot."""

    label: str | None  # provider/model, or None
    base_url: str | None
    why_not: str = ""


def hermes_model(home: Path) -> ProfileModel:
    """The model of the profile's ``config.yaml`` (``model.default``, ``model.provider``,
    ``model.base_url``) as a court model label.

    A provider the court knows (openai, anthropic, openrouter, ollama, ...) keeps its
    name; a profile with a ``base_url`` becomes ``custom/MODEL`` at that endpoint.
    Keys are never read from the profile: they come from the environment as for
    any court model (``custom`` needs none, or ``SKILL_COURT_API_KEY``).
    """
    model = hermes_config(home).get("model")
    if isinstance(model, str):
        model = {"default": model}
    if not isinstance(model, dict) or not str(model.get("default") or "").strip():
        return ProfileModel(None, None, f"{Path(home) / 'config.yaml'} names no model.default")
    from pytest_skillcourt.models.client import PROVIDERS  # not at load: the Hermes plugin imports this module

    name = str(model["default"]).strip()
    provider = str(model.get("provider") or "").strip().lower()
    base_url = str(model.get("base_url") or "").strip() or None
    if provider in PROVIDERS and provider != "custom":
        return ProfileModel(f"{provider}/{name}", base_url)
    if base_url:
        return ProfileModel(f"custom/{name}", base_url)
    head = name.split("/", 1)[0]
    if not provider or provider == "auto":
        if "/" in name and head in PROVIDERS and head != "custom":
            return ProfileModel(name, None)
    return ProfileModel(None, None, f"the profile's model {name!r} (provider {provider or 'auto'!r}) has no "
                                    "skill-court name")


def active_hermes_home() -> Path:
    """The Hermes home of this process: Hermes' own resolution (profiles and per-context
    overrides honoured), else :func:`default_hermes_home` (not inside Hermes, or its home
    cannot be resolved)."""
    try:
        from hermes_constants import get_hermes_home  # type: ignore[import-untyped]

        return Path(get_hermes_home())
    except Exception:
        return default_hermes_home()


def active_hermes_quarantine() -> Path:
    """The quarantine file the Hermes plugin reads in this process: ``$SKILL_COURT_QUARANTINE``,
    else under the active Hermes home (Hermes' own resolution, so profiles and per-context
    overrides are honoured), else :func:`~pytest_skillcourt.core.quarantine_file.hermes_path`."""
    if os.environ.get(ENV_VAR, "").strip():
        return hermes_path()
    try:
        from hermes_constants import get_hermes_home  # type: ignore[import-untyped]

        return Path(get_hermes_home()) / HERMES_DATA / "quarantine.json"
    except Exception:  # not inside Hermes, or its home cannot be resolved
        return hermes_path()
