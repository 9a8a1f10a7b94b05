"""The HTML page of a trial: ``render_html`` on hand-made data and the data gathered from
runs.  An end-to-end ``--skill-court-html`` run and a headless Chromium screenshot of the
page are in ``tests/e2e/test_html_report.py``."""

from __future__ import annotations

import json
import math
import re
from html.parser import HTMLParser
from typing import Any

import pytest

from pytest_skillcourt.core.records import INCOMPLETE
from pytest_skillcourt.report.html import (
    ANSWER_CHARS,
    EARLY_STOP_WHY,
    NOT_RUN_WHY,
    PLOT_X0,
    PLOT_X1,
    TOKEN_AXIS_MAX,
    budget_text,
    diff_plot,
    hint_text,
    pair_entry,
    render_html,
    task_entries,
    token_plot,
    trial_data,
)
from pytest_skillcourt.core.trial import TrialResult, TrialRun
from tests.support.html_sample import (
    HOSTILE,
    LONG_OUTPUT,
    entry,
    judgment,
    pair_runs,
    rec,
    sample_data,
    verdict,
)

EVIL = "<script>alert('x')</script>"


# --------------------------------------------------------------------------- parsing helpers


class _Elements(HTMLParser):
    """Every start tag with its attributes, in document order, with the text of <text>/<title>."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts.append(data)


def parse(html: str) -> _Elements:
    p = _Elements()
    p.feed(html)
    return p


def svgs(html: str) -> list[dict[str, Any]]:
    """Each forest plot: its attributes and its lines/rects by class."""
    out: list[dict[str, Any]] = []
    for tag, attrs in parse(html).tags:
        if tag == "svg":
            out.append({"attrs": attrs, "parts": []})
        elif out and tag in ("line", "rect", "text"):
            out[-1]["parts"].append((tag, attrs))
    return out


def part(svg: dict[str, Any], cls: str) -> list[dict[str, str]]:
    return [a for _, a in svg["parts"] if a.get("class") == cls]


def section(html: str, skill: str) -> str:
    """The verdict section of ``skill``."""
    start = html.index(f'<h2>{skill} <span class="muted">')
    end = html.find('<section class="verdict', start)
    return html[start:end if end > 0 else len(html)]


# --------------------------------------------------------------------------- render_html


def test_every_verdict_kind_is_written_with_its_colour_class() -> None:
    html = render_html(sample_data())
    table = html[html.index('<table class="verdicts">'):html.index("</table>")]
    rows = re.findall(r'<tr class="(k-\w+)"[^>]*>.*?<a href="#v-\d">([\w-]+)</a>.*?<span class="badge k-\w+">'
                      r'<span aria-hidden="true">.</span> ([A-Z ()a-z]+)</span>', table, re.DOTALL)
    # harmful first: HURTS, INCONCLUSIVE, NEUTRAL, HELPS, then by skill
    assert rows == [("k-hurts", "house-format", "HURTS"), ("k-hurts", "verbose-tips", "HURTS (cost)"),
                    ("k-inconclusive", "rare-skill", "INCONCLUSIVE"), ("k-neutral", "early-tips", "NEUTRAL (early stop)"),
                    ("k-neutral", "shell-tips", "NEUTRAL"), ("k-helps", "csv-helper", "HELPS")]
    for skill, kind in [("csv-helper", "HELPS"), ("house-format", "HURTS"), ("shell-tips", "NEUTRAL"),
                        ("rare-skill", "INCONCLUSIVE")]:
        assert f'<p class="line">{kind}: ' in section(html, skill)
    # the tally counts every kind
    assert "1 HELPS" in html and "2 HURTS" in html and "2 NEUTRAL" in html and "1 INCONCLUSIVE" in html
    # Wilson intervals and the success difference interval are in the table
    assert '100% <span class="muted sub">70–100%</span>' in table
    assert '+1.00 <span class="muted sub">[+0.45, +1.00]</span>' in table
    assert '×2.05 <span class="muted sub">[1.40, 3.00]</span>' in table


def test_header_names_trial_models_sandbox_and_when() -> None:
    html = render_html(sample_data())
    head = html[html.index("<header>"):html.index("</header>")]
    for text in ("20260102T030405-abcd1234", "m, other-m", "docker", "2026-01-02T03:00:00Z", "$0.0500"):
        assert text in head
    assert "quarantined <b>house-format</b> for model m" in html


def test_hurts_shows_cause_and_line_neutral_and_inconclusive_show_hints() -> None:
    html = render_html(sample_data())
    hurts = section(html, "house-format")
    assert "the skill says to round totals to hundreds" in hurts
    assert '<blockquote class="skill-line">Always round totals to the nearest hundred.</blockquote>' in hurts
    cost = section(html, "verbose-tips")
    assert "tokens alone" in cost and "skill-line" not in cost
    assert "about 9 more tasks like these would decide" in section(html, "shell-tips")
    rare = section(html, "rare-skill")
    assert "needs 1 more task with an outcome in both arms" in rare and "No success interval" in rare
    assert 'data-plot="diff"' not in rare


def test_hurts_without_a_cause_says_so() -> None:
    data = sample_data()
    data["verdicts"][1]["cause"] = None
    assert "the judge could not name one" in section(render_html(data), "house-format")


def test_untrusted_text_is_escaped_everywhere() -> None:
    data = sample_data()
    data["trial"] = "T" + EVIL
    data["errors"] = [f"the judge could not run: {EVIL}"]
    data["models"] = [EVIL]
    hurts = data["verdicts"][1]
    hurts["skill"] = "bad" + EVIL
    hurts["cause"] = {"cause": f"cause {EVIL}", "line": f"line {EVIL}"}
    hurts["verdict"]["line"] = f"line {EVIL}"
    pair = hurts["tasks"][0]["pairs"][0]
    pair["with"]["answer"] = f'answer {EVIL} <img src=x onerror="alert(1)">'
    pair["with"]["error"] = f"error {EVIL}"
    hurts["tasks"][0]["prompt"] = f"prompt {EVIL}"
    hurts["tasks"][0]["task"] = f"task {EVIL}"
    neutral = data["verdicts"][3]
    neutral["verdict"]["hint"] = f"hint {EVIL}"
    neutral["tasks"][0]["pairs"][0]["judgment"]["reasons"] = [f"reason {EVIL}", "fine"]
    html = render_html(data)
    assert "<script>alert" not in html and "<img" not in html
    assert html.count("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;") >= 10
    for where in ("cause ", "line ", "answer ", "error ", "prompt ", "task ", "hint ", "reason "):
        assert f"{where}&lt;script&gt;" in html, where
    page = parse(html)
    # the only script on the page is the page's own (collapsing), and no tag came from the data
    assert sum(1 for tag, _ in page.tags if tag == "script") == 1
    assert all("alert" not in s for s in page.scripts)
    assert not any("onerror" in attrs for _, attrs in page.tags)


def test_no_external_resources() -> None:
    html = render_html(sample_data())
    assert not re.search(r"https?://", html)
    page = parse(html)
    for tag, attrs in page.tags:
        assert tag not in ("link", "img", "iframe", "object", "embed"), tag
        assert "src" not in attrs and not (tag != "a" and "href" in attrs), (tag, attrs)
        if tag == "a":
            assert attrs["href"].startswith("#")
    assert "url(" not in html and "@import" not in html and "@font-face" not in html


def test_a_link_in_an_answer_stays_text() -> None:
    data = sample_data()
    data["verdicts"][0]["tasks"][0]["pairs"][0]["with"]["answer"] = "see https://evil.example/x.js"
    html = render_html(data)
    assert "see https://evil.example/x.js" in html
    assert not any(v.startswith("http") for _, a in parse(html).tags for v in a.values())


def _expected_diff_x(v: float) -> float:
    return PLOT_X0 + (v + 1) / 2 * (PLOT_X1 - PLOT_X0)


def _expected_token_x(v: float, axis: float) -> float:
    return PLOT_X0 + (math.log(v) / math.log(axis) + 1) / 2 * (PLOT_X1 - PLOT_X0)


def test_diff_plot_draws_the_interval_on_minus_one_to_one_with_zero_marked() -> None:
    html = render_html(sample_data())
    plots = svgs(section(html, "house-format"))
    diff = next(s for s in plots if s["attrs"]["data-plot"] == "diff")
    assert diff["attrs"]["data-lo"] == "-1.0000" and diff["attrs"]["data-hi"] == "-0.5000"
    assert "k-hurts" in diff["attrs"]["class"] and diff["attrs"]["role"] == "img"
    (ci,) = part(diff, "ci")
    assert float(ci["x1"]) == pytest.approx(_expected_diff_x(-1.0), abs=0.01)
    assert float(ci["x1"]) == PLOT_X0
    assert float(ci["x2"]) == pytest.approx(_expected_diff_x(-0.5), abs=0.01)
    (ref,) = part(diff, "ref")
    assert float(ref["x1"]) == pytest.approx((PLOT_X0 + PLOT_X1) / 2, abs=0.01)  # 0
    assert part(diff, "ticklabel")  # the axis is labelled
    assert ">0</text>" in html and ">-1</text>" in html and ">+1</text>" in html
    # the HELPS interval sits right of 0
    helps = next(s for s in svgs(section(html, "csv-helper")) if s["attrs"]["data-plot"] == "diff")
    (hci,) = part(helps, "ci")
    assert float(hci["x1"]) == pytest.approx(_expected_diff_x(0.45), abs=0.01)
    assert float(hci["x1"]) > float(ref["x1"])


def test_token_plot_is_a_log_axis_marked_at_the_margins() -> None:
    html = render_html(sample_data())
    tok = next(s for s in svgs(section(html, "house-format")) if s["attrs"]["data-plot"] == "tokens")
    axis = 4.0  # the smallest power of 2 past the upper end (3.0), symmetric in log
    (ci,) = part(tok, "ci")
    assert float(ci["x1"]) == pytest.approx(_expected_token_x(1.4, axis), abs=0.01)
    assert float(ci["x2"]) == pytest.approx(_expected_token_x(3.0, axis), abs=0.01)
    (ref,) = part(tok, "ref")
    assert float(ref["x1"]) == pytest.approx((PLOT_X0 + PLOT_X1) / 2, abs=0.01)  # ratio 1
    margins = sorted(float(a["x1"]) for a in part(tok, "margin"))
    assert margins == [pytest.approx(_expected_token_x(1 / 1.25, axis), abs=0.01),
                       pytest.approx(_expected_token_x(1.25, axis), abs=0.01)]
    # distances are equal on a log axis: 1/1.25 and 1.25 sit symmetric around 1
    labels = [float(t["x"]) for t in part(tok, "ticklabel")]
    assert ">1/4</text>" in html and ">4</text>" in html and ">0.8</text>" in html and ">1.25</text>" in html
    assert labels == sorted(labels)
    assert float(ref["x1"]) - margins[0] == pytest.approx(margins[1] - float(ref["x1"]), abs=0.02)


def test_plots_clip_what_lies_off_the_axis() -> None:
    p = token_plot((0.5, 500.0), 20.0)
    assert p is not None and p["axis"] == TOKEN_AXIS_MAX and p["clip_hi"] and not p["clip_lo"]
    assert float(p["x_hi"]) == PLOT_X1
    assert diff_plot(None, 0.0) is None and token_plot(None, None) is None
    assert token_plot((0.0, 2.0), 1.0) is None  # log(0) is never taken
    d = diff_plot((-0.25, 0.75), 0.25)
    assert d is not None and float(d["x_lo"]) == pytest.approx(_expected_diff_x(-0.25), abs=0.01)


def test_pairs_show_outcomes_tokens_loading_cache_and_cut_answers() -> None:
    html = render_html(sample_data())
    hurts = section(html, "house-format")
    assert hurts.count('<details class="answers">') == 3
    full = "The total is " + "9" * 1200
    assert full[:ANSWER_CHARS] in hurts and full not in hurts
    assert f"(first {ANSWER_CHARS} of {len(full)} characters)" in hurts
    assert '<span class="o-failure">✗ failure</span> <span class="muted">(check exit 1)</span>' in hurts
    assert '<span class="o-success">✓ success</span> <span class="muted">(check exit 0)</span>' in hurts
    assert "120 <span class=\"muted\">(100+20)</span>" in hurts
    assert '<td data-label="skill loaded">yes</td>' in hurts and '<td data-label="skill loaded">no</td>' in hurts
    assert '<td data-label="cache">cached</td>' in hurts and '<td data-label="cache">fresh</td>' in hurts
    assert "r1: with ✗ / without ✓" in hurts


def test_judged_pairs_show_picks_reasons_and_left_out_pairs() -> None:
    html = render_html(sample_data())
    neutral = section(html, "shell-tips")
    assert "<b>Judge, r1:</b>" in neutral and "winner <b>with</b>" in neutral
    assert "A = with, B = without: picked <b>A</b> (with) — A gives TOTAL-1 as asked" in neutral
    assert "A = without, B = with: picked <b>B</b> (with) — B gives TOTAL-1 as asked" in neutral
    assert "winner <b>tie</b>" in neutral and "picked <b>tie</b> — both fine" in neutral
    # j2: the without run could not be scored, so the pair is left out
    assert "capture failed: tar exit 2" in neutral
    assert "left out (an arm has no outcome)" in neutral


def test_pair_entry_follows_the_verdict_rules() -> None:
    w = rec("t", "with", outcome=None, needs_judge=True, status=INCOMPLETE)
    wo = rec("t", "without", outcome=None, needs_judge=True)
    tie = pair_entry(1, {"with": (w, False), "without": (wo, True)}, judgment("t", "tie"))
    # a run that did not complete is a failure whatever the judge said
    assert tie["source"] == "judge" and tie["counted"]
    assert tie["with"]["outcome"] == "failure" and tie["without"]["outcome"] == "success"
    assert tie["without"]["cached"] is True
    failed = pair_entry(1, {"with": (w, False), "without": (wo, False)},
                        judgment("t", None, error="judge token budget reached"))
    assert not failed["counted"] and failed["with"]["outcome"] == "none"
    unjudged = pair_entry(1, {"with": (w, False), "without": (wo, False)}, None)
    assert not unjudged["counted"] and unjudged["with"]["outcome"] == "not judged"
    check = pair_entry(2, {"with": (rec("t", "with", outcome=False), False),
                           "without": (rec("t", "without", outcome=True), False)}, None)
    assert check["source"] == "check" and check["with"]["outcome"] == "failure"
    lone = pair_entry(1, {"with": (rec("t", "with"), False)}, None)
    assert lone["without"] is None and not lone["counted"]
    assert "no run recorded" in render_html({"trial": "x", "verdicts": [
        {**entry("s", verdict("INCONCLUSIVE", "too-few-tasks", "x", diff_ci=None, mean=0, token_ci=None,
                               ratio=None), []),
         "tasks": [{"task": "t", "prompt": None, "used": True, "pairs": [lone]}]}]})


def test_tasks_follow_the_suite_order_and_early_stop_marks_unused() -> None:
    runs = [TrialRun(r, False) for r in pair_runs([(True, True)] * 5)]
    tasks = task_entries(runs, [], {}, order=["t3", "t1", "t2", "t4", "t5"], used=["t3", "t1", "t2", "t4"])
    assert [t["task"] for t in tasks] == ["t3", "t1", "t2", "t4", "t5"]
    assert [t["used"] for t in tasks] == [True, True, True, True, False]
    data = {"trial": "x", "verdicts": [{**entry("s", verdict(
        "NEUTRAL", "early-stop", "first 4 tasks ended alike", diff_ci=(0, 0), mean=0, token_ci=(1, 1),
        ratio=1.0, n=4), []), "tasks": tasks}]}
    html = render_html(data)
    assert html.count("(not used: early stop)") == 1 and "NEUTRAL (early stop)" in html


def test_data_dict_round_trips_through_json() -> None:
    data = sample_data()
    assert render_html(json.loads(json.dumps(data))) == render_html(data)


def test_minimal_and_bad_data() -> None:
    html = render_html({"trial": "t-1"})
    assert "no verdict was made in this trial" in html and "<table" not in html
    with pytest.raises(ValueError, match="trial"):
        render_html({"verdicts": []})
    with pytest.raises(ValueError, match="verdicts"):
        render_html({"trial": "t", "verdicts": {"a": 1}})


def test_trial_data_is_json_ready() -> None:
    """trial_data on a session with no verdict (nothing collected) still renders."""
    data = trial_data(TrialResult(trial="T9", outcomes=(), models=("m",), backend="local", agent="builtin",
                                  store="/tmp/s.db", quarantine_file="/tmp/q.json",
                                  started_at="2026-01-01T00:00:00Z", errors=("x",)))
    assert json.loads(json.dumps(data))["trial"] == "T9"
    assert data["started_at"] == "2026-01-01T00:00:00Z" and data["sandbox"] == "local"
    assert "T9" in render_html(data)


# --------------------------------------------------------------------------- the evidence of each run


def test_each_run_shows_its_transcript_with_tool_calls_and_long_outputs_folded() -> None:
    hurts = section(render_html(sample_data()), "house-format")
    assert hurts.count('<details class="fold transcript">') == 6  # both arms of 3 pairs
    assert "transcript (with): 5 messages" in hurts
    assert 'tool call <code>terminal</code><pre>{&#34;command&#34;: &#34;cat sales.csv&#34;}</pre>' in hurts
    # the 1,207-character tool output is folded behind its first line, whole inside
    assert f"… ({len(LONG_OUTPUT)} characters)</summary><pre>{LONG_OUTPUT}</pre>" in hurts
    assert '<div class="msg role-tool"><span class="role">tool</span>' in hurts


def test_each_run_shows_the_check_command_exit_status_output_and_captured_files() -> None:
    html = render_html(sample_data())
    early = section(html, "early-tips")
    assert 'check: <code>grep -qx &#34;TOTAL-1&#34; &#34;$SKILL_COURT_ANSWER&#34;</code>' in early
    assert "check (with): <code>grep -qx" in early and "→ exit 0" in early
    hurts = section(html, "house-format")
    assert "→ exit 1</h4>" in hurts and "want TOTAL-1, got ok" in hurts
    judged = section(html, "shell-tips")
    assert "files the judge saw (with)" in judged and '<span class="mono">out/total.txt</span>' in judged
    assert "total for j1" in judged and "binary, not shown to it: out/chart.png" in judged


def test_early_stopped_tasks_are_listed_with_why_and_the_hint_counts_them() -> None:
    early = section(render_html(sample_data()), "early-tips")
    assert '<span class="label">2 tasks not run</span>' in early
    assert early.count("<li><b>t5</b>: early stop: the first 4 tasks ended alike") == 1
    assert "<li><b>t6</b>: early stop:" in early and "Task five." in early and "test -s out.txt" in early
    # the verdict rule's "at least 5 of the skipped tasks" said against the 2 there are
    assert "at least 5" not in early
    assert ("the 2 skipped tasks could not decide it: even if all flipped the same way, 5 such tasks "
            "would be needed") in early


@pytest.mark.parametrize("skipped, words", [
    (0, "no task was skipped"),
    (1, "the 1 skipped task could not decide it: even if all flipped the same way, 5 such tasks"),
    (5, "at least 5 of the 5 skipped tasks would all have to flip the same way to decide"),
    (9, "at least 5 of the 9 skipped tasks would all have to flip"),
])
def test_hint_text_fits_the_number_of_skipped_tasks(skipped: int, words: str) -> None:
    v = {"basis": "early-stop", "hint": "stopped early: the first 4 tasks ended alike in both arms; at least 5 "
                                        "of the skipped tasks would all have to flip the same way to decide"}
    assert words in (hint_text(v, skipped) or "")
    assert hint_text({"basis": "success", "hint": "x"}, 3) == "x" and hint_text({"hint": None}, 2) is None


def test_tasks_without_a_run_say_why() -> None:
    runs = [TrialRun(r, False) for r in pair_runs([(True, False)] * 3)]
    tasks = task_entries(runs, [], {}, order=["t1", "t2", "t3", "t4"], checks={"t4": "true"})
    assert [t["skipped"] for t in tasks] == [None, None, None, NOT_RUN_WHY]
    assert tasks[3]["check"] == "true" and tasks[3]["pairs"] == []
    early = task_entries(runs, [], {}, order=["t1", "t2", "t3", "t4"], early_stop=True)
    assert early[3]["skipped"] == EARLY_STOP_WHY


def test_appeals_show_the_diff_the_drafts_trial_and_the_decision() -> None:
    hurts = section(render_html(sample_data()), "house-format")
    assert "<h3>Appeals</h3>" in hurts and "<b>Appeal 7</b>: GRANTED" in hurts
    assert "draft's trial 20260102T040000-draft001: NEUTRAL" in hurts
    assert "+Round totals only when asked." in hurts and "skills/house-format/SKILL.md" in hurts


def test_verdicts_are_harmful_first_and_the_page_can_sort_and_filter() -> None:
    html = render_html(sample_data())
    order = re.findall(r'<section class="verdict k-\w+" id="v-\d+" data-kind="(\w+)" data-skill="([\w-]+)"', html)
    assert [k for k, _ in order] == ["HURTS", "HURTS", "INCONCLUSIVE", "NEUTRAL", "NEUTRAL", "HELPS"]
    for control in ('id="f-kind"', 'id="f-text"', 'id="f-sort"', '<option value="HURTS">HURTS</option>'):
        assert control in html
    assert '@media (max-width: 720px)' in html and 'td[data-label]::before' in html


def test_hostile_run_text_is_escaped_in_transcripts_checks_files_and_appeals() -> None:
    data = sample_data()
    hurts = data["verdicts"][1]
    run = hurts["tasks"][0]["pairs"][0]["with"]
    run["transcript"][1]["text"] = f"user {HOSTILE}"
    run["transcript"][2]["calls"] = [{"name": f"tool{HOSTILE}", "arguments": f"args {HOSTILE}"}]
    run["transcript"][3]["role"] = f"role{HOSTILE}"
    run["check_output"] = f"check {HOSTILE}"
    run["captured"] = [{"path": f"path{HOSTILE}", "text": f"file {HOSTILE}", "chars": 9}]
    run["captured_binary"] = [f"bin{HOSTILE}"]
    hurts["tasks"][0]["check"] = f"cmd {HOSTILE}"
    hurts["appeals"][0]["diff"] = f"+diff {HOSTILE}"
    hurts["appeals"][0]["reason"] = f"reason {HOSTILE}"
    hurts["model"] = f"m{HOSTILE}"
    html = render_html(data)
    escaped = "&lt;/pre&gt;&lt;/details&gt;&lt;/td&gt;&lt;/tr&gt;&lt;/table&gt;&lt;script&gt;alert(&#39;run&#39;)"
    for where in ("user ", "tool", "args ", "role", "check ", "path", "file ", "bin", "cmd ", "+diff ", "reason ", "m"):
        assert f"{where}{escaped}" in html, where
    page = parse(html)
    assert "<script>alert" not in html and sum(1 for tag, _ in page.tags if tag == "script") == 1
    assert '<div class="msg role-other">' in html  # an unknown role never becomes a class name


def test_a_page_budget_leaves_out_transcripts_of_the_least_harmful_first() -> None:
    data = sample_data()
    cut = budget_text(data["verdicts"], budget=20_000)
    assert cut > 0
    hurts = next(v for v in data["verdicts"] if v["skill"] == "house-format")
    helps = next(v for v in data["verdicts"] if v["skill"] == "csv-helper")
    assert all(p[a]["transcript"] for t in hurts["tasks"] for p in t["pairs"] for a in ("with", "without"))
    assert not any(p[a]["transcript"] for t in helps["tasks"] for p in t["pairs"] for a in ("with", "without"))
    page = section(render_html(data), "csv-helper")
    assert "left out: the page shows at most 3000000 characters of them" in page
