"""The real agent CLIs for end-to-end tests: Claude Code and Codex from npm.

``tests/run_all.sh`` installs both, pinned, into ``tests/.npm`` (git-ignored;
``SKILL_COURT_NPM_DIR`` moves it) with install scripts allowed, so each native
binary is in place. This module finds those binaries (``SKILL_COURT_CLAUDE`` /
``SKILL_COURT_CODEX`` name another one), skips a test without them (or fails
it under ``SKILL_COURT_REQUIRE_CLAUDE=1`` / ``SKILL_COURT_REQUIRE_CODEX=1``,
which CI sets), writes a quiet offline set-up pointing each CLI at the local
test server, and reads each CLI's skill listing out of what it sent.

Where the binaries land (npm, linux):

- Claude Code: ``node_modules/@anthropic-ai/claude-code-linux-x64/claude`` (a
  glibc-linked executable, about 400 MB in 2.1.332); the wrapper package's
  postinstall hard-links it over ``@anthropic-ai/claude-code/bin/claude.exe``
  (the ``claude`` command). npm 11 runs that postinstall only for a package
  named in ``allowScripts`` of the installing ``package.json``.
- Codex: ``node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex``
  (static musl, about 315 MB in 0.171.0) beside ``codex-path/rg`` and
  ``codex-resources/bwrap``; ``@openai/codex/bin/codex.js`` only finds and
  execs it, no install script.
"""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path

from tests.support import REPO
from tests.support.sandbox_image import _skip_or_fail

__all__ = [
    "npm_dir",
    "claude_binary",
    "codex_binary",
    "require_claude",
    "require_codex",
    "claude_env",
    "codex_env",
    "claude_skill_listing",
    "codex_skill_listing",
    "CLAUDE_LISTING",
    "CODEX_LISTING",
]

#: The line above Claude Code's skill listing (a system-role message of the request).
CLAUDE_LISTING = "The following skills are available for use with the Skill tool:"
#: The heading of Codex's skill listing (in its ``<skills_instructions>`` developer message).
CODEX_LISTING = "### Available skills"

_CLAUDE_PLATFORMS = {"x86_64": "linux-x64", "amd64": "linux-x64", "aarch64": "linux-arm64", "arm64": "linux-arm64"}
_CODEX_TARGETS = {
    "x86_64": ("linux-x64", "x86_64-unknown-linux-musl"),
    "amd64": ("linux-x64", "x86_64-unknown-linux-musl"),
    "aarch64": ("linux-arm64", "aarch64-unknown-linux-musl"),
    "arm64": ("linux-arm64", "aarch64-unknown-linux-musl"),
}


def npm_dir() -> Path:
    """Where ``tests/run_all.sh`` installs the npm CLIs (``SKILL_COURT_NPM_DIR`` or ``tests/.npm``)."""
    given = os.environ.get("SKILL_COURT_NPM_DIR", "").strip()
    if given:
        return Path(given).resolve()
    return REPO / "tests" / ".npm"


def _executable(path: Path) -> Path | None:
    return path if path.is_file() and os.access(path, os.X_OK) else None


def claude_binary() -> Path | None:
    """The native ``claude`` executable, or None when it is not installed."""
    given = os.environ.get("SKILL_COURT_CLAUDE", "").strip()
    if given:
        return _executable(Path(given))
    modules = npm_dir() / "node_modules" / "@anthropic-ai"
    suffix = _CLAUDE_PLATFORMS.get(platform.machine().lower())
    if suffix:
        native = _executable(modules / f"claude-code-{suffix}" / "claude")
        if native:
            return native
    # Only once the postinstall copied the native binary over it; before, it is a stub.
    wrapper = modules / "claude-code" / "bin" / "claude.exe"
    if wrapper.is_file() and wrapper.stat().st_size > 1_000_000:
        return _executable(wrapper)
    return None


def codex_binary() -> Path | None:
    """The native ``codex`` executable, or None when it is not installed."""
    given = os.environ.get("SKILL_COURT_CODEX", "").strip()
    if given:
        return _executable(Path(given))
    target = _CODEX_TARGETS.get(platform.machine().lower())
    if target is None:
        return None
    package, triple = target
    vendor = npm_dir() / "node_modules" / "@openai" / f"codex-{package}" / "vendor"
    return _executable(vendor / triple / "bin" / "codex")


