"""Mining replay tasks from Hermes Agent's session history (``skill-court tasks mine``).

A skill's best replay tasks are the requests that really made the agent load
it.  Hermes keeps every session in ``$HERMES_HOME/state.db`` (SQLite, written
by ``hermes_state.SessionDB``): table ``sessions`` and table ``messages``
(``id``, ``session_id``, ``role``, ``content``, ``tool_calls`` as JSON,
``tool_name``, ``tool_call_id``, ``timestamp``, ``active``).

The rules, decided from what Hermes 0.19.0 writes:

- A *turn* is a real user message and every row after it (in ``id`` order, the
  insertion order Hermes itself trusts over timestamps) up to the next real
  user message of the same session.
- A turn *mined for* skill S has an assistant row whose ``tool_calls`` hold a
  ``skill_view`` call with ``name`` S in any form Hermes accepts (``category/S``,
  ``category/S/SKILL.md``: ``transcript.skill_name``).  A call whose
  tool result says the skill was not found is ignored: a guessed name is not a
  skill.
- Not mined, because they are about writing the skill rather than using it:
  a turn in which ``skill_manage`` created S (action ``create``, whatever the
  order of the calls), and a turn whose user message asks to write, create,
  save, update or fix a skill (``SKILL_AUTHORING``).  Later turns of the same
  session that load S for real work are mined.
- Not user requests, so never turns: Hermes' background-review prompts ("Review
  the conversation above and ...", persisted by older builds) together with
  the curator reply that followed them, and context-compaction summaries (which
  are transparent: the turn they interrupt goes on).  Sessions a subagent ran
  for ``delegate_task`` (``model_config._delegate_from``) are skipped: their
  "user" message was written by the parent agent.
- Rows soft-archived by compaction or rewind (``active = 0``) are read too:
  they are real requests, and compaction's re-inserted copies are removed by
  the de-duplication.
- De-duplication: by prompt with case folded and whitespace collapsed; the
  earliest request wins.

Reading is read-only (``mode=ro``) and happens while Hermes may be running:
``immutable=1`` would ignore the write-ahead log and the locks, so it could
miss committed sessions or read a torn page.  It is used only as a fallback
when ``mode=ro`` cannot open the file and no ``-wal`` file exists (a database
on a read-only medium), where nothing can be missed.

Mined tasks go into the skill's one suite in the library's suite folder (a
hand-written one, one ``tasks add`` made, or ``<out>/<skill>.mined.yaml`` when
it has none), so hand and mined tasks count in one verdict: check-less tasks
(the judge scores them) appended to what is there, checked as a suite and
replaced atomically (``suite_edit``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sqlite3
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

import yaml

from pytest_skillcourt.core.hermes_state import MineError, StateDBError, connect
from pytest_skillcourt.core.atomic import write_atomic
from pytest_skillcourt.core.layout import default_hermes_home, resolve
from pytest_skillcourt.core.locks import locked
from pytest_skillcourt.core.suite import SuiteError
from pytest_skillcourt.core.suite_edit import (NEW_SUITE_HEADER, Document, SuiteEditError, check_text, dump, find_suites, leading_comments,
                                          suite_filename, the_suite, with_tasks_appended)
from pytest_skillcourt.core.transcript import message_text, parse_calls, skill_name

__all__ = [
    "MinedTask",
    "MineError",
    "StateDBError",
    "SuiteFileError",
    "SuiteWrite",
    "SKILL_AUTHORING",
    "normalise_prompt",
    "mine_requests",
    "write_suite",
    "write_mined",
    "write_suites",
    "add_parser",
    "run",
]

#: Columns mining reads; checked against the file so a changed Hermes schema
#: fails with a clear message instead of a bare sqlite error.
REQUIRED_COLUMNS = {
    "sessions": ("id",),
    "messages": ("id", "session_id", "role", "content", "tool_calls", "tool_name", "tool_call_id", "timestamp"),
}

#: Prefixes of user rows Hermes writes itself (not a user's request).
#: From hermes_state._REVIEW_HARNESS_PREFIXES and agent/context_compressor.py.
REVIEW_HARNESS_PREFIXES = (
    "Review the conversation above and update the skill library",
    "Review the conversation above and consider saving to memory",
)
COMPACTION_PREFIXES = ("[CONTEXT COMPACTION", "[CONTEXT SUMMARY]:")

# Words that, between the verb and "skill", mean the skill is a means, not the
# object ("write the notes using our skill" is a use of the skill).
_NOT_OBJECT = r"(?:using|use|with|per|from|via|following|by|according|to|in|on|for|and|then)\b"
_GAP = rf"(?:(?!{_NOT_OBJECT})[\w.'-]+\s+){{0,3}}"

#: A user message asking for a skill to be written or changed: such a turn
#: loads the skill to author it, not to use it.
SKILL_AUTHORING = re.compile(
    r"|".join(
        (
            # "write a skill", "create a new release-notes skill", "add the skill"
            rf"\b(?:write|create|add|draft|author|make|build|generate|set\s+up)\s+"
            rf"(?:a|an|the|this|that|my|our|your|new|another)\s+{_GAP}skills?\b",
            # "update the release-notes skill", "fix this skill", "delete that skill"
            rf"\b(?:update|edit|patch|fix|improve|refine|rewrite|revise|change|amend|correct|"
            rf"delete|remove|rename|review)\s+(?:the|this|that|my|our|your)\s+{_GAP}skills?\b",
            # "save this as a skill", "turn it into a skill", "remember that in your skills"
            r"\b(?:save|turn|make|convert|capture|store|record|remember|keep|put|write)\b[^.!?\n]{0,40}?"
            r"\b(?:as|into|in|to)\s+(?:a|an|the|your|my|our)?\s*(?:new\s+)?skills?\b",
            # editing the file itself
            r"\bskill\.md\b",
            r"\bskill_manage\b",
        )
    ),
    re.IGNORECASE,
)

_SKILL_MODIFYING_ACTIONS = ("create",)


class SuiteFileError(MineError):
    """An existing mined suite file cannot be merged into."""


@dataclass(frozen=True)
class MinedTask:
    """One user request that made the agent load ``skill`` with ``skill_view``."""

    skill: str
    prompt: str
    session_id: str
    timestamp: float


@dataclass(frozen=True)
class SuiteWrite:
    """What writing one mined suite did: its path, tasks found, added and held."""

    skill: str
    path: Path
    found: int
    added: int
    total: int
    backup: Path | None = None


# -- reading state.db --------------------------------------------------------


def normalise_prompt(prompt: str) -> str:
    """The de-duplication key: case folded, whitespace collapsed, ends stripped."""
    return " ".join(prompt.split()).casefold()


def _skill_not_found(result: str) -> bool:
    """True for a ``skill_view`` result saying no such skill exists."""
    try:
        data = json.loads(result)
    except ValueError:
        return False
    if not isinstance(data, dict) or data.get("success") is not False:
        return False
    return "not found" in str(data.get("error", "")).lower()


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}


def _check_schema(conn: sqlite3.Connection, state_db: Path) -> tuple[set[str], set[str]]:
    found = {}
    for table, required in REQUIRED_COLUMNS.items():
        columns = _columns(conn, table)
        missing = [c for c in required if c not in columns]
        if missing:
            got = f"columns {sorted(columns)}" if columns else "no such table"
            raise StateDBError(
                f"{state_db}: table {table!r} lacks {missing}; expected the Hermes Agent "
                f"session schema (hermes_state.SessionDB), got {got}. Is this a Hermes state.db?"
            )
        found[table] = columns
    return found["sessions"], found["messages"]


def _delegate_sessions(conn: sqlite3.Connection, session_columns: set[str]) -> set[str]:
    """Ids of sessions a subagent ran for ``delegate_task``."""
    if "model_config" not in session_columns:
        return set()
    ids = set()
    for session_id, model_config in conn.execute(
        "SELECT id, model_config FROM sessions WHERE model_config LIKE '%_delegate_from%'"
    ):
        try:
            config = json.loads(model_config)
        except (TypeError, ValueError):
            continue
        if isinstance(config, dict) and config.get("_delegate_from"):
            ids.add(session_id)
    return ids


@dataclass
class _Turn:
    session_id: str
    prompt: str
    timestamp: float
    viewed: dict[str, None]  # insertion-ordered set
    created: set[str]
    view_calls: dict[str, str]  # call id -> skill
    not_found: set[str]  # call ids whose result said "not found"

    def tasks(self, wanted: set[str] | None) -> Iterator[MinedTask]:
        if not self.prompt.strip() or SKILL_AUTHORING.search(self.prompt):
            return
        missing = {self.view_calls[c] for c in self.not_found if c in self.view_calls}
        loaded = {s for c, s in self.view_calls.items() if c not in self.not_found}
        for skill in self.viewed:
            if skill in self.created or (wanted is not None and skill not in wanted):
                continue
            if skill in missing and skill not in loaded:
                continue
            yield MinedTask(skill=skill, prompt=self.prompt, session_id=self.session_id, timestamp=self.timestamp)


def _turns(rows: Iterable[tuple], skip_sessions: set[str]) -> Iterator[_Turn]:
    """Split message rows (ordered by session, id) into user turns."""
    current: _Turn | None = None
    in_review = False  # inside a background-review harness exchange
    session = None
    for session_id, role, content, tool_calls, tool_name, tool_call_id, timestamp in rows:
        if session_id != session:
            if current is not None:
                yield current
            current, in_review, session = None, False, session_id
        if session_id in skip_sessions:
            continue
        if role == "user":
            text = message_text(content)
            head = text.lstrip()
            if head.startswith(COMPACTION_PREFIXES):
                continue  # transparent: the interrupted turn goes on
            if current is not None:
                yield current
                current = None
            if head.startswith(REVIEW_HARNESS_PREFIXES):
                in_review = True
                continue
            in_review = False
            current = _Turn(session_id, text.strip(), float(timestamp or 0.0), {}, set(), {}, set())
            continue
        if current is None or in_review:
            continue
        if role == "assistant":
            for call in parse_calls(tool_calls):
                skill = skill_name(call.arguments.get("name"))
                if not skill:
                    continue
                if call.name == "skill_view":
                    current.viewed.setdefault(skill, None)
                    current.view_calls[call.id or f"#{len(current.view_calls)}"] = skill
                elif call.name == "skill_manage" and call.arguments.get("action") in _SKILL_MODIFYING_ACTIONS:
                    current.created.add(skill)
        elif role == "tool" and tool_name == "skill_view" and tool_call_id:
            if _skill_not_found(message_text(content)):
                current.not_found.add(str(tool_call_id))
    if current is not None:
        yield current


def mine_requests(state_db: Path, skills: Sequence[str] | None = None) -> dict[str, list[MinedTask]]:
    """The user requests in ``state_db`` that made the agent ``skill_view`` each skill.

    ``skills`` None mines every skill seen in a ``skill_view`` call; otherwise
    every named skill gets a key, with an empty list when nothing was found.
    Each list is de-duplicated by normalised prompt (the earliest request is
    kept) and ordered by time.  Rules: see the module docstring.

    Raises:
        StateDBError: the file is missing, unreadable, or not a Hermes state.db.
    """
    state_db = Path(state_db)
    wanted = None if skills is None else {skill_name(s) or s for s in skills}
    conn = connect(state_db)
    try:
        # One read transaction: a consistent snapshot while Hermes writes.
        conn.execute("BEGIN")
        session_columns, _ = _check_schema(conn, state_db)
        skip = _delegate_sessions(conn, session_columns)
        rows = conn.execute(
            "SELECT session_id, role, content, tool_calls, tool_name, tool_call_id, timestamp "
            "FROM messages ORDER BY session_id, id"
        )
        mined: dict[str, list[MinedTask]] = {s: [] for s in sorted(wanted)} if wanted is not None else {}
        for one_turn in _turns(rows, skip):
            for task in one_turn.tasks(wanted):
                mined.setdefault(task.skill, []).append(task)
        conn.execute("COMMIT")
    except sqlite3.DatabaseError as exc:
        raise StateDBError(f"{state_db}: reading the session history failed ({exc})") from exc
    finally:
        conn.close()
    result = {}
    for skill in sorted(mined):
        seen: set[str] = set()
        unique = []
        for task in sorted(mined[skill], key=lambda t: (t.timestamp, t.session_id)):
            key = normalise_prompt(task.prompt)
            if key not in seen:
                seen.add(key)
                unique.append(task)
        result[skill] = unique
    return result


# -- writing suites ----------------------------------------------------------

HEADER = """\
# Replay tasks mined by `skill-court tasks mine` from Hermes Agent's session
# history ({source}): user requests that made the agent load the skill
# {skill!r} with skill_view. The tasks have no check: the judge scores them.
# Edit freely (add a `check`, fix a prompt, delete a task): a later mine keeps
# every task here and never re-adds a prompt it mined before (hashes below).
"""

#: The line put above the prompt hashes in a suite ``tasks mine`` did not start
#: (a hand-written one it merges into).
SEEN_NOTE = ("# `skill-court tasks mine` merged tasks into this suite; it never re-adds a prompt "
             "it mined before (hashes below).\n")

#: Header lines listing the sha256 prefixes of every normalised prompt ever
#: mined into the file, so a task the user deleted stays deleted.
_SEEN_PREFIX = "# mined-prompts:"
_SEEN_PER_LINE = 6

_HEADER_FIRST_LINE = HEADER.splitlines()[0]
#: The first line of a suite ``tasks add`` made: its header is ours too.
_ADDED_FIRST_LINE = NEW_SUITE_HEADER.split("{", 1)[0]
_ID = re.compile(r"^mined-(\d+)$")


def _prompt_hash(prompt: str) -> str:
    return hashlib.sha256(normalise_prompt(prompt).encode("utf-8")).hexdigest()[:12]


def _suite_filename(skill: str) -> str:
    return suite_filename(skill, ".mined.yaml")


def _ours(line: str) -> bool:
    """A leading comment line ``tasks mine`` wrote (the prompt hashes and their note)."""
    return line.startswith(_SEEN_PREFIX) or line == SEEN_NOTE.rstrip("\n")


def _load_existing(path: Path, skill: str) -> tuple[dict, list[dict], set[str], bool]:
    """The existing suite, its tasks, the prompt hashes mined before, and whether
    it holds comments we did not write."""
    text = path.read_text(encoding="utf-8")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SuiteFileError(
            f"{path}: cannot merge mined tasks into it, it is not valid YAML ({exc}); "
            "fix or move the file and run `skill-court tasks mine` again"
        ) from exc
    if data is None:
        data = {"skill": skill, "tasks": []}
    if not isinstance(data, dict) or not isinstance(data.get("tasks", []), list):
        raise SuiteFileError(
            f"{path}: cannot merge mined tasks into it: expected a mapping with 'skill' and a "
            f"'tasks' list, got {type(data).__name__}; fix or move the file"
        )
    if data.get("skill", skill) != skill:
        raise SuiteFileError(
            f"{path}: field 'skill' is {data.get('skill')!r}, expected {skill!r}; this file "
            "belongs to another skill, move it before mining into this folder"
        )
    tasks = data.get("tasks") or []
    lines = text.splitlines()
    seen: set[str] = set()
    header = bool(lines) and lines[0].startswith((_HEADER_FIRST_LINE, _ADDED_FIRST_LINE))
    body: list[str] = []
    in_head = True
    for line in lines:
        if in_head and line.startswith("#"):
            if line.startswith(_SEEN_PREFIX):
                seen.update(line[len(_SEEN_PREFIX):].split())
            if header or _ours(line):
                continue  # our header is the whole leading comment block
        elif line.strip():
            in_head = False
        body.append(line)
    # Any other comment (full-line or trailing) is the user's; " #" may also be
    # prompt text, which only costs an unneeded backup.
    foreign = any(line.lstrip().startswith("#") or " #" in line for line in body)
    return data, tasks, seen, foreign


def _seen_lines(seen: set[str]) -> str:
    hashes = sorted(seen)
    return "".join(f"{_SEEN_PREFIX} {' '.join(hashes[i:i + _SEEN_PER_LINE])}\n"
                   for i in range(0, len(hashes), _SEEN_PER_LINE))


def _with_seen(text: str, seen: set[str]) -> str:
    """``text`` with its prompt-hash lines replaced by those of ``seen``: after our
    header when it has one, else at the end of its leading comments, under
    ``SEEN_NOTE``."""
    head = leading_comments(text)
    body = text[len(head):]
    lines = [line for line in head.splitlines(keepends=True) if not _ours(line.rstrip("\n"))]
    ours = lines and lines[0].startswith((_HEADER_FIRST_LINE, _ADDED_FIRST_LINE))
    last = max((i for i, line in enumerate(lines) if line.startswith("#")), default=-1)
    added = _seen_lines(seen) if ours else SEEN_NOTE + _seen_lines(seen)
    return "".join(lines[:last + 1]) + added + "".join(lines[last + 1:]) + body


def _suite_path(skill: str, out_dir: Path) -> Path:
    """The skill's one suite under ``out_dir`` (hand-written or mined), else
    ``<out>/<skill>.mined.yaml``.

    Raises:
        SuiteFileError: the skill has several suites there.
    """
    found = find_suites(out_dir)
    try:
        path = the_suite(found, skill)
    except SuiteEditError as exc:
        named = [p for p, _ in found.unreadable if p.name == _suite_filename(skill)]
        if named and not found.of(skill):
            return named[0]  # _load_existing says what is wrong with it
        raise SuiteFileError(f"cannot merge mined tasks: {exc}") from None
    return path if path is not None else Path(out_dir) / _suite_filename(skill)


def write_suite(
    skill: str, tasks: Sequence[MinedTask], out_dir: Path, *, max_tasks: int = 20, source: str = "state.db"
) -> SuiteWrite:
    """Merge ``tasks`` into the skill's suite under ``out_dir`` and report what changed.

    The suite is the skill's one suite file in the folder, whatever its name
    (a hand-written ``<skill>.yaml``, one ``tasks add`` made, a mined one), so
    mined and hand tasks count in one verdict; without one it is
    ``out_dir/<skill>.mined.yaml``.  Existing tasks (with their ids, checks and
    edits) are always kept; new requests are added after them, skipping prompts
    already present (normalised), until the file holds ``max_tasks`` tasks; the
    most recent requests are preferred.  Ids are ``mined-001``, ... continuing
    after the highest one present.  The file is untouched when nothing is
    added; otherwise the new tasks are appended in its text (the rest kept as
    written, see ``suite_edit``), the result is checked as a suite, and it
    replaces the file atomically.  If the file held comments we did not write,
    the old file is kept as ``<name>.bak`` first.

    Raises:
        SuiteFileError: the existing file is not a suite of this skill, the
            skill has several suites there, or the merged file would not be a
            valid suite (nothing written).
    """
    if max_tasks < 1:
        raise ValueError(f"max_tasks: expected a positive number, got {max_tasks}")
    path = _suite_path(skill, Path(out_dir))
    data: dict = {"skill": skill, "tasks": []}
    existing: list[dict] = []
    seen: set[str] = set()
    foreign = False
    if path.exists():
        data, existing, seen, foreign = _load_existing(path, skill)
    present = {
        normalise_prompt(t["prompt"]) for t in existing if isinstance(t, dict) and isinstance(t.get("prompt"), str)
    }
    ids = {str(t.get("id")) for t in existing if isinstance(t, dict)}
    fresh: list[MinedTask] = []
    for task in sorted(tasks, key=lambda t: t.timestamp, reverse=True):
        key = normalise_prompt(task.prompt)
        if not key or key in present or _prompt_hash(task.prompt) in seen:
            continue  # already here, or mined before and deleted by the user
        if len(existing) + len(fresh) >= max_tasks:
            break
        present.add(key)
        fresh.append(task)
    fresh.sort(key=lambda t: (t.timestamp, t.session_id))
    if not fresh:
        return SuiteWrite(skill, path, len(tasks), 0, len(existing))
    # Never reuse the id of a deleted task: every id handed out left a hash.
    number = max([len(seen)] + [int(m.group(1)) for i in ids if (m := _ID.match(i))])
    new_entries = []
    for task in fresh:
        number += 1
        while f"mined-{number:03d}" in ids:
            number += 1
        new_entries.append({"id": f"mined-{number:03d}", "prompt": task.prompt})
        seen.add(_prompt_hash(task.prompt))
    if path.exists():
        old = path.read_text(encoding="utf-8")
        try:
            edit = with_tasks_appended(Document.parse(old, path), new_entries, path)
        except SuiteEditError as exc:
            raise SuiteFileError(f"cannot merge mined tasks: {exc}") from None
        text = _with_seen(edit.text, seen)
    else:
        text = HEADER.format(source=source, skill=skill) + _seen_lines(seen) + dump(
            {"skill": data.get("skill", skill), "tasks": new_entries})
    try:
        check_text(path, text)
    except SuiteError as exc:
        raise SuiteFileError(f"mined tasks not merged, the result would not be a valid suite: {exc}") from None
    backup = None
    if path.exists() and foreign:
        backup = path.with_name(path.name + ".bak")
        write_atomic(backup, path.read_text(encoding="utf-8"))
    write_atomic(path, text)
    return SuiteWrite(skill, path, len(tasks), len(new_entries), len(existing) + len(new_entries), backup)


def write_suites(mined: dict[str, list[MinedTask]], out_dir: Path, *, max_tasks: int = 20) -> list[Path]:
    """Write one merged suite per skill with tasks (see ``write_suite``); their paths.

    Skills without any mined task get no file.
    """
    return [write_suite(skill, tasks, out_dir, max_tasks=max_tasks).path for skill, tasks in mined.items() if tasks]



def write_mined(mined: Mapping[str, list[MinedTask]], out_dir: Path, lock: Path, *, max_tasks: int,
                source: str) -> None:
    """``tasks mine``'s writing, for every miner: under the library's ``lock``, one merged
    suite per skill (:func:`write_suite`) and a line on stdout saying what each got."""
    with locked(lock):
        for skill, tasks in mined.items():
            if not tasks:
                print(f"{skill}: 0 request(s) found")
                continue
            done = write_suite(skill, tasks, out_dir, max_tasks=max_tasks, source=source)
            line = (f"{skill}: {done.found} request(s) found, {done.added} new task(s) -> {done.path} "
                    f"({done.total} in all)")
            if done.backup is not None:
                line += f"; previous file kept as {done.backup}"
            print(line)

# -- command line ------------------------------------------------------------


def _default_hermes_home() -> Path:
    return default_hermes_home()


def add_parser(subparsers: Any, *, parents: Sequence[argparse.ArgumentParser] = ()) -> None:
    """Add ``mine`` to the ``skill-court tasks`` subparsers.

    Sets both ``func`` and ``court_handler`` (the name ``pytest_skillcourt.cli``
    dispatches on) to :func:`run`; ``parents`` are passed to ``add_parser``.
    """
    parser = subparsers.add_parser(
        "mine",
        parents=list(parents),
        help="turn requests from Hermes' session history that loaded a skill into replay tasks",
        description=(
            "Read $HERMES_HOME/state.db read-only, find the user requests that made the agent "
            "call skill_view on each skill (not the turns that wrote the skill), de-duplicate "
            "them and merge them as check-less tasks into the skill's suite in the library's "
            "suite folder (the same file `tasks add` and a hand-written suite use, so all its "
            "tasks count in one verdict; <skill>.mined.yaml when it has none)."
        ),
    )
    parser.add_argument("skills", nargs="*", metavar="SKILL", help="skills to mine (default: every skill loaded)")
    parser.add_argument(
        "--hermes-home", type=Path, default=None, metavar="DIR",
        help="Hermes home holding state.db, and the library unless --skills is given "
             "(default: $HERMES_HOME, else ~/.hermes)",
    )
    parser.add_argument(
        "--skills", type=Path, default=None, metavar="DIR", dest="skills_dir",
        help="a library in a repository: its suites are skills_tests/ beside DIR",
    )
    parser.add_argument(
        "--out", type=Path, default=None, metavar="DIR",
        help="suite folder to merge into (default: the library's: "
             "$HERMES_HOME/plugin-data/skill-court/suites, or skills_tests/ beside --skills DIR)",
    )
    parser.add_argument("--max-tasks", type=int, default=20, metavar="N", help="most tasks per suite (default 20)")
    parser.add_argument(
        "--claude-home", type=Path, default=None, metavar="DIR",
        help="in a Claude Code project (a folder with .claude/skills, or --skills X/.claude/skills): mine "
             "its session transcripts under DIR/projects/ (default: $CLAUDE_CONFIG_DIR, else ~/.claude)")
    parser.set_defaults(func=run, court_handler=run)


def run(args: argparse.Namespace) -> int:
    """Mine Hermes' history, write the suites and print how many requests were found per skill
    (a Claude Code project's transcripts: ``claude_mine``, which the CLI picks first)."""
    home = args.hermes_home or _default_hermes_home()
    state_db = Path(home) / "state.db"
    if args.max_tasks < 1:
        print(f"skill-court tasks mine: --max-tasks expected a positive number, got {args.max_tasks}", file=sys.stderr)
        return 2
    where = resolve(hermes_home=Path(home), skills=getattr(args, "skills_dir", None))
    out = args.out if args.out is not None else where.suites_dir
    try:
        mined = mine_requests(state_db, args.skills or None)
        if not mined:
            print(f"no skill_view calls found in {state_db}")
            return 0
        write_mined(mined, out, where.ensure_data_dir() / where.lock.name, max_tasks=args.max_tasks,
                    source=str(state_db))
    except MineError as exc:
        print(f"skill-court tasks mine: {exc}", file=sys.stderr)
        return 1
    return 0
