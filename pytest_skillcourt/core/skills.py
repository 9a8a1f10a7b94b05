"""Skill libraries: discovery, SKILL.md frontmatter, hashes.

Frontmatter follows Hermes Agent's ``agent.skill_utils.parse_frontmatter``
exactly (leading BOM stripped; no leading ``---`` or no closing ``---`` gives no
frontmatter; YAML that fails to parse falls back to ``key: value`` lines, so
the last ``name:`` wins), so a skill is named here as Hermes names it.
Categories follow Hermes' index: ``skills/<cat>/<name>/SKILL.md`` is in
``<cat>``; a top-level ``skills/<name>/SKILL.md`` is its own category.

Skills are found as Hermes 0.19.0's ``agent.skill_utils.iter_skill_index_files``
finds them: every folder holding a ``SKILL.md``, below any folder but
Hermes' excluded ones (``EXCLUDED_DIRS``: ``.git``, ``node_modules``, ...)
and, directly inside a skill, its support folders (``SUPPORT_DIRS``:
``references/`` ...), so a skill nested in another skill's folder is a skill
too.  A category's ``DESCRIPTION.md`` (frontmatter ``description:``) is kept
for the index (``Skill.category_description``).  Which skills Hermes offers
where (``platforms:``, ``environments:``, ``metadata.hermes.requires_*`` /
``fallback_for_*``) is :func:`offered` (docs/architecture.md, "How the
built-in agent shows a library").

What a skill's folder holds is decided once, by ``trees.tree_files`` with the
library root as the boundary: symbolic links (a linked skill folder, a linked
SKILL.md, links inside a skill) are followed while they stay inside the
library, and operating-system litter (``.DS_Store`` ...) is left out.  The
listing, the hash, ``Skill.files()`` (what ``skill_view`` shows and what is
copied into sandboxes) all come from that one walk, so they agree.

A skill that cannot be taken as it is (a link out of the library, a SKILL.md
that is not UTF-8, frontmatter whose YAML aliases would expand without
bound, ...) is not part of the library's skills: it is a ``SkillProblem``.
Its own suite fails its collection with the reason (``Library.broken``);
every other suite runs, and ``load_library`` warns (``LibraryWarning``) so
the skill is never left out without a word.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import sys
import warnings
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pytest_skillcourt.core import safe_yaml
from pytest_skillcourt.core.library_cache import LibraryCache, same_json, stat_list
from pytest_skillcourt.core.printable import has_controls, plain
from pytest_skillcourt.core.trees import TreeError, is_executable, is_junk, tree_entries, tree_files

#: Folders that never hold skills, at any depth (Hermes 0.19.0's ``EXCLUDED_SKILL_DIRS``).
EXCLUDED_DIRS = frozenset({
    ".git", ".github", ".hub", ".archive", ".venv", "venv", "node_modules", "site-packages",
    "__pycache__", ".tox", ".nox", ".pytest_cache", ".mypy_cache", ".ruff_cache",
})
#: A skill's support folders: its files, never skills of their own (Hermes' ``SKILL_SUPPORT_DIRS``).
SUPPORT_DIRS = frozenset({"references", "templates", "assets", "scripts"})
#: Hermes' ``platforms:`` names and the ``sys.platform`` prefix each stands for.
PLATFORM_MAP = {"macos": "darwin", "linux": "linux", "windows": "win32"}
#: The ``environments:`` tags Hermes knows; any other tag never hides a skill.
KNOWN_ENVIRONMENTS = frozenset({"kanban", "docker", "s6"})
#: ``/proc/1/cgroup`` and mount-table markers of a container (Hermes' ``is_container``).
_CONTAINER_MARKERS = ("docker", "podman", "/lxc/", "kubepods", "containerd", "crio")

#: Hermes cuts descriptions in the skills index to this many characters.
INDEX_DESCRIPTION_LIMIT = 60
#: Entries looked through below a link that leaves the library, to name the skills it hides.
_OUTSIDE_SCAN_LIMIT = 10_000
#: Bytes of a refused skill's SKILL.md read to learn its name.
_NAME_READ_LIMIT = 1024 * 1024


class LibraryError(ValueError):
    """The skill library cannot be read; the message says which folder and why."""


class LibraryWarning(UserWarning):
    """A skill of the library was left out; the message says which, why and the fix."""


def _split(content: str) -> tuple[str | None, str]:
    """(raw frontmatter or None, body), the fences exactly as Hermes finds them."""
    content = content.removeprefix("\ufeff")
    if not content.startswith("---"):
        return None, content
    end = re.search(r"\n---\s*\n", content[3:])
    if not end:
        return None, content
    return content[3 : end.start() + 3], content[end.end() + 3 :]


def _lines_front(raw: str) -> dict[str, Any]:
    front: dict[str, Any] = {}
    for line in raw.strip().split("\n"):
        if ":" in line:
            key, value = line.split(":", 1)
            front[key.strip()] = value.strip()
    return front


def _parse(content: str) -> tuple[dict[str, Any], str, Exception | None]:
    """(frontmatter, body, why the YAML was not taken as it is: its error, else None)."""
    raw, body = _split(content)
    if raw is None:
        return {}, body, None
    try:
        _, parsed = safe_yaml.load(raw)
    except Exception as err:  # noqa: BLE001  Hermes falls back on any failure (a bad timestamp is a ValueError)
        return _lines_front(raw), body, err
    return (parsed if isinstance(parsed, dict) else {}), body, None


def frontmatter_notes(text: str, skill_md: Path, folder_name: str,
                      parsed: tuple[dict[str, Any], str, Exception | None] | None = None) -> list[str]:
    """What is wrong with ``SKILL.md``'s frontmatter that Hermes lets pass silently (it
    still loads the skill: no frontmatter or an unclosed one is none at all, bad YAML falls
    back to ``key: value`` lines, no ``name`` names it after its folder).  Each note names
    the file, the line and the fix; an empty list when there is nothing to say.
    ``parsed``: ``_parse(text)`` when the caller has it already (the YAML is read once)."""
    content = text.removeprefix("\ufeff")
    if not content.startswith("---"):
        return [f"{skill_md}:1: no frontmatter: Hermes names the skill after its folder "
                f"({folder_name!r}) and shows no description; start the file with '---', "
                "'name: ...', 'description: ...', '---'"]
    raw, _ = _split(content)
    if raw is None:
        return [f"{skill_md}:1: the frontmatter opened on line 1 is never closed: Hermes reads "
                "none of it; end it with a line holding only '---'"]
    notes: list[str] = []
    front, _, err = parsed if parsed is not None else _parse(content)
    if err is not None and not isinstance(err, safe_yaml.YamlLimitError):
        # where the bad construct began (an unclosed [ or {), else where parsing failed; the
        # YAML starts right after the opening "---", on that same line 1 of the file
        mark = getattr(err, "context_mark", None) or getattr(err, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 2
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        notes.append(f"{skill_md}:{line}: the frontmatter is not valid YAML ({problem}): Hermes "
                     "falls back to reading 'key: value' lines; fix the YAML (quote values "
                     "holding ': ' or '#')")
    if not str(front.get("name") or "").strip():
        notes.append(f"{skill_md}:2: the frontmatter has no 'name:': Hermes names the skill after "
                     f"its folder ({folder_name!r}); add 'name: {folder_name}'")
    return notes


def parse_frontmatter(content: str) -> tuple[dict[str, Any], str]:
    """Split ``SKILL.md`` text into (frontmatter, body) the way Hermes does.

    Never raises.  YAML refused by ``safe_yaml``'s bounds (an alias bomb) is
    treated as YAML that fails to parse: the ``key: value`` fallback.
    ``load_library`` refuses such a skill instead (a ``SkillProblem``)."""
    front, body, _ = _parse(content)
    return front, body


def index_description(front: dict[str, Any]) -> str:
    """The description as Hermes shows it in the skills index (cut to 60)."""
    raw = front.get("description", "")
    if not raw:
        return ""
    desc = str(raw).strip().strip("'\"")
    limit = INDEX_DESCRIPTION_LIMIT
    return desc[: limit - 3] + "..." if len(desc) > limit else desc


def _listed(value: Any) -> list[Any]:
    """A frontmatter list field as Hermes iterates it: a lone value is a list of one."""
    if not value:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def matches_platform(front: Mapping[str, Any]) -> bool:
    """Hermes' ``skill_matches_platform``: no ``platforms:``, or one naming this OS."""
    platforms = _listed(front.get("platforms"))
    if not platforms:
        return True
    termux = bool(os.getenv("TERMUX_VERSION") or "com.termux/files/usr" in os.getenv("PREFIX", ""))
    for platform in platforms:
        wanted = str(platform).lower().strip()
        mapped = PLATFORM_MAP.get(wanted, wanted)
        if sys.platform.startswith(mapped) or (termux and mapped in ("linux", "termux", "android")):
            return True
    return False


