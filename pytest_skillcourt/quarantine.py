"""The quarantine file: which skill is hidden from which model, and why.

One JSON file, versioned (schema: ``schemas/quarantine.schema.json``)::

    {"version": 1, "entries": [
      {"skill": "sales-csv-totals", "model": "claude-sonnet-4-5",
       "skill_hash": "sha256:...", "verdict": "hurts",
       "reason": "success fell from 100% to 0% (3 tasks)", "cause": "...",
       "line": "...", "set_by": "trial", "trial": "...",
       "since": "2026-11-30T12:00:00Z"}]}

Writers are ``pytest --skill-court-apply`` (entries ``set_by: "trial"``) and the
user (``skill-court quarantine``/``release``, or an editor: ``set_by: "hand"``).
The Hermes plugin (``pytest_skillcourt.hermes``) only reads it.  Every write of
this module is recorded, with who and how, in the history kept by the store
beside the file (:mod:`pytest_skillcourt.quarantine_log`), which also finds and
records edits made outside the court.

Rules this module keeps:

- **Model names** compare by :func:`model_key`: case-folded, provider prefix
  dropped.  The key is the part after the *last* ``/``, so
  ``openai/GPT-4.1-mini``, ``gpt-4.1-mini`` and ``azure/gpt-4.1-mini`` are one
  model, and ``openrouter/meta-llama/llama-3`` is ``llama-3``.  A ``provider:``
  prefix goes too when the part before the ``:`` is a provider name
  (:data:`PROVIDER_PREFIXES`) and the part after is not an Ollama tag
  (``openai:gpt-4.1-mini`` is ``gpt-4.1-mini``); any other ``:`` is part of the
  name (``ollama/qwen2.5:7b`` is ``qwen2.5:7b``, ``mistral:7b`` stays: the tag
  names a different model).  ``"*"`` means every model.
- **Dated snapshots** (:func:`model_matches`): an entry for
  ``gpt-4.1-mini`` also hides the skill from ``gpt-4.1-mini-2025-04-14`` and an
  entry for ``claude-sonnet-4-5`` from ``claude-sonnet-4-5-20250929`` (a
  suffix ``-YYYY-MM-DD`` or ``-YYYYMMDD``); an entry for a dated snapshot hides
  it from that snapshot only.  The most specific entry wins: the snapshot's own,
  then the undated one, then ``"*"``.
- **Identity** of an entry is ``(skill, model_key(model))``; skill names
  compare exactly, as Hermes compares them.
- **Merging**: every write takes an inter-process lock (``flock`` on the side
  file ``<name>.lock``), reads the file as it is *now*, applies the change and
  writes a temp file in the same directory that is fsynced and renamed over the
  old one.  A quarantine file that is a symbolic link (to the copy Hermes
  reads, say) is written *through*: lock, temp file and rename are at the
  link's final target, so the link stays a link and every path to the file
  shares one lock (:func:`~pytest_skillcourt.atomic.write_target`).
  Concurrent writers never lose an entry and an edit a user made between two
  runs is kept.  A trial never removes or changes an entry set by
  hand; a trial that finds a skill no longer hurting lifts only the entry a
  trial set for that model.
- **User edits survive**: keys this version does not know, in an entry or at
  the top level, are written back unchanged.  Entries written by hand may omit
  everything except ``skill`` and ``model``; the rest gets defaults (an entry
  without ``set_by`` counts as set by hand, so no trial can lift it).
- **A file we cannot read is never overwritten**: bad JSON, a wrong shape or a
  newer ``version`` raise :class:`QuarantineFileError` naming the file, what is
  wrong and how to fix it.  A missing file and a zero-byte file hold no entries.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, Sequence

from pytest_skillcourt.atomic import write_atomic, write_target
from pytest_skillcourt.clock import utc_now
from pytest_skillcourt.locks import locked

if TYPE_CHECKING:  # the statistics are not loaded with the Hermes plugin that reads this file
    from pytest_skillcourt.stats.verdict import VerdictKind

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
    (:mod:`pytest_skillcourt.quarantine_log`), cannot be used: the change was not
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
class _Document:
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


def _parse(path: Path, raw: bytes) -> _Document:
    if not raw.strip():
        # A zero-byte file is what `touch` makes: treat it as "nothing quarantined".
        return _Document(entries=[], extra={})
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
    return _Document(
        entries=[_entry_from_dict(path, i, e) for i, e in enumerate(entries)],
        extra={k: v for k, v in data.items() if k not in ("version", "entries")},
    )


def _read_document(path: Path) -> _Document:
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        return _Document(entries=[], extra={})
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
    return list(_read_document(Path(path)).entries)


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
def _locked(path: Path) -> Iterator[Path]:
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


@contextlib.contextmanager
def _history(target: Path) -> Iterator[Any]:
    """The history of the file ``target`` (:class:`~pytest_skillcourt.quarantine_log.History`),
    open for the ``with`` block; taken while the file's lock is held.

    Raises:
        QuarantineHistoryError: its store cannot be used (nothing was written).
    """
    from pytest_skillcourt.quarantine_log import History  # the store: only for writers

    history = History.open(target)
    try:
        yield history
    finally:
        history.close()


def _write_document(path: Path, doc: _Document) -> None:
    """Replace the file atomically: temp file in the same directory, fsync, rename."""
    data: dict[str, Any] = {"version": SUPPORTED_VERSION, "entries": [e.to_dict() for e in doc.entries]}
    for key, value in doc.extra.items():
        data.setdefault(key, value)
    write_atomic(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def apply_trial(
    path: Path,
    *,
    hurts: Sequence[QuarantineEntry],
    cleared: Sequence[tuple[str, str]],
    via: str = "trial",
    trial: str | None = None,
    detail: Mapping[str, Any] | None = None,
) -> tuple[list[QuarantineEntry], list[QuarantineEntry]]:
    """Merge the outcome of trials into the file; returns ``(added_or_updated, lifted)``.

    ``hurts``: entries with ``set_by="trial"`` to add, or to update when a trial
    entry for the same skill and model is there (its ``since`` and the user's
    extra keys are kept).  A skill and model that already has an entry set by
    hand is left alone: the hand decision stands.  An entry equal to the one
    already there is not reported as updated.

    ``cleared``: ``(skill, model)`` pairs a later trial found no longer hurting;
    only the entry a trial set for exactly that model is lifted (a ``"*"``
    entry only by ``(skill, "*")``), never an entry set by hand.

    When the file changes, the changes are recorded in its history (actions
    ``quarantine`` and ``lift``, by the local user, ``via`` ``"trial"``, ``"appeal"`` or
    ``"auto"``; ``trial``: the session behind them, default each entry's own;
    ``detail``: more to keep with each row), after edits made outside the court.

    Raises:
        ValueError: an entry of ``hurts`` is not ``set_by="trial"``, or a pair is
            both in ``hurts`` and in ``cleared``.
        QuarantineFileError: the file is unusable (it is left untouched).
    """
    path = Path(path)
    for entry in hurts:
        if entry.set_by != SET_BY_TRIAL:
            raise ValueError(
                f"apply_trial(hurts=...): entry for {entry.skill!r}/{entry.model!r} has set_by={entry.set_by!r}; "
                f"expected {SET_BY_TRIAL!r} (use quarantine() for entries set by hand)"
            )
    hurt_keys = {e.key for e in hurts}
    cleared_keys = {(skill, model_key(model)) for skill, model in cleared}
    both = hurt_keys & cleared_keys
    if both:
        raise ValueError(f"apply_trial: {sorted(both)} both hurt and cleared in one call; pass each pair once")

    changed: list[QuarantineEntry] = []
    lifted: list[QuarantineEntry] = []
    with _locked(path) as target:
        doc = _read_document(target)
        entries = list(doc.entries)
        for new in hurts:
            if any(e.key == new.key and e.set_by == SET_BY_HAND for e in entries):
                continue
            index = next((i for i, e in enumerate(entries) if e.key == new.key), None)
            if index is None:
                entries.append(new)
                changed.append(new)
                continue
            old = entries[index]
            merged = replace(new, since=old.since or new.since, extra={**new.extra, **old.extra})
            if merged.to_dict() != old.to_dict():
                entries[index] = merged
                changed.append(merged)
        kept: list[QuarantineEntry] = []
        for entry in entries:
            if entry.set_by == SET_BY_TRIAL and entry.key in cleared_keys:
                lifted.append(entry)
            else:
                kept.append(entry)
        if changed or lifted:
            with _history(target) as history:
                history.notice(doc.entries, via=via)
                _write_document(target, _Document(entries=kept, extra=doc.extra))
                history.record("quarantine", changed, via=via, trial=trial, own_trial=True, detail=detail)
                history.record("lift", lifted, via=via, trial=trial, own_trial=True, detail=detail)
    return changed, lifted


def quarantine(
    path: Path,
    skill: str,
    *,
    model: str = ALL_MODELS,
    reason: str = "set by hand",
    skill_hash: str = "",
    via: str = "cli",
    detail: Mapping[str, Any] | None = None,
) -> QuarantineEntry:
    """Hide ``skill`` from ``model`` (default every model) by hand; returns the entry.

    An existing entry for the same skill and model becomes a hand entry (so no
    trial lifts it any more) with the new reason; its cause, line, trial, the
    user's extra keys and, when ``skill_hash`` is empty, its hash are kept.

    The change is recorded in the file's history (action ``quarantine``, by the
    local user, ``via`` ``"cli"`` or ``"dashboard"``, with ``detail``), after edits
    made outside the court; the file is written first, then the row.

    Raises:
        ValueError: empty skill or model.
        QuarantineFileError: the file is unusable (it is left untouched).
    """
    path = Path(path)
    skill, model = skill.strip(), model.strip()
    if not skill:
        raise ValueError("quarantine(): skill name is empty; pass the skill's name as in its SKILL.md")
    if not model:
        raise ValueError('quarantine(): model is empty; pass a model name or "*" for every model')
    with _locked(path) as target:
        doc = _read_document(target)
        entries = list(doc.entries)
        key = (skill, model_key(model))
        index = next((i for i, e in enumerate(entries) if e.key == key), None)
        if index is None:
            entry = QuarantineEntry(
                skill=skill, model=model, skill_hash=skill_hash, verdict=VERDICT_MANUAL, reason=reason,
                cause=None, line=None, set_by=SET_BY_HAND, trial=None, since=utc_now(),
            )
            entries.append(entry)
        else:
            old = entries[index]
            entry = replace(
                old, set_by=SET_BY_HAND, reason=reason, skill_hash=skill_hash or old.skill_hash,
                since=old.since if old.set_by == SET_BY_HAND and old.since else utc_now(),
            )
            entries[index] = entry
        with _history(target) as history:
            history.notice(doc.entries, via=via)
            _write_document(target, _Document(entries=entries, extra=doc.extra))
            history.record("quarantine", [entry], via=via, detail=detail)
    return entry


def release(path: Path, skill: str, *, model: str | None = None, via: str = "cli",
            detail: Mapping[str, Any] | None = None) -> list[QuarantineEntry]:
    """Remove the entries of ``skill`` (for every model when ``model`` is None,
    else only the entry for that model; ``"*"`` names the every-model entry);
    returns what was removed (``[]`` when nothing matched: the file is not
    rewritten then).

    The removal is recorded in the file's history as :func:`quarantine` records
    (action ``release``).

    Raises:
        QuarantineFileError: the file is unusable (it is left untouched).
    """
    path = Path(path)
    skill = skill.strip()
    with _locked(path) as target:
        doc = _read_document(target)
        removed = [e for e in doc.entries if e.skill == skill and (model is None or e.key[1] == model_key(model))]
        if removed:
            gone = {id(e) for e in removed}
            kept = [e for e in doc.entries if id(e) not in gone]
            with _history(target) as history:
                history.notice(doc.entries, via=via)
                _write_document(target, _Document(entries=kept, extra=doc.extra))
                history.record("release", removed, via=via, detail=detail)
    return removed


# -- trial -> quarantine policy (``--skill-court-apply``) ----------------------


@dataclass(frozen=True)
class TrialVerdict:
    """What the policy needs of one verdict of a session."""

    skill: str
    model: str
    kind: VerdictKind
    skill_hash: str
    reason: str
    cause: str | None = None
    line: str | None = None


@dataclass(frozen=True)
class TrialPlan:
    """The changes one session's verdicts ask of the quarantine file."""

    hurts: tuple[QuarantineEntry, ...]
    cleared: tuple[tuple[str, str], ...]
    #: why a clearance was dropped: models sharing a quarantine key disagreed
    notes: tuple[str, ...] = ()


