"""File capture for the judge: what a run created or changed (README, "Judging
tasks without a check"; docs/architecture.md, Sandboxes).

One exec in the sandbox lists the candidate files with ``find``, keeps those
whose ctime or mtime is at or after ``since`` and streams them as one tar;
the host unpacks the tar in memory and applies the limits.  The script is
plain POSIX sh and uses only what busybox and GNU find/stat/sort/tar/head
share, so it runs in the busybox test image and in ``python:3.12-slim``.

Decisions made here:
- Time resolution is whole seconds (busybox ``stat`` has nothing finer), and
  a file counts when its ctime or mtime second is ``>= floor(since - 20 ms)``
  (the margin covers the kernel's coarse file clock): missing a file the run
  wrote in its first second would be worse than showing an input written in
  that same second.  ``mark_run_start()`` gives a ``since`` that keeps the
  task's inputs out exactly (it waits for the next second).  ctime catches
  files whose mtime was preserved (``tar -x``, ``cp -p``, ``mv``,
  ``touch -d``).
- Hidden directories are skipped everywhere (``.git``, ``.cache``,
  ``.venv``, ...).  Hidden *files* are kept (a ``.gitignore`` or ``.env``
  the task asked for is a deliverable) except directly in ``/root``, where
  dotfiles are tool state (shell history, ``.wget-hsts``, ``.lesshst``).
- Order: ``/workspace`` first, then ``/root``, each sorted by path (bytes),
  so the 40-file and 16,000-character limits keep the deliverables first
  and the choice is deterministic.
- ``dropped`` counts every changed file left out: past the 40-file limit,
  or reached after the 16,000-character budget was spent.
- Binary: a NUL byte, or not valid UTF-8.  Binary files count toward the 40
  files and are listed by name only.
- A file over 64 KB is copied cut (``head -c``) into a staging directory
  under ``/tmp`` and archived from there, so a huge file never crosses the
  wire whole.
- Symlinks and special files are not captured (``-type f``); a name with a
  newline in it is skipped rather than breaking the list.
- The archive is read at most ``MAX_ARCHIVE_BYTES`` (40 cut files fit many
  times over); one that grows past it while tar runs (a file the run still
  writes) fails the capture instead of filling host memory.
- A name that is not valid UTF-8 is shown with its bad bytes escaped
  (``\\xff``), so the record stays valid text.
"""

from __future__ import annotations

import io
import math
import tarfile
import time
from dataclasses import dataclass

from pytest_skillcourt.sandbox.base import Sandbox, SandboxError

#: At most this many files are captured.
MAX_FILES = 40
#: Each file is cut at this many bytes.
MAX_FILE_BYTES = 64 * 1024
#: All text files together are cut at this many characters.
MAX_TOTAL_CHARS = 16_000
#: Seconds the capture exec may take.
CAPTURE_TIMEOUT_S = 120
#: At most this many archive bytes are read from the sandbox.
MAX_ARCHIVE_BYTES = 8 * 1024 * 1024

#: Staging directory for cut copies of big files (inside the sandbox).
_STAGE = "tmp/.skillcourt-capture"
#: Line the script prints on stderr before tar runs.
_REPORT = "skillcourt-capture total="

# The exit status of the whole script is tar's: tar is the last command that
# matters and its status is saved before cleanup (busybox sh has no
# pipefail, so tar is never on the left of a pipe).  Exit 3 = cannot cd /.
_SCRIPT = r"""
S=%(since)d
MAXF=%(max_files)d
MAXB=%(max_bytes)d
STAGE=/%(stage)s.$$
export LC_ALL=C
cd / || exit 3
list=$(
  for top in workspace root; do
    [ -d "$top" ] || continue
    # No parentheses: busybox find ignores `-exec {} +` inside them.
    find "$top" -type d -name '.*' -prune -o \
      -type f ! -path 'root/.*' -exec stat -c '%%Z %%Y %%s %%n' {} + 2>/dev/null \
      | sort -k4
  done
)
n=0
total=0
while read -r c m s name; do
  case "$c$m$s" in ''|*[!0-9]*) continue ;; esac
  [ -n "$name" ] && [ -f "$name" ] || continue
  if [ "$c" -ge "$S" ] || [ "$m" -ge "$S" ]; then
    total=$((total + 1))
    [ "$n" -lt "$MAXF" ] || continue
    n=$((n + 1))
    if [ "$s" -gt "$MAXB" ]; then
      mkdir -p "$STAGE/${name%%/*}" &&
        head -c "$MAXB" "$name" > "$STAGE/$name" &&
        set -- "$@" "${STAGE#/}/$name"
    else
      set -- "$@" "$name"
    fi
  fi
done <<SKILLCOURT_EOF
$list
SKILLCOURT_EOF
echo "%(report)s$total" >&2
if [ "$n" -eq 0 ]; then
  exit 0
fi
tar -cf - "$@"
rc=$?
rm -rf "$STAGE"
exit $rc
"""


@dataclass(frozen=True)
class CapturedFiles:
    """What a run left in ``/workspace`` and ``/root``, within the limits above."""

    files: tuple[tuple[str, str], ...]  # (absolute path, text) of text files, within the limits
    binary: tuple[str, ...]  # binary files, listed by name only
    dropped: int  # changed files left out (past 40 files or the character budget)
    truncated: bool  # any file or the total cut

    @classmethod
    def empty(cls) -> "CapturedFiles":
        return cls(files=(), binary=(), dropped=0, truncated=False)