def _in_container() -> bool:
    """Hermes' ``is_container``: Docker, Podman, Kubernetes or a cgroup marker."""
    if os.path.exists("/.dockerenv") or os.path.exists("/run/.containerenv"):
        return True
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return True
    for path, markers in (("/proc/1/cgroup", _CONTAINER_MARKERS),
                          ("/proc/self/mountinfo", ("kubepods", "containerd", "crio"))):
        try:
            with open(path, encoding="utf-8") as handle:
                if any(marker in handle.read() for marker in markers):
                    return True
        except OSError:
            continue
    return False


def environment_active(tag: str) -> bool:
    """Whether Hermes, run by the court on this host, is in environment ``tag``.

    ``kanban`` never (a replay offers no kanban toolset and passes no kanban
    variables); ``docker`` when this host is a container; ``s6`` inside
    Hermes' s6 image; an unknown tag always (Hermes fails open)."""
    if tag == "kanban":
        return False
    if tag == "docker":
        return _in_container()
    if tag == "s6":
        return os.path.isdir("/run/s6") or os.path.isdir("/package/admin/s6-overlay")
    return True


def matches_environment(front: Mapping[str, Any]) -> bool:
    """Hermes' ``skill_matches_environment``: no ``environments:``, or one active."""
    tags = _listed(front.get("environments"))
    if not tags:
        return True
    for tag in tags:
        wanted = str(tag).lower().strip()
        if not wanted:
            continue
        if wanted not in KNOWN_ENVIRONMENTS or environment_active(wanted):
            return True
    return False