def plan_trial(verdicts: Sequence[TrialVerdict], existing: Sequence[QuarantineEntry], *,
               trial: str) -> TrialPlan:
    """The quarantine changes of a session's verdicts (pure: nothing is read or written).

    A HURTS verdict adds (or refreshes) an entry set by the trial.  A later
    HELPS or NEUTRAL on a *changed* skill (its hash differs from the entry's)
    lifts the entry a trial set for that model; an unchanged skill keeps its
    entry (a lucky re-run is not new evidence about the same bytes), an
    INCONCLUSIVE verdict changes nothing, and an entry set by hand is never
    touched.

    Two configured models can share one quarantine key (``openai/gpt-4.1-mini``
    and ``azure/gpt-4.1-mini`` are both ``gpt-4.1-mini``, the name Hermes
    matches).  They are one model for the file: when one hurts and another
    would lift, HURTS wins and a note says so.
    """
    from pytest_skillcourt.stats.verdict import VerdictKind

    hurts: dict[tuple[str, str], QuarantineEntry] = {}
    cleared: set[tuple[str, str]] = set()
    for v in verdicts:
        key = (v.skill, model_key(v.model))
        if v.kind is VerdictKind.HURTS:
            hurts.setdefault(key, QuarantineEntry(
                skill=v.skill, model=key[1], skill_hash=v.skill_hash, verdict="hurts",
                reason=v.reason, cause=v.cause, line=v.line, set_by=SET_BY_TRIAL,
                trial=trial, since=utc_now()))
        elif v.kind in (VerdictKind.HELPS, VerdictKind.NEUTRAL):
            for e in existing:
                if (e.skill == v.skill and e.set_by == SET_BY_TRIAL and not e.every_model
                        and model_key(e.model) == key[1] and e.skill_hash != v.skill_hash):
                    cleared.add(key)
    notes = []
    for key in sorted(cleared & hurts.keys()):
        models = sorted({v.model for v in verdicts if (v.skill, model_key(v.model)) == key})
        notes.append(f"{key[0]}: models {', '.join(models)} share the quarantine key {key[1]!r} "
                     "and disagree; HURTS wins, so the skill stays hidden from it")
    return TrialPlan(hurts=tuple(hurts.values()), cleared=tuple(sorted(cleared - hurts.keys())),
                     notes=tuple(notes))
