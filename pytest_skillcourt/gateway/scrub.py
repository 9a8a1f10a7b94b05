"""Key scrubbing: the provider key never reaches the agent or the run's record.

Everything that flows back to the agent (reply bodies, headers, stream chunks)
and everything recorded (request bodies, errors, notes) passes a
:class:`Scrubber` first.
"""

from __future__ import annotations

import base64
import re


class Scrubber:
    """Replaces the provider key wherever a reply or a request echoes it, before the agent or the record sees it.

    Caught: the key as it is, JSON-escaped in any mix (``\\u0073k-...``, ``\\/``), and
    base64-encoded (standard or URL-safe alphabet, at any of the three alignments:
    the part of the encoding that depends on the key alone).  :meth:`stream` scrubs
    a stream across chunk boundaries.  Keys shorter than 8 characters (``none`` for
    local servers) are placeholders, not secrets, and are left alone.
    """

    MASK = "[provider key]"

    def __init__(self, key: str) -> None:
        self.key = key if len(key) >= 8 else ""
        #: the longest text an echo of the key can take
        self.longest = 0
        self._text: re.Pattern[str] | None = None
        self._bytes: re.Pattern[bytes] | None = None
        self._needles: list[str] = []
        if self.key:
            patterns, self.longest, self._needles = key_patterns(self.key)
            self._text = re.compile("|".join(patterns))
            self._bytes = re.compile("|".join(patterns).encode("utf-8"))
        self._byte_needles = [n.encode("utf-8") for n in self._needles]

    def text(self, value: str) -> str:
        if self._text is None:
            return value
        # Fast path (plain searches): without an escape, only a literal echo can be there.
        if "\\u" not in value and "\\/" not in value and not any(n in value for n in self._needles):
            return value
        return self._text.sub(self.MASK, value)

    def bytes(self, value: bytes) -> bytes:
        if self._bytes is None:
            return value
        if b"\\u" not in value and b"\\/" not in value and not any(n in value for n in self._byte_needles):
            return value
        return self._bytes.sub(self.MASK.encode(), value)

    def stream(self) -> StreamScrubber:
        return StreamScrubber(self)


class StreamScrubber:
    """Scrubs a byte stream fed in chunks: an echo of the key split between two chunks is caught.

    An echo never spans a line break, so what follows a chunk's last line break (at
    most ``longest - 1`` bytes: the rest cannot hold the start of an unfinished echo)
    is held back for the next chunk; a server-sent event ends in a line break, so
    whole events pass at once.
    """

    def __init__(self, scrubber: Scrubber) -> None:
        self.scrubber = scrubber
        self.tail = b""

    def feed(self, piece: bytes) -> bytes:
        if not self.scrubber.key:
            return piece
        data = self.scrubber.bytes(self.tail + piece)
        cut = data.rfind(b"\n") + 1
        if len(data) - cut > self.scrubber.longest - 1:
            cut = len(data) - (self.scrubber.longest - 1)
        self.tail = data[cut:]
        return data[:cut]

    def flush(self) -> bytes:
        rest, self.tail = self.tail, b""
        return rest


def key_patterns(key: str) -> tuple[list[str], int, list[str]]:
    """Regular expressions of the key's echoes (see :class:`Scrubber`), the longest echo's
    length, and the literal echoes (the key and its base64 cores)."""
    def char(c: str) -> str:
        alternatives = [re.escape(c)]
        if ord(c) < 0x10000:
            alternatives.append(r"\\u" + "".join(f"[{d}{d.upper()}]" if d.isalpha() else d for d in f"{ord(c):04x}"))
        if c == "/":
            alternatives.append(r"\\/")
        return "(?:" + "|".join(alternatives) + ")"

    raw = key.encode("utf-8")
    cores: list[str] = []
    for offset, skip in ((0, 0), (1, 2), (2, 3)):
        # Encoded after ``offset`` other bytes: the first ``skip`` characters and the last
        # partial group depend on the bytes around the key, the rest on the key alone.
        encoded = base64.b64encode(b"\0" * offset + raw).decode("ascii")
        core = encoded[skip:4 * ((offset + len(raw)) // 3)]
        if len(core) >= 12:
            cores += [core, core.translate(str.maketrans("+/", "-_"))]
    cores = list(dict.fromkeys(cores))
    patterns = ["".join(char(c) for c in key)] + [re.escape(core) for core in cores]
    longest = max([6 * len(key), *(len(core) for core in cores)])
    return patterns, longest, [key, *cores]
