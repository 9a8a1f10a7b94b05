"""The JSON Schema for suite files (editor completion) agrees with the court's own parser."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from pytest_skillcourt.core import suite as suite_mod
from pytest_skillcourt.cli.scaffold import SUITE
from pytest_skillcourt.core.suite import SuiteError, load_suite

SCHEMA = json.loads((Path(suite_mod.__file__).parents[1] / "schemas" / "suite.schema.json").read_text())
REPO = Path(__file__).resolve().parents[2]
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def test_the_schema_is_valid_and_names_exactly_the_parsers_keys() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert set(SCHEMA["properties"]) == set(suite_mod.SUITE_KEYS)
    assert set(SCHEMA["$defs"]["task"]["properties"]) == set(suite_mod.TASK_KEYS)


@pytest.mark.parametrize("path", sorted((REPO / "skills_tests").glob("*.yaml")), ids=lambda p: p.name)
def test_the_shipped_suites_validate(path: Path) -> None:
    assert not list(VALIDATOR.iter_errors(yaml.safe_load(path.read_text())))


def test_the_suite_init_lays_validates() -> None:
    assert not list(VALIDATOR.iter_errors(yaml.safe_load(SUITE)))


TASK = {"id": "t1", "prompt": "Give the total."}


@pytest.mark.parametrize("data", [
    {"skill": "s", "tasks": [TASK], "colour": "red"},
    {"skill": "s", "tasks": [{**TASK, "chek": "true"}]},
    {"skill": "s", "tasks": []},
    {"skill": "s", "tasks": [{"id": "t1"}]},
    {"skill": "s", "tasks": [{**TASK, "prompt": "  "}]},
    {"skill": "s", "tasks": [{**TASK, "id": "verdict"}]},
    {"skill": "s", "tasks": [{**TASK, "id": ".."}]},
    {"skill": "s", "tasks": [{**TASK, "id": "a b"}]},
    {"skill": "s", "tasks": [{**TASK, "files": {"/etc/passwd": "x"}}]},
    {"skill": "s", "tasks": [{**TASK, "files": {"a/../../x": "x"}}]},
    {"skill": "s", "tasks": [{**TASK, "files": {"a.txt": 5}}]},
    {"skill": "s", "reps": 0, "tasks": [TASK]},
    {"skill": "s", "reps": 101, "tasks": [TASK]},
    {"skill": "s", "timeout": 0, "tasks": [TASK]},
    {"skill": "", "tasks": [TASK]},
], ids=lambda d: json.dumps(d)[:60])
def test_what_the_parser_refuses_the_schema_refuses(tmp_path: Path, data: dict[str, Any]) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(SuiteError):
        load_suite(path, ["s"])
    assert list(VALIDATOR.iter_errors(data)), "the schema let it through"


@pytest.mark.parametrize("data", [
    {"skill": "s", "tasks": [TASK]},
    {"skill": "s", "image": "python:3.12-slim", "timeout": 30.5, "reps": 3, "setup": "true",
     "tasks": [{**TASK, "files": {"data/a.csv": "x,y\n"}, "check": "true"}]},
    {"skill": "s", "tasks": [{**TASK, "id": "1.10"}, {**TASK, "id": "v-2_a"}]},
], ids=lambda d: json.dumps(d)[:60])
def test_what_the_parser_takes_the_schema_takes(tmp_path: Path, data: dict[str, Any]) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    load_suite(path, ["s"])
    assert not list(VALIDATOR.iter_errors(data))
