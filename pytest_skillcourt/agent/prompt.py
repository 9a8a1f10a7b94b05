"""The built-in agent's system prompt: a jinja2 template with Hermes' skills block.

The skills block is Hermes Agent 0.19.0's ``## Skills (mandatory)`` index
(``agent/prompt_builder.py`` ``build_skills_system_prompt``), checked line for
line against it (``tests/integration/test_builtin_vs_hermes.py``): skills
grouped by category inside ``<available_skills>``, a category's
``DESCRIPTION.md`` description beside it, ``    - name: description`` with
the description cut to 60 characters, and only the skills Hermes would offer
an agent with the built-in agent's tools (:data:`agent.tools.TOOLSETS`):
``skills.offered`` (platform, environment, ``requires_*``/``fallback_for_*``).
Hermes-only sentences (its own ``hermes-agent`` skill, ``skill_manage``) are
left out because the built-in agent has neither (docs/architecture.md, "How
the built-in agent shows a library").
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from pytest_skillcourt.core.skills import Skill, offered
from pytest_skillcourt.agent.tools import TOOLSETS

TEMPLATE = "system_prompt.j2"


@lru_cache(maxsize=1)
def _template_source() -> str:
    from importlib.resources import files

    return (files("pytest_skillcourt") / "templates" / TEMPLATE).read_text(encoding="utf-8")


def template_hash() -> str:
    """Hash of the template text: part of the run cache key."""
    return _text_hash(_template_source())


@lru_cache(maxsize=4)
def _text_hash(text: str) -> str:  # every run key asks: hashed once per text
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def index_categories(visible: Iterable[Skill], hidden: Iterable[str] = ()) -> list[tuple[str, list[str]]]:
    """Hermes' index as (category header, skill lines), categories sorted.

    A skill is left out as Hermes leaves it out: not offered here
    (``skills.offered`` with the built-in agent's tools), or disabled by its
    shown name or its folder's name (``hidden``: the names the run hides).
    Within a category, lines are sorted by name and a name is shown once."""
    hide = set(hidden)
    tools = set(TOOLSETS)
    toolsets = set(TOOLSETS.values())
    by_category: dict[str, list[tuple[str, str]]] = {}
    descriptions: dict[str, str] = {}
    for skill in sorted(visible, key=lambda s: str(s.skill_md)):  # Hermes' walk order
        if skill.index_name in hide or skill.folder.name in hide:
            continue
        if not offered(skill.frontmatter, tools, toolsets):
            continue
        by_category.setdefault(skill.category, []).append((skill.index_name, skill.index_line))
        if skill.category_description:
            descriptions[skill.category] = skill.category_description
    out: list[tuple[str, list[str]]] = []
    for category in sorted(by_category):
        desc = descriptions.get(category, "")
        header = f"  {category}: {desc}" if desc else f"  {category}:"
        seen: set[str] = set()
        lines: list[str] = []
        for name, line in sorted(by_category[category], key=lambda item: item[0]):
            if name not in seen:
                seen.add(name)
                lines.append(line)
        out.append((header, lines))
    return out


@lru_cache(maxsize=1)
def _template() -> Any:
    """The compiled template: compiled once per process (a compile costs more than a render)."""
    import jinja2

    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=False, autoescape=False,
                             keep_trailing_newline=False, undefined=jinja2.StrictUndefined)
    return env.from_string(_template_source())


def render_system_prompt(visible: Iterable[Skill], hidden: Iterable[str] = ()) -> str:
    """Render the system prompt listing the ``visible`` skills Hermes would list."""
    return _template().render(categories=index_categories(visible, hidden)).strip() + "\n"