class CaptureFailed(Exception):
    """The files could not be read; the run then has no outcome.  The message
    says why."""


#: File timestamps come from the kernel's coarse clock, which lags
#: ``time.time()`` by up to one tick (<= 10 ms at HZ=100): a file written just
#: after ``since`` may carry a time just before it.
CLOCK_LAG_S = 0.02


def mark_run_start() -> float:
    """Return ``since`` for a run whose task files were just written.

    Waits (at most ~1 s) until the next whole second has begun, so files
    written before the call are older than ``since`` at the one-second
    resolution capture works at, and never show up as changed by the run.
    Call it after writing the task files and before the agent starts.
    """
    now = time.time()
    since = math.floor(now) + 1 + 2 * CLOCK_LAG_S
    time.sleep(max(0.0, since - now))
    return since


def capture_script(since: float) -> str:
    """The shell script ``capture_changed_files`` runs (exposed for tests)."""
    return _SCRIPT % {
        "since": math.floor(since - CLOCK_LAG_S),
        "max_files": MAX_FILES,
        "max_bytes": MAX_FILE_BYTES,
        "stage": _STAGE,
        "report": _REPORT,
    }


def capture_changed_files(sandbox: Sandbox, since: float) -> CapturedFiles:
    """Capture the text files a run created or changed after ``since``.

    ``since`` is epoch seconds on the sandbox's clock (the host's for local
    and local-engine sandboxes).  Limits and choices: see the module
    docstring.

    Raises:
        CaptureFailed: the exec failed or timed out, tar exited 2 or more,
            or the archive did not read back.
    """
    try:
        result = sandbox.exec(
            capture_script(since), timeout=CAPTURE_TIMEOUT_S, binary=True, output_limit=64 * 1024,
            binary_limit=MAX_ARCHIVE_BYTES,
        )
    except SandboxError as exc:
        raise CaptureFailed(f"file capture: the exec in the sandbox failed: {exc}") from exc
    if result.timed_out:
        raise CaptureFailed(f"file capture: find | tar timed out after {CAPTURE_TIMEOUT_S} s")
    if result.exit_code >= 2:
        raise CaptureFailed(
            f"file capture: find | tar exited {result.exit_code}: {result.stderr.strip()[:500]}"
        )
    total = _reported_total(result.stderr)
    if total is None:
        raise CaptureFailed(
            "file capture: the capture script did not report its file count "
            f"(exit {result.exit_code}): {result.stderr.strip()[:500]}"
        )
    data = result.stdout_bytes or b""
    if result.stdout_bytes_dropped:
        raise CaptureFailed(
            f"file capture: the archive grew past {MAX_ARCHIVE_BYTES} bytes "
            "(a file kept growing while it was read?)"
        )
    if total == 0 and not data:
        return CapturedFiles.empty()
    try:
        members = _read_tar(data)
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise CaptureFailed(f"file capture: the archive did not read back: {exc}") from exc
    return _apply_limits(members, total)


def _reported_total(stderr: str) -> int | None:
    for line in stderr.splitlines():
        if line.startswith(_REPORT):
            try:
                return int(line[len(_REPORT):].strip())
            except ValueError:
                return None
    return None


def _read_tar(data: bytes) -> list[tuple[str, bytes, bool]]:
    """Return (absolute path, bytes, was cut) per regular file, archive order."""
    out: list[tuple[str, bytes, bool]] = []
    stage_prefix = _STAGE + "."
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        for member in tar:
            if not member.isfile():
                continue
            name = _as_text(member.name).lstrip("/")
            cut = False
            if name.startswith(stage_prefix):
                # tmp/.skillcourt-capture.<pid>/workspace/big.log -> workspace/big.log
                name = name.split("/", 2)[2]
                cut = True
            fh = tar.extractfile(member)
            if fh is None:
                raise tarfile.TarError(f"member {member.name} has no data")
            body = fh.read(MAX_FILE_BYTES + 1)
            if len(body) > MAX_FILE_BYTES:
                body, cut = body[:MAX_FILE_BYTES], True
            out.append(("/" + name, body, cut))
    return out


def _as_text(name: str) -> str:
    """A member name as valid text: ``tarfile`` keeps bytes that are not
    UTF-8 as lone surrogates, which no UTF-8 writer (SQLite, JSON files)
    takes; they become ``\\xNN``."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _decode_text(body: bytes, cut: bool) -> str | None:
    """The text of ``body``, or None when it is binary."""
    if b"\0" in body:
        return None
    # A cut can split a multi-byte character: allow up to 3 dangling bytes.
    for trim in range(4 if cut else 1):
        try:
            return body[: len(body) - trim].decode("utf-8")
        except UnicodeDecodeError:
            continue
    return None


def _apply_limits(members: list[tuple[str, bytes, bool]], total: int) -> CapturedFiles:
    files: list[tuple[str, str]] = []
    binary: list[str] = []
    truncated = False
    budget = MAX_TOTAL_CHARS
    left_out = max(0, total - len(members))
    for path, body, cut in members:
        text = _decode_text(body, cut)
        if text is None:
            binary.append(path)
            continue
        truncated = truncated or cut
        if budget <= 0:
            left_out += 1
            truncated = True
            continue
        if len(text) > budget:
            text, truncated = text[:budget], True
        budget -= len(text)
        files.append((path, text))
    return CapturedFiles(
        files=tuple(files), binary=tuple(binary), dropped=left_out, truncated=truncated
    )
