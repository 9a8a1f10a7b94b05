"""Text from a model, a skill or a user's files made safe to print: the one home of it.

Terminal lines, notices and log lines never carry raw text from outside: an ESC sequence
in a SKILL.md line or a model's cause could clear the screen (``ESC[2J``), write the
clipboard (OSC 52) or reorder what a reader sees (bidi overrides).  :func:`plain` drops
escape sequences and makes every other C0/C1 control character, DEL and the Unicode
controls that reorder or hide text a space.
"""

from __future__ import annotations

import re

#: ANSI escape sequences: CSI, OSC up to BEL or ST, and the two-character ESC forms.
_ESCAPE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]")
#: C0 and C1 controls, DEL, and the Unicode marks that reorder or isolate text.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def plain(text: object, *, keep_newlines: bool = False) -> str:
    """``text`` (made a string) safe to write to a terminal or log line: escape
    sequences dropped, every other control character (newline and tab too, unless
    ``keep_newlines`` keeps the newlines) made a space."""
    text = str(text)
    if keep_newlines:
        return "\n".join(plain(part) for part in text.split("\n"))
    return _CONTROL.sub(" ", _ESCAPE.sub("", text))


def has_controls(text: str) -> bool:
    """Whether ``text`` holds an escape sequence or a control character (see :func:`plain`)."""
    return bool(_ESCAPE.search(text) or _CONTROL.search(text))