def conditions(front: Mapping[str, Any]) -> dict[str, list[Any]]:
    """``metadata.hermes``'s conditional-activation lists (Hermes' ``extract_skill_conditions``)."""
    metadata = front.get("metadata")
    hermes = metadata.get("hermes") if isinstance(metadata, dict) else None
    if not isinstance(hermes, dict):
        hermes = {}
    return {key: _listed(hermes.get(key)) for key in
            ("fallback_for_toolsets", "requires_toolsets", "fallback_for_tools", "requires_tools")}


def offered(front: Mapping[str, Any], tools: Collection[str], toolsets: Collection[str]) -> bool:
    """Whether Hermes lists the skill in its skills index, for an agent that
    offers ``tools`` in ``toolsets``: its platform, an active environment, no
    ``requires_*`` missing and no ``fallback_for_*`` present."""
    if not matches_platform(front) or not matches_environment(front):
        return False
    cond = conditions(front)
    return (not any(t in toolsets for t in cond["fallback_for_toolsets"])
            and not any(t in tools for t in cond["fallback_for_tools"])
            and all(t in toolsets for t in cond["requires_toolsets"])
            and all(t in tools for t in cond["requires_tools"]))


def _folder_files(folder: Path, root: Path | None, real_root: str | None = None) -> list[tuple[str, Path]]:
    """The skill folder's files (``trees.tree_files``, links kept inside ``root``, whose
    real path is ``real_root`` when the caller has it).

    Raises:
        LibraryError: the folder holds something refused (the message names it and the fix).
    """
    where = "the skill library" if root is not None else "the skill folder"
    try:
        return tree_files(folder, root, where=where, real_boundary=real_root)
    except TreeError as err:
        raise LibraryError(str(err)) from err


def _digest(files: Iterable[tuple[str, bytes]], executable: Iterable[str] = ()) -> str:
    """sha256 over (path, bytes) of each file, then the files with a run bit, if any: a
    folder without one hashes as it always has (its verdicts and quarantine entries keep
    their hash); ``chmod +x`` on a script changes what a run can do, so it changes the hash."""
    digest = hashlib.sha256()
    for rel, data in files:
        name = rel.encode()
        digest.update(len(name).to_bytes(8, "big") + name)
        digest.update(len(data).to_bytes(8, "big") + data)
    runnable = sorted(executable)
    if runnable:
        listed = "\0".join(runnable).encode()
        digest.update(b"\0executable\0" + len(listed).to_bytes(8, "big") + listed)
    return "sha256:" + digest.hexdigest()


def hash_folder(folder: Path, root: Path | None = None) -> str:
    """sha256 over the folder's files (relative path + bytes, sorted by path).

    The files are ``Skill.files()``'s: links followed inside ``root`` (the
    library; default: the folder itself), litter left out.

    Raises:
        LibraryError: a link out of ``root``, a dangling link, a special file, ...
    """
    folder = Path(folder)
    files = _folder_files(folder, root)
    return _digest(((rel, path.read_bytes()) for rel, path in files),
                   [rel for rel, path in files if is_executable(path)])


@dataclass(frozen=True)
class Skill:
    """One skill folder of a library."""

    name: str  # frontmatter name, else the folder name (as Hermes)
    folder: Path  # as reached from the library root (a followed link keeps its own path)
    category: str
    description: str  # full description from the frontmatter
    hash: str
    root: Path | None = None  # the library root: where links may lead (None: the folder)
    #: SKILL.md's frontmatter as parsed (Hermes' gating fields, tags, metadata ...).
    frontmatter: Mapping[str, Any] = field(default_factory=dict, compare=False)
    #: The ``description:`` of its category's DESCRIPTION.md ("" when none), for the index.
    category_description: str = field(default="", compare=False)
    #: What Hermes lets pass in its frontmatter but a user should fix (``frontmatter_notes``).
    notes: tuple[str, ...] = field(default=(), compare=False)

    @property
    def skill_md(self) -> Path:
        return self.folder / "SKILL.md"

    @property
    def index_name(self) -> str:
        """The name Hermes' skills index shows: the frontmatter's ``name`` as written
        (``str()`` of it), the folder's name only when there is no ``name:`` key."""
        return str(self.frontmatter.get("name", self.folder.name))

    @property
    def index_line(self) -> str:
        """The skill's line in Hermes' skills index (description cut to 60)."""
        desc = index_description(dict(self.frontmatter))
        return f"    - {self.index_name}: {desc}" if desc else f"    - {self.index_name}"

    def listing(self) -> dict[str, Path]:
        """Every file of the skill: path relative to its folder -> the path to read
        (the files ``files()`` reads, without reading them).

        Raises:
            LibraryError: the folder changed since loading into something refused.
        """
        return dict(_folder_files(self.folder, self.root))

    def files(self) -> dict[str, bytes]:
        """Every file of the skill, by path relative to its folder (what ``hash`` covers).

        Raises:
            LibraryError: the folder changed since loading into something refused.
        """
        return {rel: path.read_bytes() for rel, path in self.listing().items()}

    def executables(self) -> frozenset[str]:
        """The files of ``files()`` whose run bit is set (relative paths): a sandbox gives
        them mode 0755, so a skill's ``scripts/tool.sh`` runs there as in the library."""
        return frozenset(rel for rel, path in self.listing().items() if is_executable(path))

    def placed(self, base: str) -> tuple[dict[str, bytes], frozenset[str]]:
        """The skill's files at ``base/<rel>`` in a sandbox, and which of those paths are
        executable (``Sandbox.write_files(files, executable=...)``)."""
        listing = self.listing()
        files = {f"{base}/{rel}": path.read_bytes() for rel, path in listing.items()}
        return files, frozenset(f"{base}/{rel}" for rel, path in listing.items() if is_executable(path))


