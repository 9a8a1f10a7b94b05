"""The JUnit file under xdist: the controller adds each judged pair's judgment to its two
run items' testcases, named as the workers' reports named them (``runs.RunSummary``),
without reading any suite (the workers read them; their targets carry the facts)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from pytest_skillcourt.plugin.junit import JUDGMENT_HEADER, read_block
from tests.support.builders import hurting_model, ini, run_court, task, write_skill, write_suite
from tests.support.llm_server import LLMServer
from tests.support.sandbox_image import require_bwrap

#: Notes every suite read, by the process that read it (``reads-controller.txt``, ``reads-gw0.txt``).
COUNT_READS = '''
import os

from pytest_skillcourt.core.frozen import SuiteReader

_read = SuiteReader.read_suite  # what the court reads each suite with (``read`` calls it too)
HERE = os.path.dirname(os.path.abspath(__file__))


def counted(self, path, library):
    who = os.environ.get("PYTEST_XDIST_WORKER", "controller")
    with open(os.path.join(HERE, f"reads-{who}.txt"), "a", encoding="utf-8") as f:
        f.write(f"{path}\\n")
    return _read(self, path, library)


SuiteReader.read_suite = counted
'''


def test_the_xdist_controller_adds_judgments_without_reading_a_suite(pytester: pytest.Pytester,
                                                                     server: LLMServer) -> None:
    pytest.importorskip("xdist")
    require_bwrap()
    server.set_handler(hurting_model())
    write_skill(pytester.path / "skills", "house-format", "How we format totals in this team")
    write_suite(pytester.path, "house-format",
                [task(f"t{i}", f"Question {i}: give the total.") for i in range(1, 4)], reps=2)
    pytester.makefile(".ini", pytest=ini(server.base_url, sandbox="local"))
    pytester.makeconftest(COUNT_READS)
    result = run_court(pytester, "-n", "2", subprocess=True)
    result.assert_outcomes(passed=12, failed=1)
    readers = sorted(p.name for p in pytester.path.glob("reads-*.txt"))
    assert readers and "reads-controller.txt" not in readers, readers  # the workers read it, only they
    cases = {c.get("name"): c for c in ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")}
    for name, outcome in (("t2[with-r2]", "failure"), ("t2[without-r2]", "success")):
        out = cases[name].find("system-out")
        assert out is not None and out.text is not None and JUDGMENT_HEADER in out.text, name
        judged = read_block(out.text.split(JUDGMENT_HEADER, 1)[1])
        assert judged["outcome"] == outcome and judged["judge_winner"] == "without", (name, judged)
