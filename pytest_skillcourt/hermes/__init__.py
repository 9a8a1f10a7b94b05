"""Hermes Agent plugin: hide quarantined skills from the models they hurt, and put the
skills an agent changes on trial.

Enable it in Hermes (``plugins: {enabled: [skill-court]}`` in ``config.yaml``,
or ``hermes plugins enable skill-court``); Hermes finds it through the entry
point ``hermes_agent.plugins: skill-court = pytest_skillcourt.hermes``, imports
this module and calls :func:`register` in every process (each chat, each gateway
worker, each cron job, each ``hermes`` command), so loading it stays cheap
(``tests/unit/test_hermes_plugin_imports.py``).

Its rooms:

- :mod:`~pytest_skillcourt.hermes.hiding`: the hiding callbacks
  (:class:`~pytest_skillcourt.hermes.hiding.SkillCourtPlugin`; what is hidden where,
  and what is not), made at their first call, with what they use:
  :mod:`~pytest_skillcourt.hermes.skill_index` (the prompt's skills index,
  ``skills_list``), :mod:`~pytest_skillcourt.hermes.skill_lookup` (which skill a
  ``skill_view`` loads), :mod:`~pytest_skillcourt.hermes.closed` (the places a
  constrained model's tools may not reach), :mod:`~pytest_skillcourt.hermes.scrub`
  (a hidden skill's text taken out of what a model reads);
- :mod:`~pytest_skillcourt.hermes.wrappers`: Hermes' skill loading outside the tool
  and its auxiliary model calls, wrapped at registration;
- :mod:`~pytest_skillcourt.hermes.trial_hooks`: the hooks of automatic trials;
- :mod:`~pytest_skillcourt.hermes.court_command`: ``hermes court``;
- ``dashboard/``: the Skill Court tab of ``hermes dashboard`` (not loaded here).
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from pytest_skillcourt.core import auto_queue
from pytest_skillcourt.hermes import court_command, wrappers
from pytest_skillcourt.hermes.trial_hooks import AutoTrials

if TYPE_CHECKING:
    from pytest_skillcourt.hermes.hiding import SkillCourtPlugin

logger = logging.getLogger("skill_court")


class _Hiding:
    """The hiding callbacks Hermes holds from registration on.  The plugin that answers
    them (:class:`~pytest_skillcourt.hermes.hiding.SkillCourtPlugin`, and the skill
    library's modules it reads) is made at the first call, so a process that never
    asks a model (``hermes court``, ``hermes config``, the dashboard) never loads it.
    Like the plugin's own, no callback raises."""

    def __init__(self) -> None:
        self._plugin: SkillCourtPlugin | None = None
        self._lock = threading.Lock()
        self._failed = False

    def plugin(self) -> SkillCourtPlugin | None:
        """The plugin, made at the first call; None when it cannot be (logged once)."""
        if self._plugin is None:
            with self._lock:
                if self._plugin is None:
                    try:
                        from pytest_skillcourt.hermes.hiding import SkillCourtPlugin

                        self._plugin = SkillCourtPlugin()
                    except Exception:
                        if not self._failed:
                            self._failed = True
                            logger.warning("skill-court: could not load the hiding callbacks; nothing is hidden",
                                           exc_info=True)
        return self._plugin

    def on_llm_request(self, *args: Any, **kwargs: Any) -> Any:
        plugin = self.plugin()
        return plugin.on_llm_request(*args, **kwargs) if plugin is not None else None

    def remember_model(self, *args: Any, **kwargs: Any) -> Any:
        plugin = self.plugin()
        return plugin.remember_model(*args, **kwargs) if plugin is not None else None

    def on_transform_tool_result(self, *args: Any, **kwargs: Any) -> Any:
        plugin = self.plugin()
        return plugin.on_transform_tool_result(*args, **kwargs) if plugin is not None else None

    def on_pre_tool_call(self, *args: Any, **kwargs: Any) -> Any:
        plugin = self.plugin()
        return plugin.on_pre_tool_call(*args, **kwargs) if plugin is not None else None

    def scrub_messages(self, messages: list[Any], model: str | None) -> list[Any] | None:
        plugin = self.plugin()
        return plugin.scrub_messages(messages, model) if plugin is not None else None


def register(ctx: Any) -> None:
    """Hermes entry point: register the hiding hooks, the automatic-trial hooks and
    ``hermes court``, and wrap the functions every skill load outside the ``skill_view``
    tool passes (:func:`~pytest_skillcourt.hermes.wrappers.install_wrappers`)."""
    hiding = _Hiding()
    wrappers.activate(hiding)
    try:
        wrappers.install_wrappers()
    except Exception:
        logger.warning("skill-court: could not wrap Hermes' skill loading; slash commands, bundles, "
                       "preloads and cron jobs are guarded by the text of the skills' files only", exc_info=True)
    ctx.register_middleware("llm_request", hiding.on_llm_request)
    ctx.register_hook("pre_llm_call", hiding.remember_model)
    ctx.register_hook("on_session_start", hiding.remember_model)
    ctx.register_hook("transform_tool_result", hiding.on_transform_tool_result)
    ctx.register_hook("pre_tool_call", hiding.on_pre_tool_call)
    trials = AutoTrials()
    ctx.register_hook("post_tool_call", trials.post_tool_call)
    ctx.register_hook("on_session_finalize", trials.session_finalize)
    ctx.register_hook("on_session_end", trials.turn_end)
    ctx.register_hook("pre_llm_call", trials.turn_start)
    ctx.register_hook("pre_gateway_dispatch", trials.gateway_dispatch)
    register_task = getattr(ctx, "register_auxiliary_task", None)
    if callable(register_task):
        try:
            register_task(auto_queue.JUDGE_TASK, display_name="Skill Court judge",
                          description="judges skill-court trials' answers without a check, finds causes, "
                                      "drafts appeals",
                          defaults={"provider": "auto", "model": "", "timeout": 120})
        except Exception:
            logger.warning("skill-court: could not register the auxiliary task %s", auto_queue.JUDGE_TASK,
                           exc_info=True)
    court_command.register(ctx)
