"""Agent presets: the small YAML file that tells the ``command`` runner how to run an agent.

A preset says, for one agent CLI (README, "Any agent CLI: the command runner"):

- ``binary``: where to find its executable on the host (``find``: ``$VAR``
  entries name an environment variable holding a path, bare names are looked
  up on ``PATH``, anything else is a path, ``~`` expanded, relative ones from
  the project's rootdir) and how to install it when none is found
  (``install``); the file found is mounted read-only into each sandbox;
- ``skills.dir``: the sandbox folder where the agent looks for skills (each
  visible skill goes to ``<dir>/<name>/``; a hidden one is not installed at
  all, as if the user had never added it);
- ``files``: more files the agent needs (its configuration pointing at the
  gateway), as templates;
- ``env``: the agent's environment, as templates;
- ``run.args`` and ``prompt``: the arguments after the binary, and whether
  the prompt goes on stdin or as the last argument;
- ``answer``: where the final answer is read: all of stdout, a field of the
  last JSON object stdout printed, or a file in the sandbox.

Tokens, cost and the transcript are never read from the agent: the gateway
counts and records them.  Templates may use :data:`PLACEHOLDERS`
(``{gateway_url}``, ``{openai_base_url}``, ``{token}``, ``{model}``,
``{binary}``, ``{skills_dir}``; ``{{`` and ``}}`` for braces); ``{token}`` is
the run's own gateway token, never a provider key.

Presets shipped with the package (:func:`shipped_presets`) are named by their
file stem; any other is a path.  Every mistake in a preset is a
:class:`PresetError` naming the file, the field and the fix.

A leaf: ``options.py`` loads the preset when it validates the options.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
import shutil
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml

from pytest_skillcourt.core import safe_yaml

__all__ = [
    "ANSWER_SOURCES",
    "PLACEHOLDERS",
    "PRESETS_DIR",
    "Preset",
    "PresetError",
    "load_preset",
    "shipped_presets",
]

#: Where the shipped presets live (``<name>.yaml``).
PRESETS_DIR = Path(__file__).with_name("presets")
#: What a template may name, and what it becomes.
PLACEHOLDERS = {
    "gateway_url": "the gateway's root URL as the sandbox reaches it (no /v1: Anthropic clients)",
    "openai_base_url": "the gateway's URL for OpenAI clients (ends in /v1)",
    "token": "the run's own gateway token (use it as the agent's API key)",
    "model": "the run's model name",
    "binary": "the agent's executable in the sandbox",
    "skills_dir": "the skills.dir",
}
#: ``answer.from`` values.
ANSWER_SOURCES = ("stdout", "json", "file")
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TABLES = {"name", "about", "binary", "skills", "files", "env", "run", "answer"}
_FIELDS = {
    "binary": {"find", "install"},
    "skills": {"dir"},
    "run": {"args", "prompt"},
    "answer": {"from", "field", "path"},
}


class PresetError(ValueError):
    """A preset that cannot be used; the message names the file, the field and the fix."""


@dataclass(frozen=True)
class Preset:
    """One validated preset (see the module docstring)."""

    path: Path
    name: str
    find: tuple[str, ...]
    install: str
    skills_dir: str
    args: tuple[str, ...]
    prompt: str  # "stdin" | "arg"
    answer_from: str  # one of ANSWER_SOURCES
    answer_field: str = ""  # dotted path, for "json"
    answer_path: str = ""  # sandbox path, for "file"
    files: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    about: str = ""
    #: sha256 of the preset file's bytes: part of every run's cache key
    digest: str = ""

    def locate(self, rootdir: Path) -> tuple[Path | None, str]:
        """(the executable on this host, "") or (None, why not and how to install it)."""
        tried: list[str] = []
        for entry in self.find:
            if entry.startswith("$"):
                value = os.environ.get(entry[1:], "").strip()
                tried.append(entry)
                if not value:
                    continue
                candidate: Path | None = Path(os.path.expanduser(value))
            elif "/" not in entry and not entry.startswith("~"):
                tried.append(f"`{entry}` on PATH")
                found = shutil.which(entry)
                candidate = Path(found) if found else None
            else:
                tried.append(entry)
                candidate = Path(os.path.expanduser(entry))
                if not candidate.is_absolute():
                    candidate = rootdir / candidate
            if candidate is None:
                continue
            real = candidate.resolve()
            if real.is_file() and os.access(real, os.X_OK):
                return real, ""
            if entry.startswith("$"):
                return None, (f"{entry[1:]}={os.environ.get(entry[1:])} is not an executable file "
                              f"(preset {self.path}, binary.find)")
        how = f" Fix: {self.install}" if self.install else " Fix: install it, or add its path to binary.find"
        return None, (f"the {self.name} agent was not found (preset {self.path}, binary.find: looked at "
                      f"{', '.join(tried)}).{how}")

    def identity(self, rootdir: Path) -> str:
        """What runs of this preset depend on besides the runner: the preset file's
        bytes and the executable found (its size and modification time)."""
        binary, _ = self.locate(rootdir)
        if binary is None:
            return f"{self.digest}:missing"
        stat = binary.stat()
        return f"{self.digest}:{binary}:{stat.st_size}:{stat.st_mtime_ns}"

    def render(self, template: str, values: Mapping[str, str]) -> str:
        """``template`` with its placeholders filled (they were checked at load)."""
        return template.format_map(dict(values))


def shipped_presets() -> dict[str, Path]:
    """The presets shipped with the package, by name."""
    return {p.stem: p for p in sorted(PRESETS_DIR.glob("*.yaml"))}


def _fail(path: Path, where: str, message: str) -> PresetError:
    return PresetError(f"agent preset {path}: {where}: {message}")


def _text(data: Mapping[str, Any], key: str, path: Path, where: str, *, required: bool = True,
          default: str = "") -> str:
    value = data.get(key)
    if value is None:
        if required:
            raise _fail(path, where, "is missing; add it (see README, \"Any agent CLI: the command runner\")")
        return default
    if not isinstance(value, str) or not value.strip():
        raise _fail(path, where, f"must be a non-empty string, got {value!r}")
    return value


def _names(template: str) -> list[str]:
    """The placeholders ``template`` names (``ValueError``: not a valid template)."""
    return [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]


def _template(value: Any, path: Path, where: str) -> str:
    if not isinstance(value, str):
        raise _fail(path, where, f"must be a string, got {type(value).__name__} {value!r}")
    try:
        names = _names(value)
    except ValueError as err:
        raise _fail(path, where, f"is not a valid template ({err}); write {{{{ and }}}} for literal braces") from None
    for name in names:
        if name not in PLACEHOLDERS:
            known = ", ".join("{" + p + "}" for p in PLACEHOLDERS)
            raise _fail(path, where, f"names {{{name}}}, which is not a placeholder; known: {known} "
                                     "(write {{ and }} for literal braces)")
    return value


def _table(data: Mapping[str, Any], key: str, path: Path) -> dict[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise _fail(path, f"{key}", f"must be a mapping, got {type(value).__name__}")
    allowed = _FIELDS.get(key)
    if allowed is not None:
        for extra in sorted(set(value) - allowed):
            raise _fail(path, f"{key}.{extra}", f"is not a field of {key}; known: {', '.join(sorted(allowed))}")
    return value


def _sandbox_path(value: str, path: Path, where: str) -> str:
    if not value.startswith("/") or ".." in value.split("/") or "\0" in value:
        raise _fail(path, where, f"must be an absolute sandbox path without '..', got {value!r}")
    return posixpath.normpath(value)


def load_preset(spec: str, rootdir: Path) -> Preset:
    """The preset ``spec`` names: a shipped preset's name, or a YAML file's path
    (relative ones from ``rootdir``).

    Raises:
        PresetError: no such preset, or it is invalid (the message says where and how to fix it).
    """
    shipped = shipped_presets()
    if spec in shipped:
        path = shipped[spec]
    else:
        path = Path(os.path.expanduser(spec))
        if not path.is_absolute():
            path = rootdir / path
        if not path.is_file():
            raise PresetError(f"agent preset {spec!r}: no such file ({path}) and no shipped preset of that "
                              f"name; shipped: {', '.join(shipped) or 'none'}. Fix: give a preset file's path")
    try:
        raw = path.read_bytes()
        _, data = safe_yaml.load(raw.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise PresetError(f"agent preset {path}: not UTF-8 text ({err})") from None
    except (yaml.YAMLError, ValueError) as err:
        raise PresetError(f"agent preset {path}: not valid YAML: {err}") from None
    except OSError as err:
        raise PresetError(f"agent preset {path}: cannot be read: {err.strerror or err}") from None
    if not isinstance(data, dict):
        raise PresetError(f"agent preset {path}: must be a mapping of name, binary, skills, run, answer, "
                          f"files, env (see README, \"Any agent CLI: the command runner\"); got "
                          f"{type(data).__name__}")
    for extra in sorted(set(data) - _TABLES):
        raise _fail(path, extra, f"is not a preset field; known: {', '.join(sorted(_TABLES))}")
    name = _text(data, "name", path, "name")
    if not _NAME.match(name):
        raise _fail(path, "name", f"{name!r} must be lowercase letters, digits, '-' or '_' (at most 64)")
    about = _text(data, "about", path, "about", required=False)

    binary = _table(data, "binary", path)
    find = binary.get("find")
    if isinstance(find, str):
        find = [find]
    if not isinstance(find, list) or not find or not all(isinstance(f, str) and f.strip() for f in find):
        raise _fail(path, "binary.find", "must be a non-empty list of places to look: \"$ENV_VAR\", a name "
                                           "on PATH, or a path")
    install = _text(binary, "install", path, "binary.install", required=False)

    skills = _table(data, "skills", path)
    skills_dir = _sandbox_path(_text(skills, "dir", path, "skills.dir"), path, "skills.dir")

    run = _table(data, "run", path)
    args = run.get("args", [])
    if not isinstance(args, list):
        raise _fail(path, "run.args", "must be a list of strings")
    args = [_template(a, path, f"run.args[{i}]") for i, a in enumerate(args)]
    prompt = run.get("prompt", "stdin")
    if prompt not in ("stdin", "arg"):
        raise _fail(path, "run.prompt", f"must be \"stdin\" or \"arg\", got {prompt!r}")

    answer = _table(data, "answer", path)
    source = answer.get("from", "stdout")
    if source not in ANSWER_SOURCES:
        raise _fail(path, "answer.from", f"must be one of {', '.join(ANSWER_SOURCES)}, got {source!r}")
    answer_field = answer_path = ""
    if source == "json":
        answer_field = _text(answer, "field", path, "answer.field")
    elif "field" in answer:
        raise _fail(path, "answer.field", "is used only with from: json")
    if source == "file":
        answer_path = _sandbox_path(_text(answer, "path", path, "answer.path"), path, "answer.path")
    elif "path" in answer:
        raise _fail(path, "answer.path", "is used only with from: file")

    files_raw = data.get("files", {})
    if not isinstance(files_raw, dict):
        raise _fail(path, "files", "must be a mapping of sandbox path: content")
    files: dict[str, str] = {}
    for target, content in files_raw.items():
        where = f"files.{target}"
        norm = _sandbox_path(target, path, where)
        if norm == skills_dir or norm.startswith(skills_dir.rstrip("/") + "/"):
            raise _fail(path, where, f"is inside skills.dir {skills_dir}, which holds the library only")
        files[norm] = _template(content, path, where)

    env_raw = data.get("env", {})
    if not isinstance(env_raw, dict):
        raise _fail(path, "env", "must be a mapping of NAME: value")
    env: dict[str, str] = {}
    for key, value in env_raw.items():
        if not _ENV_NAME.match(key):
            raise _fail(path, f"env.{key}", "is not an environment variable name")
        env[key] = _template(value, path, f"env.{key}")
    if not any("token" in _names(t) for t in [*env.values(), *files.values(), *args]):
        raise _fail(path, "env", "no field uses {token}: the agent would have no way to reach the gateway. "
                                   "Fix: e.g. env: {OPENAI_API_KEY: \"{token}\"}")
    return Preset(path=path, name=name, about=about, find=tuple(find), install=install,
                  skills_dir=skills_dir, args=tuple(args), prompt=prompt, answer_from=source,
                  answer_field=answer_field, answer_path=answer_path, files=files, env=env,
                  digest=hashlib.sha256(raw).hexdigest())
