"""The court's data in pytest's JUnit file, through pytest's own junitxml objects.

README "CI" says what a dashboard shows.  By default the file stays valid
against the common xunit2 schema (pytest's default ``junit_family``): each run
and verdict item carries its data as ``name: value`` lines in its
``<system-out>`` (a value's further lines are indented by four spaces), and
the trial id is a suite-level property.  With ``--skill-court-junit-properties``
(ini ``skill_court_junit_properties``; needs ``junit_family = xunit1``, the
family whose testcases may hold ``<properties>``) the same data are
per-testcase ``<property>`` elements instead.

A run item's data are its typed summary (``runs.RunSummary``, ``runs.BatchSummary``)
as ``name: value`` strings (:func:`item_properties`): its report's ``user_properties``, made
once where the report is made, the one place they become strings.

Nothing rewrites the file pytest wrote: :class:`JunitRunData` is a plugin on
the controller that hands the data to junitxml's node reporters while the
reports pass, and :func:`add_judgments` adds each judged pair's judgment to
the testcases of its two runs in pytest's ``LogXML`` after the runs and
before ``pytest_sessionfinish`` writes the file (check-less pairs are judged
then, when junitxml has already closed the run items).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Generator, Iterable, Mapping, Sequence
from typing import Any

import pytest
from _pytest.junitxml import LogXML, bin_xml_escape, xml_key

from pytest_skillcourt.core.records import ARM_WITH, ARM_WITHOUT, ARMS
from pytest_skillcourt.core.trial import Outcome
from pytest_skillcourt.plugin.runs import BatchSummary, RunSummary, Summary

Props = dict[tuple[str, str], list[tuple[str, str]]]
#: A run by (suite, model, task id, rep, arm): what names its item.
RunKey = tuple[str, str, str, int, str]

#: The first line of the court's block in a testcase's ``<system-out>``.
HEADER = "[skill court]"
#: The line that opens a judgment's lines added after the run's.
JUDGMENT_HEADER = "[skill court: judgment]"
#: The name :class:`JunitRunData` is registered under.
JUNIT_PLUGIN = "skill-court-junit"
#: The junitxml family whose testcases may hold ``<properties>``.
PROPERTIES_FAMILY = "xunit1"


def logxml(config: pytest.Config) -> LogXML | None:
    """pytest's JUnit writer of this session (None: no ``--junitxml``, or an xdist worker)."""
    return config.stash.get(xml_key, None)


def check_family(xml: LogXML | None, properties: bool) -> None:
    """Refuse ``--skill-court-junit-properties`` where the file could not hold them validly.

    Raises:
        pytest.UsageError: the option is on and ``junit_family`` is not ``xunit1``.
    """
    if xml is not None and properties and xml.family != PROPERTIES_FAMILY:
        raise pytest.UsageError(
            f"--skill-court-junit-properties: per-testcase <properties> are valid JUnit only with "
            f"junit_family = {PROPERTIES_FAMILY} (this session's is {xml.family}, whose schema has "
            f"none). Fix: add 'junit_family = {PROPERTIES_FAMILY}' to the ini ([pytest] or "
            "[tool.pytest.ini_options]), or drop the option to keep the run data in <system-out>")


def text_block(props: Iterable[tuple[str, object]], header: str = HEADER) -> str:
    """``props`` as the lines of a ``<system-out>``: ``name: value``, further lines indented."""
    lines = [header]
    for name, value in props:
        first, *rest = str(value).split("\n")
        lines.append(f"{name}: {first}")
        lines += ["    " + more for more in rest]
    return "\n".join(lines) + "\n"


def read_block(text: str) -> dict[str, str]:
    """The properties :func:`text_block` wrote (a later name wins, as a judgment's ``outcome``)."""
    props: dict[str, str] = {}
    last: str | None = None
    for line in text.splitlines():
        if line.startswith("    ") and last is not None:
            props[last] += "\n" + line[4:]
        elif line.startswith("[skill court"):
            last = None
        elif ": " in line or line.endswith(":"):
            name, _, value = line.partition(": ")
            last = name.rstrip(":")
            props[last] = value
    return props


def _ours(report: pytest.TestReport) -> bool:
    return "skill_court" in (report.keywords or {})


class JunitRunData:
    """Plugin on the controller: the court's items' data into junitxml's testcases."""

    def __init__(self, xml: LogXML, *, properties: bool, trial: str) -> None:
        self.xml = xml
        self.properties = properties
        xml.add_global_property("skill_court_trial", trial)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Generator[None, None, None]:
        """Before junitxml closes one of the court's testcases (its teardown report), move
        the item's properties into its ``<system-out>``, so junitxml writes no
        ``<properties>`` there; the report keeps them for every other plugin after."""
        held = None
        if not self.properties and report.when == "teardown" and _ours(report) and report.user_properties:
            held = report.user_properties
            out = ET.Element("system-out")
            out.text = bin_xml_escape(text_block(held))
            self.xml.node_reporter(report).append(out)
            report.user_properties = []
        try:
            return (yield)
        finally:
            if held is not None:
                report.user_properties = held


def run_properties(run: RunSummary) -> list[tuple[str, object]]:
    """A run item's properties: who it is, then (once it has a record) what it did."""
    props: list[tuple[str, object]] = [
        ("skill_court_run", run.run_id), ("skill", run.run.skill), ("model", run.run.model),
        ("arm", run.run.arm), ("rep", run.run.rep)]
    if run.early_stop:
        props.append(("early_stop", "true"))
    if not run.recorded:
        return props
    props += [("status", run.status), ("outcome", run.outcome),
              ("input_tokens", run.input_tokens), ("output_tokens", run.output_tokens),
              ("tokens", run.tokens),
              ("cost_usd", "" if run.cost_usd is None else f"{run.cost_usd:.6f}"),
              ("skill_loaded", str(run.skill_loaded).lower()),
              ("cached", str(run.cached).lower()), ("duration_s", run.duration_s)]
    if run.check_exit is not None:
        props.append(("check_exit", run.check_exit))
    return props


