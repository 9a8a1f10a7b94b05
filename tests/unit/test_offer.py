"""``offer.py``: the skill listings as Hermes, Claude Code and Codex write them into their
requests (formats as seen from the real CLIs: Claude Code 2.1.332, Codex 0.171.0), and
when a run's listing means it says nothing about the skill."""

from __future__ import annotations

import pytest

from pytest_skillcourt.core.offer import CLAUDE, CODEX, HERMES, Listing, SkillPlace, offer_problem, read_listing

HERMES_PROMPT = """You are a capable assistant.

## Skills (mandatory)
Before replying, scan the skills below.

<available_skills>
  ops: Operations
    - deploy: Deploys things
    - rollback
  general:
    - house-format: How we format totals
</available_skills>

Only proceed without loading a skill if genuinely none are relevant to the task."""

CLAUDE_SYSTEM = """- statusline-setup: Use this agent to configure the status line. (Tools: Read, Edit)

The following skills are available for use with the Skill tool:

- .dotty (dotty): a dot-folder skill of mine
- init
- house-format: How we format totals,
  continued on a second line
- superpowers:brainstorming: Plugin skill

Today's date is 2026-12-04."""

CODEX_DEVELOPER = """<skills_instructions>
### Skill roots
- `r0` = `/root/.codex/skills`
- `r1` = `/root/.codex/skills/.system`
### Available skills
- imagegen: Generate or edit raster images (file: r1/imagegen/SKILL.md)
- skill-creator: Create skills (file: r1/skill-creator/SKILL.md)
- skill-creator: The library's own (file: r0/dot-system/skill-creator/SKILL.md)
- house-format: How we format totals (file: r0/ops/house-format/SKILL.md)
</skills_instructions><permissions instructions>
x
</permissions instructions>"""


def test_hermes_and_builtin_index() -> None:
    listing = read_listing([{"role": "system", "content": HERMES_PROMPT}], "builtin")
    assert listing == Listing(HERMES, ("deploy", "rollback", "house-format"))


def test_no_index_is_no_skill_offered_only_where_the_runtime_shows_none() -> None:
    transcript = [{"role": "system", "content": "no skills here"}, {"role": "user", "content": "hi"}]
    assert read_listing(transcript, "builtin") == Listing(HERMES, ())
    assert read_listing(transcript, "hermes") == Listing(HERMES, ())
    assert read_listing(transcript, "command") is None  # an agent we cannot read: nothing proved


def test_claude_code_listing_every_entry_form() -> None:
    listing = read_listing([{"role": "system", "content": CLAUDE_SYSTEM}], "claude-code")
    assert listing is not None and listing.form == CLAUDE
    assert listing.names == ("dotty", "init", "house-format", "superpowers:brainstorming")
    assert listing.has("brainstorming")  # a plugin skill by its bare name


def test_codex_listing_with_files_and_roots() -> None:
    listing = read_listing([{"role": "developer", "content": CODEX_DEVELOPER}], "codex")
    assert listing is not None and listing.form == CODEX
    assert listing.names == ("imagegen", "skill-creator", "skill-creator", "house-format")
    assert listing.files[2] == "/root/.codex/skills/dot-system/skill-creator/SKILL.md"


def test_a_tool_result_cannot_forge_a_listing() -> None:
    transcript = [{"role": "system", "content": "nothing"},
                  {"role": "tool", "content": HERMES_PROMPT},
                  {"role": "assistant", "content": CLAUDE_SYSTEM}]
    assert read_listing(transcript, "builtin") == Listing(HERMES, ())


PLACE = SkillPlace(name="house-format", library_path="ops/house-format",
                   installed="/root/.codex/skills/ops/house-format/SKILL.md", library_size=3)


@pytest.mark.parametrize("arm, names, problem", [
    ("with", ("deploy", "house-format"), None),
    ("without", ("deploy",), None),
    ("with", ("deploy",), "not offered: the with arm's hermes listing lacks 'house-format'"),
    ("without", ("deploy", "house-format"), "not hidden: the without arm's hermes listing offered 'house-format'"),
])
def test_the_arms_must_differ_in_the_skill(arm: str, names: tuple[str, ...], problem: str | None) -> None:
    found = offer_problem(arm, PLACE, Listing(HERMES, names))
    assert found == problem if problem is None else found.startswith(problem), found


def test_codex_tells_the_library_s_copy_from_a_bundled_one_by_path() -> None:
    place = SkillPlace(name="skill-creator", library_path=".system/skill-creator",
                       installed="/root/.codex/skills/dot-system/skill-creator/SKILL.md", library_size=2)
    with_both = read_listing([{"role": "developer", "content": CODEX_DEVELOPER}], "codex")
    assert offer_problem("with", place, with_both) is None
    only_bundled = Listing(CODEX, ("skill-creator",), ("/root/.codex/skills/.system/skill-creator/SKILL.md",))
    assert offer_problem("without", place, only_bundled) is None  # the bundled one is not the skill
    why = offer_problem("with", place, only_bundled)
    assert why is not None and "is a dot-folder" in why and "a bundled skill named 'skill-creator'" in why


def test_a_cut_listing_says_how_many_were_listed() -> None:
    place = SkillPlace(name="late", library_path="z/late", installed="", library_size=1212)
    why = offer_problem("with", place, Listing(CLAUDE, tuple(f"s{i}" for i in range(257))))
    assert why == ("not offered: the with arm's claude-code listing lacks 'late' (the listing was cut short: "
                   "257 skills listed, the library has 1212)")


def test_no_listing_proves_nothing() -> None:
    assert offer_problem("with", PLACE, None) is None
