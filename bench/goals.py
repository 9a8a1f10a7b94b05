"""Every goal of one ``bash bench/run_all.sh``, in one table: read from what the benches
printed (their log), each row with the bench it came from, its goal, what was measured and
whether it was met, under the machine line.

    python3 bench/goals.py LOG        (run_all.sh calls it on its own log at the end)

Exits 1 when a goal row says it was not met, 2 when the log holds no goal at all (a bench
that printed nothing measured nothing: never a green table of nothing).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

#: A markdown table's header that carries goals: its columns named, in any order.
_GOAL_COLUMNS = ("goal", "met")
#: What a met cell says, and what a cell that holds no goal says (reference rows).
_MET = {"yes": True, "met": True, "no": False}
_NO_GOAL = {"-", "reference", ""}

_LIFECYCLE = re.compile(r"ratio lifecycle / floor: (?P<ratio>[0-9.]+)x \(goal <= (?P<goal>[0-9.]+)x\)")
_RERUN = re.compile(r"^(?P<what>re-run / first) = (?P<pct>[0-9.]+)% \((?P<rest>[^;]*); goal <= (?P<goal>[0-9.]+)%\)")
_SEQUENTIAL = re.compile(r"^Goal: (?P<goal>.+?): (?P<met>met|no) \((?P<measured>.+)\)$")
_SECTION = re.compile(r"^(?P<name>[a-z][a-z ]*) \((?P<seconds>[0-9]+) s\)$")  # perf_bench's "scale (371 s)"


@dataclass(frozen=True)
class Goal:
    """One goal row: which bench, the row's name, the goal, the measured text, met or not."""

    bench: str
    row: str
    goal: str
    measured: str
    met: bool


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def goals(text: str) -> tuple[str | None, list[Goal]]:
    """The machine line (perf_bench's ``machine: ...``) and every goal row of ``text``."""
    machine = None
    found: list[Goal] = []
    bench = "perf_bench"
    header: list[str] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("machine:") and machine is None:
            machine = line[len("machine:"):].strip()
        section = _SECTION.match(line)
        if section:
            bench = f"perf_bench {section['name']}"
        if line.startswith("engine:") or "docker backend lifecycle" in line:
            bench = "sandbox_bench"
        if line.startswith("|") and line.endswith("|"):
            cells = _cells(line)
            lowered = [c.lower() for c in cells]
            if all(col in lowered for col in _GOAL_COLUMNS):
                header = lowered
                continue
            if header is None or set(line) <= set("|-: "):
                continue
            if len(cells) != len(header):
                header = None
                continue
            row = dict(zip(header, cells))
            met = _MET.get(row["met"].lower())
            if met is None or row["goal"].lower() in _NO_GOAL:
                continue
            name = row.get("benchmark") or row.get("row") or cells[0]
            found.append(Goal(bench, name, row["goal"], row.get("measured", ""), met))
            continue
        header = None
        match = _LIFECYCLE.search(line)
        if match:
            found.append(Goal("sandbox_bench", "sandbox lifecycle against docker run + 3 docker exec",
                              f"<= {match['goal']}x", f"{match['ratio']}x",
                              float(match["ratio"]) <= float(match["goal"])))
        match = _RERUN.match(line)
        if match:
            found.append(Goal("cache_bench", "cached re-run against the first run", f"<= {match['goal']}%",
                              f"{match['pct']}% ({match['rest']})", float(match["pct"]) <= float(match["goal"])))
        match = _SEQUENTIAL.match(line)
        if match:
            found.append(Goal("sequential", "runs per decided verdict", match["goal"], match["measured"],
                              match["met"] == "met"))
    return machine, found


def table(machine: str | None, rows: list[Goal]) -> str:
    """The goals as a markdown table under the machine line."""
    out = [f"machine: {machine or 'not printed by perf_bench'}", "",
           "| bench | row | goal | measured | met |", "|---|---|---|---|---|"]
    for g in rows:
        out.append(f"| {g.bench} | {g.row} | {g.goal} | {g.measured} | {'yes' if g.met else 'no'} |")
    met = sum(g.met for g in rows)
    out += ["", f"{met} of {len(rows)} goals met"]
    return "\n".join(out)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python3 bench/goals.py LOG   (the output of bash bench/run_all.sh)", file=sys.stderr)
        return 2
    path = Path(argv[0])
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as err:
        print(f"bench/goals.py: cannot read {path}: {err.strerror or err}", file=sys.stderr)
        return 2
    machine, rows = goals(text)
    if not rows:
        print(f"bench/goals.py: {path} holds no goal row: did the benches run? (see the log above)",
              file=sys.stderr)
        return 2
    print(table(machine, rows))
    return 0 if all(g.met for g in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
