"""The built-in agent's tools; every effect happens inside the run's sandbox.

``skills_list`` and ``skill_view`` are Hermes Agent 0.19.0's
(``tools/skills_tool.py``) over the court's library, checked against the real
functions (``tests/integration/test_builtin_vs_hermes.py``; docs/architecture.md,
"How the built-in agent shows a library"): the same lookup (a name, a folder
name, a path under the library, ``cat/name/SKILL.md``, a flat ``name.md``;
two matches are "ambiguous"), the same answers and error texts, binary files
described rather than decoded, ``${HERMES_SKILL_DIR}`` replaced by the skill's
folder in the sandbox, and a hidden skill refused with Hermes' own "disabled"
message by every name, so the ``without`` arm hides a skill exactly as Hermes
does (README, "What it does").  Paths are the sandbox's (``SKILLS_ROOT``);
the bytes come from the library the court loaded (litter left out, links
followed inside the library).  A ``skill_view`` result over Hermes' 100,000
characters is saved in the sandbox and replaced by a preview, as Hermes does.

A model's mistake is a tool error it sees, never a harness failure: a path
that is missing, a directory, a FIFO or device, read-only or refused by the
engine (``sandbox.base.PathRefused``), arguments that are not what a tool
takes (a NUL byte, a command or path over the kernel's argument limits) all
come back as ``{"error": ...}``; only a sandbox that broke raises.  What a
tool returns is always valid UTF-8 text (a lone surrogate from the model's
JSON becomes ``?``), so the transcript can be stored and sent on.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from functools import lru_cache
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from pytest_skillcourt.sandbox.base import PathRefused, Sandbox, SandboxError
from pytest_skillcourt.sandbox.files import SandboxFiles
from pytest_skillcourt.core.skills import (
    EXCLUDED_DIRS,
    SUPPORT_DIRS,
    Library,
    Skill,
    matches_environment,
    matches_platform,
    parse_frontmatter,
)
from pytest_skillcourt.core.trees import is_junk

#: Where the visible skills are placed inside the sandbox (a hidden folder,
#: so the judge's file capture never mistakes them for the run's work).
SKILLS_ROOT = "/root/.skills"
TOOL_OUTPUT_LIMIT = 32 * 1024
READ_LIMIT = 100 * 1024
#: Longest ``terminal`` command, in UTF-8 bytes: one argument of a process
#: may not pass 128 KiB on Linux (``MAX_ARG_STRLEN``).
COMMAND_LIMIT = 100 * 1024
#: Longest path a file tool takes, in UTF-8 bytes (``PATH_MAX``).
PATH_LIMIT = 4096
#: Each tool the built-in agent offers and its Hermes toolset: what Hermes'
#: ``requires_toolsets`` / ``fallback_for_toolsets`` are checked against.
TOOLSETS = {"terminal": "terminal", "read_file": "file", "write_file": "file",
            "skills_list": "skills", "skill_view": "skills"}
#: A ``skill_view`` result longer than this (characters) is saved in the sandbox
#: and replaced by a preview (Hermes' ``DEFAULT_RESULT_SIZE_CHARS``).
PERSIST_THRESHOLD = 100_000
#: Where such a result is saved, and the preview's length (Hermes' values).
PERSIST_DIR = "/tmp/hermes-results"
PREVIEW_CHARS = 1_500
#: Hermes' limits on what ``skills_list`` shows of a skill.
NAME_LIMIT = 64
DESCRIPTION_LIMIT = 1024
#: Characters of SKILL.md Hermes' ``skills_list`` reads (frontmatter past them is not seen).
LIST_READ_CHARS = 4000
_NAMESPACE = re.compile(r"^[a-zA-Z0-9_-]+$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_LOOKUP_HINT = "Use a skill name or relative path within the skills directory."
_FILE_HINT = "Use a relative path within the skill directory"
_OTHER_SUFFIXES = frozenset({".md", ".py", ".yaml", ".yml", ".json", ".tex", ".sh"})
_TEMPLATE_EXTS = ("*.md", "*.py", "*.yaml", "*.yml", "*.json", "*.tex", "*.sh")
_SCRIPT_EXTS = ("*.py", "*.sh", "*.bash", "*.js", "*.ts", "*.rb")

TOOL_SCHEMAS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": "terminal",
        "description": "Run a shell command (sh -c) in /workspace and return its output and exit code.",
        "parameters": {"type": "object", "properties": {
            "command": {"type": "string", "description": "The command to run"},
            "timeout": {"type": "integer", "description": "Seconds before the command is killed (default 120)"},
        }, "required": ["command"]}}},
    {"type": "function", "function": {
        "name": "read_file",
        "description": "Read a text file. Relative paths are under /workspace.",
        "parameters": {"type": "object", "properties": {
            "path": {"type": "string"},
        }, "required": ["path"]}}},
    {"type": "function", "function": {
        "name": "write_file",
        "description": "Create or overwrite a text file. Relative paths are under /workspace.",
        "parameters": {"type": "object", "properties": {
            "path": {"type": "string"}, "content": {"type": "string"},
        }, "required": ["path", "content"]}}},
    {"type": "function", "function": {
        "name": "skills_list",
        "description": "List available skills (name + description). Use skill_view(name) to load full content.",
        "parameters": {"type": "object", "properties": {
            "category": {"type": "string", "description": "Optional category filter to narrow results"},
        }, "required": []}}},
    {"type": "function", "function": {
        "name": "skill_view",
        "description": ("Skills allow for loading information about specific tasks and workflows, as well "
                        "as scripts and templates. Load a skill's full content or access its linked files "
                        "(references, templates, scripts). First call returns SKILL.md content plus a "
                        "'linked_files' dict showing available references/templates/scripts. To access "
                        "those, call again with file_path parameter."),
        "parameters": {"type": "object", "properties": {
            "name": {"type": "string", "description": "The skill name (use skills_list to see available skills)."},
            "file_path": {"type": "string", "description": "OPTIONAL: Path to a linked file within the skill (e.g., 'references/api.md'). Omit to get the main SKILL.md content."},
        }, "required": ["name"]}}},
]


def disabled_message(name: str) -> str:
    """Hermes 0.19.0's refusal for a disabled skill, word for word."""
    return (f"Skill '{name}' is disabled. "
            "Enable it with `hermes skills` or inspect the files directly on disk.")


