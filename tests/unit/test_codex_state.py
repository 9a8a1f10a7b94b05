"""The state Codex makes at its first start, made once on the host and placed in each run's
``~/.codex`` (``agent/codex.py``, :func:`codex.first_start_state`)."""

from __future__ import annotations

import sqlite3
import stat
import sys
from pathlib import Path

import pytest

from pytest_skillcourt.agent import codex
from pytest_skillcourt.core.skills import load_library
from tests.support.agent_clis import codex_binary
from tests.support.builders import write_skill

#: A stand-in for ``codex archive``: it logs its call and what it was given, and makes in
#: ``$CODEX_HOME`` two migrated databases (one left in WAL mode), one that is no Codex
#: database, an identity file and a skill.
FAKE = """\
import os, sqlite3, sys
home = os.environ["CODEX_HOME"]
with open(sys.argv[0] + ".calls", "a") as log:
    log.write(repr((sys.argv[1:], sorted(os.environ), os.path.samefile(home, os.getcwd()),
                    open(os.path.join(home, "config.toml")).read())) + "\\n")
open(os.path.join(home, "installation_id"), "w").write("0000")
os.makedirs(os.path.join(home, "skills", ".system"))
for name, wal in (("logs_2.sqlite", False), ("other_1.sqlite", False), ("state_5.sqlite", True)):
    db = sqlite3.connect(os.path.join(home, name))
    if wal:
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA wal_autocheckpoint = 0")
    if name != "other_1.sqlite":
        db.execute("CREATE TABLE _sqlx_migrations (version INTEGER)")
        db.execute("INSERT INTO _sqlx_migrations VALUES (1)")
    db.execute("CREATE TABLE threads (id TEXT)")
    db.commit()
    if wal:
        os._exit(1)  # as Codex leaves it: its WAL not folded in
    db.close()
"""


def _fake(tmp_path: Path) -> Path:
    binary = tmp_path / "bin" / "codex"
    binary.parent.mkdir()
    binary.write_text(f"#!{sys.executable}\n" + FAKE)
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    return binary


def _tables(data: bytes, tmp_path: Path) -> dict[str, int]:
    path = tmp_path / "read.sqlite"
    path.write_bytes(data)
    db = sqlite3.connect(path)
    try:
        names = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {name: db.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0] for name in names}
    finally:
        db.close()
        path.unlink()


def test_the_migrated_databases_of_an_empty_home_once_per_binary(tmp_path: Path) -> None:
    binary = _fake(tmp_path)
    state = codex.first_start_state(binary)
    # Only Codex's migrated databases, each one file (the WAL folded in), at ~/.codex.
    assert sorted(state) == ["/root/.codex/logs_2.sqlite", "/root/.codex/state_5.sqlite"]
    for data in state.values():
        assert _tables(data, tmp_path) == {"_sqlx_migrations": 1, "threads": 0}
    calls = Path(str(binary) + ".calls").read_text().splitlines()
    assert len(calls) == 1
    argv, env, in_home, config = eval(calls[0])  # noqa: S307  (our own repr)
    assert argv == ["archive", codex.NO_SESSION]
    assert env == ["CODEX_HOME", "HOME", "LANG", "PATH"] and in_home
    assert "[analytics]\nenabled = false" in config and "plugins = false" in config
    # Made once: the next run gets a copy, without a second start.
    again = codex.first_start_state(binary)
    assert again == state and again is not codex.first_start_state(binary)
    assert len(Path(str(binary) + ".calls").read_text().splitlines()) == 1


def test_no_state_from_a_binary_that_cannot_make_it(tmp_path: Path) -> None:
    assert codex.first_start_state(tmp_path / "missing") == {}
    elf = tmp_path / "elf"
    elf.write_bytes(b"\x7fELF" + b"\0" * 60)
    elf.chmod(0o755)
    assert codex.first_start_state(elf) == {}  # it does not run here (e.g. another platform's)


def test_the_state_goes_in_with_the_run_files_and_the_config_is_the_runs(tmp_path: Path) -> None:
    write_skill(tmp_path / "lib", "deploy", "Deploys things", "Run make deploy.")
    library = load_library(tmp_path / "lib")
    state = {"/root/.codex/state_5.sqlite": b"db"}
    files = codex.codex_files(library, frozenset({"deploy"}), "m", "http://x/v1", state)
    plain = codex.codex_files(library, frozenset({"deploy"}), "m", "http://x/v1")
    assert files == {**plain, **state}
    assert not files.executable
    assert codex.codex_files(library, frozenset(), "m", "http://x/v1",
                             {codex.CONFIG_FILE: b"no"})[codex.CONFIG_FILE] != b"no"


def test_the_real_clis_state_is_pristine(tmp_path: Path) -> None:
    binary = codex_binary()
    if binary is None:
        pytest.skip("Codex is not installed (bash tests/run_all.sh installs it)")
    state = codex.first_start_state(binary)
    assert "/root/.codex/state_5.sqlite" in state, sorted(state)
    assert all(path.startswith("/root/.codex/") and path.endswith(".sqlite") for path in state)
    tables = _tables(state["/root/.codex/state_5.sqlite"], tmp_path)
    assert tables["_sqlx_migrations"] > 0
    assert tables["threads"] == 0  # no run in it
    for path, data in state.items():
        counts = _tables(data, tmp_path)
        assert counts.get("logs", 0) == 0, path
