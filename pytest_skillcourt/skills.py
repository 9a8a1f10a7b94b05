"""Skill libraries: discovery, SKILL.md frontmatter, hashes.

Frontmatter follows Hermes Agent's ``agent.skill_utils.parse_frontmatter``
exactly (leading BOM stripped; no leading ``---`` or no closing ``---`` gives no
frontmatter; YAML that fails to parse falls back to ``key: value`` lines, so
the last ``name:`` wins), so a skill is named here as Hermes names it.
Categories follow Hermes' index: ``skills/<cat>/<name>/SKILL.md`` is in
``<cat>``; a top-level ``skills/<name>/SKILL.md`` is its own category.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

#: Folders that never hold skills (Hermes skips the same kind of folders).
_SKIP_DIRS = frozenset({
    ".git", ".hub", ".venv", "venv", "node_modules", "__pycache__",
    "references", "templates", "assets", "scripts",
})

#: Hermes cuts descriptions in the skills index to this many characters.
INDEX_DESCRIPTION_LIMIT = 60


class LibraryError(ValueError):
    """The skill library cannot be read; the message says which folder and why."""


def parse_frontmatter(content: str) -> tuple[dict[str, Any], str]:
    """Split ``SKILL.md`` text into (frontmatter, body) the way Hermes does."""
    import yaml

    if content.startswith("\ufeff"):
        content = content[1:]
    if not content.startswith("---"):
        return {}, content
    end = re.search(r"\n---\s*\n", content[3:])
    if not end:
        return {}, content
    raw = content[3 : end.start() + 3]
    body = content[end.end() + 3 :]
    try:
        parsed = yaml.safe_load(raw)
        front: dict[str, Any] = parsed if isinstance(parsed, dict) else {}
    except yaml.YAMLError:
        front = {}
        for line in raw.strip().split("\n"):
            if ":" in line:
                key, value = line.split(":", 1)
                front[key.strip()] = value.strip()
    return front, body


def index_description(front: dict[str, Any]) -> str:
    """The description as Hermes shows it in the skills index (cut to 60)."""
    raw = front.get("description", "")
    if not raw:
        return ""
    desc = str(raw).strip().strip("'\"")
    limit = INDEX_DESCRIPTION_LIMIT
    return desc[: limit - 3] + "..." if len(desc) > limit else desc


def _regular_files(folder: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            path = Path(dirpath, name)
            if path.is_file() and not path.is_symlink():
                yield path


def hash_folder(folder: Path) -> str:
    """sha256 over the folder's regular files (relative path + bytes, sorted)."""
    digest = hashlib.sha256()
    files = sorted(_regular_files(folder), key=lambda p: p.relative_to(folder).as_posix())
    for path in files:
        rel = path.relative_to(folder).as_posix().encode()
        data = path.read_bytes()
        digest.update(len(rel).to_bytes(8, "big") + rel)
        digest.update(len(data).to_bytes(8, "big") + data)
    return "sha256:" + digest.hexdigest()


@dataclass(frozen=True)
class Skill:
    """One skill folder of a library."""

    name: str  # frontmatter name, else the folder name (as Hermes)
    folder: Path
    category: str
    description: str  # full description from the frontmatter
    hash: str

    @property
    def skill_md(self) -> Path:
        return self.folder / "SKILL.md"

    @property
    def index_line(self) -> str:
        desc = index_description({"description": self.description})
        return f"    - {self.name}: {desc}" if desc else f"    - {self.name}"

    def files(self) -> dict[str, bytes]:
        """Every regular file of the skill, by path relative to its folder."""
        return {p.relative_to(self.folder).as_posix(): p.read_bytes()
                for p in _regular_files(self.folder)}


@dataclass(frozen=True)
class Library:
    """A folder of skills, in a stable order (by name)."""

    root: Path
    skills: tuple[Skill, ...]

    def get(self, name: str) -> Skill | None:
        for skill in self.skills:
            if skill.name == name:
                return skill
        return None

    def names(self) -> list[str]:
        return [s.name for s in self.skills]

    def visible(self, hidden: Iterable[str]) -> tuple[Skill, ...]:
        hide = set(hidden)
        return tuple(s for s in self.skills if s.name not in hide)


def _find_skill_files(root: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames
                             if d not in _SKIP_DIRS and not d.startswith("."))
        if "SKILL.md" in filenames:
            yield Path(dirpath, "SKILL.md")
            dirnames[:] = []  # a skill's own subfolders are its files, not skills


def load_library(root: Path) -> Library:
    """Read every skill under ``root``.

    Raises:
        LibraryError: the folder is missing, or two skills share a name.
    """
    root = Path(root)
    if not root.is_dir():
        raise LibraryError(
            f"skill library {root} is not a folder: set --skill-court-skills or "
            "ini skill_court_skills to the folder holding <name>/SKILL.md"
        )
    skills: dict[str, Skill] = {}
    for skill_md in _find_skill_files(root):
        folder = skill_md.parent
        try:
            text = skill_md.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise LibraryError(f"{skill_md}: cannot be read as UTF-8 text ({err})") from err
        front, _ = parse_frontmatter(text)
        rel = skill_md.relative_to(root).parts
        category = "/".join(rel[:-2]) if len(rel) > 2 else (rel[0] if len(rel) == 2 else "general")
        name = str(front.get("name") or folder.name).strip()
        if name in skills:
            raise LibraryError(
                f"two skills are named {name!r}: {skills[name].folder} and {folder}; "
                "rename one (frontmatter name:)"
            )
        skills[name] = Skill(
            name=name,
            folder=folder,
            category=category,
            description=str(front.get("description") or "").strip(),
            hash=hash_folder(folder),
        )
    return Library(root=root, skills=tuple(sorted(skills.values(), key=lambda s: s.name)))
