"""The SQLite store: runs, judgments, verdicts, quarantine history, appeals (README "Store, cache and budget").

One file, WAL mode, one connection per process; xdist workers write their
runs, the controller writes verdicts.  Each run is written in one transaction
when it has finished, so a crash or Ctrl-C mid-run leaves no half-written row
that a later session would trust.  The schema is versioned with forward
migrations (``PRAGMA user_version``).

:class:`Store` keeps the connection, the sessions, the runs and their marks, spend and
pruning here, and is made of the parts that keep the rest: judgments, causes and
verdicts (``store_verdicts.py``), appeals (``store_appeals.py``) and the quarantine
history (``store_history.py``); ``store_part.py`` is what those take from it.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_skillcourt.core.atomic import write_atomic
from pytest_skillcourt.core.clock import utc_now
from pytest_skillcourt.core.records import RunHead, RunRecord
from pytest_skillcourt.core.store_appeals import AppealTable
from pytest_skillcourt.core.store_history import QuarantineHistoryTable
from pytest_skillcourt.core.store_part import valid_text
from pytest_skillcourt.core.store_verdicts import VerdictTables
from pytest_skillcourt.core.trees import stat_text
from pytest_skillcourt.core.trial import TrialHead, TrialRun


#: Each entry migrates from version i to i+1.
MIGRATIONS: list[str] = [
    """
    CREATE TABLE trials (
        trial TEXT PRIMARY KEY, started_at TEXT NOT NULL, finished_at TEXT,
        rootdir TEXT, argv TEXT
    );
    CREATE TABLE runs (
        run_id TEXT PRIMARY KEY, cache_key TEXT NOT NULL, trial TEXT NOT NULL,
        skill TEXT NOT NULL, suite TEXT NOT NULL, task_id TEXT NOT NULL, arm TEXT NOT NULL,
        rep INTEGER NOT NULL, model TEXT NOT NULL, status TEXT NOT NULL,
        outcome INTEGER, cost_usd REAL, priced INTEGER NOT NULL DEFAULT 0,
        input_tokens INTEGER NOT NULL DEFAULT 0, output_tokens INTEGER NOT NULL DEFAULT 0,
        cacheable INTEGER NOT NULL, created_at TEXT NOT NULL, data TEXT NOT NULL
    );
    CREATE INDEX runs_by_key ON runs(cache_key, cacheable);
    CREATE INDEX runs_by_trial ON runs(trial);
    CREATE TABLE trial_runs (
        trial TEXT NOT NULL, run_id TEXT NOT NULL, skill TEXT NOT NULL, model TEXT NOT NULL,
        suite TEXT NOT NULL, task_id TEXT NOT NULL, arm TEXT NOT NULL, rep INTEGER NOT NULL,
        cached INTEGER NOT NULL, PRIMARY KEY (trial, suite, task_id, arm, rep, model)
    );
    CREATE TABLE judgments (
        key TEXT PRIMARY KEY, trial TEXT NOT NULL, with_run TEXT NOT NULL,
        without_run TEXT NOT NULL, winner TEXT, input_tokens INTEGER NOT NULL DEFAULT 0,
        output_tokens INTEGER NOT NULL DEFAULT 0, cost_usd REAL, created_at TEXT NOT NULL,
        data TEXT NOT NULL
    );
    CREATE TABLE verdicts (
        id INTEGER PRIMARY KEY AUTOINCREMENT, trial TEXT NOT NULL, skill TEXT NOT NULL,
        model TEXT NOT NULL, suite TEXT NOT NULL, skill_hash TEXT NOT NULL,
        suite_hash TEXT NOT NULL, kind TEXT NOT NULL, created_at TEXT NOT NULL,
        data TEXT NOT NULL
    );
    CREATE INDEX verdicts_by_skill ON verdicts(skill, model, id);
    CREATE TABLE quarantine_history (
        id INTEGER PRIMARY KEY AUTOINCREMENT, at TEXT NOT NULL, action TEXT NOT NULL,
        skill TEXT NOT NULL, model TEXT NOT NULL, trial TEXT, data TEXT NOT NULL
    );
    """,
    # v2: the library folder of each session, so `skill-court report` can tell
    # whether a skill changed since its verdict without guessing the ini.
    """
    ALTER TABLE trials ADD COLUMN skills_dir TEXT;
    CREATE INDEX trial_runs_by_run ON trial_runs(run_id);
    CREATE INDEX judgments_by_runs ON judgments(with_run, without_run);
    """,
    # v3: causes of HURTS verdicts, cached like judgments (a re-run of an unchanged
    # library asks no model, not even the cause finder).
    """
    CREATE TABLE causes (
        key TEXT PRIMARY KEY, trial TEXT NOT NULL, created_at TEXT NOT NULL, data TEXT NOT NULL
    );
    """,
    # v4: appeals: a revised SKILL.md, its trial and the decision.  The
    # original bytes are kept whole so `appeal undo` can write them back exactly.
    """
    CREATE TABLE appeals (
        id INTEGER PRIMARY KEY AUTOINCREMENT, skill TEXT NOT NULL, model TEXT NOT NULL,
        verdict_id INTEGER NOT NULL, verdict_trial TEXT NOT NULL, skill_md TEXT NOT NULL,
        original_sha256 TEXT NOT NULL, original BLOB NOT NULL, draft_sha256 TEXT NOT NULL,
        draft BLOB NOT NULL, diff TEXT NOT NULL, decision TEXT NOT NULL, reason TEXT NOT NULL,
        draft_trial TEXT, draft_verdict TEXT, status TEXT NOT NULL, created_at TEXT NOT NULL,
        applied_at TEXT, undone_at TEXT, data TEXT NOT NULL
    );
    CREATE INDEX appeals_by_skill ON appeals(skill, model, id);
    """,
    # v5: what the cause finder cost, so spend counts runs, judgments and causes alike.
    """
    ALTER TABLE causes ADD COLUMN cost_usd REAL;
    """,
    # v6: verdicts by what they were decided from (``cache.verdict_key``): a re-run whose
    # outcomes did not change reuses the verdict instead of deciding it again.
    """
    CREATE TABLE decided (
        key TEXT PRIMARY KEY, created_at TEXT NOT NULL, data TEXT NOT NULL
    );
    """,
    # v7: no index of trial_runs by run id.  A cached run keeps the id of the trial that
    # ran it, so each session's marks landed all over that index: with the marks of a
    # 24,000-run session written 500 at a time, every commit rewrote hundreds of its
    # pages, 0.67 s of the session's 0.75 s of mark writes (bench/perf_bench.py, scale).
    # Only ``prune`` asked it (which runs no trial uses); its NOT IN builds that list
    # once, in about 0.1 s per 250,000 marks.
    """
    DROP INDEX IF EXISTS trial_runs_by_run;
    """,
    # v8: runs a session's item ended without a record (it raised, or was skipped before it
    # started: budget, no price).  Early stop waits for the first tasks' runs of a skill;
    # one that will never be recorded must not hold it until its deadline (31 min a task).
    """
    CREATE TABLE ended (
        trial TEXT NOT NULL, suite TEXT NOT NULL, task_id TEXT NOT NULL, arm TEXT NOT NULL,
        rep INTEGER NOT NULL, model TEXT NOT NULL, reason TEXT NOT NULL,
        PRIMARY KEY (trial, suite, task_id, arm, rep, model)
    );
    """,
    # v9: each run's head (``records.RunHead``: where it belongs, how it ended, its outcome,
    # tokens, cost and reach digest) beside its whole record.  A cached session of 2,000
    # skills serves 24,000 runs; decoding each record (its transcript and files) only to
    # count outcomes was most of its time.  Rows written before have none: their record is
    # read instead (``Store._head``).
    """
    ALTER TABLE runs ADD COLUMN head TEXT;
    """,
    # v10: the heads read from indexes that hold them.  ``head`` is the row's last column,
    # after ``data`` (the whole record): SQLite reaches it through the record's overflow
    # pages, so a run of 200 KB cost 50-60 us to serve, its head or not (3,000 heads of a
    # 600 MB store: 0.15-0.19 s; from the index: 0.004 s).  One index serves the look-up
    # by key (``Store._newest``, whose ``runs_by_key`` it replaces), one the trial's runs
    # by id (``Store.trial_heads``).
    """
    CREATE INDEX runs_heads ON runs(cache_key, cacheable, created_at, run_id, head);
    CREATE INDEX runs_head_by_id ON runs(run_id, head);
    DROP INDEX IF EXISTS runs_by_key;
    """,
    # v11: a trial's marks kept in the order of their key alone (WITHOUT ROWID).  A rowid table
    # stored each mark twice, as its row and in the key's index: a cached session of 2,000
    # skills wrote 24,000 of each, and grew the store by 10.1 MB (7.9 MB now); its writes took
    # 0.09 s against 0.06 s.  Every read of it (by trial, in the key's order) reads the key.
    """
    CREATE TABLE trial_runs_v11 (
        trial TEXT NOT NULL, run_id TEXT NOT NULL, skill TEXT NOT NULL, model TEXT NOT NULL,
        suite TEXT NOT NULL, task_id TEXT NOT NULL, arm TEXT NOT NULL, rep INTEGER NOT NULL,
        cached INTEGER NOT NULL, PRIMARY KEY (trial, suite, task_id, arm, rep, model)
    ) WITHOUT ROWID;
    INSERT INTO trial_runs_v11(trial, run_id, skill, model, suite, task_id, arm, rep, cached)
        SELECT trial, run_id, skill, model, suite, task_id, arm, rep, cached FROM trial_runs;
    DROP TABLE trial_runs;
    ALTER TABLE trial_runs_v11 RENAME TO trial_runs;
    """,
]
SCHEMA_VERSION = len(MIGRATIONS)
#: The schema version that added ``runs.head`` (filled for the rows already there: :func:`_fill_heads`).
HEADS_VERSION = 9


def _fill_heads(db: Any) -> None:
    """Give every run already stored its head (``records.RunHead``), in the migration's
    transaction: a store's first session on this version would otherwise decode every
    record it reuses, as before, until it is filled again.  A row that does not decode
    keeps none; reading it says it is damaged, as it did."""
    rows = db.execute("SELECT run_id, data FROM runs WHERE head IS NULL").fetchall()
    heads = []
    for run_id, data in rows:
        try:
            heads.append((valid_text(RunRecord.from_json(data).head().to_text()), run_id))
        except (ValueError, TypeError):
            continue
    db.executemany("UPDATE runs SET head = ? WHERE run_id = ?", heads)
#: What a trial spent on runs, judgments and causes, apart (``Store.spend``).
_SPEND_SQL = "SELECT " + ", ".join(f"(SELECT COALESCE(SUM(cost_usd), 0) FROM {table} WHERE trial = ?)"
                                   for table in ("runs", "judgments", "causes"))
#: A run's use by a trial (``Store.record_run``).
_MARK_SQL = ("INSERT OR REPLACE INTO trial_runs(trial, run_id, skill, model, suite, task_id, arm, "
             "rep, cached) VALUES (?,?,?,?,?,?,?,?,?)")
#: A finished run (``Store.record_run``), its row from :func:`_run_row`.
_RUN_SQL = ("INSERT OR REPLACE INTO runs(run_id, cache_key, trial, skill, suite, task_id, arm, rep, model, "
            "status, outcome, cost_usd, priced, input_tokens, output_tokens, cacheable, created_at, data, head) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)")


def _run_row(record: RunRecord) -> tuple[Any, ...]:
    return (record.run_id, record.cache_key, record.trial, record.skill, record.suite, record.task_id,
            record.arm, record.rep, record.model, record.status,
            None if record.outcome is None else int(record.outcome), record.cost_usd, int(record.priced),
            record.input_tokens, record.output_tokens, int(record.cacheable), utc_now(),
            valid_text(record.to_json()), valid_text(record.head().to_text()))


class StoreError(Exception):
    """The store cannot be used; the message names the file and the fix."""


def damaged(path: Path, detail: str) -> StoreError:
    """The error for a store file whose pages are corrupt (README "Store, cache and budget").

    The court never repairs, rewrites or removes such a file: every other
    trial's data stays in it, and the fix is to move it away.
    """
    return StoreError(
        f"{path} is not a usable skill-court store ({detail}): it is damaged, and nothing "
        f"was written to it. Fix: move it away (mv {path} {path}.damaged): the next "
        "session starts a fresh store in its place, and the moved file keeps every other "
        "trial's data (sqlite3's .recover copies out what is still readable); or pass "
        "--skill-court-store PATH")


#: How many problems ``PRAGMA quick_check`` reports at most (the first one is shown).
_CHECK_ROWS = 5
#: Beside the store (``court.db.checked``): the stat of the file as the last connection that
#: found it sound left it (``Store._left_as_checked``).
CHECKED_SUFFIX = ".checked"


class GuardedConnection:
    """The store's connection: a corrupt page met while reading or writing is a
    :class:`StoreError` naming the file and the fix, never a raw ``sqlite3`` error."""

    def __init__(self, db: sqlite3.Connection, path: Path) -> None:
        self._inner = db
        self._path = path

    def execute(self, sql: str, params: Sequence[Any] = ()) -> GuardedCursor:
        """Run one statement; its rows are read by the caller (a cursor)."""
        try:
            return GuardedCursor(self._inner.execute(sql, params), self._path)
        except sqlite3.DatabaseError as err:
            raise _translate(err, self._path) from err

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run one statement for each of ``rows`` (one call into sqlite, not one per row)."""
        try:
            self._inner.executemany(sql, rows)
        except sqlite3.DatabaseError as err:
            raise _translate(err, self._path) from err

    @property
    def total_changes(self) -> int:
        return self._inner.total_changes

    def close(self) -> None:
        self._inner.close()


