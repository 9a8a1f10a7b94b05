"""The hooks of automatic trials (README "Automatic trials"): a successful
``skill_manage`` change queues its skill, the end of a session or turn starts the
background runner, and the runner's notices reach the user who made the change
(the CLI's printer, or the chat the change came from).

The hooks do file work only, through :mod:`pytest_skillcourt.core.auto_queue`: the
runner (``skill-court trial --auto``, :mod:`pytest_skillcourt.engine.auto`) is its
own process, and nothing here loads the engine.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any, Callable

from pytest_skillcourt.core import auto_queue
from pytest_skillcourt.core.layout import HERMES_DATA, active_hermes_home

logger = logging.getLogger("skill_court")


def _succeeded(result: Any) -> bool:
    """A ``skill_manage`` result that says it worked (``{"success": true, ...}``)."""
    try:
        data = json.loads(result) if isinstance(result, str) else result
    except ValueError:
        return False
    return isinstance(data, dict) and data.get("success") is True


def show_to_user(text: str) -> str:
    """Put a line in front of the CLI user, outside the conversation: through the
    interactive CLI's own printer (``cli._cprint``, which prints above the input
    area while prompt_toolkit runs), else on stderr.  Where it went."""
    cli_module = sys.modules.get("cli")
    printer = getattr(cli_module, "_cprint", None) if cli_module is not None else None
    try:
        from prompt_toolkit.application import get_app_or_none

        running = get_app_or_none() is not None
    except Exception:
        running = False
    if callable(printer) and running:
        for line in text.splitlines():
            printer(line)
        return "cli"
    print(text, file=sys.stderr, flush=True)
    return "stderr"


class AutoTrials:
    """The hooks of automatic trials; every one logs its errors and never fails Hermes' call."""

    def __init__(self, home: Callable[[], Path] = active_hermes_home) -> None:
        self.home = home
        self._failed: set[str] = set()
        self._sending: set[Any] = set()

    def _guard(self, name: str, call: Callable[[], Any]) -> None:
        try:
            call()
        except Exception:
            if name not in self._failed:
                self._failed.add(name)
                logger.warning("skill-court: automatic trials: %s failed; Hermes goes on", name, exc_info=True)
            else:
                logger.debug("skill-court: automatic trials: %s failed", name, exc_info=True)

    def _enabled(self, home: Path) -> bool:
        return (home / HERMES_DATA / auto_queue.SETTINGS_NAME).exists() and auto_queue.read_settings(home).enabled

    def post_tool_call(self, tool_name: Any = None, args: Any = None, result: Any = None,
                       session_id: Any = None, **kwargs: Any) -> None:
        """``post_tool_call``: a successful ``skill_manage`` create/patch/edit queues the skill."""
        if tool_name != "skill_manage" or not isinstance(args, dict):
            return None

        def queue() -> None:
            action, name = args.get("action"), args.get("name")
            if action not in auto_queue.WATCHED_ACTIONS or not isinstance(name, str) or not _succeeded(result):
                return
            from pytest_skillcourt.core.transcript import skill_name  # not at load: it reads the library's modules

            home = self.home()
            if not self._enabled(home):
                return
            sid = str(session_id or "")
            change = auto_queue.queue_change(home, skill_name(name) or name, sid, str(action),
                                             origin=auto_queue.session_origin(home, sid) if sid else None)
            if change is not None:
                auto_queue.log(home, f"{change['skill']}: {action} by session {sid or '?'} queued")

        self._guard("post_tool_call", queue)
        return None

    def session_finalize(self, session_id: Any = None, **kwargs: Any) -> None:
        """``on_session_finalize``: the session ended; its changes go on trial."""
        def finish() -> None:
            home = self.home()
            if self._enabled(home):
                auto_queue.end_session(home, str(session_id or ""))
                auto_queue.maybe_start_runner(home)

        self._guard("on_session_finalize", finish)
        return None

    def turn_end(self, **kwargs: Any) -> None:
        """``on_session_end`` (0.19.0 fires it after every turn): start a runner for a
        quiet or ready change."""
        def check() -> None:
            home = self.home()
            if self._enabled(home):
                auto_queue.maybe_start_runner(home)

        self._guard("on_session_end", check)
        return None

    def turn_start(self, platform: Any = None, session_id: Any = None, **kwargs: Any) -> None:
        """``pre_llm_call``: show the CLI user their notices, start a runner for a quiet
        change; returns nothing, so nothing enters the model's context."""
        def check() -> None:
            home = self.home()
            if not (home / HERMES_DATA).is_dir():
                return
            if str(platform or "cli") == "cli":
                for notice in auto_queue.take_notices(home, platform="cli", to="cli"):
                    show_to_user(str(notice["text"]))
            if self._enabled(home):
                auto_queue.maybe_start_runner(home)

        self._guard("pre_llm_call", check)
        return None

    def gateway_dispatch(self, event: Any = None, gateway: Any = None, **kwargs: Any) -> None:
        """``pre_gateway_dispatch``: a message from a chat; its sender's notices go to that
        chat through the platform's adapter (only the sender who changed the skill, in
        the same chat on the same platform)."""
        def deliver() -> None:
            source = getattr(event, "source", None)
            platform = getattr(getattr(source, "platform", None), "value", None)
            if source is None or not platform or gateway is None:
                return
            home = self.home()
            if not (home / HERMES_DATA / auto_queue.STATE_NAME).exists():
                return
            adapter = (getattr(gateway, "adapters", None) or {}).get(source.platform)
            if adapter is None:
                return
            notices = auto_queue.take_notices(home, platform=str(platform), chat_id=source.chat_id,
                                              user_id=source.user_id, to=f"{platform}:{source.chat_id}")
            if not notices:
                return
            import asyncio

            loop = asyncio.get_running_loop()
            thread = getattr(source, "thread_id", None)
            for notice in notices:
                task = loop.create_task(adapter.send(source.chat_id, str(notice["text"]),
                                                     metadata={"thread_id": thread} if thread else None))
                self._sending.add(task)  # held until sent (the loop keeps only weak references)
                task.add_done_callback(self._sending.discard)

        self._guard("pre_gateway_dispatch", deliver)
        return None
