"""``skill-court report``: the latest verdict per skill and model, read from the store.

For each verdict it says whether the skill changed since (its folder hashed
again and compared with the hash the verdict was made on), where the
outcomes came from (checks or the judge), and for a HURTS the cause and the
SKILL.md line.  The library folder is ``--skills`` when given, else the one
the verdict's session recorded, else ``skills`` under that session's rootdir.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

#: ``changed`` values.
UNCHANGED = "no"
CHANGED = "yes"
MISSING = "missing"  # the skill is no longer in the library
UNKNOWN = "unknown"  # the library cannot be read


@dataclass(frozen=True)
class ReportRow:
    """One line of the report: the newest verdict of one skill on one model."""

    skill: str
    model: str
    suite: str
    verdict: str  # HELPS, HURTS, NEUTRAL, INCONCLUSIVE (+ " (cost)" for a token verdict)
    line: str
    made_at: str
    trial: str
    changed: str  # UNCHANGED, CHANGED, MISSING or UNKNOWN
    changed_detail: str
    from_check: int
    from_judge: int
    cached_runs: int
    fresh_runs: int
    spend_usd: float
    cause: str | None
    skill_line: str | None
    #: what would decide it, when it did not (e.g. a suite too small to ever decide)
    hint: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _library_dir(store: Any, trial: str, skills: Path | None, cache: dict[str, Path]) -> Path:
    if skills is not None:
        return skills
    if trial not in cache:
        info = store.trial_info(trial) or {}
        if info.get("skills_dir"):
            cache[trial] = Path(info["skills_dir"])
        else:
            cache[trial] = Path(info.get("rootdir") or ".") / "skills"
    return cache[trial]


def _hashes(folder: Path, cache: dict[Path, Any]) -> Any:
    """skill name -> hash for the library at ``folder``, or the error reading it."""
    from pytest_skillcourt.core.skills import load_library

    if folder not in cache:
        try:
            lib = load_library(folder)
            cache[folder] = {name: lib.get(name).hash for name in lib.names()}  # type: ignore[union-attr]
        except Exception as err:  # shown as "unknown", the report still comes
            cache[folder] = err
    return cache[folder]


def report_rows(store: Any, *, skills: Path | None = None, model: str | None = None,
                skill: str | None = None) -> list[ReportRow]:
    """The newest verdict per (skill, model) in ``store``, optionally for one model or skill."""
    from pytest_skillcourt.core.quarantine_file import model_key

    dirs: dict[str, Path] = {}
    libraries: dict[Path, Any] = {}
    out: list[ReportRow] = []
    for row in store.latest_verdicts():
        if model is not None and model_key(row["model"]) != model_key(model):
            continue
        if skill is not None and row["skill"] != skill:
            continue
        data = row["data"]
        v = data.get("verdict") or {}
        folder = _library_dir(store, row["trial"], skills, dirs)
        hashes = _hashes(folder, libraries)
        if isinstance(hashes, Exception):
            changed, detail = UNKNOWN, f"library {folder} unreadable: {hashes}"
        elif row["skill"] not in hashes:
            changed, detail = MISSING, f"no skill {row['skill']!r} in {folder}"
        elif hashes[row["skill"]] != row["skill_hash"]:
            changed, detail = CHANGED, f"{folder / row['skill']} differs from the tried version"
        else:
            changed, detail = UNCHANGED, f"same bytes as tried ({folder / row['skill']})"
        cause = data.get("cause") or {}
        out.append(ReportRow(
            skill=row["skill"], model=row["model"], suite=row["suite"],
            verdict=row["kind"] + (" (cost)" if v.get("basis") == "tokens" else ""),
            line=str(v.get("line", "")), made_at=row["created_at"], trial=row["trial"],
            changed=changed, changed_detail=detail,
            from_check=int(v.get("n_check", 0)), from_judge=int(v.get("n_judge", 0)),
            cached_runs=int(data.get("cached_runs", 0)), fresh_runs=int(data.get("fresh_runs", 0)),
            spend_usd=float(data.get("spend_usd", 0.0)),
            cause=cause.get("cause"), skill_line=cause.get("line"), hint=v.get("hint") or None,
        ))
    return out


def format_rows(rows: list[ReportRow]) -> list[str]:
    """The report as text lines: a table, then the verdict line, cause and skill line of each."""
    from pytest_skillcourt.report.terminal import format_table

    table = [["skill", "model", "verdict", "changed since", "check/judge", "cached", "spend", "made"]]
    for r in rows:
        table.append([r.skill, r.model, r.verdict, r.changed, f"{r.from_check}/{r.from_judge}",
                      f"{r.cached_runs}/{r.cached_runs + r.fresh_runs}", f"${r.spend_usd:.4f}",
                      r.made_at])
    lines = format_table(table)
    for r in rows:
        lines.append("")
        lines.append(f"{r.skill} on {r.model}: {r.verdict}: {r.line}")
        if r.cause:
            lines.append(f"  cause: {r.cause}")
        if r.skill_line:
            lines.append(f"  skill line: {r.skill_line}")
        if r.hint:
            lines.append(f"  hint: {r.hint}")
        if r.changed != UNCHANGED:
            lines.append(f"  changed since: {r.changed} ({r.changed_detail}); run pytest --skill-court "
                         "again for a verdict on the current version")
    return lines
