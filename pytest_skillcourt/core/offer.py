"""Proof of offer: which skills the model was really offered in a run, read from what
the agent sent the model, and whether that kept the two arms apart.

A verdict is only true if the two arms differed in the skill alone.  Codex does not list
skills in dot-folders and cuts its listing short in a large library (1,212 skills: 257
listed); a runtime may list its own bundled skill of the same name in place of the
library's.  Then the ``with`` arm never saw the skill, and its runs say nothing about it.
So each run's first request is read for the agent's own skill listing
(:func:`read_listing`), and a ``with`` run whose listing lacks the skill under test, or a
``without`` run whose listing has it, has no outcome, with the reason
(:func:`offer_problem`); the verdict's hint names it (README "Proof of offer").

The listings, as each runtime writes them into its requests:

- Hermes and the built-in agent: the ``<available_skills>`` block of the system prompt,
  one ``    - NAME: description`` line per skill (no block: no skill offered).
- Claude Code: the lines below "The following skills are available for use with the
  Skill tool:" (``- NAME: description``, ``- NAME``, or ``- FOLDER (NAME)``).
- Codex: the lines below ``### Available skills`` (``- NAME: description (file:
  r0/PATH/SKILL.md)``), with the roots ``r0`` ... named under ``### Skill roots``.

Only messages the agent itself wrote (system, developer, user) are read, never a tool's
output, so a run cannot forge its own listing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

#: The listing forms :func:`read_listing` knows.
HERMES, CLAUDE, CODEX = "hermes", "claude-code", "codex"
#: Runners whose agent shows no listing at all when it offers no skill.
NO_BLOCK_MEANS_NONE = frozenset({"builtin", "hermes"})

_CLAUDE_HEADING = "The following skills are available for use with the Skill tool:"
_CODEX_HEADING = "### Available skills"
_CODEX_ROOT = re.compile(r"^- `(r\d+)` = `([^`]*)`$")
_CODEX_FILE = re.compile(r"\(file: (r\d+)/(.*)\)\s*$")
_CLAUDE_FOLDER = re.compile(r"^(\S+) \(([^()]+)\)$")


@dataclass(frozen=True)
class Listing:
    """The skills one run's agent offered its model, as its listing names them."""

    form: str
    names: tuple[str, ...]
    #: Codex: each entry's SKILL.md path (roots expanded), in the order of ``names``
    files: tuple[str, ...] = ()

    def has(self, name: str) -> bool:
        """Whether ``name`` is listed (a ``plugin:name`` entry counts for ``name``)."""
        return any(n == name or n.rpartition(":")[2] == name for n in self.names)

    def has_file(self, path: str) -> bool:
        return path in self.files


def _texts(transcript: Sequence[Mapping[str, Any]]) -> list[str]:
    """The texts of the messages the agent wrote (not tool results, not the model's)."""
    out = []
    for message in transcript:
        if message.get("role") in ("system", "developer", "user"):
            content = message.get("content")
            if isinstance(content, str):
                out.append(content)
            elif isinstance(content, list):
                out.append("\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict)))
    return out


def _entries(text: str, heading: str) -> list[str]:
    """The ``- entry`` lines right below ``heading`` (continuation lines skipped; the list
    ends at a blank line, a tag or a heading)."""
    start = text.find(heading)
    lines = text[start + len(heading):].lstrip("\n").splitlines()
    out = []
    for line in lines:
        if not line.strip() or line.startswith(("<", "#")):
            break
        if line.startswith("- "):
            out.append(line[2:])
    return out


def _hermes(text: str) -> Listing | None:
    start = text.find("<available_skills>")
    if start < 0:
        return None
    names = []
    for line in text[start + len("<available_skills>"):].splitlines():
        if line.strip() == "</available_skills>":
            break
        if line.startswith("    - "):
            names.append(line[6:].split(": ", 1)[0].strip())
    return Listing(HERMES, tuple(names))


def _claude(text: str) -> Listing | None:
    if _CLAUDE_HEADING not in text:
        return None
    names = []
    for entry in _entries(text, _CLAUDE_HEADING):
        head = entry.split(": ", 1)[0].strip()
        folder = _CLAUDE_FOLDER.match(head)
        names.append(folder.group(2) if folder else head)
    return Listing(CLAUDE, tuple(names))


def _codex(text: str) -> Listing | None:
    if _CODEX_HEADING not in text:
        return None
    roots = {}
    for line in text.splitlines():
        found = _CODEX_ROOT.match(line.strip())
        if found:
            roots[found.group(1)] = found.group(2).rstrip("/")
    names, files = [], []
    for entry in _entries(text, _CODEX_HEADING):
        names.append(entry.split(":", 1)[0].strip())
        where = _CODEX_FILE.search(entry)
        files.append(f"{roots.get(where.group(1), where.group(1))}/{where.group(2)}" if where else "")
    return Listing(CODEX, tuple(names), tuple(files))


def read_listing(transcript: Sequence[Mapping[str, Any]], runner: str) -> Listing | None:
    """The skill listing of the run's first request that has one, in whichever form it
    is; for the built-in agent and Hermes no listing at all is an empty one (they show
    none when no skill is offered); None when no listing can be read (an agent whose
    listing this module does not know: nothing can be proved either way)."""
    for text in _texts(transcript):
        for read in (_hermes, _claude, _codex):
            found = read(text)
            if found is not None:
                return found
    if runner in NO_BLOCK_MEANS_NONE and transcript:
        return Listing(HERMES, ())
    return None


@dataclass(frozen=True)
class SkillPlace:
    """What the offer check needs of the skill under test."""

    name: str
    #: its folder's path in the library, POSIX ("tools/deploy", ".curated/x")
    library_path: str
    #: where the runner installed its SKILL.md in the sandbox ("" when it does not say)
    installed: str = ""
    library_size: int = 0


def offer_problem(arm: str, skill: SkillPlace, listing: Listing | None) -> str | None:
    """Why this run says nothing about the skill: a ``with`` run that was not offered it,
    or a ``without`` run that was; None when the arms are as they must be (or when the
    listing cannot be read)."""
    if listing is None:
        return None
    if listing.form == CODEX and skill.installed and any(listing.files):
        listed = listing.has_file(skill.installed)
    else:
        listed = listing.has(skill.name)
    if arm == "without":
        if not listed:
            return None
        return (f"not hidden: the without arm's {listing.form} listing offered {skill.name!r} "
                "(the runtime did not hide it)")
    if listed:
        return None
    why = []
    if any(part.startswith(".") for part in skill.library_path.split("/")):
        why.append(f"its folder {skill.library_path}/ is a dot-folder, which {listing.form} does not list")
    if listing.form == CODEX and listing.has(skill.name):
        why.append(f"a bundled skill named {skill.name!r} is listed in its place")
    if listing.form == HERMES:  # the index lists every skill it offers: none is cut
        why.append("its frontmatter's platforms:, environments: or requires_ conditions leave it "
                   "out here, as Hermes does")
    elif skill.library_size and len(listing.names) < skill.library_size:
        why.append(f"the listing was cut short: {len(listing.names)} skills listed, the library has "
                   f"{skill.library_size}")
    reason = "; ".join(why) or "the runtime left it out of its listing"
    return f"not offered: the with arm's {listing.form} listing lacks {skill.name!r} ({reason})"
