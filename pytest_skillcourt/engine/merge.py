"""``skill-court merge``: join the stores of CI shards and recompute verdicts (README "CI", shards).

Each shard (``pytest --skill-court --skill-court-shard I/N``) writes its own
store.  Merging copies every row of every input into a new store (runs,
trial runs, judgments, verdicts, quarantine history, trials) without
duplicates, then decides each (suite, model) again from the recorded runs of
the session that made its newest verdict, with the same functions the plugin
uses (``court.pair_outcomes`` + stored judgments + ``verdict.decide``), and
records those verdicts under one new *merge trial*.  The verdicts therefore
equal those of one unsharded session on the same recorded runs.

What is carried over rather than recomputed: the cause of a HURTS (finding it
asks a model; merging never calls one) when the recomputed verdict has the
same kind and basis as the shard's.  The early-stop tasks are the shard's own
(``first_tasks`` in its verdict data; older verdicts without it fall back to
the suite file's first four tasks), and early stop is off when the shard ran
with ``--skill-court-no-early-stop``.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from pytest_skillcourt.core.clock import new_trial_id, utc_now
from pytest_skillcourt.core.records import RunRecord
from pytest_skillcourt.stats.verdict import EARLY_STOP_TASKS, VerdictKind, decide
from pytest_skillcourt.core.store import GuardedConnection, Store, StoreError
from pytest_skillcourt.core.trial import Judgment, group_pairs, pair_outcomes



class MergeError(Exception):
    """The merge cannot be done; the message names the file and the fix."""


@dataclass
class MergedVerdict:
    """One recomputed verdict of the merge trial."""

    skill: str
    model: str
    suite: str
    source_trial: str
    verdict: Any  # verdict.Verdict
    data: dict[str, Any]


@dataclass
class MergeResult:
    """What a merge did."""

    output: Path
    trial: str
    inputs: list[Path]
    copied: dict[str, int] = field(default_factory=dict)
    verdicts: list[MergedVerdict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


#: (table, columns, conflict clause). Tables with a natural key use it; verdicts
#: and quarantine history (autoincrement ids) are deduplicated on their content.
_KEYED = [
    ("trials", "trial, started_at, finished_at, rootdir, argv, skills_dir"),
    ("runs", "run_id, cache_key, trial, skill, suite, task_id, arm, rep, model, status, outcome, "
             "cost_usd, priced, input_tokens, output_tokens, cacheable, created_at, data, head"),
    ("trial_runs", "trial, run_id, skill, model, suite, task_id, arm, rep, cached"),
]
_CAUSE_COLS = "key, trial, created_at, data, cost_usd"
_JUDGMENT_COLS = ("key, trial, with_run, without_run, winner, input_tokens, output_tokens, cost_usd, "
                  "created_at, data")
_CONTENT = [
    ("verdicts", "trial, skill, model, suite, skill_hash, suite_hash, kind, created_at, data"),
    ("quarantine_history", "at, action, skill, model, trial, data"),
    # verdict_id points into the shard's own verdicts table; verdict_trial stays exact
    ("appeals", "skill, model, verdict_id, verdict_trial, skill_md, original_sha256, original, "
                "draft_sha256, draft, diff, decision, reason, draft_trial, draft_verdict, status, "
                "created_at, applied_at, undone_at, data"),
]


def _copy(db: GuardedConnection, alias: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for table, cols in _KEYED:
        before = db.total_changes
        db.execute(f"INSERT OR IGNORE INTO {table}({cols}) SELECT {cols} FROM {alias}.{table}")
        counts[table] = db.total_changes - before
    before = db.total_changes
    # A judgment with a winner wins over one without (a judge that failed in one shard).
    db.execute(
        f"INSERT INTO judgments({_JUDGMENT_COLS}) SELECT {_JUDGMENT_COLS} FROM {alias}.judgments "
        "WHERE true ON CONFLICT(key) DO UPDATE SET winner = excluded.winner, data = excluded.data, "
        "created_at = excluded.created_at WHERE judgments.winner IS NULL AND excluded.winner IS NOT NULL")
    counts["judgments"] = db.total_changes - before
    before = db.total_changes
    # Likewise a cause found wins over a failed attempt at it (kept for its cost).
    db.execute(
        f"INSERT INTO causes({_CAUSE_COLS}) SELECT {_CAUSE_COLS} FROM {alias}.causes WHERE true "
        "ON CONFLICT(key) DO UPDATE SET trial = excluded.trial, data = excluded.data, "
        "created_at = excluded.created_at, cost_usd = excluded.cost_usd "
        "WHERE json_extract(causes.data, '$.cause') IS NULL AND json_extract(excluded.data, '$.cause') IS NOT NULL")
    counts["causes"] = db.total_changes - before
    for table, cols in _CONTENT:
        names = [c.strip() for c in cols.split(",")]
        same = " AND ".join(f"t.{c} IS s.{c}" for c in names)
        before = db.total_changes
        db.execute(f"INSERT INTO {table}({cols}) SELECT {', '.join('s.' + c for c in names)} "
                   f"FROM {alias}.{table} s WHERE NOT EXISTS (SELECT 1 FROM {table} t WHERE {same}) "
                   "ORDER BY s.id")
        counts[table] = db.total_changes - before
    return counts


def _first_tasks(source: dict[str, Any], info: dict[str, Any] | None, warnings: list[str]) -> tuple[str, ...] | None:
    """The task order the shard's session decided by (the sequential rule's, stored as
    ``task_order``; for verdicts made before it was stored, the seed's first four tasks),
    or None when early stop was off."""
    argv = (info or {}).get("argv") or []
    if "--skill-court-no-early-stop" in argv:
        return None
    order = source["data"].get("task_order")
    if order:
        return tuple(str(t) for t in order)
    first = source["data"].get("first_tasks")
    if first is None:
        # Verdicts written before first_tasks was stored: the suite's first four tasks.
        from pytest_skillcourt.core.suite import load_suite

        rootdir = Path((info or {}).get("rootdir") or ".")
        try:
            suite = load_suite(rootdir / source["suite"], None)
            first = [t.id for t in suite.tasks][:EARLY_STOP_TASKS]
        except Exception as err:  # the verdict is still recomputed, without early stop
            warnings.append(f"{source['suite']}: early-stop tasks unknown ({err}); decided "
                            "without early stop")
            return None
    return tuple(first) if len(first) == EARLY_STOP_TASKS else None


def recompute(store: Store, source: dict[str, Any], warnings: list[str]) -> tuple[Any, list[dict[str, Any]]]:
    """Decide the verdict of ``source``'s (suite, model) again from its session's recorded runs.

    Returns (Verdict, judgments used as dicts)."""
    runs = [tr.record for tr in store.trial_runs(source["trial"], suite=source["suite"],
                                                 model=source["model"])]
    pairs = group_pairs(runs, lambda w, wo: _judgment(store, w, wo))
    early = _first_tasks(source, store.trial_info(source["trial"]), warnings)
    verdict = decide(pair_outcomes(pairs), early_stop_tasks=early)
    used = [{"task": p.task_id, "rep": p.rep, **p.judgment} for p in pairs if p.judgment is not None]
    return verdict, used


def _judgment(store: Store, with_run: RunRecord, without_run: RunRecord) -> dict[str, Any] | None:
    """The stored judgment of a pair, as ``Judgment.to_dict()`` (checked), or None."""
    stored = store.judgment_for_runs(with_run.run_id, without_run.run_id)
    return None if stored is None else Judgment.from_dict(stored).to_dict()


def merge_stores(inputs: Sequence[Path], output: Path, *, force: bool = False) -> MergeResult:
    """Join the shard stores ``inputs`` into a new store at ``output`` and recompute verdicts.

    Raises:
        MergeError: an input is missing or not a store, ``output`` exists
            without ``force``, or ``output`` is one of the inputs.
    """
    inputs = [Path(p) for p in inputs]
    output = Path(output)
    if not inputs:
        raise MergeError("merge: name at least one shard store (skill-court merge A.db B.db -o OUT.db)")
    for path in inputs:
        if not path.is_file():
            raise MergeError(f"merge: {path}: no such store; pass the court.db each shard wrote "
                             "(--skill-court-store)")
        if output.exists() and path.resolve() == output.resolve():
            raise MergeError(f"merge: the output {output} is also an input; write to a new file")
        try:
            Store(path, readonly=True).close()
        except StoreError as err:
            raise MergeError(f"merge: {err}") from None
    if output.exists():
        if not force:
            raise MergeError(f"merge: {output} exists; pass --force to replace it, or choose another -o")
        for suffix in ("", "-wal", "-shm"):
            Path(str(output) + suffix).unlink(missing_ok=True)
    trial = new_trial_id("merge-")
    result = MergeResult(output=output, trial=trial, inputs=inputs)
    tmp = output.with_name(output.name + f".{uuid.uuid4().hex[:8]}.tmp")
    store = Store(tmp)
    try:
        db = store._db
        sources: list[dict[str, Any]] = []
        for i, path in enumerate(inputs):
            alias = f"shard{i}"
            db.execute(f"ATTACH DATABASE ? AS {alias}", (str(path),))
            try:
                with store._write():
                    counts = _copy(db, alias)
            finally:
                db.execute(f"DETACH DATABASE {alias}")
            for table, n in counts.items():
                result.copied[table] = result.copied.get(table, 0) + n
        # The newest verdict of each (suite, model) names the session whose runs decide it
        # (a shard started from a copy of an older store also holds that store's verdicts).
        newest: dict[tuple[str, str], dict[str, Any]] = {}
        for row in store.all_verdicts():
            if not row["trial"].startswith("merge-"):
                newest[(row["suite"], row["model"])] = row
        sources = [newest[k] for k in sorted(newest)]
        store.start_trial(trial, rootdir=_common_rootdir(store, sources),
                          argv=["skill-court", "merge", *map(str, inputs)])
        for source in sources:
            verdict, used = recompute(store, source, result.warnings)
            data = _verdict_data(store, source, verdict, used)
            with store._write() as w:
                for tr in store.trial_runs(source["trial"], suite=source["suite"], model=source["model"]):
                    rec = tr.record
                    w.execute("INSERT OR IGNORE INTO trial_runs(trial, run_id, skill, model, suite, "
                              "task_id, arm, rep, cached) VALUES (?,?,?,?,?,?,?,?,?)",
                              (trial, rec.run_id, rec.skill, rec.model, rec.suite, rec.task_id,
                               rec.arm, rec.rep, int(tr.cached)))
            store.record_verdict(trial=trial, skill=source["skill"], model=source["model"],
                                 suite=source["suite"], skill_hash=source["skill_hash"],
                                 suite_hash=source["suite_hash"], kind=verdict.kind.value, data=data)
            result.verdicts.append(MergedVerdict(source["skill"], source["model"], source["suite"],
                                                 source["trial"], verdict, data))
        store.finish_trial(trial)
        store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except BaseException:
        store.close()
        for suffix in ("", "-wal", "-shm"):
            Path(str(tmp) + suffix).unlink(missing_ok=True)
        raise
    store.close()
    # Renamed into place only when complete: a failed merge leaves no half store at -o.
    for suffix in ("-wal", "-shm"):
        Path(str(tmp) + suffix).unlink(missing_ok=True)
    tmp.replace(output)
    result.verdicts.sort(key=lambda v: (v.skill, v.model, v.suite))
    return result


def _common_rootdir(store: Store, sources: list[dict[str, Any]]) -> str:
    roots = {(store.trial_info(s["trial"]) or {}).get("rootdir") or "" for s in sources}
    return roots.pop() if len(roots) == 1 else ""


def _verdict_data(store: Store, source: dict[str, Any], verdict: Any, used: list[dict[str, Any]]) -> dict[str, Any]:
    old = source["data"]
    same = (old.get("verdict") or {}).get("kind") == verdict.kind.value and (
        old.get("verdict") or {}).get("basis") == verdict.basis
    runs = store.trial_runs(source["trial"], suite=source["suite"], model=source["model"])
    cached = sum(1 for r in runs if r.cached)
    return {
        "skill": source["skill"], "model": source["model"], "suite": source["suite"],
        "nodeid": old.get("nodeid"), "skill_hash": source["skill_hash"],
        "suite_hash": source["suite_hash"], "verdict": verdict.to_dict(),
        "cached_runs": cached, "fresh_runs": len(runs) - cached,
        "spend_usd": round(sum(r.record.cost_usd or 0.0 for r in runs
                               if r.record.trial == source["trial"]), 6),
        "failed": verdict.kind is VerdictKind.HURTS if not same else bool(old.get("failed")),
        "cause": old.get("cause") if same else None, "judgments": used,
        "first_tasks": old.get("first_tasks"), "task_order": old.get("task_order"),
        "merged_from": source["trial"],
        "made_at": utc_now(),
    }


def fingerprint(verdict_dict: dict[str, Any]) -> str:
    """A short digest of a verdict's evidence and result (to compare two stores)."""
    import json

    return hashlib.sha256(json.dumps(verdict_dict, sort_keys=True).encode()).hexdigest()[:12]
