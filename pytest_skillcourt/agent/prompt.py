"""The built-in agent's system prompt: a jinja2 template with Hermes' skills block.

The skills block copies Hermes Agent 0.19.0's ``## Skills (mandatory)`` index
(``agent/prompt_builder.py``): skills grouped by category inside
``<available_skills>``, ``    - name: description`` with the description cut
to 60 characters, so a skill is exactly as visible as it would be in Hermes.
Hermes-only sentences (its own ``hermes-agent`` skill, ``skill_manage``) are
left out because the built-in agent has neither.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from typing import Iterable

from ..skills import Skill

TEMPLATE = "system_prompt.j2"


@lru_cache(maxsize=1)
def _template_source() -> str:
    from importlib.resources import files

    return (files("pytest_skillcourt") / "templates" / TEMPLATE).read_text(encoding="utf-8")


def template_hash() -> str:
    """Hash of the template text: part of the run cache key."""
    return hashlib.sha256(_template_source().encode()).hexdigest()[:16]


def render_system_prompt(visible: Iterable[Skill]) -> str:
    """Render the system prompt listing only ``visible`` skills."""
    import jinja2

    by_category: dict[str, list[str]] = {}
    for skill in sorted(visible, key=lambda s: s.name):
        by_category.setdefault(skill.category, []).append(skill.index_line)
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=False, autoescape=False,
                             keep_trailing_newline=False, undefined=jinja2.StrictUndefined)
    template = env.from_string(_template_source())
    return template.render(categories=sorted(by_category.items())).strip() + "\n"