def require_claude() -> Path:
    """The ``claude`` binary; skip (or, with SKILL_COURT_REQUIRE_CLAUDE=1, fail) without it."""
    found = claude_binary()
    _skip_or_fail("" if found else f"Claude Code is not installed in {npm_dir()} (bash tests/run_all.sh installs it)",
                  "SKILL_COURT_REQUIRE_CLAUDE")
    assert found is not None
    return found


def require_codex() -> Path:
    """The ``codex`` binary; skip (or, with SKILL_COURT_REQUIRE_CODEX=1, fail) without it."""
    found = codex_binary()
    _skip_or_fail("" if found else f"Codex is not installed in {npm_dir()} (bash tests/run_all.sh installs it)",
                  "SKILL_COURT_REQUIRE_CODEX")
    assert found is not None
    return found


def _origin(base_url: str) -> str:
    """``http://127.0.0.1:PORT`` of a ``.../v1`` base URL (Claude Code appends ``/v1/messages`` itself)."""
    return base_url[: -len("/v1")] if base_url.endswith("/v1") else base_url.rstrip("/")


def claude_env(home: str | os.PathLike[str], base_url: str, api_key: str = "sk-test-key",
               settings: dict | None = None) -> dict[str, str]:
    """The minimal env that runs ``claude -p`` against the test server with ``home`` as HOME.

    ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`` keeps it offline (measured:
    its only connection is then the one model call to the server; without it
    it resolves outside hosts). ``settings`` is written to
    ``~/.claude/settings.json`` (e.g. ``{"skillOverrides": {"NAME": "off"}}``).
    """
    home_path = Path(home)
    (home_path / ".claude").mkdir(parents=True, exist_ok=True)
    if settings is not None:
        (home_path / ".claude" / "settings.json").write_text(json.dumps(settings, indent=2) + "\n")
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home_path),
        "LANG": "C.UTF-8",
        "ANTHROPIC_BASE_URL": _origin(base_url),
        "ANTHROPIC_API_KEY": api_key,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }


def codex_env(home: str | os.PathLike[str], base_url: str, model: str = "test-model",
              api_key: str = "test-key", extra_toml: str = "") -> dict[str, str]:
    """Write ``home/.codex/config.toml`` for the test server and return the env to run ``codex exec``.

    A custom provider on ``base_url`` with ``wire_api = "responses"`` (the only
    one 0.171.0 accepts: "chat" is refused), its key in
    ``SKILL_COURT_MODEL_KEY``; analytics off (else OTLP metrics to
    ab.chatgpt.com) and the ``plugins`` feature off (else ``git`` clones
    github.com/openai/plugins.git at start). ``extra_toml`` is appended (e.g.
    a ``[[skills.config]]`` entry).
    """
    codex_home = Path(home) / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    config = f"""\
model = {json.dumps(model)}
model_provider = "skillcourt"

[model_providers.skillcourt]
name = "skillcourt"
base_url = {json.dumps(base_url)}
env_key = "SKILL_COURT_MODEL_KEY"
wire_api = "responses"

[analytics]
enabled = false

[features]
plugins = false
"""
    (codex_home / "config.toml").write_text(config + ("\n" + extra_toml if extra_toml else ""))
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "SKILL_COURT_MODEL_KEY": api_key,
    }


def _listed(text: str, heading: str) -> list[str] | None:
    """The ``- name: description`` entries below ``heading`` (None if the heading is absent)."""
    start = text.find(heading)
    if start < 0:
        return None
    names = []
    for line in text[start + len(heading):].lstrip("\n").splitlines():
        if not line.strip() or line.startswith(("<", "#")):
            break  # the listing ends at a blank line, a tag or a heading
        if line.startswith("- "):
            names.append(line[2:].split(":", 1)[0].strip())
        # any other line continues a multi-line description (Claude Code's claude-api skill has some)
    return names


def claude_skill_listing(texts: list[str]) -> list[str] | None:
    """Skill names in Claude Code's listing, from ``RecordedRequest.texts()``; None if no listing.

    A listed entry is ``- NAME: description`` (``- NAME`` alone under
    ``skillOverrides`` ``name-only``; ``- FOLDER (NAME)`` when the folder and
    the frontmatter name differ); the names are returned as written.
    """
    for text in texts:
        found = _listed(text, CLAUDE_LISTING)
        if found is not None:
            return found
    return None


def codex_skill_listing(texts: list[str]) -> list[str] | None:
    """Skill names in Codex's ``<skills_instructions>`` listing; None if no listing."""
    for text in texts:
        found = _listed(text, CODEX_LISTING)
        if found is not None:
            return found
    return None
