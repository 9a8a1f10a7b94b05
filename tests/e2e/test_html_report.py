"""The HTML page of a trial end to end: a ``--skill-court-html`` run, the same page from the
store, and the page in headless Chromium driven through the DevTools protocol
(``tests/support/browser.py``; ``render_html`` on plain values is in
``tests/unit/test_html_report.py``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pytest_skillcourt.report.html import render_html, store_data
from pytest_skillcourt.core.store import Store
from tests.support.browser import Browser
from tests.support.builders import (
    ini,
    loading_agent,
    question_number,
    run_court,
    task,
    write_skill,
    write_suite,
)
from tests.support.html_sample import sample_data
from tests.support.llm_server import LLMServer, RecordedRequest, Reply
from tests.support.sandbox_image import require_bwrap

ANSWER_CHECK = 'grep -qx "{value}" "$SKILL_COURT_ANSWER"'
SKILL_LINE = "Write totals as <b>hundreds</b> <script>alert('skill')</script>."


# --------------------------------------------------------------------------- --skill-court-html


def test_html_report_end_to_end(pytester: pytest.Pytester, server: LLMServer) -> None:
    """A HURTS trial with ``--skill-court-html``: the page holds the verdict, the
    cause and the SKILL.md line (escaped), the pairs and answers; the same page
    comes back from the store."""
    require_bwrap()

    agent = loading_agent("house-format",
                          lambda r: f"total {question_number(r)}00 <script>alert('answer')</script>",
                          lambda r: f"TOTAL-{question_number(r)}")

    def handler(request: RecordedRequest) -> Reply:
        if not request.tools:  # the cause finder
            return Reply(content=json.dumps({"cause": "the rule <script>alert('cause')</script> on hundreds "
                                                      "misled the model", "line": SKILL_LINE}))
        return agent(request)

    server.set_handler(handler)
    write_skill(pytester.path / "skills", "house-format", "How we format totals", body=SKILL_LINE)
    write_suite(pytester.path, "house-format",
                [task(f"t{i}", f"Question {i}: give the total.", ANSWER_CHECK.format(value=f"TOTAL-{i}"))
                 for i in range(1, 4)])
    pytester.makefile(".ini", pytest=ini(server.base_url))
    result = run_court(pytester, "--skill-court-html", "report.html", junitxml=None)
    result.assert_outcomes(passed=6, failed=1)
    result.stdout.fnmatch_lines(["*generated html report: *report.html*"])
    page = (pytester.path / "report.html").read_text(encoding="utf-8")
    assert '<p class="line">HURTS: success fell from 100% to 0% (3 tasks)</p>' in page
    assert "house-format" in page and "test-model" in page
    assert "the rule &lt;script&gt;alert(&#39;cause&#39;)&lt;/script&gt; on hundreds misled the model" in page
    assert ("Write totals as &lt;b&gt;hundreds&lt;/b&gt; &lt;script&gt;alert(&#39;skill&#39;)"
            "&lt;/script&gt;.") in page
    assert "total 100 &lt;script&gt;alert(&#39;answer&#39;)&lt;/script&gt;" in page
    assert "<script>alert" not in page and not re.search(r"https?://", page)
    assert "Question 2: give the total." in page and page.count('class="pair-start"') == 3
    assert "data-plot=\"diff\"" in page
    # the same trial rendered later from the store
    store = Store(pytester.path / ".skill-court" / "court.db", readonly=True)
    try:
        trial = store.trial_verdicts(re.search(r"trial ([\w-]+)", page).group(1))  # type: ignore[union-attr]
        assert len(trial) == 1
        again = render_html(store_data(store, trial[0]["trial"]))
    finally:
        store.close()
    assert '<p class="line">HURTS: success fell from 100% to 0% (3 tasks)</p>' in again
    assert again.count('class="pair-start"') == 3 and "misled the model" in again


def test_early_stopped_tasks_reach_the_page_and_the_json(pytester: pytest.Pytester, server: LLMServer,
                                                         tmp_path: Path) -> None:
    """Six tasks whose first four end alike: the page lists t5 and t6 as early-stopped with why,
    the hint counts the 2 skipped tasks, each run shows its check command and transcript, and
    the JSON (schema 3) says the same; the page has no horizontal overflow at 420 px."""
    require_bwrap()
    server.set_handler(lambda r: Reply(content=f"TOTAL-{question_number(r)}", input_tokens=100, output_tokens=20))
    write_skill(pytester.path / "skills", "house-format", "How we format totals")
    write_suite(pytester.path, "house-format",
                [task(f"t{i}", f"Question {i}: give the total.", ANSWER_CHECK.format(value=f"TOTAL-{i}"))
                 for i in range(1, 7)])
    pytester.makefile(".ini", pytest=ini(server.base_url))
    result = run_court(pytester, "--skill-court-html", "report.html", "--skill-court-json", "report.json",
                       junitxml=None)
    result.assert_outcomes(passed=9, skipped=4)
    page = (pytester.path / "report.html").read_text(encoding="utf-8")
    assert '<span class="label">2 tasks not run</span>' in page
    assert "<li><b>t5</b>: early stop: the first 4 tasks ended alike" in page and "<li><b>t6</b>: early stop" in page
    assert "the 2 skipped tasks could not decide it" in page and "at least 5 of the skipped" not in page
    assert 'check: <code>grep -qx &#34;TOTAL-1&#34; &#34;$SKILL_COURT_ANSWER&#34;</code>' in page
    assert "transcript (with): " in page and "Question 1: give the total." in page
    doc = json.loads((pytester.path / "report.json").read_text())
    assert doc["schema_version"] == 3
    [v] = doc["verdicts"]
    assert [(t["task"], t["runs"], t["not_run"] is not None) for t in v["tasks"]] == [
        ("t1", 2, False), ("t2", 2, False), ("t3", 2, False), ("t4", 2, False), ("t5", 0, True), ("t6", 0, True)]
    assert v["runs"][0]["check"]["command"] == 'grep -qx "TOTAL-1" "$SKILL_COURT_ANSWER"'
    assert v["runs"][0]["transcript"][-1]["content"] == "TOTAL-1"
    b = Browser(420, 900)
    try:
        b.goto((pytester.path / "report.html").as_uri())
        b.click("#open-all")
        width, inner = b.overflow()
        assert width <= inner, f"the page is {width} px wide at {inner} px"
        assert "t5: early stop" in b.js("document.querySelector('.skipped-tasks').innerText")
    finally:
        b.close()


# --------------------------------------------------------------------------- headless Chromium


PWN = "</pre></details></td></tr></table><script>window.pwned = 1</script><img src=x onerror=\"window.pwned = 2\">"


def report_page(tmp_path: Path) -> Path:
    """The sample page, with hostile run text in an answer, a tool call and a transcript message."""
    data = sample_data()
    hurts = next(v for v in data["verdicts"] if v["skill"] == "house-format")
    run = hurts["tasks"][0]["pairs"][0]["with"]
    run["answer"] = f"answer {PWN}"
    run["transcript"][2]["calls"] = [{"name": "terminal", "arguments": f"args {PWN}"}]
    run["transcript"][4]["text"] = f"final {PWN}"
    page = tmp_path / "report.html"
    page.write_text(render_html(data), encoding="utf-8")
    return page


def test_the_report_page_in_chromium_at_1400_and_420_px(tmp_path: Path) -> None:
    """Transcripts, early-stopped tasks, filters; hostile run text stays text; nothing is wider
    than the screen at 420 px; screenshots for CI."""
    page = report_page(tmp_path)
    b = Browser(1400, 1000)
    try:
        b.goto(page.as_uri())
        # harmful first, and the filter and sort work
        kinds = "[...document.querySelectorAll('#verdict-list > section')].filter(s => !s.hidden).map(s => s.dataset.kind)"
        assert b.js(kinds) == ["HURTS", "HURTS", "INCONCLUSIVE", "NEUTRAL", "NEUTRAL", "HELPS"]
        b.js("(() => { const s = document.getElementById('f-kind'); s.value = 'NEUTRAL'; "
             "s.dispatchEvent(new Event('change')); })()")
        assert b.js(kinds) == ["NEUTRAL", "NEUTRAL"]
        assert b.js("document.getElementById('f-count').textContent") == "2 of 6 verdicts shown"
        b.js("(() => { const s = document.getElementById('f-kind'); s.value = ''; s.dispatchEvent(new Event('change'));"
             " const o = document.getElementById('f-sort'); o.value = 'skill'; o.dispatchEvent(new Event('change')); })()")
        assert b.js("[...document.querySelectorAll('#verdict-list > section')].map(s => s.dataset.skill)")[:2] == [
            "csv-helper", "early-tips"]
        # early-stopped tasks are listed with why
        early = b.js("document.querySelector('section[data-skill=\"early-tips\"]').innerText")
        assert "2 tasks not run" in early and "t5: early stop" in early and "2 skipped tasks could not decide it" in early
        # a transcript opens with a real click and shows the tool call and the hostile text as text
        b.click('section[data-skill="house-format"] details.answers > summary')
        b.click('section[data-skill="house-format"] details.transcript > summary')
        shown = b.js("document.querySelector('section[data-skill=\"house-format\"] details.transcript').innerText")
        assert "tool call terminal" in shown and f"args {PWN}" in shown and f"final {PWN}" in shown
        assert b.js("window.pwned === undefined") and b.js("document.scripts.length") == 1
        assert b.js("document.querySelectorAll('img').length") == 0
        b.js("(() => { const o = document.getElementById('f-sort'); o.value = 'harm'; o.dispatchEvent(new Event('change')); })()")
        b.click("#open-all")
        b.screenshot("report-1400.png")
        b.resize(420, 900)
        width, inner = b.overflow()
        assert width <= inner, f"the page is {width} px wide at {inner} px"
        b.screenshot("report-420.png")
        b.click("#close-all")
        b.screenshot("report-420-collapsed.png")
        width, inner = b.overflow()
        assert width <= inner
    finally:
        b.close()