def skill_path_in_sandbox(library: Library, skill: Skill) -> str:
    return posixpath.join(SKILLS_ROOT, skill.folder.relative_to(library.root).as_posix())


def skill_files_for_sandbox(library: Library, visible: tuple[Skill, ...]) -> SandboxFiles:
    """The visible skills' files, at their place under ``SKILLS_ROOT``, with their run bits.

    A skill nested in a visible skill's folder but not visible itself is left
    out of that folder's files too: only visible skills reach the sandbox."""
    shown = {s.folder for s in visible}
    hidden = [skill_path_in_sandbox(library, s) + "/" for s in library.skills if s.folder not in shown]
    out = SandboxFiles()
    for skill in visible:
        out.add_skill(skill_path_in_sandbox(library, skill), skill,
                      keep=lambda where: not any(where.startswith(folder) for folder in hidden))
    return out


# -- Hermes' skill tools over the library -------------------------------------


def _text(data: bytes) -> str:
    """Bytes read as Hermes' ``read_text(encoding="utf-8")`` reads a file (universal
    newlines).  Raises UnicodeDecodeError as it does."""
    return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


def _dumps(payload: Mapping[str, Any]) -> str:
    """``payload`` as Hermes writes it; a value JSON cannot hold (a YAML date in
    the frontmatter) gives Hermes' generic error, as there."""
    try:
        return json.dumps(payload, ensure_ascii=False)
    except (TypeError, ValueError) as err:
        return json.dumps({"error": str(err), "success": False}, ensure_ascii=False)


def _in_sandbox(library: Library, path: str) -> str:
    """A host path under the library as the sandbox sees it (other paths unchanged)."""
    for root in (str(library.root), os.path.realpath(library.root)):
        root = root.rstrip("/")
        if path == root:
            return SKILLS_ROOT
        if path.startswith(root + "/"):
            return SKILLS_ROOT + path[len(root):]
    return path


def _sandbox_text(library: Library, text: str) -> str:
    """``text`` (an error message) with the library's host paths as the sandbox's."""
    for root in sorted({str(library.root), os.path.realpath(library.root)}, key=len, reverse=True):
        text = text.replace(root.rstrip("/"), SKILLS_ROOT)
    return text


def _on_host(library: Library, path: str) -> str:
    """A sandbox path under ``SKILLS_ROOT`` as the host path of the library (others unchanged)."""
    if path == SKILLS_ROOT or path.startswith(SKILLS_ROOT + "/"):
        return str(library.root) + path[len(SKILLS_ROOT):]
    return path


