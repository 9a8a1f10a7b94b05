"""Hermes' skill loading outside the ``skill_view`` tool, and its auxiliary model calls
(points 4 and 7 of :mod:`pytest_skillcourt.hermes.hiding`).

Slash commands (``/name``, stacked ``/a /b``), bundles, ``-s``/``HERMES_TUI_SKILLS``
preloads, gateway auto-skills and webhooks all go through
``agent.skill_commands._load_skill_payload`` -> ``tools.skills_tool.skill_view``
(a Python call, not a tool call: no ``pre_tool_call``, no
``transform_tool_result``) and ``agent.skill_commands._build_skill_message``;
cron jobs with ``skills:`` call ``skill_view`` and paste its ``content``.  The
model is not known there (a preload runs before the first request, a slash
command may come before the session's first request), so these two functions
are wrapped at registration only to *record* what they returned (:data:`LOADS`); the
``llm_request`` middleware, which knows the model exactly, removes the recorded
text from every message of a model the skill is hidden from.  Hermes' auxiliary
calls (``agent.auxiliary_client.call_llm``/``async_call_llm``), which no middleware
sees, are wrapped to take the same text out of their messages.

:func:`install_wrappers` wraps the modules Hermes already imported and has the
others wrapped when Hermes imports them.  Loaded at registration, so it imports
what a wrapper needs (:mod:`pytest_skillcourt.hermes.skill_lookup`) at the wrapper's call.
"""

from __future__ import annotations

import functools
import json
import logging
import sys
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable, Container, Iterable, Mapping, Protocol

logger = logging.getLogger("skill_court")

#: Recorded texts shorter than this are not searched for (a tiny text could match anything).
RECORDED_MIN = 32
#: How many loaded texts are remembered (least recently loaded go first).
LOAD_MEMORY_SIZE = 128


class LoadLog:
    """Texts of skills Hermes loaded -> the names of the skills they are; bounded LRU, thread-safe."""

    def __init__(self, size: int = LOAD_MEMORY_SIZE) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._map: OrderedDict[str, frozenset[str]] = OrderedDict()

    def record(self, text: Any, names: Iterable[str]) -> None:
        names = frozenset(n for n in names if isinstance(n, str) and n)
        if not isinstance(text, str) or len(text.strip()) < RECORDED_MIN or not names:
            return
        with self._lock:
            self._map[text] = self._map.get(text, frozenset()) | names
            self._map.move_to_end(text)
            while len(self._map) > self._size:
                self._map.popitem(last=False)

    def texts(self, hidden: Container[str]) -> list[tuple[str, str]]:
        """``(text, hidden skill it is)`` for the recorded texts of hidden skills, longest first."""
        with self._lock:
            items = list(self._map.items())
        found = [(text, min(n for n in names if n in hidden)) for text, names in items
                 if any(n in hidden for n in names)]
        return sorted(found, key=lambda item: -len(item[0]))

    def __len__(self) -> int:
        with self._lock:
            return len(self._map)


#: The loads of this process (the wrappers are process-wide, like the functions they wrap).
LOADS = LoadLog()


def _loaded_skill_names(loaded: Any, skill_dir: Any) -> set[str]:
    """The names of the skill ``_build_skill_message(loaded, skill_dir, ...)`` formats."""
    from pytest_skillcourt.hermes.skill_lookup import frontmatter_parser, name_of

    parse = frontmatter_parser()
    names: set[str] = set()
    if isinstance(loaded, dict):
        if isinstance(loaded.get("name"), str):
            names.add(loaded["name"])
        skill_dir = skill_dir or loaded.get("skill_dir")
    if skill_dir:
        folder = Path(str(skill_dir))
        names |= {folder.name, name_of(folder / "SKILL.md", parse)}
    names.discard("")
    return names


