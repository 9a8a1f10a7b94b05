"""Set-ups the Hermes tests of several kinds share: the skills of the plugin tests, and a
run context of the ``hermes`` runner built from plain values."""

from __future__ import annotations

from pathlib import Path

from pytest_skillcourt.agent.context import RunContext
from pytest_skillcourt.options import AgentChoice
from pytest_skillcourt.skills import load_library
from pytest_skillcourt.suite import Suite, Task
from tests.support.builders import model_spec, settings, write_skill

# -- the plugin: three skills in two categories ---------------------------------------

SALES = "sales-csv-totals"

SKILLS = {
    "data/sales-csv-totals": (SALES, "Sum the amount column of a sales CSV and report the total with currency",
                              "# Sales totals\nRound every total to tens.\n"),
    "data/csv-clean": ("csv-clean", "Clean CSV files", "Drop empty rows.\n"),
    "writing/tone": ("tone", "Write in a friendly tone", "Be kind.\n"),
}


def write_skills(skills_dir: Path, skills: dict[str, tuple[str, str, str]] = SKILLS) -> None:
    """Write ``skills`` (folder -> name, description, body) under ``skills_dir``."""
    for rel, (name, description, body) in skills.items():
        folder = skills_dir / rel
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\n{body}")


# -- the runner: one run of house-format's suite ---------------------------------------

SKILL = "house-format"


def make_ctx(tmp: Path, profile: Path | None, arm: str, *, disabled: tuple[str, ...] = (),
             base_url: str = "http://127.0.0.1:9/v1", timeout: float = 60.0,
             prompt: str = "Question 1") -> RunContext:
    """One ``arm`` run of ``house-format``'s task t1 with the hermes runner in Docker, in a
    library of two skills (``tools/other-tip`` with a script); ``profile`` is the Hermes
    profile the run clones."""
    lib_root = tmp / "skills"
    write_skill(lib_root, SKILL, "How we format totals")
    write_skill(lib_root / "tools", "other-tip", "A harmless tip", body="Use printf.")
    (lib_root / "tools" / "other-tip" / "scripts").mkdir(exist_ok=True)
    (lib_root / "tools" / "other-tip" / "scripts" / "run.sh").write_text("echo hi\n")
    library = load_library(lib_root)
    suite = Suite(path=tmp / "skills_tests" / f"{SKILL}.yaml", skill=SKILL,
                  tasks=(Task(id="t1", prompt=prompt),), timeout=timeout)
    model = model_spec(base_url, "custom/m", api_key="the-run-key")
    run_settings = settings(tmp, models=("custom/m",), agent=AgentChoice.HERMES, hermes_profile=profile,
                            sandbox="docker", disabled=disabled, memory_mb=512, pids=64)
    return RunContext(settings=run_settings, library=library,
                      suite=suite, suite_rel=f"skills_tests/{SKILL}.yaml", task=suite.tasks[0],
                      arm=arm, rep=1, model=model, trial="t", backend="docker", image="img",
                      image_id="sha256:x")