@dataclass(frozen=True)
class SkillProblem:
    """A skill that is not part of the library, and why."""

    name: str  # what a suite would call it: its frontmatter name if readable, else its folder's
    path: Path  # the skill folder (or the link) at fault
    message: str  # the whole readable reason, with the path and the fix


#: Buckets of a :func:`bucket_digest`: a change to one entry rehashes one bucket.
DIGEST_BUCKETS = 256


def _bucket_of(name: str) -> int:
    return hashlib.sha256(name.encode()).digest()[0] % DIGEST_BUCKETS


def _entry_bytes(name: str, value: Any) -> bytes:
    # one JSON line: JSON escapes newlines, so the lines cannot run into each other
    return json.dumps([name, value], sort_keys=True).encode() + b"\n"


def _outer(bucket_digests: Iterable[bytes]) -> str:
    return "sha256:" + hashlib.sha256(b"".join(bucket_digests)).hexdigest()


def bucket_digest(entries: Mapping[str, Any]) -> str:
    """One sha256 digest of ``entries`` (name -> a JSON value), a function of the entries
    alone (not of their order): each name goes to one of ``DIGEST_BUCKETS`` buckets by
    the hash of the name, each bucket's entries (sorted) are hashed, and the bucket
    digests are hashed in bucket order.  :class:`DigestIndex` gives the digest of a
    library less a few names in time proportional to those few buckets, which keeps a
    session of a library of thousands of skills linear (docs/architecture.md, "Libraries
    of thousands of skills")."""
    return DigestIndex(entries).digest_without(())


class DigestIndex:
    """The :func:`bucket_digest` of a fixed mapping, and of it less some names, remembered."""

    def __init__(self, entries: Mapping[str, Any]) -> None:
        buckets: list[list[tuple[str, bytes]]] = [[] for _ in range(DIGEST_BUCKETS)]
        for name, value in entries.items():
            buckets[_bucket_of(name)].append((name, _entry_bytes(name, value)))
        self._buckets = [sorted(b) for b in buckets]
        self._digests = [self._inner(b, frozenset()) for b in self._buckets]
        self._bucket = {name: _bucket_of(name) for name in entries}
        self._memo: dict[frozenset[str], str] = {}
        #: made on the first removal that needs them (``_without_one``): a bucket's hash states
        #: before each of its entries, with the entries' bytes; the same over the bucket digests
        self._partial: dict[int, tuple[list[Any], list[int], memoryview, dict[str, int]]] = {}
        self._outer_states: tuple[list[Any], memoryview] | None = None

    @staticmethod
    def _inner(bucket: list[tuple[str, bytes]], leave_out: frozenset[str]) -> bytes:
        digest = hashlib.sha256()
        for name, line in bucket:
            if name not in leave_out:
                digest.update(line)
        return digest.digest()

    def digest_without(self, names: Iterable[str]) -> str:
        """The digest of the entries less ``names`` (names not among them are ignored).
        A frozenset of names (every run asks with one: its hidden skills, the skills out of
        its reach) is remembered as it is given, so asking again costs one dict look-up."""
        if isinstance(names, frozenset):
            found = self._memo.get(names)
            if found is not None:
                return found
        gone = frozenset(n for n in names if n in self._bucket)
        found = self._memo.get(gone)
        if found is None:
            if len(gone) == 1:  # the common case (a skill's own without arm): no loop over the others
                found = self._without_one(next(iter(gone)))
            else:
                digests = list(self._digests)
                for b in {self._bucket[n] for n in gone}:
                    digests[b] = self._inner(self._buckets[b], gone)
                found = _outer(digests)
            self._memo[gone] = found
        if isinstance(names, frozenset):
            self._memo[names] = found
        return found

    def _without_one(self, name: str) -> str:
        """:meth:`digest_without` of one name, from hash states kept part way (the same
        bytes, hashed in two calls instead of one per entry): a removal once took a
        bucket of entries (1/256 of the library) and the 256 bucket digests, so a
        session of n skills, each removing itself, grew as n squared (10,000 skills: 40
        entries a bucket, 21 us a removal)."""
        b = self._bucket[name]
        bucket = self._buckets[b]
        if b not in self._partial:
            states, offsets, h = [], [0], hashlib.sha256()
            for _, line in bucket:
                states.append(h.copy())
                h.update(line)
                offsets.append(offsets[-1] + len(line))
            self._partial[b] = (states, offsets, memoryview(b"".join(line for _, line in bucket)),
                                {n: i for i, (n, _) in enumerate(bucket)})
        states, offsets, joined, places = self._partial[b]
        j = places[name]
        inner = states[j].copy()
        inner.update(joined[offsets[j + 1]:])
        if self._outer_states is None:
            outer_states, h = [], hashlib.sha256()
            for digest in self._digests:
                outer_states.append(h.copy())
                h.update(digest)
            self._outer_states = (outer_states, memoryview(b"".join(self._digests)))
        outer_states, digests = self._outer_states
        outer = outer_states[b].copy()
        outer.update(inner.digest())
        outer.update(digests[(b + 1) * 32:])
        return "sha256:" + outer.hexdigest()


