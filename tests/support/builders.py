"""Helpers for end-to-end tests: small skill libraries, suites and scripted models.

The scripted "models" here are handlers for the local test server: they decide
each reply from what the agent really sent (the system prompt's skills index,
tool results), so the plugin's own code path is exercised for real.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Callable, Iterable

from tests.support.llm_server import RecordedRequest, Reply, ToolCall, turn


def write_skill(root: Path, name: str, description: str, body: str = "Follow the house rules.") -> Path:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: {description}\n---\n\n# {name}\n\n{body}\n", encoding="utf-8")
    return folder


def write_suite(root: Path, skill: str, tasks: Iterable[dict], **top: object) -> Path:
    import yaml

    path = root / "skills_tests" / f"{skill}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"skill": skill, **top, "tasks": list(tasks)}
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def default_sandbox() -> tuple[str, str]:
    """(backend, image) for end-to-end trials: Docker with the local test image
    where an engine answers (as the product defaults to), else bubblewrap."""
    from tests.support.sandbox_image import docker_available, ensure_test_image

    if docker_available():
        return "docker", ensure_test_image()
    return "local", ""


def ini(base_url: str, *, skills: str = "skills", extra: str = "", sandbox: str | None = None) -> str:
    backend, image = default_sandbox() if sandbox is None else (sandbox, "")
    if backend == "docker" and not image:
        image = default_sandbox()[1]
    return textwrap.dedent(f"""\
        [pytest]
        skill_court_skills = {skills}
        skill_court_models = custom/test-model
        skill_court_base_url = {base_url}
        skill_court_sandbox = {backend}
        skill_court_image = {image or "unused"}
        skill_court_timeout = 60
        skill_court_allow_unpriced = true
        """) + extra


def sees_skill(request: RecordedRequest, skill: str) -> bool:
    """True when the skill is listed in the system prompt's skills index."""
    system = request.system
    start, end = system.find("<available_skills>"), system.find("</available_skills>")
    return start >= 0 and f"- {skill}" in system[start:end]


def loading_agent(skill: str, answer_with: Callable[[RecordedRequest], str],
                  answer_without: Callable[[RecordedRequest], str],
                  *, tokens: tuple[int, int] = (100, 20)) -> Callable[[RecordedRequest], Reply]:
    """A model that loads ``skill`` with skill_view when it is listed, then answers.

    Turn 0: skill_view if visible (else answer at once).  Turn 1: answer.
    """

    def handler(request: RecordedRequest) -> Reply:
        t = turn(request)
        visible = sees_skill(request, skill)
        if t == 0 and visible:
            return Reply(tool_calls=(ToolCall("skill_view", {"name": skill}),),
                         input_tokens=tokens[0], output_tokens=tokens[1])
        text = answer_with(request) if visible else answer_without(request)
        return Reply(content=text, input_tokens=tokens[0], output_tokens=tokens[1])

    return handler


def task(tid: str, prompt: str, check: str | None = None, **kw: object) -> dict:
    out: dict = {"id": tid, "prompt": prompt}
    if check is not None:
        out["check"] = check
    out.update(kw)
    return out


def junit_properties(xml_path: Path) -> dict[str, dict[str, str]]:
    """testcase name (classname::name) -> its properties."""
    import xml.etree.ElementTree as ET

    out: dict[str, dict[str, str]] = {}
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        key = case.get("name", "")
        props = {p.get("name", ""): p.get("value", "") for p in case.iter("property")}
        status = "passed"
        for tag in ("failure", "error", "skipped"):
            if case.find(tag) is not None:
                status = tag
        props["__status__"] = status
        out[f"{case.get('classname')}::{key}"] = props
    return out


def dump(obj: object) -> str:
    return json.dumps(obj, indent=1, default=str)
