"""The quarantine file's format: its entries, how model names compare, how it is read
and locked (the rules are :mod:`pytest_skillcourt.core.quarantine`'s docstring).

Below the writers (:mod:`~pytest_skillcourt.core.quarantine`) and the history
(:mod:`~pytest_skillcourt.core.quarantine_log`), which both build on it; the Hermes
plugin only ever reads through it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

from pytest_skillcourt.core.atomic import write_target
from pytest_skillcourt.core.locks import locked

#: The newest file format this code reads and writes.
SUPPORTED_VERSION = 1

#: Environment variable naming the quarantine file (wins over every default).
ENV_VAR = "SKILL_COURT_QUARANTINE"

#: The entry keys this version knows, in the order they are written.
ENTRY_FIELDS = ("skill", "model", "skill_hash", "verdict", "reason", "cause", "line", "set_by", "trial", "since")

#: ``model`` value meaning every model.
ALL_MODELS = "*"

#: ``set_by`` values.
SET_BY_TRIAL = "trial"
SET_BY_HAND = "hand"

#: ``verdict`` of an entry set by hand (no trial verdict behind it).
VERDICT_MANUAL = "manual"

_FIX_HINT = (
    "The file was left as it is. Fix it by hand (the format is described in "
    "pytest_skillcourt/schemas/quarantine.schema.json), or move it away to start an empty one "
    "(its entries would then no longer hide anything)."
)


class QuarantineFileError(Exception):
    """The quarantine file exists but cannot be used (unreadable, bad JSON, wrong
    shape, newer version).  The message names the file, what is wrong and the fix;
    the file is never overwritten."""


class QuarantineHistoryError(QuarantineFileError):
    """The store beside the quarantine file, which keeps its history
    (:mod:`pytest_skillcourt.core.quarantine_log`), cannot be used: the change was not
    made (or, said in the message, made but not recorded).  The message names both
    files and the fix."""


@dataclass(frozen=True)
class QuarantineEntry:
    """One skill hidden from one model (or from every model with ``model="*"``)."""

    skill: str
    model: str
    skill_hash: str
    verdict: str
    reason: str
    cause: str | None
    line: str | None
    set_by: str  # "trial" | "hand"
    trial: str | None
    since: str  # ISO-8601 UTC, "2026-11-30T12:00:00Z"
    #: Keys of this entry the format does not define (a user's edit), kept on rewrite.
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)

    @property
    def key(self) -> tuple[str, str]:
        """The identity of the entry: ``(skill, model_key(model))``."""
        return (self.skill, model_key(self.model))

    @property
    def every_model(self) -> bool:
        """True when the entry hides the skill from every model."""
        return self.model.strip() == ALL_MODELS

    def hides_from(self, model: str) -> bool:
        """True when this entry hides its skill from ``model`` (:func:`model_matches`)."""
        return model_matches(self.model, model)

    def to_dict(self) -> dict[str, Any]:
        """The entry as written to the file: known keys first, then the user's extra keys."""
        data: dict[str, Any] = {name: getattr(self, name) for name in ENTRY_FIELDS}
        for key, value in self.extra.items():
            if key not in data:
                data[key] = value
        return data


#: Names before a ``:`` that are a provider, not part of the model's name
#: (Hermes' ``provider:model`` syntax and the court's providers).
PROVIDER_PREFIXES = frozenset({
    "openai", "azure", "anthropic", "claude", "openrouter", "ollama", "ollama-cloud", "llamacpp",
    "lmstudio", "vllm", "custom", "local", "nous", "openai-codex", "copilot", "github", "github-copilot",
    "github-models", "gemini", "google", "google-gemini", "google-ai-studio", "vertex", "bedrock",
    "deepseek", "deepinfra", "mistral", "groq", "together", "fireworks", "xai", "x-ai", "grok",
    "zai", "z-ai", "glm", "zhipu", "kimi", "kimi-coding", "moonshot", "minimax", "qwen",
    "dashscope", "alibaba", "novita", "nvidia", "nim", "cohere", "perplexity", "cerebras",
})