def _skill_part(original: Callable[..., Any], message: Any, loaded_skill: Any, skill_dir: Any,
                args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The skill's part of a ``_build_skill_message`` result: without the user's
    instruction and the runtime note Hermes appends (they are the user's, not the
    skill's, and must reach the model whatever happens to the skill)."""
    if not isinstance(message, str):
        return message
    import inspect

    try:
        bound = inspect.signature(original).bind(loaded_skill, skill_dir, *args, **kwargs).arguments
    except (TypeError, ValueError):
        return message
    instruction, note = bound.get("user_instruction") or "", bound.get("runtime_note") or ""
    tail = ""
    if instruction:
        tail += f"\n\nThe user has provided the following instruction alongside the skill invocation: {instruction}"
    if note:
        tail += f"\n\n[Runtime note: {note}]"
    return message[:-len(tail)] if tail and message.endswith(tail) else message


def _recording_build(original: Callable[..., Any]) -> Callable[..., Any]:
    """``agent.skill_commands._build_skill_message``, recording the block it returns."""

    @functools.wraps(original)
    def _build_skill_message(loaded_skill: Any, skill_dir: Any = None, *args: Any, **kwargs: Any) -> Any:
        message = original(loaded_skill, skill_dir, *args, **kwargs)
        try:
            names = _loaded_skill_names(loaded_skill, skill_dir)
            LOADS.record(_skill_part(original, message, loaded_skill, skill_dir, args, kwargs), names)
            if isinstance(loaded_skill, dict):
                LOADS.record(loaded_skill.get("content"), names)
        except Exception:
            logger.debug("skill-court: could not record a skill message", exc_info=True)
        return message

    _build_skill_message.__skill_court__ = True  # type: ignore[attr-defined]
    return _build_skill_message


def _recording_view(original: Callable[..., Any]) -> Callable[..., Any]:
    """``tools.skills_tool.skill_view``, recording the text a successful call returns."""

    @functools.wraps(original)
    def skill_view(name: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(name, *args, **kwargs)
        try:
            data = json.loads(result) if isinstance(result, str) else None
            if isinstance(data, dict) and data.get("success") is True:
                from pytest_skillcourt.hermes.skill_lookup import viewed_names

                file_path = kwargs.get("file_path", args[0] if args else None)
                LOADS.record(data.get("content"), viewed_names(result, {"name": name, "file_path": file_path}))
        except Exception:
            logger.debug("skill-court: could not record a skill_view result", exc_info=True)
        return result

    skill_view.__skill_court__ = True  # type: ignore[attr-defined]
    return skill_view


class Scrubber(Protocol):
    """What takes the text of the skills hidden from a model out of messages (the plugin)."""

    def scrub_messages(self, messages: list[Any], model: str | None) -> list[Any] | None: ...


#: The plugin whose quarantine the auxiliary-call wrappers apply (the one ``register`` made).
_ACTIVE: Scrubber | None = None


def activate(scrubber: Scrubber | None) -> None:
    """Have the auxiliary-call wrappers apply the quarantine of ``scrubber`` (``register``'s plugin)."""
    global _ACTIVE
    _ACTIVE = scrubber


def _aux_model(task: Any, kwargs: Mapping[str, Any]) -> str | None:
    """The model an auxiliary call will use, as ``agent.auxiliary_client.call_llm`` picks it:
    an explicit ``model``, else the task's configured model, else the main runtime's."""
    if isinstance(kwargs.get("model"), str) and kwargs["model"]:
        return kwargs["model"]
    client = sys.modules.get("agent.auxiliary_client")
    resolve = getattr(client, "_resolve_task_provider_model", None)
    if callable(resolve):
        try:
            resolved = resolve(task, kwargs.get("provider"), kwargs.get("model"), kwargs.get("base_url"),
                               kwargs.get("api_key"))[1]
            if isinstance(resolved, str) and resolved:
                return resolved
        except Exception:
            pass
    runtime = kwargs.get("main_runtime")
    model = runtime.get("model") if isinstance(runtime, dict) else None
    return model if isinstance(model, str) and model else None


def _scrub_aux(task: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    plugin = _ACTIVE
    if plugin is None or not isinstance(kwargs.get("messages"), list):
        return kwargs
    try:
        messages = plugin.scrub_messages(kwargs["messages"], _aux_model(task, kwargs))
    except Exception:
        logger.debug("skill-court: could not check an auxiliary call", exc_info=True)
        return kwargs
    return kwargs if messages is None else {**kwargs, "messages": messages}


def _scrubbing_call(original: Callable[..., Any]) -> Callable[..., Any]:
    """``agent.auxiliary_client.call_llm``, with the hidden skills' text taken out of its messages."""

    @functools.wraps(original)
    def call_llm(task: Any = None, *args: Any, **kwargs: Any) -> Any:
        return original(task, *args, **_scrub_aux(task, kwargs))

    call_llm.__skill_court__ = True  # type: ignore[attr-defined]
    return call_llm


def _scrubbing_async_call(original: Callable[..., Any]) -> Callable[..., Any]:
    """``agent.auxiliary_client.async_call_llm``, likewise."""

    @functools.wraps(original)
    async def async_call_llm(task: Any = None, *args: Any, **kwargs: Any) -> Any:
        return await original(task, *args, **_scrub_aux(task, kwargs))

    async_call_llm.__skill_court__ = True  # type: ignore[attr-defined]
    return async_call_llm


#: Hermes module -> (attribute, wrapper factory): the functions every skill load outside
#: the tool passes, and the auxiliary model calls no middleware sees.
_WRAPPED: dict[str, tuple[tuple[str, Callable[[Callable[..., Any]], Callable[..., Any]]], ...]] = {
    "agent.skill_commands": (("_build_skill_message", _recording_build),),
    "tools.skills_tool": (("skill_view", _recording_view),),
    "agent.auxiliary_client": (("call_llm", _scrubbing_call), ("async_call_llm", _scrubbing_async_call)),
}


def _wrap_module(module: Any, rebind: bool = False) -> None:
    """Wrap ``module``'s functions of :data:`_WRAPPED`; with ``rebind`` (the module was
    imported before the plugin registered), also every ``from module import name``
    binding other loaded modules already hold."""
    for attribute, make in _WRAPPED.get(getattr(module, "__name__", ""), ()):
        function = getattr(module, attribute, None)
        if not callable(function) or getattr(function, "__skill_court__", False):
            continue
        wrapper = make(function)
        setattr(module, attribute, wrapper)
        if rebind:
            for other in list(sys.modules.values()):
                try:  # vars(), not getattr(): a lazy module's __getattr__ must not run
                    if other is not module and vars(other).get(attribute) is function:
                        setattr(other, attribute, wrapper)
                except Exception:
                    continue


class _WrappingLoader:
    """A module loader that wraps the module's functions once it has run."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def create_module(self, spec: Any) -> Any:
        create = getattr(self._inner, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: Any) -> None:
        self._inner.exec_module(module)
        try:
            _wrap_module(module)
        except Exception:
            logger.warning("skill-court: could not wrap %s", getattr(module, "__name__", "?"), exc_info=True)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _WrapOnImport:
    """A ``sys.meta_path`` finder that hands the modules of :data:`_WRAPPED` a
    :class:`_WrappingLoader` (so they need not be imported at registration, which
    would cost ``tools.skills_tool``'s 60 ms to every ``hermes`` command)."""

    __skill_court__ = True

    def __init__(self) -> None:
        self._busy: set[str] = set()

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in _WRAPPED or fullname in self._busy:
            return None
        self._busy.add(fullname)
        try:
            for finder in list(sys.meta_path):
                find = getattr(finder, "find_spec", None)
                if finder is self or find is None:
                    continue
                spec = find(fullname, path, target)
                if spec is not None:
                    break
            else:
                return None
        finally:
            self._busy.discard(fullname)
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _WrappingLoader(spec.loader)
        return spec


def install_wrappers() -> None:
    """Wrap the load functions now if Hermes imported them, else when it does (idempotent)."""
    for name in _WRAPPED:
        module = sys.modules.get(name)
        if module is not None:
            _wrap_module(module, rebind=True)
    if not any(getattr(finder, "__skill_court__", False) for finder in sys.meta_path):
        sys.meta_path.insert(0, _WrapOnImport())
