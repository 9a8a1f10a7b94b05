"""YAML alias bombs and deep nesting in suites and SKILL.md frontmatter (issue 17, point 7).

A 404-byte suite once took 32.6 s and 1.6 GB before its error appeared, and
a deeply nested document crashes libyaml's composer.  Each case runs in a
child process under an address-space limit (``resource.RLIMIT_AS``) and a
timeout, so a regression fails fast instead of eating the machine or killing
the test process; each runs on both YAML loaders (libyaml's and the pure one).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from tests.support import REPO
from tests.support.yaml_bombs import laughs, merge_bomb

MEMORY_LIMIT = 512 * 1024 * 1024
SECONDS = 20

LOADERS = ["SafeLoader"] + (["CSafeLoader"] if hasattr(yaml, "CSafeLoader") else [])

#: The child: limit memory, pick the loader, run the body, print its JSON result.
CHILD = """\
import json, resource, sys, yaml
resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
sys.path.insert(0, {root!r})
from pytest_skillcourt.core import safe_yaml
safe_yaml.BASE_LOADER = getattr(yaml, {loader!r})
{body}
"""


def run_child(loader: str, body: str) -> dict:
    code = CHILD.format(limit=MEMORY_LIMIT, root=str(REPO), loader=loader, body=textwrap.dedent(body))
    start = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=SECONDS)
    except subprocess.TimeoutExpired:
        pytest.fail(f"still parsing after {SECONDS} s")
    elapsed = time.monotonic() - start
    assert proc.returncode == 0, f"child died ({proc.returncode}): {proc.stderr[-2000:]}"
    assert elapsed < SECONDS / 2, elapsed
    return json.loads(proc.stdout.strip().splitlines()[-1])


SUITE_BODY = """\
from pytest_skillcourt.core.suite import SuiteError, load_suite
try:
    load_suite({path!r}, ["sales-csv-totals"])
    print(json.dumps({{"error": None}}))
except SuiteError as err:
    print(json.dumps({{"error": str(err)}}))
"""


def suite_error(tmp_path: Path, loader: str, text: str) -> str | None:
    path = tmp_path / "skills_tests" / "bomb.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return run_child(loader, SUITE_BODY.format(path=str(path)))["error"]


@pytest.fixture(params=LOADERS)
def loader(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.mark.parametrize(("text", "expected"), [
    # the 404-byte suite: the tasks are the bomb itself
    ("skill: sales-csv-totals\ntasks:\n  - " + laughs() + "\n",
     "would expand to more than 10000 values; write the repeated part out"),
    # a bomb inside one task's files (an alias to a mapping)
    ("skill: sales-csv-totals\ntasks:\n  - id: a\n    prompt: p\n    files: {f: " + laughs() + "}\n",
     "is refused: the aliases up to *l3 would expand"),
    ("skill: sales-csv-totals\n" + merge_bomb().replace("m8: &m8", "tasks:"),
     "would expand to more than 10000 values"),
    ("skill: sales-csv-totals\ntasks: &t [*t]\n",
     "the alias *t is inside the collection &t it names, so expanding it never ends"),
    ("skill: sales-csv-totals\ntasks: " + "[" * 100_000 + "]" * 100_000 + "\n",
     "collections are nested more than 100 deep; flatten the structure"),
    ("skill: sales-csv-totals\ntasks:\n  " + "- " * 50_000 + "x\n",
     "collections are nested more than 100 deep"),
], ids=["laughs", "laughs-in-a-task", "merge-keys", "recursive", "deep-flow", "deep-block"])
def test_a_suite_bomb_is_refused_before_it_expands(tmp_path: Path, loader: str, text: str,
                                                   expected: str) -> None:
    error = suite_error(tmp_path, loader, text)
    assert error is not None and expected in error, error
    assert "bomb.yaml:" in error  # the file and the line of the offending alias or nesting


def test_the_refusal_names_the_line_of_the_alias(tmp_path: Path, loader: str) -> None:
    error = suite_error(tmp_path, loader, "skill: sales-csv-totals\ntasks:\n\n  - " + laughs() + "\n")
    assert error is not None and "bomb.yaml:4: is refused" in error, error


def test_ordinary_aliases_still_load(tmp_path: Path, loader: str) -> None:
    tasks = "".join(f"  - {{id: t{i}, prompt: p, files: *common, check: *check}}\n" for i in range(300))
    text = ("skill: sales-csv-totals\nsetup: &check test -s \"$SKILL_COURT_ANSWER\"\n"
            "x-common: &common {a.csv: \"1\", b.csv: \"2\", notes/c.md: \"3\"}\ntasks:\n" + tasks)
    error = suite_error(tmp_path, loader, text)
    # the key x-common is unknown: the document loaded, aliases and all
    assert error is not None and "x-common: unknown key" in error, error
    ok = ("skill: sales-csv-totals\ntasks:\n  - &one {id: a, prompt: p, files: &f {a.csv: '1'}}\n"
          + "".join(f"  - {{id: b{i}, prompt: q, files: *f}}\n" for i in range(1000)))
    assert suite_error(tmp_path, loader, ok) is None


LIBRARY_BODY = """\
import warnings
from pytest_skillcourt.core.skills import load_library, parse_frontmatter
from pytest_skillcourt.core.suite import SuiteError, load_suite
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    lib = load_library({root!r})
front, body = parse_frontmatter(open({skill_md!r}, encoding="utf-8").read())
try:
    load_suite({suite!r}, lib.names(), lib.broken())
    suite_error = None
except SuiteError as err:
    suite_error = str(err)
print(json.dumps({{"names": lib.names(), "broken": lib.broken(), "suite_error": suite_error,
                  "warnings": [str(w.message) for w in caught], "body": body}}))
"""


@pytest.mark.parametrize(("front", "expected"), [
    ("name: bomb\ndescription: " + laughs(),
     "would expand to more than 10000 values"),
    ("name: bomb\ndescription: " + "[" * 100_000 + "]" * 100_000,
     "nested more than 100 deep"),
    ("name: bomb\ndescription: &d [*d]", "never ends"),
], ids=["laughs", "deep", "recursive"])
def test_a_frontmatter_bomb_leaves_out_that_skill_only(tmp_path: Path, loader: str, front: str,
                                                       expected: str) -> None:
    root = tmp_path / "skills"
    (root / "bomb").mkdir(parents=True)
    (root / "bomb" / "SKILL.md").write_text(f"---\n{front}\n---\nbody\n", encoding="utf-8")
    (root / "fine").mkdir()
    (root / "fine" / "SKILL.md").write_text("---\nname: fine\ndescription: ok\n---\nbody\n")
    suite = tmp_path / "skills_tests" / "bomb.yaml"
    suite.parent.mkdir()
    suite.write_text("skill: bomb\ntasks:\n  - {id: a, prompt: p}\n")
    result = run_child(loader, LIBRARY_BODY.format(root=str(root), skill_md=str(root / "bomb" / "SKILL.md"),
                                                   suite=str(suite)))
    assert result["names"] == ["fine"]
    assert expected in result["broken"]["bomb"] and "bomb/SKILL.md:" in result["broken"]["bomb"]
    assert "bomb.yaml:1: skill: the skill 'bomb' is left out of the library" in result["suite_error"]
    assert expected in result["suite_error"]
    assert any("skill 'bomb' is left out" in w for w in result["warnings"])
    assert result["body"] == "body\n"  # parse_frontmatter itself never raises
