"""What Hermes pays to load the court's plugin: every Hermes process (each chat, each
gateway worker, each cron job) imports ``pytest_skillcourt.hermes`` and calls its
``register``.  Hiding skills and queueing automatic trials need the quarantine file,
the library's names and the queue, not the engine: the statistics, the sandboxes, the
agent runners, the trial command and the history miner load only where a trial runs
(the background runner, its own process)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: At most this many of the package's modules are loaded by importing and registering the plugin.
MOST_MODULES = 15
#: Never loaded by loading the plugin.
NOT_AT_LOAD = (
    "pytest_skillcourt.sandbox", "pytest_skillcourt.sandbox.docker", "pytest_skillcourt.sandbox.local",
    "pytest_skillcourt.engine.trial_run", "pytest_skillcourt.engine.auto", "pytest_skillcourt.engine.mine", "pytest_skillcourt.stats.verdict",
    "pytest_skillcourt.models.client", "pytest_skillcourt.core.runner_registry", "pytest_skillcourt.core.store",
    "pytest_skillcourt.plugin.court", "pytest_skillcourt.gateway", "openai", "httpx", "numpy", "pytest",
    # The hiding callbacks and the skill library they read: made at their first call.
    "pytest_skillcourt.hermes.hiding", "pytest_skillcourt.core.skills",
)

LOAD = """
import json, sys
import pytest_skillcourt.hermes as plugin

class Ctx:
    def __getattr__(self, name):  # register_hook, register_middleware, register_cli_command, ...
        return lambda *args, **kwargs: None

plugin.register(Ctx())
{extra}
print(json.dumps(sorted(sys.modules)))
"""


def _loaded(extra: str = "") -> set[str]:
    done = subprocess.run([sys.executable, "-c", LOAD.format(extra=extra)], capture_output=True, text=True,
                          timeout=120, check=True)
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def test_loading_the_hermes_plugin_loads_few_of_the_package_s_modules() -> None:
    loaded = _loaded()
    ours = sorted(m for m in loaded if m == "pytest_skillcourt" or m.startswith("pytest_skillcourt."))
    assert "pytest_skillcourt.hermes" in ours and "pytest_skillcourt.core.auto_queue" in ours
    assert len(ours) <= MOST_MODULES, ours
    assert sorted(m for m in NOT_AT_LOAD if m in loaded) == []


@pytest.mark.parametrize("module", ["pytest_skillcourt.engine.trial_run", "pytest_skillcourt.sandbox.docker"])
def test_the_probe_sees_what_a_trial_loads(module: str) -> None:
    """The check above can fail: the background runner's first trial loads the engine."""
    assert module in _loaded(f"import {module}")


def test_the_first_hiding_call_loads_the_hiding_callbacks() -> None:
    """Loading waits for the first call: the middleware's first request makes the plugin."""
    first_call = (
        "hooks = {}\n"
        "class Keep:\n"
        "    def register_middleware(self, kind, callback):\n"
        "        hooks[kind] = callback\n"
        "    def __getattr__(self, name):\n"
        "        return lambda *args, **kwargs: None\n"
        "plugin.register(Keep())\n"
        "assert hooks['llm_request'](request={'messages': []}, model='m') is None\n"
    )
    loaded = _loaded(first_call)
    assert {"pytest_skillcourt.hermes.hiding", "pytest_skillcourt.core.skills"} <= loaded
