"""The ``$GITHUB_STEP_SUMMARY`` markdown (``pytest_skillcourt/report/markdown.py``) with a
hostile skill name, cause, skill line, model, suite label and error: nothing of them
closes a code span, makes a link, an image, emphasis or HTML, splits a table cell or
ends the row, and no control character or bidi override is written.

Checked twice: on the markdown text with GitHub's rules for table rows and code spans,
and rendered by markdown-it (CommonMark with GFM tables and strike-through, raw HTML
allowed as GitHub's renderer allows it before its sanitizer)."""

from __future__ import annotations

import dataclasses
import re
from html.parser import HTMLParser

import pytest

from pytest_skillcourt.core.printable import has_controls
from pytest_skillcourt.report import markdown
from pytest_skillcourt.stats.verdict import PairOutcome, VerdictKind, decide
from pytest_skillcourt.core.trial import Cause, Outcome, Target, TrialResult

SKILL = "evil[x](https://e.example/s)`*b*|c\x1b[2J\u202eName"
MODEL = "m|![i](http://e.example/i.png)"
CAUSE = "closes ` the span [click](http://e.example/c) ![img](http://e.example/i.png) <img src=x onerror=alert(1)>" \
        " <b>bold</b> **strong** _em_ ~~del~~ www.e.example a@e.example $x$ |split| \x1b]52;c;ZXZpbA==\x07end\nnext"
LINE = "Always `write` TOTAL | ``` [a](http://e.example/l) ![b](http://e.example/b.png) <i>it</i>\u2066x\u2069 `"
LABEL = "HEAD [pr](http://e.example/r)"
ERROR = "# the judge [failed](http://e.example/e)\n- <script>alert(1)</script>"


def hostile_result() -> TrialResult:
    tasks = ["t1", "t2", "t3", "t4"]
    verdict = decide([PairOutcome(t, 1, False, True, 120, 120) for t in tasks])
    assert verdict.kind is VerdictKind.HURTS
    target = Target(f"skills_tests/x.yaml::verdict[{MODEL}]", "skills_tests/x.yaml", MODEL, tuple(tasks))
    hurts = Outcome(target=target, skill=SKILL, verdict=verdict, skill_hash="h", suite_hash="q", cached_runs=0,
                    fresh_runs=8, spend=0.0, cause=Cause(CAUSE, LINE), failed=True,
                    suite_source={"kind": "ref", "label": LABEL})
    helps = dataclasses.replace(hurts, skill="plain-skill", cause=None, suite_source={},
                                verdict=decide([PairOutcome(t, 1, True, False, 120, 120) for t in tasks]))
    return TrialResult(trial="T1", outcomes=(hurts, helps), errors=(ERROR,))


def gfm_cells(row: str) -> list[str]:
    """The cells of a GFM table row: split at every ``|`` not escaped by a backslash."""
    body = row.strip()
    assert body.startswith("| ") and body.endswith(" |") and not body.endswith("\\ |"), row
    cells, current, escaped = [], "", False
    for ch in body[1:-1]:
        if ch == "|" and not escaped:
            cells.append(current)
            current = ""
        else:
            current += ch
        escaped = ch == "\\" and not escaped
    cells.append(current)
    return cells


def test_hostile_text_keeps_its_cell_and_its_code_span() -> None:
    md = markdown.markdown_table(hostile_result())
    assert not has_controls(md.replace("\n", ""))  # no ESC, OSC, bidi override, no stray newline
    rows = [line for line in md.splitlines() if line.startswith("| ") and "verdict |" not in line]
    assert len(rows) == 2  # the newline of the cause did not end the row
    for row in rows:
        assert len(gfm_cells(row)) == 7, row
    cells = gfm_cells(rows[0])
    # the skill line is one code span whose fence is longer than any run of backticks in it
    span = re.search(r"skill line: (`+)(.*?)\1\)", cells[6])
    assert span is not None, cells[6]
    assert len(span.group(1)) == 4 and "````" not in span.group(2)
    assert span.group(2).strip().replace("\\|", "|") == "Always `write` TOTAL | ``` [a](http://e.example/l) " \
                                                        "![b](http://e.example/b.png) <i>it</i> x  `"
    outside = cells[6].replace(span.group(0), "").replace("; cause: ", "; ")  # the summary's own words
    for part in (outside, cells[1], cells[2]):  # every markdown character outside code is escaped
        for ch in "[]`*_~|:@$<>":
            assert not re.search(r"(?<!\\)(?:\\\\)*" + re.escape(ch), part), (ch, part)
        assert "www." not in part
    assert "> \\# the judge \\[failed\\](http\\://e.example/e) - &lt;script&gt;alert(1)&lt;/script&gt;\n" in md


def test_the_rendered_summary_has_no_link_image_html_or_emphasis_from_outside() -> None:
    markdown_it = pytest.importorskip("markdown_it")
    html = markdown_it.MarkdownIt("commonmark").enable("table").enable("strikethrough").render(
        markdown.markdown_table(hostile_result()))

    class Tags(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.tags: list[str] = []
            self.cells: list[str] = []
            self.codes: list[str] = []
            self._in: list[str] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            self.tags.append(tag)
            if tag in ("td", "code"):
                self._in.append(tag)
                (self.cells if tag == "td" else self.codes).append("")

        def handle_endtag(self, tag: str) -> None:
            if self._in and self._in[-1] == tag:
                self._in.pop()

        def handle_data(self, data: str) -> None:
            if "td" in self._in:
                self.cells[-1] += data
            if "code" in self._in:
                self.codes[-1] += data

    parsed = Tags()
    parsed.feed(html)
    allowed = {"h3", "p", "code", "table", "thead", "tbody", "tr", "th", "td", "strong", "blockquote"}
    assert set(parsed.tags) <= allowed, set(parsed.tags) - allowed
    assert parsed.tags.count("strong") == 2  # the page's own: **HURTS** and **HELPS**
    assert len(parsed.cells) == 14  # two rows of seven cells
    assert parsed.cells[1] == "evil[x](https://e.example/s)`*b*|c Name"  # ESC[2J gone, the override a space
    assert parsed.cells[2] == MODEL
    assert "Always `write` TOTAL | ``` [a](http://e.example/l) ![b](http://e.example/b.png) <i>it</i> x  `" \
        in parsed.codes
    assert "<img src=x onerror=alert(1)> <b>bold</b> **strong** _em_ ~~del~~ www.e.example a@e.example $x$ |split|" \
        in parsed.cells[6]
    assert f"suite as of {LABEL}" in parsed.cells[6]


def test_code_spans_round_trip_any_backticks() -> None:
    markdown_it = pytest.importorskip("markdown_it")
    render = markdown_it.MarkdownIt("commonmark").renderInline
    for body in ("`", "a`b", "``x``", "`lead", "trail`", "a ``` b ` c", "plain"):
        got = render(markdown.code(body))
        assert got.startswith("<code>") and got.endswith("</code>"), (body, got)
        assert got[len("<code>"):-len("</code>")].replace("&lt;", "<").replace("&gt;", ">") \
            .replace("&quot;", '"').replace("&amp;", "&") == body, (body, got)
    assert markdown.code("\x1b[31m") == "(empty)"
