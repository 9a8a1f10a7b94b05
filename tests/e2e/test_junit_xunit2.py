"""The JUnit file (README "CI"): valid xunit2 by default, written by pytest alone.

The schema is Jenkins' xunit plugin's junit-10.xsd (``tests/support/junit-10.xsd``),
the one pytest validates its own xunit2 output against.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pytest_skillcourt.plugin.junit import read_block, text_block
from tests.support.builders import (
    hurting_model,
    ini,
    junit_properties,
    run_court,
    task,
    write_skill,
    write_suite,
)
from tests.support.llm_server import LLMServer
from tests.support.sandbox_image import require_bwrap

XSD = Path(__file__).resolve().parents[1] / "support" / "junit-10.xsd"
#: how pytest's junitxml starts its file (a rewrite by ElementTree would start otherwise)
PYTEST_START = '<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests">'


def schema_errors(xml_path: Path) -> list[str]:
    """What the xunit2 schema says of ``xml_path`` (empty: valid)."""
    from lxml import etree

    schema = etree.XMLSchema(etree.parse(str(XSD)))
    ok = schema.validate(etree.parse(str(xml_path)))
    return [] if ok else [str(e) for e in schema.error_log]


def hurting_session(pytester: pytest.Pytester, server: LLMServer) -> None:
    """A library whose skill misleads the model on three check-less (judged) tasks."""
    require_bwrap()
    server.set_handler(hurting_model())
    write_skill(pytester.path / "skills", "house-format", "How we format totals in this team")
    write_suite(pytester.path, "house-format",
                [task(f"t{i}", f"Question {i}: give the total.") for i in range(1, 4)])
    pytester.makefile(".ini", pytest=ini(server.base_url, sandbox="local"))


def test_default_file_is_valid_xunit2_with_the_run_data_in_system_out(pytester: pytest.Pytester,
                                                                       server: LLMServer) -> None:
    hurting_session(pytester, server)
    result = run_court(pytester)
    result.assert_outcomes(passed=6, failed=1)
    path = pytester.path / "junit.xml"
    assert schema_errors(path) == []
    text = path.read_text(encoding="utf-8")
    assert text.startswith(PYTEST_START)  # pytest's own file: nobody wrote it again
    root = ET.parse(path).getroot()
    assert not [c for c in root.iter("testcase") if c.find("properties") is not None]
    suite_props = {p.get("name"): p.get("value") for p in root.find("testsuite/properties") or []}
    assert suite_props["skill_court_trial"].startswith("20")
    cases = {c.get("name"): c for c in root.iter("testcase")}
    run_out = cases["t2[with]"].find("system-out")
    assert run_out is not None and run_out.text is not None
    assert run_out.text.startswith("[skill court]\nskill_court_run: ")
    assert "[skill court: judgment]\noutcome: failure\noutcome_source: judge\njudge_winner: without\n" in run_out.text
    verdict = junit_properties(path)["skills_tests.house-format.yaml::verdict[test-model]"]
    assert verdict["verdict"] == "HURTS" and verdict["__status__"] == "failure"
    assert verdict["cause"] == "the skill's rule about totals misled the model"
    run = junit_properties(path)["skills_tests.house-format.yaml::t2[with]"]
    assert run["outcome"] == "failure" and run["judge_winner"] == "without" and run["arm"] == "with"
    assert "PytestWarning" not in result.stdout.str()


def test_properties_option_with_xunit1_gives_per_testcase_properties(pytester: pytest.Pytester,
                                                                      server: LLMServer) -> None:
    hurting_session(pytester, server)
    result = run_court(pytester, "--skill-court-junit-properties", "-o", "junit_family=xunit1")
    result.assert_outcomes(passed=6, failed=1)
    path = pytester.path / "junit.xml"
    assert path.read_text(encoding="utf-8").startswith(PYTEST_START)
    root = ET.parse(path).getroot()
    case = next(c for c in root.iter("testcase") if c.get("name") == "t2[with]")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["outcome"] == "failure" and props["judge_winner"] == "without"
    assert props["skill_court_run"] and props["status"] == "answered"
    assert [p.get("name") for p in case.iter("property")].count("outcome") == 1
    assert not [o for o in case.findall("system-out") if (o.text or "").startswith("[skill court]")]


def test_properties_option_is_refused_with_xunit2(pytester: pytest.Pytester, server: LLMServer) -> None:
    hurting_session(pytester, server)
    result = run_court(pytester, "--skill-court-junit-properties")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([("*--skill-court-junit-properties: per-testcase <properties> are valid JUnit "
                                  "only with junit_family = xunit1*add 'junit_family = xunit1' to the ini*")])
    assert server.requests == []


def test_the_text_block_reads_back_as_written() -> None:
    props = [("line", "success fell\nfrom 100% to 0%"), ("empty", ""), ("n", 3), ("url", "a: b")]
    block = text_block(props)
    assert block == "[skill court]\nline: success fell\n    from 100% to 0%\nempty: \nn: 3\nurl: a: b\n"
    assert read_block(block + text_block([("n", 4)], "[skill court: judgment]")) == {
        "line": "success fell\nfrom 100% to 0%", "empty": "", "n": "4", "url": "a: b"}
