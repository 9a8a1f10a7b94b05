"""The skills index of Hermes' system prompt and its ``skills_list`` results, without
the skills hidden from a model (points 1 and 2 of :mod:`pytest_skillcourt.hermes.hiding`).

Pure text: the index is found by the structure Hermes' prompt builder writes
(``agent/prompt_builder.py``, ``build_skills_system_prompt``) and edited line by line.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Container, Iterable

# The skills index as agent/prompt_builder.py (build_skills_system_prompt) writes it.
_SKILLS_HEADER = "## Skills (mandatory)"
_OPEN = "<available_skills>"
_CLOSE = "</available_skills>"
_SKILLS_FOOTER = "Only proceed without loading a skill if genuinely none are relevant to the task."
_BLOCK_END = "\n" + _CLOSE + "\n\n" + _SKILLS_FOOTER
_DEMOTED_NOTE_RE = re.compile(r"\n\(Categories marked \[names only\][^\n]*\)")
_NAMES_ONLY = " [names only]: "
_ENTRY = "    - "
#: The longest description in the index (agent.skill_utils.extract_skill_description
#: cuts it to 57 characters and "..."); a description keeps its newlines.
_DESCRIPTION_MAX = 60


# -- the system prompt ----------------------------------------------------------


def _line_start_find(text: str, needle: str, start: int = 0) -> int:
    """Index of the first ``needle`` at ``start`` or later that begins a line, else -1."""
    pos = text.find(needle, start)
    while pos > 0 and text[pos - 1] != "\n":
        pos = text.find(needle, pos + 1)
    return pos


def _entry_split(line: str, hidden: Container[str]) -> tuple[str, str, bool]:
    """``(name, description, hidden?)`` of an index entry ``    - name: description``.

    A name may itself hold ": "; every split is tried (a few per line), and a
    hidden reading wins.  Without a hidden reading, the first ": " splits.
    """
    rest = line[len(_ENTRY):]
    if rest in hidden:
        return rest, "", True
    first: tuple[str, str] | None = None
    pos = rest.find(": ")
    while pos >= 0:
        name, description = rest[:pos], rest[pos + 2:]
        if name in hidden:
            return name, description, True
        if first is None:
            first = (name, description)
        pos = rest.find(": ", pos + 1)
    name, description = first if first is not None else (rest, "")
    return name, description, False


@dataclass
class _Item:
    """Lines of the index body that belong together: a category header, a
    names-only category, a skill entry (each with the lines its text continues
    on), or any other line."""

    kind: str  # "category" | "names" | "skill" | "other"
    lines: list[str]
    name: str = ""
    hidden: bool = False
    budget: int = 0  # characters a skill's description may still continue with


def _items(lines: Iterable[str], hidden: Container[str]) -> list[_Item]:
    items: list[_Item] = []
    for line in lines:
        last = items[-1] if items else None
        if line.startswith(_ENTRY):
            name, description, is_hidden = _entry_split(line, hidden)
            items.append(_Item("skill", [line], name, is_hidden, _DESCRIPTION_MAX - len(description) if description else 0))
        elif line.startswith("  ") and len(line) > 2 and line[2] != " ":
            items.append(_Item("names" if _NAMES_ONLY in line else "category", [line]))
        elif last is not None and last.kind == "skill" and len(line) + 1 <= last.budget:
            last.lines.append(line)  # the description went on after a newline
            last.budget -= len(line) + 1
        elif last is not None and last.kind == "category":
            last.lines.append(line)  # so did the category's description (DESCRIPTION.md)
        else:
            items.append(_Item("other", [line]))
    return items


def _filter_body(body: str, hidden: Container[str], removed: set[str]) -> str | None:
    """The index body without the hidden skills, or None when nothing was hidden."""
    items = _items(body.split("\n"), hidden)
    out: list[str] = []
    changed = False
    group: list[_Item] = []  # a category header (or nothing) and the items under it

    def close_group() -> None:
        nonlocal changed
        if not group:
            return
        head = group[0] if group[0].kind in ("category", "names") else None
        skills = [i for i in group if i.kind == "skill"]
        kept = [i for i in group if not (i.kind == "skill" and i.hidden)]
        for item in skills:
            if item.hidden:
                removed.add(item.name)
                changed = True
        if head is not None and head.kind == "category" and skills and all(i.hidden for i in skills):
            kept = kept[1:]  # the header would be left without skills
        for item in kept:
            if item.kind == "names":
                head_text, names = item.lines[0].split(_NAMES_ONLY, 1)
                listed = names.split(", ")
                visible = [n for n in listed if n.strip() not in hidden]
                if len(visible) != len(listed):
                    removed.update(n.strip() for n in listed if n.strip() in hidden)
                    changed = True
                if visible:
                    out.append(head_text + _NAMES_ONLY + ", ".join(visible))
                out.extend(item.lines[1:])
            else:
                out.extend(item.lines)
        group.clear()

    for item in items:
        if item.kind in ("category", "names"):
            close_group()
        group.append(item)
    close_group()
    return "\n".join(out) if changed else None


def hide_in_prompt(text: str, hidden: Container[str], removed: set[str] | None = None) -> str:
    """``text`` with the hidden skills removed from Hermes' skills index.

    The index is the ``<available_skills>`` block after ``## Skills (mandatory)``
    (or, in a text without that header, the first such block), up to the last
    ``</available_skills>`` line followed by a blank line and Hermes' closing
    sentence (or, without that sentence, the last ``</available_skills>``
    line): a description that holds ``</available_skills>`` cannot end it
    early.  When no skill is left, the whole ``## Skills (mandatory)``
    section goes, as Hermes renders a library without visible skills.  The
    names removed are added to ``removed``.  Linear in the length of ``text``.
    """
    if not hidden or _OPEN not in text:
        return text
    header = _line_start_find(text, _SKILLS_HEADER + "\n")
    opened = _line_start_find(text, _OPEN + "\n", max(header, 0))
    if opened < 0:
        return text
    body_start = opened + len(_OPEN) + 1
    end = text.rfind(_BLOCK_END, body_start - 1)
    footer = end >= 0
    if not footer:
        end = text.rfind("\n" + _CLOSE, body_start - 1)
        if end < 0:
            return text
    body = text[body_start:end] if end >= body_start else ""
    found: set[str] = set()
    new_body = _filter_body(body, hidden, found)
    if new_body is None:
        return text
    if removed is not None:
        removed.update(found)
    if new_body:
        after = text[end:]
        if _NAMES_ONLY not in new_body and footer:
            # Hermes adds the note on demoted categories only when one is listed.
            tail = end + len(_BLOCK_END)
            note = _DEMOTED_NOTE_RE.match(text, tail)
            if note:
                after = text[end:tail] + text[note.end():]
        return text[:body_start] + new_body + after
    if header < 0 or not footer:  # not Hermes' layout: keep an empty block
        return text[:body_start] + text[end + 1:]
    stop = end + len(_BLOCK_END)
    note = _DEMOTED_NOTE_RE.match(text, stop)
    if note:
        stop = note.end()
    before, after = text[:header].rstrip("\n"), text[stop:].lstrip("\n")
    return before + ("\n\n" if before and after else "") + after


def _hide_in_content(content: Any, hidden: Container[str], removed: set[str]) -> tuple[Any, bool]:
    """Message content (a string, or a list of text parts/blocks) without hidden skills."""
    if isinstance(content, str):
        new = hide_in_prompt(content, hidden, removed)
        return new, new != content
    if isinstance(content, list):
        changed = False
        parts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                new = hide_in_prompt(part["text"], hidden, removed)
                if new != part["text"]:
                    part = {**part, "text": new}
                    changed = True
            parts.append(part)
        return (parts, True) if changed else (content, False)
    return content, False


def hide_in_request(request: dict[str, Any], hidden: Container[str],
                    removed: set[str] | None = None) -> dict[str, Any] | None:
    """A copy of the provider request with the hidden skills removed from its system
    prompt, or None when nothing changed (the names removed are added to ``removed``).

    Shapes: chat completions (system/developer ``messages``), Responses API
    (``instructions`` and system/developer items of ``input``), Anthropic and
    Bedrock (``system`` as a string or a list of text blocks).
    """
    if not hidden or not isinstance(request, dict):
        return None
    gone: set[str] = set() if removed is None else removed
    new = dict(request)
    changed = False
    for key in ("system", "instructions"):
        if key in request:
            value, did = _hide_in_content(request[key], hidden, gone)
            if did:
                new[key] = value
                changed = True
    for key in ("messages", "input"):
        items = request.get(key)
        if not isinstance(items, list):
            continue
        new_items = list(items)
        for index, item in enumerate(items):
            if not isinstance(item, dict) or item.get("role") not in ("system", "developer"):
                continue
            value, did = _hide_in_content(item.get("content"), hidden, gone)
            if did:
                new_items[index] = {**item, "content": value}
                changed = True
        if new_items != items:
            new[key] = new_items
    return new if changed else None


# -- skills_list ---------------------------------------------------------------


def filter_skills_list(result: str, hidden: Container[str], args: Any = None) -> str | None:
    """The ``skills_list`` JSON result without the hidden skills, or None when
    nothing was hidden (or the result is not the shape Hermes returns)."""
    if not hidden:
        return None
    try:
        data = json.loads(result)
    except (TypeError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("skills"), list):
        return None
    kept = [s for s in data["skills"] if not (isinstance(s, dict) and s.get("name") in hidden)]
    if len(kept) == len(data["skills"]):
        return None
    category = args.get("category") if isinstance(args, dict) else None
    if not kept and not category:
        # What Hermes answers for a library without visible skills.
        data = {"success": True, "skills": [], "categories": [], "message": "No skills found in skills/ directory."}
    else:
        data = dict(data)
        data["skills"] = kept
        data["categories"] = sorted({s.get("category") for s in kept if isinstance(s, dict) and s.get("category")})
        data["count"] = len(kept)
    return json.dumps(data, ensure_ascii=False)
