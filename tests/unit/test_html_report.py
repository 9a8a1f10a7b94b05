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

from pytest_skillcourt.records import INCOMPLETE
from pytest_skillcourt.report.html import (ANSWER_CHARS, PLOT_X0, PLOT_X1, TOKEN_AXIS_MAX, trial_data,
                                           diff_plot, pair_entry, render_html, task_entries,
                                           token_plot)
from pytest_skillcourt.trial import TrialResult, TrialRun
from tests.support.html_sample import entry, judgment, pair_runs, rec, sample_data, verdict

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
    rows = re.findall(r'<tr class="(k-\w+)">.*?<a href="#v-\d">([\w-]+)</a>.*?<span class="badge k-\w+">'
                      r'<span aria-hidden="true">.</span> ([A-Z ()a-z]+)</span>', table, re.S)
    assert rows == [("k-helps", "csv-helper", "HELPS"), ("k-hurts", "house-format", "HURTS"),
                    ("k-hurts", "verbose-tips", "HURTS (cost)"), ("k-neutral", "shell-tips", "NEUTRAL"),
                    ("k-inconclusive", "rare-skill", "INCONCLUSIVE")]
    for skill, kind in [("csv-helper", "HELPS"), ("house-format", "HURTS"), ("shell-tips", "NEUTRAL"),
                        ("rare-skill", "INCONCLUSIVE")]:
        assert f'<p class="line">{kind}: ' in section(html, skill)
    # the tally counts every kind
    assert "1 HELPS" in html and "2 HURTS" in html and "1 NEUTRAL" in html and "1 INCONCLUSIVE" in html
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
    assert "<td>yes</td>" in hurts and "<td>no</td>" in hurts
    assert "<td>cached</td>" in hurts and "<td>fresh</td>" in hurts
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
