"""Which skills a run read, from its transcript (for the run cache).

A skill's body can change a run only if the run read it: through
``skill_view`` (any runner), or by a tool call that touched the skill files
in the sandbox (``cat /root/.skills/x/SKILL.md``, ``grep -r ... skills``).
The run cache keys a run on what every run sees (the skills index: names,
categories, descriptions) and validates the bodies of the skills it read, so
editing one skill's body replays only the runs that read it.

Tool calls are read conservatively: a call whose arguments mention a skills
folder counts as reading the skills it names there, or every visible skill
when it names none (``ls``, ``grep -r``).
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable, Sequence

_SKILLS_PATH = re.compile(r"skills/+([A-Za-z0-9_.:-][^/\s'\"]*)?")


def _arguments(call: dict[str, Any]) -> tuple[str, str]:
    fn = call.get("function") or {}
    raw = fn.get("arguments")
    text = raw if isinstance(raw, str) else json.dumps(raw or {})
    return str(fn.get("name") or ""), text


def skills_read(transcript: Sequence[dict[str, Any]], visible: Iterable[str]) -> set[str]:
    """Names of the visible skills the run may have read."""
    names = set(visible)
    read: set[str] = set()
    viewed: dict[str, str] = {}
    for msg in transcript:
        if msg.get("role") == "assistant":
            for call in msg.get("tool_calls") or []:
                tool, text = _arguments(call)
                if tool == "skills_list":
                    continue
                if tool == "skill_view":
                    try:
                        args = json.loads(text)
                    except ValueError:
                        continue
                    name = str(args.get("name", "")).strip() if isinstance(args, dict) else ""
                    viewed[str(call.get("id", ""))] = re.split(r"[/:]", name)[-1].removesuffix(".md")
                    continue
                if "skills" not in text:
                    continue
                named = {m.group(1) for m in _SKILLS_PATH.finditer(text) if m.group(1)}
                hit = {n for n in names if any(part == n or part.startswith(n + "/") for part in named)}
                # a folder path names categories too: "skills/ops/deploy" -> look at every segment
                for m in re.finditer(r"skills/+(\S+)", text):
                    segments = set(re.split(r"[/'\"\s]+", m.group(1)))
                    hit |= names & segments
                read |= hit or names
        elif msg.get("role") == "tool" and msg.get("tool_call_id") in viewed:
            name = viewed.pop(str(msg.get("tool_call_id")))
            try:
                result = json.loads(msg.get("content") or "")
            except ValueError:
                result = None
            if isinstance(result, dict) and result.get("success") is True:
                read.add(str(result.get("name") or name))
    return read & names