# What follows "name:" in an Ollama model tag ("qwen:0.5b", "mistral:7b-instruct-q4_0",
# "llama3:latest"): the ":" is then part of the name, never a provider prefix (Hermes
# reads such names the same way).  Whole words only: "chatgpt-4o-latest" is no tag.
_OLLAMA_TAG = re.compile(
    r"^(\d+(\.\d+)?[bmkt]|e\d+b|latest|stable|q\d\w*|fp?\d+|instruct|chat|coder|code|vision|text|base|mini)(?:$|[-_.])",
    re.I,
)

# A dated snapshot: "gpt-4.1-mini-2025-04-14", "claude-sonnet-4-5-20250929".
_DATED = re.compile(r"^(?P<base>.+?)-(?:(?P<y>(?:19|20)\d\d)-(?P<m>\d\d)-(?P<d>\d\d)|(?P<y2>(?:19|20)\d\d)(?P<m2>\d\d)(?P<d2>\d\d))$")


def model_key(model: str) -> str:
    """The name models are compared by: case-folded, provider prefix dropped.

    The key is the text after the last ``/``: ``openai/GPT-4.1-mini`` ->
    ``gpt-4.1-mini``, ``openrouter/meta-llama/llama-3`` -> ``llama-3``.  Then
    a ``provider:`` prefix is dropped when the part before the first ``:`` is
    in :data:`PROVIDER_PREFIXES` and the rest is not an Ollama tag:
    ``openai:gpt-4.1-mini`` -> ``gpt-4.1-mini``, but ``qwen2.5:7b`` and
    ``mistral:7b`` stay as they are.  ``"*"`` stays ``"*"``.  Surrounding
    white space is ignored.  A dated snapshot keeps its date (it is a model of
    its own; :func:`model_matches` relates it to the undated name).
    """
    text = model.strip()
    if text == ALL_MODELS:
        return ALL_MODELS
    key = text.rsplit("/", 1)[-1].strip().casefold()
    prefix, colon, rest = key.partition(":")
    if colon and rest.strip() and prefix.strip() in PROVIDER_PREFIXES and not _OLLAMA_TAG.match(rest.strip()):
        key = rest.strip()
    return key


def undated_key(key: str) -> str | None:
    """The undated model a dated snapshot key belongs to, else None.

    ``gpt-4.1-mini-2025-04-14`` and ``gpt-4.1-mini-20250414`` ->
    ``gpt-4.1-mini``; a suffix that is no calendar date (``-2025-13-40``) is
    not a snapshot date.
    """
    match = _DATED.match(key)
    if match is None:
        return None
    month, day = int(match.group("m") or match.group("m2")), int(match.group("d") or match.group("d2"))
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return None
    return match.group("base")


def match_keys(model: str) -> tuple[str, ...]:
    """The entry keys that hide a skill from ``model``, most specific first
    (not counting ``"*"``): its own key, then the undated key of a snapshot."""
    key = model_key(model)
    base = undated_key(key)
    return (key,) if base is None else (key, base)


def model_matches(entry_model: str, model: str) -> bool:
    """True when an entry written for ``entry_model`` applies to ``model``.

    ``"*"`` applies to every model; otherwise the keys (:func:`model_key`)
    are equal, or ``model`` is a dated snapshot (``-YYYY-MM-DD`` or
    ``-YYYYMMDD``) of the undated ``entry_model``.  An entry for a snapshot
    applies to that snapshot only.
    """
    if entry_model.strip() == ALL_MODELS:
        return True
    return model_key(entry_model) in match_keys(model)


def default_path(rootdir: Path) -> Path:
    """The quarantine file of a project: ``rootdir/.skill-court/quarantine.json``."""
    return Path(rootdir) / ".skill-court" / "quarantine.json"


def hermes_path(environ: Mapping[str, str] = os.environ) -> Path:
    """The file the Hermes plugin reads.

    ``$SKILL_COURT_QUARANTINE`` if set, else
    ``$HERMES_HOME/plugin-data/skill-court/quarantine.json`` (``HERMES_HOME``
    defaults to ``~/.hermes``, as in Hermes).
    """
    explicit = environ.get(ENV_VAR, "").strip()
    if explicit:
        return Path(explicit).expanduser()
    home = environ.get("HERMES_HOME", "").strip()
    base = Path(home).expanduser() if home else Path.home() / ".hermes"
    return base / "plugin-data" / "skill-court" / "quarantine.json"


