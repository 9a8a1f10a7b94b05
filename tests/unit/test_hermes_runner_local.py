"""The ``hermes`` runner's local-sandbox pieces (Hermes inside bubblewrap): finding the
host's hermes-agent and the folders a jail must be shown, the run's HERMES_HOME as files
(the arm's skills only, the model behind the gateway), its environment and command line,
what it asks of the sandbox, and ``LocalSandbox.read_only_trees``.

A real ``hermes chat -q`` in a jail is in ``tests/e2e/test_hermes_runner_local.py``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
import yaml

from pytest_skillcourt.agent import hermes_runner as hr
from pytest_skillcourt.agent.runner import SandboxNeeds
from pytest_skillcourt.gateway import RunGrant
from pytest_skillcourt.sandbox import local
from pytest_skillcourt.sandbox.base import SandboxError, SandboxSpec, SandboxUnavailable
from tests.support.hermes_setups import SKILL, make_ctx

#: What the gateway gives a run in a local sandbox: the forwarder's URL and the run's token.
GRANT = RunGrant(run_id="r", token="sk-court-the-token", base_url="http://127.0.0.1:8088",
                 socket_path="/tmp/gw/gateway.sock")


def local_ctx(tmp_path: Path, arm: str, profile: Path | None = None, **kw: object):
    ctx = make_ctx(tmp_path, profile, arm, **kw)  # type: ignore[arg-type]
    return dataclasses.replace(ctx, backend="local")


def write_profile(root: Path) -> Path:
    prof = root / "profile"
    (prof / "memories" / "notes").mkdir(parents=True)
    (prof / "memories" / "MEMORY.md").write_text("PROFILE-MEMORY-MARKER\n")
    (prof / "memories" / "notes" / "n.md").write_text("nested\n")
    os.symlink("/etc/passwd", prof / "memories" / "linked.md")
    (prof / "SOUL.md").write_text("PROFILE-SOUL-MARKER\n")
    (prof / ".env").write_text("OPENAI_API_KEY=sk-from-dotenv\n")
    (prof / "auth.json").write_text('{"token": "secret"}\n')
    (prof / "skills" / "own-skill").mkdir(parents=True)
    (prof / "skills" / "own-skill" / "SKILL.md").write_text("---\nname: own-skill\n---\nx\n")
    config = {"model": {"default": "gpt-x", "provider": "openrouter", "api_key": "sk-profile",
                        "context_length": 64000},
              "terminal": {"backend": "docker", "docker_volumes": ["/:/host"], "env_passthrough": ["AWS_KEY"]},
              "approvals": {"mode": "off", "deny": ["git push --force*"]},
              "display": {"personality": "pirate"}}
    (prof / "config.yaml").write_text(yaml.safe_dump(config))
    return prof


# -- the run's HERMES_HOME ---------------------------------------------------------------


def test_with_arm_home_holds_the_profile_the_library_and_the_gateway_only(tmp_path: Path) -> None:
    prof = write_profile(tmp_path)
    ctx = local_ctx(tmp_path, "with", prof)
    files = hr.local_home_files(ctx, hr.read_profile_config(prof), GRANT)
    home = hr.LOCAL_HERMES_HOME
    assert sorted(p[len(home) + 1:] for p in files) == sorted([
        ".no-bundled-skills", "SOUL.md", "config.yaml", "memories/MEMORY.md", "memories/notes/n.md",
        f"skills/{SKILL}/SKILL.md", "skills/tools/other-tip/SKILL.md", "skills/tools/other-tip/scripts/run.sh"])
    assert files[f"{home}/SOUL.md"] == b"PROFILE-SOUL-MARKER\n"
    # Never the profile's keys, auth, own skills or symlinks.
    assert not [p for p, data in files.items() if b"sk-from-dotenv" in data or b"sk-profile" in data
                or b"secret" in data or b"root:x:" in data]
    cfg = yaml.safe_load(files[f"{home}/config.yaml"])
    assert cfg["model"] == {"default": "m", "provider": "custom", "base_url": "http://127.0.0.1:8088/v1",
                            "api_key": "sk-court-the-token", "context_length": 64000}
    assert cfg["terminal"] == {"backend": "local", "cwd": "/workspace", "env_passthrough": [],
                               "shell_init_files": [], "auto_source_bashrc": False, "home_mode": "real",
                               "timeout": 60}
    assert cfg["approvals"] == {"mode": "manual", "timeout": hr.APPROVAL_TIMEOUT_S, "cron_mode": "deny",
                                "deny": ["git push --force*"]}
    assert cfg["plugins"] == {"enabled": []} and cfg["skills"]["inline_shell"] is False
    assert cfg["skills"]["disabled"] == [] and cfg["display"] == {"personality": "pirate"}
    # A skill's script keeps its run bit, as in the library.
    (tmp_path / "skills" / "tools" / "other-tip" / "scripts" / "run.sh").chmod(0o755)
    files = hr.local_home_files(ctx, {}, GRANT)
    assert files.executable == {f"{home}/skills/tools/other-tip/scripts/run.sh"}


def test_without_arm_home_has_no_file_of_the_skill(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no profile: not this machine's ~/.hermes
    ctx = local_ctx(tmp_path, "without", disabled=("ini-off",))
    files = hr.local_home_files(ctx, {}, GRANT)
    assert not [p for p in files if SKILL in p]
    assert f"{hr.LOCAL_HERMES_HOME}/skills/tools/other-tip/SKILL.md" in files
    assert f"{hr.LOCAL_HERMES_HOME}/SOUL.md" not in files
    cfg = yaml.safe_load(files[f"{hr.LOCAL_HERMES_HOME}/config.yaml"])
    assert cfg["skills"]["disabled"] == [SKILL, "ini-off"]  # and switched off, Hermes' way
    assert cfg["model"]["context_length"] == hr.DEFAULT_CONTEXT_LENGTH


def test_environment_and_command_line(tmp_path: Path) -> None:
    env = hr.local_env()
    assert env == {"PATH": hr.SANDBOX_PATH, "HOME": "/root", "HERMES_HOME": "/root/.hermes",
                   "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
    install = hr.HermesInstall(hermes="/opt/h/bin/hermes", python="/opt/h/bin/python3", trees=("/opt/h",),
                               version="0.19.0")
    argv = hr.local_argv(install, local_ctx(tmp_path, "with", prompt="-rf: a prompt like an option"))
    assert argv[:4] == ["/opt/h/bin/python3", "-s", "-c", hr.HERMES_MAIN]
    assert argv[4:6] == ["chat", "--query=-rf: a prompt like an option"]
    assert argv[argv.index("--toolsets") + 1] == ",".join(hr.TOOLSETS)
    assert argv[argv.index("--max-turns") + 1] == "61"
    # The console script's own code, run by the interpreter: no script is needed in the jail.
    assert "from hermes_cli.main import main" in hr.HERMES_MAIN and "sys.exit(main())" in hr.HERMES_MAIN


# -- what the runner asks of the sandbox -------------------------------------------------


def test_local_runs_ask_for_a_gateway_and_reach_the_visible_skills_only(tmp_path: Path) -> None:
    runner = hr.RUNNER
    docker_with = make_ctx(tmp_path, None, "with")
    docker_without = make_ctx(tmp_path, None, "without")
    assert runner.sandbox_needs(docker_with) == SandboxNeeds()  # as before: Hermes on the host
    assert runner.skills_in_reach(docker_without) == {SKILL, "other-tip"}
    assert runner.skills_out_of_reach(docker_without) == frozenset()
    local_with, local_without = local_ctx(tmp_path, "with"), local_ctx(tmp_path, "without")
    assert runner.sandbox_needs(local_with) == SandboxNeeds(gateway=True)
    assert runner.skills_in_reach(local_with) == {SKILL, "other-tip"}
    assert runner.skills_in_reach(local_without) == {"other-tip"}
    assert runner.skills_out_of_reach(local_without) == {SKILL}
    assert runner.skills_out_of_reach(local_with) == frozenset()


def test_other_backends_are_refused_with_the_fix() -> None:
    why = hr.hermes_reason("firecracker")
    assert "docker and local" in why and "Fix: --skill-court-sandbox docker (or local)" in why


# -- finding the host's Hermes -----------------------------------------------------------


@pytest.mark.parametrize(("first", "want"), [
    ("#!/opt/h/bin/python3\n", "/opt/h/bin/python3"),
    ("#!/opt/h/bin/python3.11 -E\n", "/opt/h/bin/python3.11"),
    ("#!/usr/bin/env bash\n", None),  # a pyenv shim
    ("#!/bin/sh\n", None),
    ("\x7fELF\x02", None),
    ("#!python3\n", None),
])
def test_shebang_python(tmp_path: Path, first: str, want: str | None) -> None:
    script = tmp_path / "hermes"
    script.write_text(first + "import sys\n")
    assert hr.shebang_python(str(script)) == want


def test_shebang_python_env_form_takes_it_from_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text("#!/bin/sh\n")
    (bin_dir / "python3").chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    script = tmp_path / "hermes"
    script.write_text("#!/usr/bin/env python3\n")
    assert hr.shebang_python(str(script)) == str(bin_dir / "python3")
    assert hr.shebang_python(str(tmp_path / "missing")) is None


def test_python_trees_skip_the_system_view_and_nested_folders(tmp_path: Path) -> None:
    a, b = tmp_path / "env", tmp_path / "other"
    (a / "lib" / "site").mkdir(parents=True)
    b.mkdir()
    os.symlink(a, tmp_path / "link")
    got = hr.python_trees([str(a / "lib" / "site"), str(tmp_path / "link"), str(a), "/usr/lib/python3", "",
                           str(b), str(b)], ("/usr",))
    assert got == (str(a), str(b))


def test_skill_court_hermes_names_the_hermes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "hermes"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.setenv(hr.ENV_BINARY, str(script))
    assert hr.find_hermes() == str(script)
    monkeypatch.setenv(hr.ENV_BINARY, str(tmp_path / "missing"))
    assert hr.find_hermes() is None
    why = hr.hermes_reason("local")
    assert f"{hr.ENV_BINARY}={tmp_path / 'missing'} is not an executable file" in why
    assert why == hr.hermes_reason("docker")


def test_a_shim_is_refused_with_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shim = tmp_path / "hermes"
    shim.write_text("#!/usr/bin/env bash\nexec pyenv exec hermes \"$@\"\n")
    shim.chmod(0o755)
    monkeypatch.setenv(hr.ENV_BINARY, str(shim))
    why = hr.hermes_reason("local")
    assert "names none (a pyenv or asdf shim?)" in why
    assert f"{hr.ENV_BINARY}=/opt/hermes/bin/hermes" in why and "--skill-court-sandbox docker" in why


def fake_env(root: Path, answer: dict[str, object]) -> Path:
    """A ``hermes`` whose "Python" (a shell script) answers the probe with ``answer``."""
    bin_dir = root / "env" / "bin"
    bin_dir.mkdir(parents=True)
    python = bin_dir / "python3"
    python.write_text(f"#!/bin/sh\necho '{json.dumps(answer)}'\n")
    python.chmod(0o755)
    hermes = bin_dir / "hermes"
    hermes.write_text(f"#!{python}\nimport sys\n")
    hermes.chmod(0o755)
    return hermes


def test_the_folders_to_show_and_who_can_read_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = tmp_path / "env"
    site = tmp_path / "elsewhere" / "site-packages"
    site.mkdir(parents=True)
    hermes = fake_env(tmp_path, {"prefixes": [str(env), "/usr", str(env), "/usr"], "executable": "x",
                                 "version": "0.19.0", "roots": [str(site), str(site)], "main": True})
    monkeypatch.setenv(hr.ENV_BINARY, str(hermes))
    install, why = hr.hermes_install()
    private = local.unreachable_for(hr.JAIL_PROBE_UID, str(env), file=False)
    if os.geteuid() == 0 and private:  # pytest's own tmp folder is private to root
        assert install is None
        assert "the sandbox's own user (never root) cannot read" in why
        assert private.split(" is under ", 1)[1] in why  # the private folder, its mode and owner
        assert "/usr/bin/python3 -m venv /opt/hermes" in why and "chmod o+x" in why
    else:
        assert why == "" and install == hr.HermesInstall(
            hermes=str(hermes), python=str(env / "bin" / "python3"),
            trees=tuple(sorted((str(env), str(site)))), version="0.19.0")
        assert hr.hermes_reason("local") == ""


def test_a_python_without_hermes_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hermes = fake_env(tmp_path, {"prefixes": [], "roots": [], "main": False})
    monkeypatch.setenv(hr.ENV_BINARY, str(hermes))
    install, why = hr.hermes_install()
    assert install is None and "cannot import hermes-agent without the user's site-packages" in why


def test_a_folder_the_sandbox_provides_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hermes = fake_env(tmp_path, {"prefixes": ["/proc/fake"], "roots": [], "main": True})
    monkeypatch.setenv(hr.ENV_BINARY, str(hermes))
    install, why = hr.hermes_install()
    assert install is None and "cannot show hermes-agent's folder /proc/fake" in why


# -- LocalSandbox.read_only_trees -----------------------------------------------------------


@pytest.mark.parametrize(("target", "refused"), [
    ("/root/.pyenv/versions/3.11", ""), ("/tmp/env", ""), ("/home/u/.venv", ""), ("/srv/h", ""),
    ("/workspace/env", ""),
    ("/", "own"), ("/root", "own"), ("/tmp", "own"), ("/workspace", "own"), ("/opt", "own"),
    ("/usr/local/h", "provides"), ("/etc/h", "provides"), ("/proc", "provides"), ("/dev/x", "provides"),
    ("/run/skill-court/x", "provides"), ("/opt/skill-court", "provides"), ("/lib64/x", "provides"),
    ("relative", "plain"), ("/a/../b", "plain"), ("/a/", "plain"), ("//a", "plain"),
])
def test_tree_targets(target: str, refused: str) -> None:
    why = local.tree_target_refused(target)
    assert (refused in why) if refused else why == ""


def test_read_only_trees_show_a_folder_for_the_block_only(tmp_path: Path, bwrap_ok: None) -> None:
    tree = Path("/tmp") / f"skillcourt-test-tree-{os.getpid()}"  # every user can enter /tmp
    (tree / "sub").mkdir(parents=True)
    try:
        (tree / "sub" / "f").write_text("shown\n")
        for p in (tree, tree / "sub"):
            p.chmod(0o755)
        (tree / "sub" / "f").chmod(0o644)
        with local.open_local(SandboxSpec()) as sb:
            with sb.read_only_trees({"/root/.env/h": str(tree), "/srv/h": str(tree)}):
                shown = sb.exec("cat /root/.env/h/sub/f /srv/h/sub/f; touch /srv/h/x")
                with pytest.raises(SandboxError, match="cannot nest"), sb.read_only_trees({"/srv/i": str(tree)}):
                    pass
            assert shown.stdout == "shown\nshown\n" and "Read-only file system" in shown.stderr
            assert not (tree / "x").exists()
            after = sb.exec("ls /srv/h/sub/f 2>&1; echo LEFT $(ls -A /root/.env/h)")
            assert "No such file" in after.stdout and after.stdout.endswith("LEFT\n")  # an empty mount point
            with pytest.raises(SandboxError, match="lies in /usr"), sb.read_only_trees({"/usr/h": str(tree)}):
                pass
            with pytest.raises(SandboxError, match="is not a folder"), sb.read_only_trees(
                    {"/srv/h": str(tree / "sub" / "f")}):
                pass
            assert sb.exec("true").ok  # a refused block leaves the sandbox as it was
    finally:
        for p in sorted(tree.rglob("*"), reverse=True):
            p.unlink() if p.is_file() else p.rmdir()
        tree.rmdir()


def test_read_only_trees_refuse_a_private_folder_as_root(tmp_path: Path, bwrap_ok: None) -> None:
    if os.geteuid() != 0:
        pytest.skip("as an ordinary user the jail runs as that user, who can enter their own folders")
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    with local.open_local(SandboxSpec()) as sb, pytest.raises(SandboxUnavailable, match="Fix: install it where"):
        with sb.read_only_trees({"/srv/p": str(private)}):
            pass
