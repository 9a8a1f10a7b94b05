"""The owner-only secret the Skill Court tab's write routes ask for (docs/hermes.md
"Who may change things from the tab").

Hermes' dashboard guards ``/api/`` with a session token it writes into the page it
serves at ``GET /`` to whoever asks: on a shared machine every local user can read
it and call the tab's routes.  Reading the court stays behind that token alone; a
change (quarantine, release, apply fix) must also carry the profile owner's secret,
a line of 43 random characters in ``$HERMES_HOME/plugin-data/skill-court/dashboard.secret``:

- a regular file (not a link), owned by the owner of the Hermes home, mode 0600 (no
  bit for group or others): anything else is refused, with the fix;
- made by ``skill-court hermes install`` or by the first change asked of the tab,
  atomically: written to a new file opened ``O_CREAT|O_EXCL|O_NOFOLLOW`` with mode
  0600, then hard-linked to its name, which never replaces a file already there (two
  makers at once both end with the one secret that won);
- sent by the page as the :data:`HEADER` header (the user pastes it once into the
  tab, which keeps it in the browser's local storage for that profile), compared in
  constant time (``hmac.compare_digest``);
- a new one is made by deleting the file: every browser then needs the new one.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import re
import secrets
import stat
from pathlib import Path

from pytest_skillcourt.core.layout import hermes_layout

#: The file's name in the profile's data folder.
SECRET_NAME = "dashboard.secret"
#: The request header that carries the secret.
HEADER = "X-Skill-Court-Secret"
#: What a secret made here looks like (``secrets.token_urlsafe(32)``: 43 characters).
_SHAPE = re.compile(r"^[A-Za-z0-9_-]{32,256}$")
#: The longest header value compared at all.
_MAX_SENT = 1024


class SecretError(Exception):
    """The secret file cannot be trusted or made; the message names it and the fix."""


def secret_path(hermes_home: Path) -> Path:
    """``$HERMES_HOME/plugin-data/skill-court/dashboard.secret``."""
    return hermes_layout(Path(hermes_home)).data_dir / SECRET_NAME


def owner_of(hermes_home: Path) -> int:
    """The uid that owns the profile: the owner of its home folder (this process's
    user while the folder does not exist yet)."""
    try:
        return os.stat(hermes_home).st_uid
    except FileNotFoundError:
        return os.geteuid()


def how_to_get(path: Path) -> str:
    """The sentence that tells the user where the secret is and what to do with it."""
    return (f"Run `cat {path}` as the profile's owner (only that user can read it) and paste the line into "
            f"the tab's \"Unlock changes\" field; the browser keeps it. A script sends it as the {HEADER} header")


def read(path: Path, owner: int) -> str:
    """The secret in ``path``.

    Raises:
        FileNotFoundError: there is none yet.
        SecretError: a link, not a regular file, another owner, a mode that lets
            group or others in, or no secret in it.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if path.is_symlink():
            raise SecretError(f"{path} is a link; the dashboard secret must be a file of its own: delete the link "
                              "(a new secret is made at the next change)") from None
        raise SecretError(f"{path} cannot be read ({exc.strerror}); run `hermes dashboard` as the profile's owner")
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SecretError(f"{path} is not a regular file: delete it (a new secret is made at the next change)")
        if info.st_uid != owner:
            raise SecretError(f"{path} belongs to uid {info.st_uid}, not to the profile's owner (uid {owner}): "
                              "someone else made it. Delete it as the owner; a new secret is made at the next change")
        mode = stat.S_IMODE(info.st_mode)
        if mode & 0o077:
            raise SecretError(f"{path} has mode {mode:04o}: other users may have read it. Delete it (a new secret "
                              "is made at the next change, mode 0600) and paste the new one into the tab")
        raw = os.read(fd, 4096)
    finally:
        os.close(fd)
    value = raw.decode("ascii", errors="replace").strip()
    if not _SHAPE.match(value):
        raise SecretError(f"{path} holds no dashboard secret (one line of 32 to 256 letters, digits, - or _): "
                          "delete it; a new one is made at the next change")
    return value


def ensure(path: Path, owner: int) -> tuple[str, bool]:
    """The secret in ``path``, made first when there is none; returns (secret, made now).

    Raises:
        SecretError: as :func:`read`, or the file cannot be made (the folder is not
            writable, or this process is neither the owner nor root).
    """
    try:
        return read(path, owner), False
    except FileNotFoundError:
        pass
    me = os.geteuid()
    if me not in (owner, 0):
        raise SecretError(f"{path} does not exist and this process (uid {me}) cannot make it for the profile's "
                          f"owner (uid {owner}): run `skill-court hermes install` or `hermes dashboard` as the owner")
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise SecretError(f"cannot make {path.parent} ({exc.strerror}); run it as the profile's owner") from None
    tmp = path.parent / f".{path.name}.{secrets.token_hex(8)}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise SecretError(f"cannot make {path} ({exc.strerror}); run it as the profile's owner") from None
    try:
        try:
            os.fchmod(fd, 0o600)  # O_CREAT's mode is already 0600 or less (umask); say it plainly
            if me != owner:
                os.fchown(fd, owner, -1)
            os.write(fd, (secrets.token_urlsafe(32) + "\n").encode("ascii"))
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)  # never replaces: when two make it at once, the first link wins
            made = True
        except FileExistsError:
            made = False
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return read(path, owner), made


def matches(sent: str, secret: str) -> bool:
    """Whether ``sent`` is ``secret``, compared in constant time."""
    if not sent or len(sent) > _MAX_SENT:
        return False
    return hmac.compare_digest(sent.encode("utf-8", errors="replace"), secret.encode("ascii"))
