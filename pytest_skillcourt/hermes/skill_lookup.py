"""Which skills a ``skill_view`` call loads, found as the running Hermes' own
``skill_view`` finds them (point 3 of :mod:`pytest_skillcourt.hermes.hiding`), and
where Hermes keeps its skills.

Hermes' helpers (``tools/skills_tool.py``, ``agent/skill_utils.py``) are imported at
the first lookup, never at load; without them the library's names are resolved as
:func:`pytest_skillcourt.core.transcript.find_skill` resolves them.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from pytest_skillcourt.core.layout import default_hermes_home
from pytest_skillcourt.core.skills import Library, Skill, parse_frontmatter
from pytest_skillcourt.core.transcript import find_skill, skill_name

logger = logging.getLogger("skill_court")

#: A Hermes plugin namespace (agent.skill_utils.is_valid_namespace).
_NAMESPACE_RE = re.compile(r"^[a-zA-Z0-9_-]+$")


@dataclass(frozen=True)
class HermesSkillLookup:
    """The pieces of the running Hermes' own ``skill_view`` resolution
    (``tools/skills_tool.py``, ``agent/skill_utils.py``), used to find which
    files a ``skill_view(name)`` would load exactly as Hermes finds them."""

    lookup_error: Callable[[str], Any]  # why a name may not be looked up (absolute, "..")
    is_support_path: Callable[[Path], bool]  # under references/, templates/, ... of a skill
    index_files: Callable[[Path, str], Iterable[Path]]  # every SKILL.md Hermes scans
    parse_frontmatter: Callable[[str], Any]  # (dict, body)
    search_dirs: Callable[[], list[Path]]  # the dirs skill_view searches, in its order


def _hermes_search_dirs() -> list[Path]:
    from agent.skill_utils import get_external_skills_dirs  # type: ignore[import-untyped]
    from tools.skills_tool import _skills_dir  # type: ignore[import-untyped]

    active = Path(_skills_dir())
    return ([active] if active.exists() else []) + [Path(d) for d in get_external_skills_dirs()]


@functools.lru_cache(maxsize=1)
def hermes_skill_lookup() -> HermesSkillLookup | None:
    """Hermes' resolution helpers when this Hermes has them (0.19.0 does), else None."""
    try:
        from agent import skill_utils  # type: ignore[import-untyped]
        from tools import skills_tool  # type: ignore[import-untyped]

        return HermesSkillLookup(
            lookup_error=skills_tool._skill_lookup_path_error,
            is_support_path=skill_utils.is_skill_support_path,
            index_files=skill_utils.iter_skill_index_files,
            parse_frontmatter=skill_utils.parse_frontmatter,
            search_dirs=_hermes_search_dirs,
        )
    except Exception:
        return None


def _frontmatter(md: Path, parse: Callable[[str], Any]) -> dict[str, Any]:
    try:
        front, _ = parse(md.read_text(encoding="utf-8"))
    except Exception:
        return {}
    return front if isinstance(front, dict) else {}


def name_of(md: Path, parse: Callable[[str], Any]) -> str:
    """The name Hermes gives the skill a loaded file belongs to: its frontmatter
    ``name``, else its folder's name (``tools.skills_tool.skill_view`` checks
    ``skills.disabled`` by this name)."""
    name = _frontmatter(md, parse).get("name", md.parent.name)
    return str(name) if name not in (None, "") else md.parent.name


def loaded_names(md: Path, base: Path, parse: Callable[[str], Any]) -> set[str]:
    """The skills whose file ``md`` (under the skills dir ``base``) is: the name
    Hermes gives it, and every skill folder between ``base`` and the file (a
    ``NOTES.md`` beside a ``SKILL.md`` is that skill's file)."""
    names = {name_of(md, parse)}
    try:
        rel = md.relative_to(base)
    except ValueError:
        return names
    for depth in range(len(rel.parts) - 1, 0, -1):
        skill_md = base.joinpath(*rel.parts[:depth], "SKILL.md")
        if skill_md != md and skill_md.is_file():
            names.add(name_of(skill_md, parse))
    return names


def _hermes_candidates(name: str, lookup: HermesSkillLookup, dirs: Sequence[Path]) -> list[tuple[Path, Path]]:
    """``(skills dir, file)`` for every file Hermes 0.19.0's ``skill_view(name)``
    considers (its strategies, in its order; it loads the file when there is
    exactly one).  Mirrors ``tools.skills_tool.skill_view`` with Hermes' own
    helpers; plugin skills (``plugin:skill``) are left to the caller."""
    if not isinstance(name, str) or lookup.lookup_error(name):
        return []
    local_category: str | None = None
    if ":" in name:
        namespace, bare = name.split(":", 1)
        if not _NAMESPACE_RE.match(namespace):
            return []  # Hermes refuses the name
        if bare:  # no plugin has it: Hermes tries the folder path namespace/bare
            local_category = f"{namespace}/{bare}"
            if lookup.lookup_error(local_category):
                return []
    found: dict[Path, tuple[Path, Path]] = {}

    def record(base: Path, md: Path) -> None:
        try:
            key = md.resolve()
        except Exception:
            key = md
        found.setdefault(key, (base, md))

    for base in dirs:
        for form in (name, local_category):
            if form is None:
                continue
            direct = base / form
            try:
                if not lookup.is_support_path(direct) and direct.is_dir() and (direct / "SKILL.md").exists():
                    record(base, direct / "SKILL.md")
                elif direct.with_suffix(".md").exists() and not lookup.is_support_path(direct.with_suffix(".md")):
                    record(base, direct.with_suffix(".md"))
            except (OSError, ValueError):
                pass
        for md in lookup.index_files(base, "SKILL.md"):
            if md.parent.name == name or _frontmatter(md, lookup.parse_frontmatter).get("name") == name:
                record(base, md)
        try:
            for md in base.rglob(f"{name}.md"):
                if md.name != "SKILL.md" and not lookup.is_support_path(md):
                    record(base, md)
        except (OSError, ValueError, NotImplementedError):
            pass
    return list(found.values())