def _support_path(library: Library, path: Path) -> bool:
    """Hermes' ``is_skill_support_path``: below a support folder directly inside a skill."""
    parts = path.parts
    for idx, part in enumerate(parts[:-1]):
        if part in SUPPORT_DIRS and idx != 0 and (Path(*parts[:idx]) / "SKILL.md").exists():
            return True
    return False


def _list_entry(library: Library, skill: Skill) -> dict[str, Any] | None:
    """The skill as Hermes' ``skills_list`` shows it, or None when Hermes skips it."""
    try:
        content = _text(skill.skill_md.read_bytes())[:LIST_READ_CHARS]
    except (KeyError, UnicodeDecodeError, OSError):
        return None
    front, body = parse_frontmatter(content)
    if not matches_platform(front) or not matches_environment(front):
        return None
    name = front.get("name", skill.folder.name)
    if not isinstance(name, str):
        return None  # Hermes' name[:64] fails on it and the skill is skipped
    description = front.get("description", "")
    if not description:
        for line in body.strip().split("\n"):
            line = line.strip()
            if line and not line.startswith("#"):
                description = line
                break
    try:
        if len(description) > DESCRIPTION_LIMIT:
            description = description[:DESCRIPTION_LIMIT - 3] + "..."
    except TypeError:
        return None
    parts = skill.skill_md.relative_to(library.root).parts
    return {"name": name[:NAME_LIMIT], "description": description,
            "category": parts[0] if len(parts) >= 3 else None}


def _by_path(library: Library) -> list[Skill]:
    """The library's skills in the order Hermes' walk yields them (by SKILL.md path)."""
    return sorted(library.skills, key=lambda s: str(s.skill_md))


def list_entries(library: Library, hidden: frozenset[str]) -> list[dict[str, Any]]:
    """Hermes' ``_find_all_skills``: the listed skills, the first of a name, the hidden left out."""
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for skill in _by_path(library):
        entry = _list_entry(library, skill)
        if entry is None or entry["name"] in seen or entry["name"] in hidden:
            continue
        seen.add(entry["name"])
        out.append(entry)
    return out


