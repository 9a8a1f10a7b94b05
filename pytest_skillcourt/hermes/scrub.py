"""Taking a hidden skill's text out of what a model reads (point 8 of
:mod:`pytest_skillcourt.hermes.hiding`): every line of the skill's files, and each
text Hermes was recorded loading (:mod:`pytest_skillcourt.hermes.wrappers`), in tool
results and in every message of a request."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Container, Iterable, Mapping, Sequence

#: Lines of a hidden skill's files shorter than this are not removed from what a model reads.
SCRUB_MIN_LINE = 16
_SCRUB_FILE_MAX = 256 * 1024
_SCRUB_FILES_MAX = 200
#: What stands where lines of a hidden skill were taken out.
SCRUB_MARKER = "[skill-court: text of a skill quarantined for this model removed]"


def _line_keys(line: str) -> Iterable[str]:
    """The forms a line of a file takes in tool output: itself, and after a
    ``cat -n``/``read_file`` number, a ``grep`` ``path:line:`` prefix or a diff sign."""
    stripped = line.strip()
    yield stripped
    yield stripped.lstrip("+-> \t")
    rest = stripped
    for _ in range(3):
        cut = min((i for i in (rest.find(":"), rest.find("|"), rest.find("\t")) if i >= 0), default=-1)
        if cut < 0:
            break
        rest = rest[cut + 1:]
        yield rest.strip()


def scrub_text(text: str, lines: Container[str], blocks: Sequence[tuple[str, str]] = ()) -> str:
    """``text`` without hidden skills' text: each recorded ``(block, replacement)`` replaced,
    then every line that is a line of ``lines`` (in any of the forms :func:`_line_keys`
    knows) replaced by :data:`SCRUB_MARKER`, runs collapsed.  JSON text (a tool
    result) is scrubbed value by value and re-encoded only when something changed."""
    if not text or not (lines or blocks):
        return text
    if text.lstrip()[:1] in ("{", "["):
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if isinstance(data, (dict, list)):
            new = _scrub_json(data, lines, blocks)
            return text if new == data else json.dumps(new, ensure_ascii=False)
    for block, replacement in blocks:
        if block in text:
            text = text.replace(block, replacement)
    if not lines:
        return text
    out: list[str] = []
    changed = False
    split = text.split("\n")
    for index, line in enumerate(split):
        if len(line) >= SCRUB_MIN_LINE and (any(
                key in lines for key in _line_keys(line) if len(key) >= SCRUB_MIN_LINE)  # type: ignore[operator]
                or (index in (0, len(split) - 1) and _cut_line(line.strip(), lines, first=index == 0,
                                                                last=index == len(split) - 1))):
            changed = True
            if not out or out[-1] != SCRUB_MARKER:
                out.append(SCRUB_MARKER)
        else:
            out.append(line)
    return "\n".join(out) if changed else text


def _cut_line(piece: str, lines: Container[str], first: bool, last: bool) -> bool:
    """Whether the first or last line of a text is a line of ``lines`` cut short (a
    snippet: Hermes sends the first 500 characters of a message to title a session)."""
    if len(piece) < SCRUB_MIN_LINE or not isinstance(lines, (set, frozenset)):
        return False
    return any((last and line.startswith(piece)) or (first and line.endswith(piece)) for line in lines)


def _scrub_json(value: Any, lines: Container[str], blocks: Sequence[tuple[str, str]]) -> Any:
    if isinstance(value, str):
        return scrub_text(value, lines, blocks)
    if isinstance(value, list):
        return [_scrub_json(v, lines, blocks) for v in value]
    if isinstance(value, dict):
        return {k: _scrub_json(v, lines, blocks) for k, v in value.items()}
    return value


#: Keys whose string values are text a model reads, in every request shape Hermes sends
#: (chat ``content``, content parts' ``text``, Responses ``output``/``input``/``instructions``,
#: Anthropic ``system`` and ``tool_result`` ``content``).
_TEXT_KEYS = frozenset({"content", "text", "output", "input", "system", "instructions"})


def map_request_texts(request: Mapping[str, Any], change: Callable[[str], str]) -> dict[str, Any] | None:
    """A copy of a provider request with ``change`` applied to every text the model reads
    (system prompt, every message of every role, tool results; not tool names, ids or
    call arguments), or None when nothing changed."""
    changed = False

    def walk(value: Any, is_text: bool) -> Any:
        nonlocal changed
        if isinstance(value, str):
            if not is_text:
                return value
            new = change(value)
            changed = changed or new != value
            return new
        if isinstance(value, list):
            return [walk(item, is_text) for item in value]
        if isinstance(value, dict):
            return {key: walk(item, key in _TEXT_KEYS) for key, item in value.items()}
        return value

    new = dict(request)
    for key in ("system", "instructions", "messages", "input"):
        if key in request:
            new[key] = walk(request[key], True)
    return new if changed else None


def folder_lines(folder: Path) -> frozenset[str]:
    """The lines (stripped, at least :data:`SCRUB_MIN_LINE` long) of the text files of a skill folder."""
    found: set[str] = set()
    count = 0
    for current, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            count += 1
            if count > _SCRUB_FILES_MAX:
                return frozenset(found)
            path = Path(current) / name
            try:
                if path.stat().st_size > _SCRUB_FILE_MAX:
                    continue
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            found.update(s for s in (line.strip() for line in text.splitlines()) if len(s) >= SCRUB_MIN_LINE)
    return frozenset(found)


def folder_signature(folder: Path) -> tuple[Any, ...]:
    items: list[Any] = []
    for current, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            try:
                st = os.stat(os.path.join(current, name))
            except OSError:
                continue
            items.append((current, name, st.st_size, st.st_mtime_ns))
            if len(items) > _SCRUB_FILES_MAX:
                return tuple(items)
    return tuple(items)
