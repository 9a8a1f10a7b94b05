"""The skill an appeal is about and its drafts, shared by the appeal tests of every kind.

``house-format`` holds the line ``BAD`` that misleads the scripted model; the good
draft replaces that line, so on trial it no longer hurts.
"""

from __future__ import annotations

SKILL = "house-format"
BAD = "Spell totals out in words, like 'total 100'."
BODY = f"# {SKILL}\n\nAnswer with the total only.\n{BAD}\nNever add commentary.\n"


def original_md() -> str:
    """The SKILL.md on trial, with the bad line."""
    return f"---\nname: {SKILL}\ndescription: How we format totals in this team\n---\n\n{BODY}"


def good_draft() -> str:
    """A draft that passes every check: the bad line replaced by the right rule."""
    return original_md().replace(BAD + "\n", "Write totals as TOTAL-<n>.\n")