def _plain_parse(text: str) -> tuple[dict[str, Any], str]:
    return parse_frontmatter(text)


def frontmatter_parser() -> Callable[[str], Any]:
    """Hermes' frontmatter parser when this Hermes has one, else the court's."""
    lookup = hermes_skill_lookup()
    return lookup.parse_frontmatter if lookup is not None else _plain_parse


def fallback_dirs() -> list[Path]:
    """The skills folder of ``$HERMES_HOME`` (else ``~/.hermes``), for when Hermes' helpers are missing."""
    return [default_hermes_home() / "skills"]


def _quick_library(root: Path) -> Library:
    """The skills under ``root`` by name and folder only (no hashing): enough for
    :func:`~pytest_skillcourt.core.transcript.find_skill`."""
    skills = []
    for folder, dirs, files in os.walk(root, followlinks=True):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if "SKILL.md" in files:
            md = Path(folder) / "SKILL.md"
            skills.append(Skill(name=name_of(md, _plain_parse), folder=Path(folder), category="",
                                description="", hash="", root=root))
    return Library(root=root, skills=tuple(skills))


def view_names(name: Any, skills_dirs: Sequence[Path] | None = None) -> set[str]:
    """Every skill name a ``skill_view(name)`` call may load (hide it if any is hidden).

    With Hermes' helpers (:func:`hermes_skill_lookup`): the skills of every file
    Hermes' own ``skill_view`` would consider for ``name`` (frontmatter name,
    folder name, ``category/name``, ``category:name``, a path to ``SKILL.md``
    with or without ``.md`` or with another suffix, a bare ``NOTES`` that
    finds a ``NOTES.md`` in a skill's folder, ...), each by the name Hermes
    gives it and the skill folder it lies in.  Without them: the library's
    name for ``name`` as :func:`pytest_skillcourt.core.transcript.find_skill`
    resolves it.  Always also the normalised name
    (:func:`~pytest_skillcourt.core.transcript.skill_name`: the last path segment,
    with ``/SKILL.md``, ``/SKILL`` or ``.md`` dropped) and a qualified
    ``plugin:skill`` as written, so this errs on the side of hiding.
    """
    if not isinstance(name, str) or not name.strip():
        return set()
    raw = name.strip()
    names = {skill_name(raw), raw}
    if raw.endswith(".md"):
        names.add(skill_name(raw[:-3]))
    lookup = hermes_skill_lookup()
    if lookup is not None:
        try:
            dirs = list(skills_dirs) if skills_dirs is not None else lookup.search_dirs()
            for base, md in _hermes_candidates(name, lookup, dirs):
                names |= loaded_names(md, base, lookup.parse_frontmatter)
        except Exception:
            logger.debug("skill-court: Hermes' skill lookup failed for %r", name, exc_info=True)
            lookup = None
    if lookup is None:
        for base in skills_dirs if skills_dirs is not None else fallback_dirs():
            if base.is_dir():
                library = _quick_library(base)
                forms = {raw, raw.removesuffix(".md")}
                # Hermes reads "category:name" as the folder path when no plugin has it.
                forms |= {f.replace(":", "/", 1) for f in forms if ":" in f}
                for form in forms:
                    skill = find_skill(form, library)
                    if skill is not None:
                        names.add(skill.name)
    names.discard("")
    return names


def viewed_names(result: Any, args: Any, skills_dirs: Sequence[Path] | None = None) -> set[str]:
    """The skills a successful ``skill_view`` result shows, by what it says it loaded
    (``name``, ``skill_dir``, ``path``); a linked file (``file``) belongs to the
    skill its ``name`` argument names.  Empty for a failed or unreadable result."""
    try:
        data = json.loads(result) if isinstance(result, str) else None
    except ValueError:
        return set()
    if not isinstance(data, dict) or data.get("success") is not True:
        return set()
    lookup = hermes_skill_lookup()
    parse = lookup.parse_frontmatter if lookup is not None else _plain_parse
    names: set[str] = set()
    if isinstance(data.get("name"), str):
        names.add(data["name"])
    if "file" in data and isinstance(args, dict):
        names |= view_names(args.get("name"), skills_dirs)
    skill_dir = data.get("skill_dir")
    if isinstance(skill_dir, str) and skill_dir:
        names.add(name_of(Path(skill_dir) / "SKILL.md", parse))
    rel = data.get("path")
    if isinstance(rel, str) and rel and not skill_dir and not Path(rel).is_absolute() and ".." not in Path(rel).parts:
        try:
            dirs = list(skills_dirs) if skills_dirs is not None else (
                lookup.search_dirs() if lookup is not None else fallback_dirs())
        except Exception:
            dirs = fallback_dirs()
        for base in dirs:
            md = base / rel
            if md.is_file():
                names |= loaded_names(md, base, parse)
            else:  # an external skill's path is relative to its parent's parent
                for found in base.rglob(Path(rel).name) if base.is_dir() else ():
                    if found.as_posix().endswith("/" + rel):
                        names |= loaded_names(found, base, parse)
    names.discard("")
    return names


def search_dirs() -> list[Path]:
    """The folders ``skill_view`` searches, in its order (Hermes' own list when it has one)."""
    lookup = hermes_skill_lookup()
    try:
        return lookup.search_dirs() if lookup is not None else fallback_dirs()
    except Exception:
        return fallback_dirs()