class GuardedCursor:
    """A cursor whose reads translate corruption like :class:`GuardedConnection`."""

    def __init__(self, cursor: sqlite3.Cursor, path: Path) -> None:
        self._cursor = cursor
        self._path = path
        self.lastrowid = cursor.lastrowid

    def fetchone(self) -> Any:
        try:
            return self._cursor.fetchone()
        except sqlite3.DatabaseError as err:
            raise _translate(err, self._path) from err

    def fetchall(self) -> list[Any]:
        """Every row at once (sqlite3's own loop: a read of 24,000 rows through
        :meth:`__iter__`'s generator paid a frame per row)."""
        try:
            return self._cursor.fetchall()
        except sqlite3.DatabaseError as err:
            raise _translate(err, self._path) from err

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    def __iter__(self) -> Iterator[Any]:
        try:
            yield from self._cursor
        except sqlite3.DatabaseError as err:
            raise _translate(err, self._path) from err


def _translate(err: sqlite3.DatabaseError, path: Path) -> Exception:
    """Corruption (a plain ``DatabaseError``: "malformed", "not a database") becomes
    :func:`damaged`; other errors (locked, constraint) stay what they are."""
    if type(err) is sqlite3.DatabaseError:
        return damaged(path, str(err))
    return err


class Store(VerdictTables, AppealTable, QuarantineHistoryTable):
    """A connection to the store; cheap to open, one per process."""

    def __init__(self, path: Path, *, readonly: bool = False, check: bool = True, fold: bool = True):
        """Open (making and migrating it when needed) the store at ``path``.

        ``check``: run ``PRAGMA quick_check`` on an existing file first (about
        1.5 s per 100 MB); xdist workers skip it, their controller has run it.
        ``fold``: fold the write-ahead log into the file at :meth:`close`; xdist workers
        leave it to their controller, which closes last (a fold waits for every other
        connection's reads and writes to end: a worker's waited on the controller's
        verdicts and on the other worker's own fold).

        Raises:
            StoreError: the file is not a usable store (damaged, newer schema).
        """
        self.path = Path(path)
        self.readonly = readonly
        self._fold = fold
        self._hold = False
        #: with hold_marks(max_age_s=...): how long a held mark may wait, and since when the oldest has
        self._hold_max_age = float("inf")
        self._held_since = 0.0
        self._marks: list[tuple[Any, ...]] = []
        #: run id -> its head, as :meth:`cached_heads` read it: the verdicts then read the
        #: trial's runs (:meth:`trial_heads`) without decoding them again
        self._heads: dict[str, RunHead] = {}
        existed = False
        try:
            if readonly:
                if not self.path.exists():
                    raise StoreError(f"no store at {self.path}: run pytest --skill-court first "
                                     "or pass --store PATH")
                db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=30,
                                     isolation_level=None, check_same_thread=False)
            else:
                if not self.path.parent.exists():
                    self.path.parent.mkdir(parents=True)
                    # A folder the court made holds only its own data: keep it out of git.
                    (self.path.parent / ".gitignore").write_text(
                        "# made by pytest-skillcourt: its store and reports, not for version control\n*\n",
                        encoding="utf-8")
                existed = self.path.is_file() and self.path.stat().st_size > 0
                db = sqlite3.connect(self.path, timeout=60, isolation_level=None,
                                     check_same_thread=False)
            self._db = GuardedConnection(db, self.path)
            self._db.execute("PRAGMA busy_timeout = 60000")
            #: this connection found the file sound (checked it, or found it as a checked one was
            #: left): its close may say so (``_stamp``)
            self._sound = False
            if check and (readonly or existed):  # before anything writes to it
                if not self._left_as_checked():
                    self._check_integrity()
                self._sound = True
            if not readonly:
                self._db.execute("PRAGMA journal_mode = WAL")
                self._db.execute("PRAGMA synchronous = NORMAL")
            self._migrate()
        except sqlite3.DatabaseError as err:
            raise damaged(self.path, str(err)) from err

    def _run(self, data: str) -> RunRecord:
        """A stored run from its ``data`` column.

        Raises:
            StoreError: the row does not decode (a damaged page's bytes).
        """
        try:
            return RunRecord.from_json(data)
        except (ValueError, TypeError) as err:
            raise damaged(self.path, f"a stored run does not decode: {err}") from err

    def _json(self, data: str) -> Any:
        """A stored ``data`` column, decoded (see :meth:`_run`)."""
        try:
            return json.loads(data)
        except (ValueError, TypeError) as err:
            raise damaged(self.path, f"a stored row does not decode: {err}") from err

    def _check_integrity(self) -> None:
        """``PRAGMA quick_check``: every page's structure, without the slow index
        cross-check of ``integrity_check`` (about a second per 100 MB).

        Raises:
            StoreError: the file is damaged (see :func:`damaged`).
        """
        rows = [str(r[0]) for r in self._db.execute(f"PRAGMA quick_check({_CHECK_ROWS})")]
        if rows != ["ok"]:
            first = rows[0] if rows else "no answer"
            more = f" and {len(rows) - 1} more problem(s)" if len(rows) > 1 else ""
            raise damaged(self.path, f"integrity check: {first}{more}")

    def close(self) -> None:
        """Write the held marks (:meth:`hold_marks`), fold the WAL into the database file
        and close: a copied court.db is then whole (CI artifacts for ``skill-court merge``
        are often just that one file)."""
        if not self.readonly:
            try:
                self.flush_marks()
                if self._fold:
                    self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except (sqlite3.Error, StoreError):  # another process is reading or writing: its
                pass  # close checkpoints; a damaged file was already reported
        self._db.close()
        if self._sound and not self.readonly:
            self._stamp()

    # -- the integrity check, once per change of the file ------------------------------------------

    def _stamp_path(self) -> Path:
        return self.path.with_name(self.path.name + CHECKED_SUFFIX)

    def _wal_written(self) -> bool:
        """Whether the file's write-ahead log holds frames (a connection still open, or one
        that ended without its checkpoint): the file alone is then not the store."""
        try:
            return self.path.with_name(self.path.name + "-wal").stat().st_size > 0
        except OSError:
            return False

    def _stamp(self) -> None:
        """At the close of a connection that found the file sound: note the file's stat as
        it is left (``court.db.checked``), for the next open to skip the check while it is
        unchanged.  Nothing is noted while the log holds frames; an error writing it is
        left unsaid (the next open checks)."""
        try:
            if self._wal_written():
                self._stamp_path().unlink(missing_ok=True)
                return
            write_atomic(self._stamp_path(), json.dumps({"stat": stat_text(self.path.stat())}))
        except OSError:
            pass

    def _left_as_checked(self) -> bool:
        """Whether the file is exactly as a connection that found it sound left it: the same
        stat (size, mtime and ctime in ns, inode, device: a write, a copy or a restored
        mtime changes one) and no frames in its log.  The check then has nothing new to
        read: on a store of real transcripts (gigabytes) it took seconds each session.
        Damage that changes no stat (a failing disk) still surfaces, as SQLite's read
        error, readable (:func:`damaged`)."""
        try:
            stamp = json.loads(self._stamp_path().read_text(encoding="utf-8"))
            now = stat_text(self.path.stat())
        except (OSError, ValueError):
            return False
        return isinstance(stamp, dict) and stamp.get("stat") == now and not self._wal_written()

    @contextmanager
    def _write(self) -> Iterator[GuardedConnection]:
        # BEGIN IMMEDIATE takes the write lock up front: concurrent writers queue
        # on busy_timeout instead of failing half-way through.
        for attempt in range(5):
            try:
                self._db.execute("BEGIN IMMEDIATE")
                break
            except sqlite3.OperationalError as err:
                if "locked" not in str(err) or attempt == 4:
                    raise
                time.sleep(0.2 * (attempt + 1))
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        else:
            self._db.execute("COMMIT")

    def _migrate(self) -> None:
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} has schema version {version}, newer than this pytest-skillcourt "
                f"knows ({SCHEMA_VERSION}); upgrade pytest-skillcourt or use another store")
        if version == SCHEMA_VERSION or self.readonly:
            if self.readonly and version < SCHEMA_VERSION:
                raise StoreError(f"{self.path} has an old schema ({version}); open it once with "
                                 "pytest --skill-court to migrate it")
            return
        with self._write() as db:
            version = db.execute("PRAGMA user_version").fetchone()[0]  # another process may have won
            for i in range(version, SCHEMA_VERSION):
                for statement in MIGRATIONS[i].split(";"):
                    if statement.strip():
                        db.execute(statement)
                if i + 1 == HEADS_VERSION:
                    _fill_heads(db)
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    # -- trials ---------------------------------------------------------------

    def start_trial(self, trial: str, *, rootdir: str, argv: Sequence[str],
                    skills_dir: str | None = None) -> None:
        """Record that session ``trial`` started (its rootdir, argv and library folder)."""
        with self._write() as db:
            db.execute("INSERT OR IGNORE INTO trials(trial, started_at, rootdir, argv, skills_dir) "
                       "VALUES (?,?,?,?,?)",
                       (trial, utc_now(), rootdir, json.dumps(list(argv)), skills_dir))

    def finish_trial(self, trial: str) -> None:
        with self._write_with_marks() as db:
            db.execute("UPDATE trials SET finished_at = ? WHERE trial = ?", (utc_now(), trial))

    def set_trial_library(self, trial: str, skills_dir: str) -> None:
        """Say which library ``trial``'s verdicts are about (an appeal's draft trial ran on a
        temporary copy: its verdicts are about the live library it may be applied to)."""
        with self._write_with_marks() as db:
            db.execute("UPDATE trials SET skills_dir = ? WHERE trial = ?", (skills_dir, trial))

    def trial_info(self, trial: str) -> dict[str, Any] | None:
        """The trials row of ``trial`` (argv decoded), or None."""
        row = self._db.execute(
            "SELECT trial, started_at, finished_at, rootdir, argv, skills_dir FROM trials "
            "WHERE trial = ?", (trial,)).fetchone()
        if row is None:
            return None
        keys = ("trial", "started_at", "finished_at", "rootdir", "argv", "skills_dir")
        info = dict(zip(keys, row))
        try:
            info["argv"] = json.loads(info["argv"] or "[]")
        except ValueError:
            info["argv"] = []
        return info

    # -- runs -----------------------------------------------------------------

    def cached_run(self, cache_key: str) -> RunRecord | None:
        """The newest cacheable run with this key, if any."""
        return self.cached_runs([cache_key]).get(cache_key)

    def cached_runs(self, cache_keys: Sequence[str]) -> dict[str, RunRecord]:
        """The newest cacheable run of each of these keys that has one: one query per 500
        keys, where :meth:`cached_run` for each would be one per run."""
        return {key: self._run(data) for chunk in self._newest(cache_keys, "data") for key, (_, data) in chunk.items()}

    def cached_heads(self, cache_keys: Sequence[str]) -> dict[str, RunHead]:
        """:meth:`cached_runs`, as heads (``records.RunHead``): what a session that reuses
        the runs needs of them, without decoding their records."""
        out: dict[str, RunHead] = {}
        for newest in self._newest(cache_keys, "head"):
            headless: dict[str, str] = {}
            heads = self._heads_of([text for _, text in newest.values()])
            for (key, (run_id, _)), head in zip(newest.items(), heads):
                if head is None:
                    headless[key] = run_id
                else:
                    out[key] = self._heads[run_id] = head
            if headless:
                records = self.runs_by_id(list(headless.values()))
                out.update((key, records[run_id].head()) for key, run_id in headless.items() if run_id in records)
        return out

    def _newest(self, cache_keys: Sequence[str], column: str) -> Iterator[dict[str, tuple[str, Any]]]:
        """For each 500 of these keys (one query each): key -> (run id, ``column``) of its
        newest cacheable run, for the keys that have one."""
        keys = list(dict.fromkeys(cache_keys))
        for i in range(0, len(keys), 500):
            chunk = keys[i:i + 500]
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(
                f"SELECT cache_key, run_id, {column} FROM runs WHERE cache_key IN ({marks}) AND cacheable = 1 "
                "ORDER BY created_at DESC, rowid DESC", chunk).fetchall()
            # the newest of each key: the rows are newest first, so the oldest are written first
            # and the newer of a key written over them
            yield {key: (run_id, value) for key, run_id, value in reversed(rows)}

    def _heads_of(self, texts: list[str | None]) -> list[RunHead | None]:
        """Runs' heads from their ``head`` column; None for one that has none this version
        reads (written before heads were kept): then its record is read.

        Raises:
            StoreError: a text does not decode (a damaged page's bytes).
        """
        try:
            return RunHead.from_texts(texts)
        except (ValueError, TypeError) as err:
            raise damaged(self.path, f"a stored run's head does not decode: {err}") from err

    #: Marks of cached runs held before they are written together (:meth:`record_run`).
    MARK_BATCH = 500

    def hold_marks(self, *, max_age_s: float | None = None) -> None:
        """From now on, keep the marks of runs reused from the cache (``trial_runs`` rows)
        and write them together: every :data:`MARK_BATCH`, with the next fresh run,
        before anything of this connection reads ``trial_runs``, and at
        :meth:`flush_marks` and :meth:`close`.  With ``max_age_s``, also with the first
        mark recorded that long after the oldest held one: for an xdist worker, whose
        marks another worker's early stop polls for (the worker also flushes before a
        fresh run and when its session ends; ``session.py``).  One write transaction
        per cached run was about a third of a cached ``-n 2`` session: the workers
        queued on each other's write lock.  A fresh run is still written at once, in its own
        transaction, so a crash never loses a run; it may lose the marks of cached
        runs, whose records are in the store already (README "Store, cache and budget")."""
        self._hold = True
        if max_age_s is not None:
            self._hold_max_age = max_age_s

    def flush_marks(self) -> None:
        """Write the held marks of cached runs, in one transaction."""
        if self._marks:
            with self._write_with_marks():
                pass

    @contextmanager
    def _write_with_marks(self) -> Iterator[GuardedConnection]:
        """:meth:`_write`, whose transaction also writes the held marks (kept when it rolls back)."""
        with self._write() as db:
            marks = list(self._marks)
            if marks:
                db.executemany(_MARK_SQL, marks)
            yield db
        del self._marks[:len(marks)]

    def record_run(self, record: RunRecord | RunHead, *, trial: str, cached: bool) -> None:
        """Store a finished run (unless it came from the cache: then its head will do) and
        mark it used by ``trial``."""
        mark = (trial, record.run_id, record.skill, record.model, record.suite, record.task_id,
                record.arm, record.rep, int(cached))
        if cached and self._hold:
            now = time.monotonic()
            if not self._marks:
                self._held_since = now
            self._marks.append(mark)
            if len(self._marks) >= self.MARK_BATCH or now - self._held_since >= self._hold_max_age:
                self.flush_marks()
            return
        with self._write_with_marks() as db:
            if not cached:
                if not isinstance(record, RunRecord):
                    raise TypeError(f"a fresh run is stored whole, not as its head: {record.run_id}")
                self._heads.pop(record.run_id, None)
                db.execute(_RUN_SQL, _run_row(record))
            db.execute(_MARK_SQL, mark)

    def record_runs(self, records: Sequence[RunRecord], *, trial: str) -> None:
        """:meth:`record_run` of each of these fresh runs, in one transaction (a bench fills
        a store of tens of thousands of runs: ``bench/perf_bench.py``)."""
        with self._write_with_marks() as db:
            for record in records:
                self._heads.pop(record.run_id, None)
            db.executemany(_RUN_SQL, [_run_row(record) for record in records])
            db.executemany(_MARK_SQL, [(trial, r.run_id, r.skill, r.model, r.suite, r.task_id, r.arm, r.rep, 0)
                                       for r in records])

    def trial_runs(self, trial: str, *, suite: str | None = None, model: str | None = None) -> list[TrialRun]:
        """The runs ``trial`` used (of one suite, of one model), in the order of the table's key."""
        self.flush_marks()
        sql = ("SELECT r.data, t.cached FROM trial_runs t JOIN runs r ON r.run_id = t.run_id "
               "WHERE t.trial = ?")
        params: list[Any] = [trial]
        if suite is not None:
            sql += " AND t.suite = ?"
            params.append(suite)
        if model is not None:
            sql += " AND t.model = ?"
            params.append(model)
        sql += " ORDER BY t.suite, t.task_id, t.arm, t.rep, t.model"  # the key's order: no sort
        return [TrialRun(self._run(d), bool(c)) for d, c in self._db.execute(sql, params)]

    def trial_heads(self, trial: str, *, suite: str | None = None, model: str | None = None) -> list[TrialHead]:
        """:meth:`trial_runs` as heads (``records.RunHead``): the verdicts, the early stop and
        the session's totals count outcomes and tokens, and need no transcript."""
        self.flush_marks()
        where, params = "t.trial = ?", [trial]
        if suite is not None:
            where += " AND t.suite = ?"
            params.append(suite)
        if model is not None:
            where += " AND t.model = ?"
            params.append(model)
        order = " ORDER BY t.suite, t.task_id, t.arm, t.rep, t.model"  # the key's order: no sort
        known = self._heads
        marks = self._db.execute(f"SELECT t.run_id, t.cached FROM trial_runs t WHERE {where}{order}",
                                 params).fetchall()
        if any(run_id not in known for run_id, _ in marks):  # read the heads this connection has not
            # the heads from the index that holds them (v10), not through each record's pages
            rows = self._db.execute(f"SELECT r.run_id, r.head FROM trial_runs t "
                                    f"JOIN runs r INDEXED BY runs_head_by_id ON r.run_id = t.run_id "
                                    f"WHERE {where}", params)
            unknown = [(run_id, text) for run_id, text in rows if run_id not in known]
            headless = []
            for (run_id, _), head in zip(unknown, self._heads_of([text for _, text in unknown])):
                if head is None:
                    headless.append(run_id)
                else:
                    known[run_id] = head
            for run_id, record in self.runs_by_id(headless).items():
                known[run_id] = record.head()
        return [TrialHead(known[run_id], bool(cached)) for run_id, cached in marks if run_id in known]

    def trial_heads_by_target(self, trial: str) -> dict[tuple[str, str], list[TrialHead]]:
        """:meth:`trial_heads` by (suite, model): one query, where one per verdict would do."""
        out: dict[tuple[str, str], list[TrialHead]] = {}
        for th in self.trial_heads(trial):
            out.setdefault((th.head.suite, th.head.model), []).append(th)
        return out

    def record_ended(self, *, trial: str, suite: str, task_id: str, arm: str, rep: int, model: str,
                     reason: str) -> None:
        """Note that ``trial``'s run of this task, arm, rep and model ended without a record
        (it raised, or was skipped before it started): nobody should wait for it."""
        with self._write() as db:
            db.execute("INSERT OR REPLACE INTO ended(trial, suite, task_id, arm, rep, model, reason) "
                       "VALUES (?,?,?,?,?,?,?)", (trial, suite, task_id, arm, rep, model, valid_text(reason[:500])))

    def ended_runs(self, trial: str, *, suite: str, model: str) -> set[tuple[str, str, int]]:
        """(task id, arm, rep) of ``trial``'s runs of one suite and model that ended without
        a record (:meth:`record_ended`)."""
        rows = self._db.execute("SELECT task_id, arm, rep FROM ended WHERE trial = ? AND suite = ? AND model = ?",
                                (trial, suite, model))
        return {(task, arm, int(rep)) for task, arm, rep in rows}

    def trial_runs_by_target(self, trial: str) -> dict[tuple[str, str], list[TrialRun]]:
        """The runs ``trial`` used, by (suite, model): one query where :meth:`trial_runs`
        per target would be one per verdict."""
        out: dict[tuple[str, str], list[TrialRun]] = {}
        for tr in self.trial_runs(trial):
            out.setdefault((tr.record.suite, tr.record.model), []).append(tr)
        return out

    def runs_by_id(self, run_ids: Sequence[str]) -> dict[str, RunRecord]:
        out: dict[str, RunRecord] = {}
        ids = list(run_ids)
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            marks = ",".join("?" * len(chunk))
            for (data,) in self._db.execute(f"SELECT data FROM runs WHERE run_id IN ({marks})", chunk):
                rec = self._run(data)
                out[rec.run_id] = rec
        return out

    def spend(self, trial: str) -> float:
        """USD this session spent: its fresh runs, judgments and causes (the one definition
        of spend: the budget, the terminal, JSON and HTML all show this)."""
        row = self._db.execute(_SPEND_SQL, (trial, trial, trial)).fetchone()  # one query per call:
        total = 0.0  # every run item asks (the budget)
        for part in row:
            total += float(part)
        return total

    def unpriced_models(self, trial: str) -> list[str]:
        """Models whose fresh runs in this session used tokens but carry no price."""
        rows = self._db.execute(
            "SELECT DISTINCT model FROM runs WHERE trial = ? AND priced = 0 "
            "AND input_tokens + output_tokens > 0", (trial,))
        return [r[0] for r in rows]

    # -- pruning --------------------------------------------------------------

    def prune(self, *, keep: int | None = None, before: str | None = None,
              protect: dict[str, list[str]] | None = None, dry_run: bool = False) -> Pruned:
        """Remove old trials (``skill-court prune``, README "Store, cache and budget").

        A trial goes when it is not among the ``keep`` newest and (when given) it
        started before the day ``before`` (``YYYY-MM-DD``); with only one of the
        two, that one decides.  Never removed: the trial of the newest verdict of
        each skill (and suite) on each model, a trial an appeal was made against or
        tried its draft in, and those in ``protect`` (trial -> why, e.g. a
        quarantine entry).  With a trial go its verdicts and its list of runs;
        runs no kept trial lists, and the judgments of those runs, go too (causes
        and the quarantine history stay: small, and the history is a record).  One
        transaction, then ``VACUUM`` so the file shrinks.
        """
        if keep is None and before is None:
            raise ValueError("prune: give keep or before")
        # newest first: started_at is to the second, and two sessions may start in
        # the same one (a trial id's random tail does not order them); the row
        # recorded later is the later start
        trials = [(r[0], r[1]) for r in self._db.execute(
            "SELECT trial, started_at FROM trials ORDER BY started_at DESC, rowid DESC")]
        why: dict[str, list[str]] = {t: list(r) for t, r in (protect or {}).items()}
        for by in ("skill", "suite"):
            for v in self.latest_verdicts(by=by):
                why.setdefault(v["trial"], [])
                reason = f"newest verdict of {v['skill']} on {v['model']}"
                if reason not in why[v["trial"]]:
                    why[v["trial"]].append(reason)
        for a in self.all_appeals():
            why.setdefault(a["verdict_trial"], []).append(f"appeal {a['id']} of {a['skill']} (its verdict)")
            if a["draft_trial"]:
                why.setdefault(a["draft_trial"], []).append(f"appeal {a['id']} of {a['skill']} (its draft's trial)")
        old = {t for i, (t, started) in enumerate(trials)
               if (keep is None or i >= keep) and (before is None or (started or "") < before)}
        oldest_first = [t for t, _ in reversed(trials)]
        removed = [t for t in oldest_first if t in old and t not in why]
        kept = {t: why[t] for t in oldest_first if t in old and t in why}
        size = self.path.stat().st_size if self.path.exists() else 0
        result = Pruned(removed=removed, protected=kept, bytes_before=size, bytes_after=size)
        if dry_run or not removed:
            return result
        marks = ",".join("?" * len(removed))
        with self._write_with_marks() as db:
            for table in ("trial_runs", "ended", "verdicts", "trials"):
                result.rows[table] = db.execute(f"DELETE FROM {table} WHERE trial IN ({marks})", removed).rowcount
            gone = "run_id NOT IN (SELECT run_id FROM trial_runs)"
            result.rows["judgments"] = db.execute(
                f"DELETE FROM judgments WHERE with_run IN (SELECT run_id FROM runs WHERE {gone}) "
                f"OR without_run IN (SELECT run_id FROM runs WHERE {gone})").rowcount
            result.rows["runs"] = db.execute(f"DELETE FROM runs WHERE {gone}").rowcount
            # verdicts by their evidence: a cache, decided again by the next session that needs one
            result.rows["decided"] = db.execute("DELETE FROM decided").rowcount
        self._db.execute("VACUUM")
        self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        result.bytes_after = self.path.stat().st_size
        return result


@dataclass
class Pruned:
    """What :meth:`Store.prune` removed (or, with ``dry_run``, would remove)."""

    removed: list[str]
    #: old trials kept, each with why
    protected: dict[str, list[str]]
    bytes_before: int
    bytes_after: int
    #: table -> rows deleted
    rows: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"removed": self.removed, "protected": self.protected, "rows": self.rows,
                "bytes_before": self.bytes_before, "bytes_after": self.bytes_after}
