"""The HTML page of a trial end to end: a ``--skill-court-html`` run, the same page from the
store, and a headless Chromium screenshot of the page (``render_html`` on plain values is
in ``tests/unit/test_html_report.py``)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from pytest_skillcourt.report.html import render_html, store_data
from pytest_skillcourt.store import Store
from tests.support.builders import ini, loading_agent, question_number, run_court, task, write_skill, write_suite
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


# --------------------------------------------------------------------------- headless Chromium


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def screenshot(html_path: Path, png: Path, profile: Path, size: str = "1200,1600") -> subprocess.CompletedProcess:
    exe = chromium()
    assert exe is not None
    return subprocess.run(
        [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={profile}", f"--screenshot={png}", f"--window-size={size}",
         html_path.resolve().as_uri()],
        capture_output=True, text=True, timeout=120)


def test_chromium_renders_the_page(tmp_path: Path) -> None:
    if chromium() is None:
        if os.environ.get("SKILL_COURT_REQUIRE_CHROMIUM") == "1":
            pytest.fail("chromium is not installed but SKILL_COURT_REQUIRE_CHROMIUM=1 (apt-get install chromium)")
        pytest.skip("chromium is not installed (apt-get install chromium); set SKILL_COURT_REQUIRE_CHROMIUM=1 "
                    "to make this a failure")
    page = tmp_path / "report.html"
    page.write_text(render_html(sample_data()), encoding="utf-8")
    png = tmp_path / "report.png"
    done = screenshot(page, png, tmp_path / "profile")
    assert done.returncode == 0, done.stderr[-2000:]
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1200, 1600)
    try:
        from PIL import Image
    except ImportError:
        return
    with Image.open(png) as img:  # not a blank page: text and the verdict colours are drawn
        colours = img.convert("RGB").getcolors(maxcolors=1 << 20) or []
    assert len(colours) > 50
    rgb = {c for _, c in colours}
    assert (0xB9, 0x1C, 0x1C) in rgb and (0x1A, 0x7F, 0x37) in rgb  # HURTS red, HELPS green