def _sorted_entries(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(entries, key=lambda e: (e.get("category") or "", e["name"]))


def skills_list(library: Library, hidden: frozenset[str], category: Any = None) -> str:
    """Hermes' ``skills_list`` answer for the library without the ``hidden`` skills."""
    entries = list_entries(library, hidden)
    if not entries:
        return json.dumps({"success": True, "skills": [], "categories": [],
                           "message": "No skills found in skills/ directory."}, ensure_ascii=False)
    if category:
        entries = [e for e in entries if e.get("category") == category]
    entries = _sorted_entries(entries)
    return _dumps({
        "success": True, "skills": entries,
        "categories": sorted({e["category"] for e in entries if e.get("category")}),
        "count": len(entries),
        "hint": "Use skill_view(name) to see full content, tags, and linked files",
    })


@dataclass(frozen=True)
class SkillView:
    """What ``skill_view`` answered, and the skill whose SKILL.md it served (if any)."""

    text: str
    loaded: Skill | None = None


def _lookup_error(name: Any) -> str | None:
    """Hermes' ``_skill_lookup_path_error``: a name that could leave the library."""
    if not isinstance(name, str):
        return "Skill name must be a string."
    candidate = name.strip()
    if (PurePosixPath(candidate).is_absolute() or PureWindowsPath(candidate).is_absolute()
            or PureWindowsPath(candidate).drive):
        return "Skill name must be a relative path within the skills directory."
    if ".." in Path(candidate).parts:
        return "Skill name cannot contain '..' path traversal components."
    return None


@lru_cache(maxsize=8)
def _md_files(library: Library) -> tuple[tuple[Path, str], ...]:
    """(path, path relative to the library) of every ``*.md`` file under the library
    that Hermes' ``rglob`` would see: the skills' files and the files outside any
    skill (links outside the library not followed).  Read once per library."""
    out: dict[str, Path] = {}
    for skill in library.skills:
        for rel in skill.listing():
            if rel.endswith(".md"):
                out.setdefault(str(skill.folder / rel), skill.folder / rel)
    for dirpath, dirnames, filenames in os.walk(library.root):
        dirnames[:] = sorted(d for d in dirnames if d not in EXCLUDED_DIRS and not is_junk(d))
        for filename in sorted(filenames):
            path = Path(dirpath) / filename
            if filename.endswith(".md") and not is_junk(filename) and str(path) not in out and path.is_file():
                out[str(path)] = path
    return tuple((out[key], out[key].relative_to(library.root).as_posix()) for key in sorted(out))


def _glob_match(rel: str, pattern: str) -> bool:
    """``PurePosixPath(rel).match(pattern)`` for a relative pattern (what ``rglob`` matches)."""
    wanted = [part for part in pattern.split("/") if part and part != "."]
    parts = rel.split("/")
    if not wanted or len(wanted) > len(parts):
        return False
    return all(fnmatchcase(part, want) for part, want in zip(parts[-len(wanted):], wanted))


def _candidates(library: Library, name: str, category_name: str | None) -> list[tuple[Path | None, Path]]:
    """Hermes' lookup: (skill folder or None for a flat file, the file), every strategy, no repeats."""
    root = library.root
    found: list[tuple[Path | None, Path]] = []
    seen: set[str] = set()

    def record(folder: Path | None, md: Path) -> None:
        key = os.path.realpath(md)
        if key not in seen:
            seen.add(key)
            found.append((folder, md))

    def direct(rel: str) -> None:
        path = root / rel
        if not _inside_root(library, path):
            return
        if not _support_path(library, path) and path.is_dir() and (path / "SKILL.md").exists():
            record(path, path / "SKILL.md")
            return
        flat = path.with_suffix(".md")
        if flat.exists() and not _support_path(library, flat) and _inside_root(library, flat):
            record(None, flat)

    direct(name)
    if category_name:
        direct(category_name)
    for skill in _by_path(library):
        if skill.folder.name == name or skill.frontmatter.get("name") == name:
            record(skill.folder, skill.skill_md)
    pattern = f"{name}.md"
    for md, rel in _md_files(library):
        if md.name != "SKILL.md" and _glob_match(rel, pattern) and not _support_path(library, md):
            record(None, md)
    return found


def _inside_root(library: Library, path: Path) -> bool:
    real, bound = os.path.realpath(path), os.path.realpath(library.root)
    return real == bound or real.startswith(bound.rstrip(os.sep) + os.sep)


def _skill_at(library: Library, folder: Path | None) -> Skill | None:
    if folder is None:
        return None
    for skill in library.skills:
        if skill.folder == folder:
            return skill
    return None


def _parse_tags(value: Any) -> list[str]:
    """Hermes' ``_parse_tags``: a YAML list, ``"[a, b]"`` or ``"a, b"``."""
    if not value:
        return []
    if isinstance(value, list):
        return [str(t).strip() for t in value if t]
    text = str(value).strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    return [t.strip().strip("\"'") for t in text.split(",") if t.strip()]


def _required_env(front: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Hermes' ``_get_required_environment_variables`` (setup secrets and legacy
    ``prerequisites.env_vars`` included)."""
    setup = front.get("setup")
    setup = setup if isinstance(setup, dict) else {}
    help_raw = setup.get("help")
    setup_help = help_raw.strip() if isinstance(help_raw, str) and help_raw.strip() else None
    secrets_raw = setup.get("collect_secrets")
    if isinstance(secrets_raw, dict):
        secrets_raw = [secrets_raw]
    secrets = []
    for item in secrets_raw if isinstance(secrets_raw, list) else []:
        if isinstance(item, dict) and str(item.get("env_var") or "").strip():
            env_var = str(item.get("env_var") or "").strip()
            secrets.append({"name": env_var,
                            "prompt": str(item.get("prompt") or f"Enter value for {env_var}").strip(),
                            "help": str(item.get("provider_url") or item.get("url") or "").strip() or setup_help})
    required_raw = front.get("required_environment_variables")
    if isinstance(required_raw, dict):
        required_raw = [required_raw]
    out: list[dict[str, Any]] = []
    seen: set[str] = set()

    def add(entry: Mapping[str, Any]) -> None:
        env_name = str(entry.get("name") or entry.get("env_var") or "").strip()
        if not env_name or env_name in seen or not _ENV_NAME.match(env_name):
            return
        item: dict[str, Any] = {"name": env_name,
                                "prompt": str(entry.get("prompt") or f"Enter value for {env_name}").strip()}
        help_text = entry.get("help") or entry.get("provider_url") or entry.get("url") or setup_help
        if isinstance(help_text, str) and help_text.strip():
            item["help"] = help_text.strip()
        required_for = entry.get("required_for")
        if isinstance(required_for, str) and required_for.strip():
            item["required_for"] = required_for.strip()
        if entry.get("optional"):
            item["optional"] = True
        seen.add(env_name)
        out.append(item)

    for raw in required_raw if isinstance(required_raw, list) else []:
        if isinstance(raw, str):
            add({"name": raw})
        elif isinstance(raw, dict):
            add(raw)
    for secret in secrets:
        add(secret)
    prereqs = front.get("prerequisites")
    legacy = prereqs.get("env_vars") if isinstance(prereqs, dict) else None
    if legacy:
        for env_var in [legacy] if isinstance(legacy, str) else legacy:
            if str(env_var).strip():
                add({"name": str(env_var)})
    return out


def _linked_files(files: Mapping[str, Path]) -> dict[str, list[str]]:
    """Hermes' ``linked_files``: references/*.md; templates/ (recursive) and
    scripts/ by extension; everything in assets/.  Sorted within each glob
    (Hermes' order is the filesystem's)."""
    def glob(folder: str, pattern: str, recursive: bool) -> list[str]:
        hits = []
        for rel in files:
            if not rel.startswith(folder + "/"):
                continue
            rest = rel[len(folder) + 1:]
            if (recursive or "/" not in rest) and PurePosixPath(rest.rsplit("/", 1)[-1]).match(pattern):
                hits.append(rel)
        return sorted(hits)

    linked: dict[str, list[str]] = {}
    groups = {
        "references": glob("references", "*.md", False),
        "templates": [rel for ext in _TEMPLATE_EXTS for rel in glob("templates", ext, True)],
        "assets": glob("assets", "*", True),
        "scripts": [rel for ext in _SCRIPT_EXTS for rel in glob("scripts", ext, False)],
    }
    for key, rels in groups.items():
        if rels:
            linked[key] = rels
    return linked


def _available_files(files: Mapping[str, Path]) -> dict[str, list[str]]:
    """Hermes' ``available_files`` of a "file not found" answer."""
    out: dict[str, list[str]] = {"references": [], "templates": [], "assets": [], "scripts": [], "other": []}
    for rel in sorted(files):
        if rel.rsplit("/", 1)[-1] == "SKILL.md":
            continue
        top = rel.split("/", 1)[0] if "/" in rel else ""
        if top in ("references", "templates", "assets", "scripts"):
            out[top].append(rel)
        elif PurePosixPath(rel).suffix in _OTHER_SUFFIXES:
            out["other"].append(rel)
    return {k: v for k, v in out.items() if v}


def _escape_error(library: Library, target: Path, folder: Path) -> str | None:
    """Hermes' ``validate_within_dir`` for ``target`` in the skill ``folder``, paths as the sandbox's."""
    resolved = _in_sandbox(library, os.path.realpath(target))
    bound = _in_sandbox(library, os.path.realpath(folder))
    try:
        PurePosixPath(resolved).relative_to(PurePosixPath(bound))
    except ValueError as exc:
        return f"Path escapes allowed directory: {exc}"
    return None


def _view_file(library: Library, skill: Skill, name: str, file_path: Any) -> str:
    """``skill_view(name, file_path)``: one file of the skill, as Hermes answers."""
    if not isinstance(file_path, str):
        return json.dumps({"error": f"expected str, bytes or os.PathLike object, not {type(file_path).__name__}",
                           "success": False})
    if ".." in Path(file_path).parts:
        return json.dumps({"success": False, "error": "Path traversal ('..') is not allowed.",
                           "hint": _FILE_HINT}, ensure_ascii=False)
    base = skill_path_in_sandbox(library, skill)
    target = Path(_on_host(library, str(PurePosixPath(base) / file_path))) if file_path.startswith("/") \
        else skill.folder / file_path
    error = _escape_error(library, target, skill.folder)
    if error:
        return json.dumps({"success": False, "error": error, "hint": _FILE_HINT}, ensure_ascii=False)
    files = skill.listing()
    rel = target.relative_to(skill.folder).as_posix() if target != skill.folder else ""
    if rel not in files:
        if rel == "" or any(f.startswith(rel + "/") for f in files):
            return json.dumps({"error": f"[Errno 21] Is a directory: '{_in_sandbox(library, str(target))}'",
                               "success": False}, ensure_ascii=False)
        return json.dumps({"success": False, "error": f"File '{file_path}' not found in skill '{name}'.",
                           "available_files": _available_files(files),
                           "hint": "Use one of the available file paths listed above"}, ensure_ascii=False)
    data = files[rel].read_bytes()
    try:
        content = _text(data)
    except UnicodeDecodeError:
        return json.dumps({"success": True, "name": name, "file": file_path,
                           "content": f"[Binary file: {target.name}, size: {len(data)} bytes]",
                           "is_binary": True}, ensure_ascii=False)
    return json.dumps({"success": True, "name": name, "file": file_path, "content": content,
                       "file_type": target.suffix}, ensure_ascii=False)


def view_skill(library: Library, hidden: frozenset[str], name: Any, file_path: Any = None) -> SkillView:
    """Hermes' ``skill_view(name, file_path)`` over the library, ``hidden`` disabled."""
    error = _lookup_error(name)
    if error:
        return SkillView(json.dumps({"success": False, "error": error, "hint": _LOOKUP_HINT}, ensure_ascii=False))
    category_name = None
    if ":" in name:
        namespace, bare = name.split(":", 1)
        if not namespace or not _NAMESPACE.match(namespace):
            return SkillView(json.dumps({"success": False, "error": (
                f"Invalid namespace '{namespace}' in '{name}'. Namespaces must match [a-zA-Z0-9_-]+.")},
                ensure_ascii=False))
        if bare:  # no plugin provides skills here: Hermes then tries the path category/name
            category_name = f"{namespace}/{bare}"
            error = _lookup_error(category_name)
            if error:
                return SkillView(json.dumps({"success": False, "error": error, "hint": _LOOKUP_HINT},
                                            ensure_ascii=False))
    try:
        found = _candidates(library, name, category_name)
    except (ValueError, OSError) as err:  # Hermes' own answer to any failure, without host paths
        return SkillView(json.dumps({"error": _sandbox_text(library, str(err)), "success": False},
                                    ensure_ascii=False))
    if len(found) > 1:
        return SkillView(json.dumps({
            "success": False,
            "error": (f"Ambiguous skill name '{name}': {len(found)} skills match across your local skills "
                      "dir and external_dirs. Refusing to guess — load one explicitly by its categorized path."),
            "matches": [_in_sandbox(library, str(md)) for _, md in found],
            "hint": ("Pass the full relative path instead of the bare name (e.g., 'category/skill-name'), "
                     "or rename one of the colliding skills so each name is unique."),
        }, ensure_ascii=False))
    folder, skill_md = found[0] if found else (None, None)
    skill = _skill_at(library, folder)
    if skill_md is None or (folder is not None and skill is None):
        available = [e["name"] for e in _sorted_entries(list_entries(library, hidden))[:20]]
        return SkillView(json.dumps({"success": False, "error": f"Skill '{name}' not found.",
                                     "available_skills": available,
                                     "hint": "Use skills_list to see all available skills"}, ensure_ascii=False))
    try:
        raw = (skill.listing()["SKILL.md"] if skill is not None else skill_md).read_bytes()
        content = _text(raw)
    except (OSError, UnicodeDecodeError) as err:
        return SkillView(json.dumps({"success": False, "error": f"Failed to read skill '{name}': "
                                     + _sandbox_text(library, str(err))}, ensure_ascii=False))
    front, _ = parse_frontmatter(content)
    if not matches_platform(front):
        return SkillView(json.dumps({"success": False, "error": f"Skill '{name}' is not supported on this platform.",
                                     "readiness_status": "unsupported"}, ensure_ascii=False))
    resolved = front.get("name", skill_md.parent.name)
    if isinstance(resolved, str) and resolved in hidden:
        return SkillView(json.dumps({"success": False, "error": disabled_message(resolved)}, ensure_ascii=False))
    if file_path and skill is not None:
        return SkillView(_view_file(library, skill, name, file_path))
    served = skill or next((s for s in library.skills if s.skill_md == skill_md), None)  # cat/name/SKILL.md
    return SkillView(_main_view(library, skill, skill_md, front, content), served)


def _main_view(library: Library, skill: Skill | None, skill_md: Path, front: Mapping[str, Any],
               content: str) -> str:
    """``skill_view(name)``: SKILL.md and what goes with it, as Hermes answers."""
    skill_dir = skill_path_in_sandbox(library, skill) if skill is not None else None
    linked = _linked_files(skill.listing()) if skill is not None else {}
    metadata = front.get("metadata")
    hermes_meta = (metadata.get("hermes", {}) or {}) if isinstance(metadata, dict) else {}
    if not isinstance(hermes_meta, dict):
        return json.dumps({"error": f"'{type(hermes_meta).__name__}' object has no attribute 'get'",
                           "success": False}, ensure_ascii=False)
    required = _required_env(front)
    missing = [e["name"] for e in required if not e.get("optional")]  # the sandbox has none of them
    creds_raw = front.get("required_credential_files", [])
    creds = []
    for entry in creds_raw if isinstance(creds_raw, list) else []:
        rel = entry.strip() if isinstance(entry, str) else (
            (entry.get("path") or entry.get("name") or "").strip() if isinstance(entry, dict) else "")
        if rel:
            creds.append(rel)
    setup_needed = bool(missing) or bool(creds)
    if skill_dir is not None:
        content = content.replace("${HERMES_SKILL_DIR}", skill_dir)
    result: dict[str, Any] = {
        "success": True,
        "name": front.get("name", skill_md.stem if skill is None else skill_md.parent.name),
        "description": front.get("description", ""),
        "tags": _parse_tags(hermes_meta.get("tags") or front.get("tags", "")),
        "related_skills": _parse_tags(hermes_meta.get("related_skills") or front.get("related_skills", "")),
        "content": content,
        "path": skill_md.relative_to(library.root).as_posix(),
        "skill_dir": skill_dir,
        "linked_files": linked or None,
        "usage_hint": ("To view linked files, call skill_view(name, file_path) where file_path is e.g. "
                       "'references/api.md' or 'assets/config.yaml'") if linked else None,
        "required_environment_variables": required,
        "required_commands": [],
        "missing_required_environment_variables": missing,
        "missing_credential_files": creds,
        "missing_required_commands": [],
        "setup_needed": setup_needed,
        "setup_skipped": False,
        "readiness_status": "setup_needed" if setup_needed else "available",
    }
    setup_help = next((e["help"] for e in required if e.get("help")), None)
    if setup_help:
        result["setup_help"] = setup_help
    if setup_needed:
        items = [f"env ${n}" for n in missing] + [f"file {c}" for c in creds]
        note = f"Setup needed before using this skill: missing {', '.join(items) if items else 'required prerequisites'}."
        result["setup_note"] = f"{note} {setup_help}" if setup_help else note
    if front.get("compatibility"):
        result["compatibility"] = front["compatibility"]
    if isinstance(metadata, dict):
        result["metadata"] = metadata
    return _dumps(result)


def _valid_text(text: str) -> str:
    """``text`` as valid UTF-8: lone surrogates (JSON lets a model send
    ``"\\udcff"``) become ``?``."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def _checked_arg(value: str, what: str, limit: int) -> str:
    """``value`` when a process can take it as an argument, else ValueError."""
    if "\0" in value:
        raise ValueError(f"{what} must not contain a NUL byte")
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise ValueError(f"{what} is {size} bytes; at most {limit} are accepted"
                         + ("; write a script with write_file and run that" if what == "command" else ""))
    return value


def _cut(text: str, limit: int = TOOL_OUTPUT_LIMIT) -> str:
    if len(text) <= limit:
        return text
    return text[: limit // 2] + f"\n[... {len(text) - limit} characters cut ...]\n" + text[-limit // 2:]


@dataclass
class Toolbox:
    """Executes tool calls of one run."""

    sandbox: Sandbox
    library: Library
    visible: tuple[Skill, ...]
    hidden: frozenset[str]
    skill_under_test: str
    deadline: float  # time.monotonic() after which commands are not started
    skill_loaded: bool = False
    calls: int = 0
    _handlers: dict[str, Callable[[Mapping[str, Any]], str]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._handlers = {
            "terminal": self._terminal, "read_file": self._read_file,
            "write_file": self._write_file, "skills_list": self._skills_list,
            "skill_view": self._skill_view,
        }

    def call(self, name: str, raw_arguments: str) -> str:
        """Run one tool call and return the text the model sees.

        Raises:
            SandboxError: the sandbox broke (the run is a harness failure);
                never for a path the sandbox refused (``PathRefused``).
        """
        return _valid_text(self._call(name, raw_arguments))

    def _call(self, name: str, raw_arguments: str) -> str:
        self.calls += 1
        handler = self._handlers.get(name)
        if handler is None:
            return json.dumps({"error": f"unknown tool {name!r}; available: {', '.join(self._handlers)}"})
        try:
            args = json.loads(raw_arguments or "{}")
            if not isinstance(args, dict):
                raise TypeError("arguments must be a JSON object")
        except (ValueError, TypeError) as err:
            return json.dumps({"error": f"invalid arguments for {name}: {err}"})
        try:
            return handler(args)
        except (PathRefused, FileNotFoundError, IsADirectoryError, NotADirectoryError) as err:
            return json.dumps({"error": f"{name}: {err}"}, ensure_ascii=False)
        except SandboxError:
            raise
        except (KeyError, TypeError, ValueError, RecursionError) as err:
            return json.dumps({"error": f"{name}: {err}"}, ensure_ascii=False)

    def _abs(self, path: Any) -> str:
        if not isinstance(path, str) or not path:
            raise ValueError("path must be a non-empty string")
        return posixpath.normpath(posixpath.join("/workspace", _checked_arg(path, "path", PATH_LIMIT)))

    def _terminal(self, args: Mapping[str, Any]) -> str:
        command = args["command"]
        if not isinstance(command, str):
            raise TypeError("command must be a string")
        _checked_arg(command, "command", COMMAND_LIMIT)
        remaining = self.deadline - time.monotonic()
        if remaining <= 1:
            return json.dumps({"error": "time is up: give your final answer now"})
        try:
            wanted = float(args.get("timeout") or 120)
        except (TypeError, ValueError):
            wanted = 120.0
        result = self.sandbox.exec(command, timeout=max(1.0, min(wanted, 600.0, remaining)))
        output = result.stdout + (("\n" + result.stderr) if result.stderr else "")
        payload: dict[str, Any] = {"output": _cut(output), "exit_code": result.exit_code}
        if result.timed_out:
            payload["error"] = "command timed out and was killed"
        return json.dumps(payload, ensure_ascii=False)

    def _read_file(self, args: Mapping[str, Any]) -> str:
        path = self._abs(args["path"])
        try:
            # One byte past the limit tells a longer file; no more is ever read.
            data = self.sandbox.read_file(path, limit=READ_LIMIT + 1)
        except FileNotFoundError:
            return json.dumps({"error": f"no such file: {path}"}, ensure_ascii=False)
        except IsADirectoryError:
            return json.dumps({"error": f"{path} is a directory; list it with terminal (ls)"},
                              ensure_ascii=False)
        longer = len(data) > READ_LIMIT
        if b"\0" in data[:8192]:
            size = f"more than {READ_LIMIT}" if longer else str(len(data))
            return json.dumps({"error": f"{path} is a binary file ({size} bytes)"}, ensure_ascii=False)
        text = data[:READ_LIMIT].decode("utf-8", errors="replace")
        payload: dict[str, Any] = {"path": path, "content": text}
        if longer:
            payload["truncated"] = f"only the first {READ_LIMIT} bytes; the file is longer"
        return json.dumps(payload, ensure_ascii=False)

    def _write_file(self, args: Mapping[str, Any]) -> str:
        path = self._abs(args["path"])
        content = args["content"]
        if not isinstance(content, str):
            raise TypeError("content must be a string")
        data = _valid_text(content).encode("utf-8")
        # Docker's archive upload would replace a whole directory by the file.
        if self.sandbox.exec('[ -d "$P" ]', env={"P": path}, timeout=30).exit_code == 0:
            return json.dumps({"error": f"{path} is a directory; give a file path"}, ensure_ascii=False)
        self.sandbox.write_files({path: data})
        return json.dumps({"success": True, "path": path, "bytes": len(data)}, ensure_ascii=False)

    def _skills_list(self, args: Mapping[str, Any]) -> str:
        return skills_list(self.library, self.hidden, args.get("category"))

    def _skill_view(self, args: Mapping[str, Any]) -> str:
        view = view_skill(self.library, self.hidden, args.get("name", ""), args.get("file_path"))
        out = view.text
        if view.loaded is not None and view.loaded.name == self.skill_under_test:
            self.skill_loaded = True
        if len(out) > PERSIST_THRESHOLD:
            out = self._persisted(out)
        return out

    def _persisted(self, out: str) -> str:
        """Hermes' answer to a tool result over its threshold: the whole result
        saved in the sandbox, a preview and the file's path in its place."""
        path = f"{PERSIST_DIR}/skill_view_{self.calls}.txt"
        self.sandbox.write_files({path: out.encode("utf-8")})
        preview = out[:PREVIEW_CHARS]
        newline = preview.rfind("\n")
        if newline > PREVIEW_CHARS // 2:
            preview = preview[:newline + 1]
        size_kb = len(out) / 1024
        size = f"{size_kb / 1024:.1f} MB" if size_kb >= 1024 else f"{size_kb:.1f} KB"
        return (f"<persisted-output>\nThis tool result was too large ({len(out):,} characters, {size}).\n"
                f"Full output saved to: {path}\n"
                "Use the terminal tool (sed -n, head -c, grep) to read sections of this output.\n\n"
                f"Preview (first {len(preview)} chars):\n{preview}"
                + ("\n..." if len(preview) < len(out) else "") + "\n</persisted-output>")