def _batch_line(run: RunSummary) -> str:
    """One run of a ``runs[MODEL]`` item in a line: its outcome, time, tokens, cost, cache, id."""
    if run.skip_reason is not None:
        return f"skipped: {run.skip_reason}"
    if run.error is not None:
        return f"error: {run.error}"
    cost = "" if run.cost_usd is None else f", ${run.cost_usd:.6f}"
    cached = ", cached" if run.cached else ""
    return f"{run.outcome}, {run.duration_s:.1f}s, {run.tokens} tok{cost}{cached}, run {run.run_id}"


def batch_properties(batch: BatchSummary) -> list[tuple[str, object]]:
    """A ``runs[MODEL]`` item's properties: the totals, one ``run[t1[with]]`` line per run
    and each skipped task's reason (``skipped[t5]``)."""
    props: list[tuple[str, object]] = [("skill_court_runs", ""), ("skill", batch.skill), ("model", batch.model)]
    if not batch.finished:
        return props
    counts = batch.counts()
    props += [("runs", len(batch.runs)), ("cached_runs", batch.cached),
              ("outcomes", ", ".join(f"{n} {what}" for what, n in counts.items())),
              ("tokens", batch.tokens), ("cost_usd", f"{batch.cost:.6f}"),
              ("duration_s", round(batch.duration_s, 3)), ("early_stopped", batch.early_stopped),
              *((f"run[{run.name}]", _batch_line(run)) for run in batch.runs),
              *((f"skipped[{task}]", reason) for task, reason in batch.skip_reasons.items())]
    return props


def item_properties(summary: Summary) -> list[tuple[str, object]]:
    """A run item's or a ``runs[MODEL]`` item's properties."""
    return batch_properties(summary) if isinstance(summary, BatchSummary) else run_properties(summary)


def run_key(run: RunSummary) -> RunKey:
    """What :func:`pair_properties` finds the run's item name by."""
    return (run.run.suite_rel, run.run.model, run.run.task_id, run.run.rep, run.run.arm)


def pair_properties(outcomes: Sequence[Outcome], names: Mapping[RunKey, str]) -> Props:
    """Per judged pair, the properties of its two run items, keyed by (classname, name).

    ``names`` are the run items' names by run (:func:`run_key`), as their reports gave
    them: a run without an item of its own (``--skill-court-items skill``) has none."""
    props: Props = {}
    for o in outcomes:
        classname = o.target.suite_rel.replace("/", ".")
        for pj in o.judgments:
            j = pj.judgment
            winner = j.winner
            if winner == "tie":
                got = {ARM_WITH: "success", ARM_WITHOUT: "success"}
            elif winner in ARMS:
                loser = ARM_WITHOUT if winner == ARM_WITH else ARM_WITH
                got = {winner: "success", loser: "failure"}
            else:
                got = {ARM_WITH: "none", ARM_WITHOUT: "none"}
            for arm in ARMS:
                name = names.get((o.target.suite_rel, o.target.model, pj.task, pj.rep, arm))
                if name is None:
                    continue
                props[(classname, name)] = [
                    ("outcome", got[arm]), ("outcome_source", "judge"),
                    ("judge_winner", winner or "none"),
                    ("judge_picks", "/".join(p or "-" for p in j.picks)),
                    ("judge_order", "A=" + j.order[0] + " first"),
                    ("judge_reasons", j.error or " | ".join(j.reasons)),
                    ("judge_model", j.judge_model),
                    ("judge_tokens", str(j.input_tokens + j.output_tokens)),
                ]
    return props


def _closed_testcases(xml: LogXML) -> list[ET.Element]:
    """The testcases junitxml has closed: a closed node reporter returns the same
    element each time, which is what pytest_sessionfinish writes."""
    cases = []
    for reporter in xml.node_reporters_ordered:
        element: Any = reporter.to_xml()
        if reporter.to_xml() is element:  # an open one builds a new element: nothing to add to
            cases.append(element)
    return cases


def add_judgments(xml: LogXML, props: Mapping[tuple[str, str], list[tuple[str, str]]],
                  *, properties: bool) -> int:
    """Add ``props`` to the closed testcases keyed by (classname suffix, name), as
    ``<property>`` elements or lines of their ``<system-out>``; returns how many matched."""
    matched = 0
    for case in _closed_testcases(xml):
        classname, name = case.get("classname", ""), case.get("name", "")
        extra = next((values for (suffix, want), values in props.items()
                      if name == want and (classname == suffix or classname.endswith("." + suffix))), None)
        if extra is None:
            continue
        matched += 1
        if properties:
            holder = case.find("properties")
            if holder is None:
                holder = ET.Element("properties")
                case.insert(0, holder)
            for key, value in extra:
                for old in [p for p in holder.findall("property") if p.get("name") == key]:
                    holder.remove(old)
                ET.SubElement(holder, "property", {"name": key, "value": bin_xml_escape(value)})
            continue
        out = next((el for el in case.findall("system-out") if (el.text or "").startswith(HEADER)), None)
        if out is None:
            out = ET.SubElement(case, "system-out")
            out.text = ""
        out.text = (out.text or "") + bin_xml_escape(text_block(extra, JUDGMENT_HEADER))
    return matched