# -- reading ------------------------------------------------------------------


@dataclass(frozen=True)
class Document:
    """The parsed file: its entries and the top-level keys we do not own."""

    entries: list[QuarantineEntry]
    extra: dict[str, Any]


def _bad(path: Path, what: str) -> QuarantineFileError:
    return QuarantineFileError(f"{path}: {what}. {_FIX_HINT}")


def _optional_str(path: Path, index: int, data: Mapping[str, Any], name: str, default: str | None) -> str | None:
    value = data.get(name, default)
    if value is None or isinstance(value, str):
        return value
    raise _bad(path, f"entries[{index}].{name}: expected a string or null, got {type(value).__name__} {value!r}")


def _required_str(path: Path, index: int, data: Mapping[str, Any], name: str, default: str | None) -> str:
    if name not in data and default is not None:
        return default
    value = data.get(name)
    if not isinstance(value, str) or (default is None and not value.strip()):
        got = "nothing" if name not in data else f"{type(value).__name__} {value!r}"
        raise _bad(path, f"entries[{index}].{name}: expected a non-empty string, got {got}")
    return value


def _entry_from_dict(path: Path, index: int, data: Any) -> QuarantineEntry:
    if not isinstance(data, dict):
        raise _bad(path, f"entries[{index}]: expected an object, got {type(data).__name__} {data!r}")
    set_by = _required_str(path, index, data, "set_by", SET_BY_HAND)
    if set_by not in (SET_BY_TRIAL, SET_BY_HAND):
        raise _bad(path, f"entries[{index}].set_by: expected \"trial\" or \"hand\", got {set_by!r}")
    entry = QuarantineEntry(
        skill=_required_str(path, index, data, "skill", None).strip(),
        model=_required_str(path, index, data, "model", None).strip(),
        skill_hash=_required_str(path, index, data, "skill_hash", ""),
        verdict=_required_str(path, index, data, "verdict", VERDICT_MANUAL if set_by == SET_BY_HAND else "hurts"),
        reason=_required_str(path, index, data, "reason", ""),
        cause=_optional_str(path, index, data, "cause", None),
        line=_optional_str(path, index, data, "line", None),
        set_by=set_by,
        trial=_optional_str(path, index, data, "trial", None),
        since=_required_str(path, index, data, "since", ""),
        extra={k: v for k, v in data.items() if k not in ENTRY_FIELDS},
    )
    return entry