#: A Claude Code plugin's manifest, relative to the plugin's folder.
PLUGIN_MANIFEST = ".claude-plugin/plugin.json"
_PLUGIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@dataclass(frozen=True)
class Plugin:
    """The Claude Code plugin a library belongs to (its ``.claude-plugin/plugin.json``
    in the library's folder or the one above, as ``obra/superpowers`` lays its skills
    out): Claude Code names its skills ``NAME:skill`` and loads them with
    ``--plugin-dir``."""

    name: str
    root: Path  # the plugin's folder (holds .claude-plugin/ and skills/)

    @property
    def manifest(self) -> Path:
        return self.root / PLUGIN_MANIFEST


def find_plugin(root: Path) -> Plugin | None:
    """The plugin ``root`` (a library folder) is, or is the ``skills/`` of; None when
    neither has a manifest.  A manifest that cannot be read, or whose ``name`` Claude Code
    would refuse, is warned of and taken as none."""
    for folder in (root, root.parent):
        manifest = folder / PLUGIN_MANIFEST
        if not manifest.is_file():
            continue
        try:
            data = json.loads(manifest.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            warnings.warn(f"{manifest}: cannot be read as JSON ({err}); the library is installed as user "
                          "skills, not as a plugin: fix the manifest", LibraryWarning, stacklevel=3)
            return None
        name = data.get("name") if isinstance(data, dict) else None
        if not isinstance(name, str) or not _PLUGIN_NAME.match(name):
            warnings.warn(f"{manifest}: field 'name' must be a plugin name (letters, digits, '.', '_', '-'), "
                          f"got {name!r}; the library is installed as user skills, not as a plugin",
                          LibraryWarning, stacklevel=3)
            return None
        return Plugin(name=name, root=folder)
    return None


@dataclass(frozen=True)
class Shadowed:
    """A skill folder whose name an earlier one in Hermes' scan order already has: Hermes
    never loads it, so neither does the court (``Library.shadowed``)."""

    name: str
    kept: Path  # the folder of the skill that has the name
    shadowed: Path  # the folder that is not used

    @property
    def same_folder(self) -> bool:
        return os.path.realpath(self.kept) == os.path.realpath(self.shadowed)


@dataclass(frozen=True)
class Library:
    """A folder of skills, in a stable order (by name)."""

    root: Path
    skills: tuple[Skill, ...]
    problems: tuple[SkillProblem, ...] = ()
    #: folders whose name an earlier skill has (Hermes: the first found wins)
    shadowed: tuple[Shadowed, ...] = ()
    #: the Claude Code plugin the library is (its skills are ``NAME:skill`` there)
    plugin: Plugin | None = None
    #: Category -> its DESCRIPTION.md's description (Hermes' index shows it beside the category).
    category_descriptions: Mapping[str, str] = field(default_factory=dict, compare=False)

    @cached_property
    def _by_name(self) -> dict[str, Skill]:
        return {s.name: s for s in self.skills}

    @cached_property
    def name_set(self) -> frozenset[str]:
        """The skills' names, for membership tests (one set per library)."""
        return frozenset(self._by_name)

    @cached_property
    def reach_index(self) -> DigestIndex:
        """Every skill's name and hash, digested by :class:`DigestIndex` (the run cache's
        reach, ``cache.reach_digest``)."""
        return DigestIndex({s.name: s.hash for s in self.skills})

    @cached_property
    def view_index(self) -> DigestIndex:
        """What every run sees of each skill (name, category, description), digested by
        :class:`DigestIndex` (part of the run key, ``cache.run_key``)."""
        return DigestIndex({s.name: [s.category, s.description] for s in self.skills})

    @cached_property
    def reach_answers(self) -> dict[tuple[str, str, frozenset[str]], frozenset[str]]:
        """(runner, version, hidden) -> the skills out of that runner's reach in this
        library, as ``cache.out_of_reach`` remembers them."""
        return {}

    def get(self, name: str) -> Skill | None:
        return self._by_name.get(name)

    def names(self) -> list[str]:
        return [s.name for s in self.skills]

    def visible(self, hidden: Iterable[str]) -> tuple[Skill, ...]:
        hide = set(hidden)
        if hide.isdisjoint(self._by_name):  # the usual "with" arm: the whole library
            return self.skills
        return tuple(s for s in self.skills if s.name not in hide)

    def broken(self) -> dict[str, str]:
        """Why each skill left out of the library was left out, by the name a suite uses."""
        return {p.name: p.message for p in self.problems}

    @cached_property
    def broken_map(self) -> Mapping[str, str]:
        """:meth:`broken`, made once per library (each suite read asks), read-only."""
        return MappingProxyType(self.broken())


def _inside(path: str, boundary: str) -> bool:
    return path == boundary or path.startswith(boundary.rstrip(os.sep) + os.sep)


def _name_of(folder: Path) -> str:
    """The name a suite would use for a refused skill (never raises)."""
    text = ""
    skill_md = folder / "SKILL.md"
    try:
        if skill_md.is_file():  # never a FIFO or a device (a read could block or never end)
            with open(skill_md, "rb") as handle:
                text = handle.read(_NAME_READ_LIMIT).decode("utf-8", errors="replace")
    except OSError:
        pass
    front, _, _ = _parse(text)
    return str(front.get("name") or folder.name).strip()


def _subfolders(names: Iterable[str], in_skill: bool) -> list[str]:
    """The entries of a folder that Hermes' walk may descend into (by name)."""
    return [n for n in names if n not in EXCLUDED_DIRS and not is_junk(n)
            and not (in_skill and n in SUPPORT_DIRS)]


def _outside_skills(link: Path) -> Iterator[Path]:
    """Skill folders below ``link`` (a folder outside the library), without following links."""
    seen = 0
    for dirpath, dirnames, filenames in os.walk(link):
        seen += len(dirnames) + len(filenames)
        if seen > _OUTSIDE_SCAN_LIMIT:
            return
        dirnames[:] = sorted(_subfolders(dirnames, "SKILL.md" in filenames))
        if "SKILL.md" in filenames:
            yield Path(dirpath)


def _discover(root: Path, descriptions: list[Path] | None = None
              ) -> Iterator[tuple[Path, str | None, str, list[str] | None]]:
    """(skill folder as reached from ``root``, None, its real path, its entries' names
    sorted) for each skill; (folder, reason, its real path, None) for each skill reached
    only through a link that leaves the library.

    The walk is Hermes' (module docstring): a skill's folder is searched on
    for nested skills, its support folders are not.  Links to folders are
    followed while they stay inside the library (as Hermes follows them); a
    link loop is not followed again.  Each category ``DESCRIPTION.md`` found
    is appended to ``descriptions``.  Paths are worked on as text, a folder's
    entries are told apart by the type its listing gives (no stat but for a
    link), and a real path is asked of the system only for a link (a folder's
    is its parent's and its name): thousands of folders are walked on every session."""
    bound = os.path.realpath(root)
    join = os.path.join
    # (folder as reached, its real path, the real paths of it and the folders above it)
    todo: list[tuple[str, str, frozenset[str]]] = [(os.fspath(root), bound, frozenset({bound}))]
    while todo:
        current, real_current, chain = todo.pop()
        try:
            with os.scandir(current) as listed:
                entries = {entry.name: entry for entry in listed}
        except OSError as err:
            raise LibraryError(f"{Path(current)}: cannot be listed ({err.strerror or err}); "
                               "make it readable or remove it") from err
        names = sorted(entries)
        in_skill = "SKILL.md" in entries
        if in_skill:
            yield Path(current), None, real_current, names
        if descriptions is not None and "DESCRIPTION.md" in entries and os.path.isfile(join(current, "DESCRIPTION.md")):
            descriptions.append(Path(current) / "DESCRIPTION.md")
        subdirs: list[tuple[str, str, frozenset[str]]] = []
        real_prefix = real_current if real_current.endswith(os.sep) else real_current + os.sep
        for name in _subfolders(names, in_skill):
            if name == "SKILL.md" or not _is_dir(entries[name]):  # files, dangling links, links to files
                continue
            path = entries[name].path  # os.path.join(current, name), made by the listing
            if _is_link(entries[name]):
                real = os.path.realpath(path)
                if not _inside(real, bound):
                    for found in _outside_skills(Path(path)):
                        yield found, (
                            f"{Path(path)} is a symbolic link to {os.readlink(path)} ({real}), outside the "
                            f"skill library {bound}, so the skill in {found} is left out. Links are "
                            "followed only inside the library: move or copy the folder into it, or "
                            "point --skill-court-skills at the folder that holds it"), "", None
                    continue
            else:
                real = real_prefix + name
            if real in chain:
                continue  # a link loop: everything below was seen already
            subdirs.append((path, real, chain | {real}))
        todo.extend(reversed(subdirs))


def _is_dir(entry: os.DirEntry[str]) -> bool:
    """``os.path.isdir`` of a listed entry (links followed; False where it cannot be told)."""
    try:
        return entry.is_dir()
    except OSError:
        return False


def _is_link(entry: os.DirEntry[str]) -> bool:
    """``os.path.islink`` of a listed entry."""
    try:
        return entry.is_symlink()
    except OSError:
        return False


def _category_descriptions(root: Path, files: Iterable[Path]) -> dict[str, str]:
    """Category -> description from its DESCRIPTION.md, as Hermes' index reads them
    (frontmatter ``description:``, stripped of spaces and quotes; unreadable ones skipped)."""
    out: dict[str, str] = {}
    for path in files:
        try:
            with open(path, "rb") as handle:
                text = handle.read(_NAME_READ_LIMIT + 1).decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if len(text) > _NAME_READ_LIMIT:
            continue
        front, _ = parse_frontmatter(text)
        desc = front.get("description")
        if not desc:
            continue
        parts = path.relative_to(root).parts
        out["/".join(parts[:-1]) if len(parts) > 1 else "general"] = str(desc).strip().strip("'\"")
    return out


def _category(root: Path, folder: Path) -> str:
    rel = folder.parts[len(root.parts):] + ("SKILL.md",)  # (folder / "SKILL.md").relative_to(root).parts
    return "/".join(rel[:-2]) if len(rel) > 2 else (rel[0] if len(rel) == 2 else "general")


def _read_skill(root: Path, folder: Path, descriptions: Mapping[str, str],
                real_root: str | None = None, real_folder: str | None = None,
                cache: LibraryCache | None = None, listing: list[str] | None = None) -> Skill | SkillProblem:
    """One skill, or why it is left out (``real_root``, ``real_folder``: the real paths of
    the root and the folder, ``listing``: its entries' names sorted, when known).  With ``cache``, a folder whose files are the
    ones it was read with is not read again (``library_cache``)."""
    try:
        try:
            entries = tree_entries(folder, root, where="the skill library", real_boundary=real_root,
                                   real_folder=real_folder, listing=listing)
        except TreeError as err:
            raise LibraryError(str(err)) from err
        if not any(rel == "SKILL.md" for rel, _, _ in entries):  # SKILL.md is litter-free, so a link to a folder
            raise LibraryError(f"{folder / 'SKILL.md'}: is not a file; make SKILL.md the skill's text file")
        key = stats = None
        if cache is not None:
            key, stats = str(folder), stat_list(entries)
            known = cache.lookup(key, stats)
            if known is not None:
                found = _from_cache(known, root, folder, descriptions)
                if found is not None:
                    return found
        data = [(rel, _read_bytes(path)) for rel, path, _ in entries]
        runnable = [rel for rel, _, st in entries if st.st_mode & stat.S_IXUSR]
    except LibraryError as err:
        return SkillProblem(_name_of(folder), folder, str(err))
    except OSError as err:
        return SkillProblem(_name_of(folder), folder,
                            f"{getattr(err, 'filename', None) or folder}: cannot be read "
                            f"({err.strerror or err}); make it readable or remove it")
    made = _made_of(root, folder, descriptions, folder / "SKILL.md", data, runnable)
    if cache is not None and key is not None and stats is not None:
        _keep(cache, key, stats, made)
    return made


def _read_bytes(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def _made_of(root: Path, folder: Path, descriptions: Mapping[str, str], skill_md: Path,
             data: list[tuple[str, bytes]], runnable: list[str]) -> Skill | SkillProblem:
    """The skill (or why it is left out) of the files read from ``folder``."""
    raw = dict(data)["SKILL.md"]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        return SkillProblem(_name_of(folder), folder,
                            f"{skill_md}: cannot be read as UTF-8 text ({err}); save it as UTF-8 "
                            "(Hermes skips such a skill too)")
    parsed = _parse(text)
    front, _, limit = parsed
    name = str(front.get("name") or folder.name).strip()
    if has_controls(name):  # a name printed in every table must not carry ESC[2J or a bidi override
        return SkillProblem(plain(name), folder, f"{skill_md}: its name {name!r} holds control characters "
                            "(escape sequences, bidi overrides); give it a plain 'name:'")
    if isinstance(limit, safe_yaml.YamlLimitError):
        mark = limit.problem_mark
        line = f":{mark.line + 2}" if mark is not None else ""  # +1 for the opening ---
        return SkillProblem(name, folder, f"{skill_md}{line}: frontmatter: {limit.problem}")
    category = _category(root, folder)
    return Skill(name=name, folder=folder, category=category,
                 description=str(front.get("description") or "").strip(),
                 hash=_digest(data, runnable), root=root, frontmatter=front,
                 category_description=descriptions.get(category, ""),
                 notes=tuple(frontmatter_notes(text, skill_md, folder.name, parsed)))


def _keep(cache: LibraryCache, key: str, stats: tuple[str, int], made: Skill | SkillProblem) -> None:
    """Put what was made of a folder in ``cache``, unless its frontmatter would not come
    back from JSON exactly as it is (a date, a set, a number key: read again each time)."""
    if isinstance(made, SkillProblem):
        cache.put(key, stats, {"problem": [made.name, made.message]})
        return
    front = made.frontmatter
    try:
        back = json.loads(json.dumps(front, ensure_ascii=False))
    except (TypeError, ValueError, RecursionError):
        return
    if not same_json(front, back):
        return
    cache.put(key, stats, {"name": made.name, "description": made.description, "hash": made.hash,
                           "frontmatter": back, "notes": list(made.notes)})


_new = object.__new__


def _from_cache(entry: dict[str, Any], root: Path, folder: Path,
                descriptions: Mapping[str, str]) -> Skill | SkillProblem | None:
    """The skill (or problem) a cache entry keeps, every part checked for its type; None
    for an entry ``_keep`` does not make."""
    problem = entry.get("problem")
    if problem is not None:
        if type(problem) is list and len(problem) == 2 and all(type(p) is str for p in problem):
            return SkillProblem(problem[0], folder, problem[1])
        return None
    name, description, digest = entry.get("name"), entry.get("description"), entry.get("hash")
    front, notes = entry.get("frontmatter"), entry.get("notes")
    if (type(name) is not str or type(description) is not str or type(digest) is not str
            or type(front) is not dict or type(notes) is not list or not all(type(n) is str for n in notes)):
        return None
    category = _category(root, folder)
    skill = _new(Skill)  # without its frozen __init__: a library of thousands of skills, each read from here
    skill.__dict__.update(name=name, folder=folder, category=category, description=description, hash=digest,
                          root=root, frontmatter=front, category_description=descriptions.get(category, ""),
                          notes=tuple(notes))
    return skill  # type: ignore[no-any-return]


def load_library(root: Path, cache: LibraryCache | None = None) -> Library:
    """Read every skill under ``root`` (with ``cache``: a skill folder whose files are
    unchanged is not read again, ``library_cache``; the caller saves it).

    A skill that cannot be taken as it is becomes a ``SkillProblem`` (and a
    ``LibraryWarning``), not an error of the whole library.

    Raises:
        LibraryError: the folder is missing or cannot be listed.
    """
    root = Path(root)
    if not root.is_dir():
        raise LibraryError(
            f"skill library {root} is not a folder: set --skill-court-skills or "
            "ini skill_court_skills to the folder holding <name>/SKILL.md"
        )
    found: dict[str, Skill | SkillProblem] = {}
    shadowed: list[Shadowed] = []
    description_files: list[Path] = []
    # Hermes' scan order (``iter_skill_index_files``: every SKILL.md path as reached, sorted as
    # strings), in which the first skill of a name wins and later ones are shadowed
    folders = sorted(_discover(root, description_files), key=lambda found: os.path.join(found[0], "SKILL.md"))
    descriptions = _category_descriptions(root, description_files)
    real_root = os.path.realpath(root)
    for folder, outside, real_folder, listing in folders:
        entry = (SkillProblem(_name_of(folder), folder, outside) if outside
                 else _read_skill(root, folder, descriptions, real_root, real_folder, cache, listing))
        first = found.get(entry.name)
        if first is not None and not (isinstance(first, SkillProblem) and isinstance(entry, Skill)):
            shadowed.append(Shadowed(entry.name, _entry_folder(first), _entry_folder(entry)))
            continue
        if first is not None:  # Hermes skips a copy it cannot read: the next readable one wins
            shadowed.append(Shadowed(entry.name, _entry_folder(entry), _entry_folder(first)))
        found[entry.name] = entry
    skills = sorted((e for e in found.values() if isinstance(e, Skill)), key=lambda s: s.name)
    problems = sorted((e for e in found.values() if isinstance(e, SkillProblem)), key=lambda p: p.name)
    for problem in problems:
        warnings.warn(f"skill {problem.name!r} is left out of the library: {problem.message}",
                      LibraryWarning, stacklevel=2)
    if shadowed:  # one warning with every pair, not an error of the whole library
        warnings.warn(shadowed_message(shadowed), LibraryWarning, stacklevel=2)
    for skill in skills:
        for note in skill.notes:  # tried as Hermes would load it, but never without a word
            warnings.warn(f"skill {skill.name!r}: {note}", LibraryWarning, stacklevel=2)
    return Library(root=root, skills=tuple(skills), problems=tuple(problems),
                   category_descriptions=descriptions, shadowed=tuple(shadowed), plugin=find_plugin(root))


def _entry_folder(entry: Skill | SkillProblem) -> Path:
    return entry.folder if isinstance(entry, Skill) else entry.path


def shadowed_message(shadowed: Sequence[Shadowed]) -> str:
    """The one warning of a library whose skill names are used more than once."""
    pairs = "; ".join(
        f"{s.name!r}: {s.kept} is used, {s.shadowed} is not"
        + (" (the same folder, through a symbolic link)" if s.same_folder else "")
        for s in shadowed)
    return (f"{len(shadowed)} skill folder(s) repeat a name another skill already has; as Hermes "
            f"does, the first found (paths in sorted order) is the skill and the other is "
            f"shadowed: {pairs}. Rename one (frontmatter name:) or remove the copy")
