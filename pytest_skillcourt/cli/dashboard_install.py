"""``skill-court hermes install``: lay the Skill Court tab into a Hermes profile and enable it
(README "The Skill Court tab in Hermes' dashboard").

Hermes' dashboard (``hermes_cli/web_server.py``) finds a user plugin's tab at
``$HERMES_HOME/plugins/<name>/dashboard/manifest.json`` and serves it (its
JS and CSS, and the ``api`` file's router at ``/api/plugins/<name>/``) only
when ``<name>`` is in ``plugins.enabled`` of the profile's ``config.yaml``, as
``hermes plugins enable`` writes it.  The tab's name is the Hermes plugin's,
``skill-court``, so the one entry enables both the hiding hooks and the tab.

Idempotent: files already holding the right bytes and a name already enabled
are left alone, and the result says what changed.  The plugin's ``api`` file
is a two-line shim importing :mod:`pytest_skillcourt.hermes.dashboard.api`, so the
routes are always the installed package's; the JS and CSS are copies (run
the command again after an upgrade).

It also makes the profile owner's dashboard secret (:mod:`.secret`, mode 0600)
when there is none, which the tab's changes need; an existing one is kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pytest_skillcourt.core import safe_yaml
from pytest_skillcourt.core.atomic import write_atomic
from pytest_skillcourt.core import dashboard_secret as secret

#: The plugin's name: the Hermes plugin's entry point name, the tab's manifest name.
PLUGIN_NAME = "skill-court"
#: Where the tab's files are in this package.
SOURCE = Path(__file__).resolve().parents[1] / "hermes" / "dashboard" / "plugin"
#: The files laid under ``plugins/skill-court/dashboard/`` (relative paths).
FILES = ("manifest.json", "dist/index.js", "dist/style.css")
API_FILE = "plugin_api.py"
API_SHIM = '''"""The Skill Court tab's routes: laid here by `skill-court hermes install`."""
from pytest_skillcourt.hermes.dashboard.api import router  # noqa: F401
'''


class InstallError(ValueError):
    """The profile cannot take the plugin; the message names the file and the fix."""


@dataclass
class InstallResult:
    """What ``install`` found and changed."""

    plugin_dir: Path
    config: Path
    written: list[str] = field(default_factory=list)
    enabled_now: bool = False
    hidden: bool = False  # the user hid the tab (dashboard.hidden_plugins): left as it is
    secret: Path | None = None  # the owner-only secret the tab's changes need
    secret_made: bool = False  # made now (else it was there)


def plugin_files() -> dict[str, bytes]:
    """Relative path -> bytes of every file the plugin folder holds."""
    out = {rel: (SOURCE / rel).read_bytes() for rel in FILES}
    out[API_FILE] = API_SHIM.encode("utf-8")
    return out


def _read_config(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        text = path.read_text(encoding="utf-8")
        _, data = safe_yaml.load(text)
    except (OSError, UnicodeDecodeError, yaml.YAMLError, ValueError) as exc:
        raise InstallError(f"{path}: cannot be read as YAML ({exc}); fix it (or move it away) and run "
                           "`skill-court hermes install` again; nothing was changed") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InstallError(f"{path}: expected a mapping at the top level, got {type(data).__name__}; "
                           "nothing was changed")
    return data


def _name_list(path: Path, plugins: dict[str, Any], key: str) -> list[Any]:
    value = plugins.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise InstallError(f"{path}: plugins.{key} must be a list of plugin names, got "
                           f"{type(value).__name__}; fix it and run the command again; nothing was changed")
    return list(value)


def enable(config: Path, *, write: bool = True) -> tuple[bool, bool]:
    """Put :data:`PLUGIN_NAME` into ``plugins.enabled`` (and out of ``plugins.disabled``);
    returns (changed, hidden by the user).  ``write=False`` only checks that the file
    can be edited (and says whether it would change)."""
    data = _read_config(config)
    plugins = data.get("plugins")
    if plugins is None:
        plugins = {}
    if not isinstance(plugins, dict):
        raise InstallError(f"{config}: plugins must be a mapping (enabled: [...]), got "
                           f"{type(plugins).__name__}; nothing was changed")
    enabled = _name_list(config, plugins, "enabled")
    disabled = _name_list(config, plugins, "disabled")
    dashboard = data.get("dashboard")
    hidden_list = dashboard.get("hidden_plugins") if isinstance(dashboard, dict) else None
    hidden = isinstance(hidden_list, list) and PLUGIN_NAME in hidden_list
    if PLUGIN_NAME in enabled and PLUGIN_NAME not in disabled:
        return False, hidden
    if not write:
        return True, hidden
    if PLUGIN_NAME not in enabled:
        enabled.append(PLUGIN_NAME)
    plugins["enabled"] = sorted(str(n) for n in enabled)
    if "disabled" in plugins:
        plugins["disabled"] = [n for n in disabled if n != PLUGIN_NAME]
    data["plugins"] = plugins
    config.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(config, yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return True, hidden


def install(hermes_home: Path) -> InstallResult:
    """Lay the plugin folder into ``hermes_home`` and enable it.

    Raises:
        InstallError: the home is not a folder, the plugin path is taken by a
            file or a link, ``config.yaml`` cannot be read, or the dashboard
            secret file cannot be trusted (a link, another owner, a loose mode).
    """
    home = Path(hermes_home).expanduser()
    if home.exists() and not home.is_dir():
        raise InstallError(f"{home} is not a folder; pass the Hermes home with --hermes-home DIR")
    root = home / "plugins" / PLUGIN_NAME
    target = root / "dashboard"
    for folder in (home / "plugins", root, target, target / "dist"):
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            raise InstallError(f"{folder} is a file or a link, not a folder: move it away and run "
                               "`skill-court hermes install` again; nothing was changed")
    config = home / "config.yaml"
    enable(config, write=False)  # a config it cannot edit refuses before any file is laid
    result = InstallResult(plugin_dir=target, config=config)
    for rel, data in plugin_files().items():
        path = target / rel
        if path.is_symlink():
            raise InstallError(f"{path} is a link: move it away and run the command again")
        if path.exists() and path.read_bytes() == data:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, data)
        result.written.append(rel)
    result.enabled_now, result.hidden = enable(config)
    result.secret = secret.secret_path(home)
    try:
        _, result.secret_made = secret.ensure(result.secret, secret.owner_of(home))
    except secret.SecretError as exc:
        raise InstallError(f"the tab is laid and enabled, but its dashboard secret is not usable: {exc}") from None
    return result