def _parse(path: Path, raw: bytes) -> Document:
    if not raw.strip():
        # A zero-byte file is what `touch` makes: treat it as "nothing quarantined".
        return Document(entries=[], extra={})
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _bad(path, f"not UTF-8 text ({exc})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _bad(path, f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    if not isinstance(data, dict):
        raise _bad(path, f'expected a JSON object {{"version": 1, "entries": [...]}}, got {type(data).__name__}')
    version = data.get("version")
    if isinstance(version, bool) or not isinstance(version, int):
        got = "nothing" if "version" not in data else repr(version)
        raise _bad(path, f"version: expected an integer (1), got {got}")
    if version > SUPPORTED_VERSION:
        raise QuarantineFileError(
            f"{path}: version {version} is newer than this pytest-skillcourt understands "
            f"(up to {SUPPORTED_VERSION}). Upgrade pytest-skillcourt (pip install -U pytest-skillcourt) "
            f"to read or change it; the file was left as it is."
        )
    if version < 1:
        raise _bad(path, f"version: expected 1, got {version}")
    entries = data.get("entries", [])
    if not isinstance(entries, list):
        raise _bad(path, f"entries: expected a list, got {type(entries).__name__}")
    return Document(
        entries=[_entry_from_dict(path, i, e) for i, e in enumerate(entries)],
        extra={k: v for k, v in data.items() if k not in ("version", "entries")},
    )


def read_document(path: Path) -> Document:
    """The file at ``path`` as it is now (no entries when it does not exist); the writers
    read it so, under :func:`locked_file`, to change it.

    Raises:
        QuarantineFileError: as :func:`read_entries`.
    """
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        return Document(entries=[], extra={})
    except IsADirectoryError:
        raise QuarantineFileError(f"{path}: is a directory, expected a JSON file. Point to a file instead.") from None
    except OSError as exc:
        raise QuarantineFileError(f"{path}: cannot be read ({exc.strerror or exc}). Check its permissions.") from None
    return _parse(Path(path), raw)


def read_entries(path: Path) -> list[QuarantineEntry]:
    """All entries of the file at ``path`` (``[]`` when it does not exist).

    Raises:
        QuarantineFileError: the file exists but is unreadable, not JSON, of the
            wrong shape or of a newer version.
    """
    return list(read_document(Path(path)).entries)


def find(entries: Sequence[QuarantineEntry], skill: str, model: str) -> QuarantineEntry | None:
    """The entry hiding ``skill`` from ``model``, if any.

    The most specific entry wins: one for that very model, then one for the
    undated model of a dated snapshot, then a ``"*"`` entry (its reason is the
    least specific); among equals the first in the file.  One lookup scans the
    entries once; for many lookups build a :class:`QuarantineIndex`.
    """
    keys = match_keys(model)
    best: QuarantineEntry | None = None
    rank = len(keys)  # the rank of a "*" entry
    for entry in entries:
        if entry.skill != skill:
            continue
        if entry.every_model:
            if best is None:
                best = entry
            continue
        key = model_key(entry.model)
        if key in keys and keys.index(key) < rank:
            best, rank = entry, keys.index(key)
            if rank == 0:
                return entry
    return best


class QuarantineIndex:
    """The entries of one version of the file, indexed for lookups.

    Built once per version of the file (linear in its entries); then
    :meth:`find` costs a few dictionary lookups and :meth:`hidden` a merge
    that is cached per model, so a reader that asks on every model call
    (the Hermes plugin) does not pay for the size of the file each time.
    Thread-safe.
    """

    #: How many models' :meth:`hidden` maps are kept.
    CACHE_SIZE = 64

    def __init__(self, entries: Iterable[QuarantineEntry]) -> None:
        self.entries: tuple[QuarantineEntry, ...] = tuple(entries)
        self._every: dict[str, QuarantineEntry] = {}
        self._by_key: dict[str, dict[str, QuarantineEntry]] = {}
        for entry in self.entries:
            if entry.every_model:
                self._every.setdefault(entry.skill, entry)
            else:
                self._by_key.setdefault(model_key(entry.model), {}).setdefault(entry.skill, entry)
        self._lock = threading.Lock()
        self._hidden: dict[tuple[str, ...], Mapping[str, QuarantineEntry]] = {}

    def __len__(self) -> int:
        return len(self.entries)

    def find(self, skill: str, model: str | None) -> QuarantineEntry | None:
        """As :func:`find`; ``model`` None (not known) sees only ``"*"`` entries."""
        for key in match_keys(model) if model is not None else ():
            entry = self._by_key.get(key, {}).get(skill)
            if entry is not None:
                return entry
        return self._every.get(skill)

    def hidden(self, model: str | None) -> Mapping[str, QuarantineEntry]:
        """Skill name -> the entry hiding it from ``model`` (None: only ``"*"`` entries).

        Do not change the returned mapping: it is shared.
        """
        keys = match_keys(model) if model is not None else ()
        with self._lock:
            cached = self._hidden.get(keys)
            if cached is not None:
                return cached
        merged = dict(self._every)
        for key in reversed(keys):  # the most specific key last: it wins
            merged.update(self._by_key.get(key, {}))
        with self._lock:
            if len(self._hidden) >= self.CACHE_SIZE:
                self._hidden.clear()
            self._hidden[keys] = merged
        return merged


# -- writing ------------------------------------------------------------------


@contextlib.contextmanager
def locked_file(path: Path) -> Iterator[Path]:
    """Hold the inter-process lock of the quarantine file at ``path``; yields the
    file to read and write.

    A symbolic link is written through: the lock (a side file ``<name>.lock``)
    is taken beside the link's final target and the target is yielded, so every
    path to one file shares one lock and the link is never replaced.
    """
    try:
        target = write_target(path)
    except OSError as exc:
        raise QuarantineFileError(
            f"{path}: is a symbolic link that cannot be followed ({exc.strerror or exc}). "
            f"Point it at a file, or replace it with a file; it was left as it is."
        ) from None
    with locked(target.with_name(target.name + ".lock")):
        yield target
