"""The Skill Court tab's changes need the profile owner's secret (issue 32, row 7):
Hermes' session token, which ``GET /`` of ``hermes dashboard`` hands any local user,
is not enough to quarantine, release or apply a fix (``pytest_skillcourt/hermes/dashboard/
secret.py`` and ``api.py``).  In process with FastAPI's test client; the real
dashboard and Chromium are ``tests/e2e/test_dashboard.py``."""

from __future__ import annotations

import hashlib
import os
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from pytest_skillcourt import cli
from pytest_skillcourt.cli import dashboard_install as install
from pytest_skillcourt.core import dashboard_secret as secret
from pytest_skillcourt.core.quarantine_file import read_entries
from pytest_skillcourt.core.store import Store
from tests.support.dashboard_profile import API, HURTS_SKILL, MODEL, Profile, api_client, profile  # noqa: F401


@pytest.fixture
def client(profile: Profile) -> Iterator[TestClient]:
    """A caller with Hermes' session token (the dashboard's middleware let it in) and nothing else."""
    with api_client() as c:
        yield c


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def writes(profile: Profile) -> list[tuple[str, dict[str, str]]]:
    return [("release", {"skill": HURTS_SKILL, "model": MODEL}),
            ("quarantine", {"skill": "csv-helper", "model": MODEL}),
            ("appeals/1/apply", {"file": str(profile.skill_md(HURTS_SKILL))})]


def test_a_change_without_or_with_a_wrong_secret_is_refused_and_changes_nothing(client: TestClient,
                                                                                profile: Profile) -> None:
    before = (sha(profile.quarantine), sha(profile.skill_md(HURTS_SKILL)))
    path = secret.secret_path(profile.home)
    for route, body in writes(profile):
        missing = client.post(f"{API}/{route}", json=body)
        assert missing.status_code == 403, (route, missing.text)
        said = missing.json()["detail"]
        assert f"cat {path}" in said and "Unlock changes" in said and secret.HEADER in said, said
        assert "Nothing was changed" in said
        for wrong in ("x", "A" * 43, secret.read(path, os.geteuid())[:-1], "é" * 50, "s" * 5000):
            got = client.post(f"{API}/{route}", json=body, headers={secret.HEADER: wrong.encode()})
            assert got.status_code == 403, (route, wrong, got.text)
            assert "is not the one in" in got.json()["detail"] and f"cat {path}" in got.json()["detail"]
    assert client.post(f"{API}/unlock").status_code == 403
    assert (sha(profile.quarantine), sha(profile.skill_md(HURTS_SKILL))) == before
    store = Store(profile.store, readonly=True)
    try:
        assert store.appeal(1)["status"] == "new"  # type: ignore[index]
    finally:
        store.close()


def test_the_right_secret_lets_each_change_through(client: TestClient, profile: Profile) -> None:
    assert not secret.secret_path(profile.home).exists()  # a fresh profile has none until install or a change
    assert client.post(f"{API}/unlock").status_code == 403  # the first change makes it
    value = secret.read(secret.secret_path(profile.home), os.geteuid())
    head = {secret.HEADER: value}
    unlocked = client.post(f"{API}/unlock", headers=head)
    assert unlocked.status_code == 200 and unlocked.json()["unlocked"] is True
    for route, body in writes(profile):
        got = client.post(f"{API}/{route}", json=body, headers=head)
        assert got.status_code == 200, (route, got.text)
    assert [(e.skill, e.set_by) for e in read_entries(profile.quarantine)] == [("csv-helper", "hand")]
    assert "nearest hundred only when the task asks" in profile.skill_md(HURTS_SKILL).read_text()
    # a body the route refuses is still refused after the secret was checked
    assert client.post(f"{API}/release", json={"skill": ""}, headers=head).status_code == 422


def test_reads_need_no_secret_and_say_where_it_is(client: TestClient, profile: Profile) -> None:
    state = client.get(f"{API}/state")
    assert state.status_code == 200 and state.json()["skills"]
    assert state.json()["secret_file"] == str(profile.data / "dashboard.secret")
    assert client.get(f"{API}/report", params={"trial": "20260102T030405-hand0001"}).status_code == 200
    assert not (profile.data / "dashboard.secret").exists()  # reading made nothing


def test_the_secret_file_is_0600_whatever_the_umask(profile: Profile) -> None:
    old = os.umask(0)
    try:
        value, made = secret.ensure(secret.secret_path(profile.home), os.geteuid())
    finally:
        os.umask(old)
    path = secret.secret_path(profile.home)
    info = path.stat()
    assert made and stat.S_IMODE(info.st_mode) == 0o600 and info.st_uid == os.geteuid()
    assert path.read_text() == value + "\n" and len(value) >= 43
    assert secret.ensure(path, os.geteuid()) == (value, False)  # kept, not remade
    assert [p.name for p in path.parent.iterdir() if p.name.startswith(".dashboard.secret")] == []


def test_install_makes_the_secret_0600_and_keeps_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "h"
    first = install.install(home)
    assert first.secret == home / "plugin-data" / "skill-court" / "dashboard.secret" and first.secret_made
    assert stat.S_IMODE(first.secret.stat().st_mode) == 0o600
    value = first.secret.read_bytes()
    again = install.install(home)
    assert not again.secret_made and first.secret.read_bytes() == value
    assert cli.main(["hermes", "install", "--hermes-home", str(home)]) == 0
    assert first.secret.read_bytes() == value


def test_two_first_changes_at_once_agree_on_one_secret(profile: Profile) -> None:
    path = secret.secret_path(profile.home)
    got: list[tuple[str, bool]] = []
    barrier = threading.Barrier(8)

    def make() -> None:
        barrier.wait()
        got.append(secret.ensure(path, os.geteuid()))

    threads = [threading.Thread(target=make) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({value for value, _ in got}) == 1 and sum(made for _, made in got) == 1
    assert path.read_text().strip() == got[0][0]


@pytest.mark.parametrize("spoil, says", [
    (lambda p: p.chmod(0o644), "has mode 0644"),
    (lambda p: p.chmod(0o640), "has mode 0640"),
    (lambda p: p.write_text("short\n"), "holds no dashboard secret"),
])
def test_a_secret_file_others_could_read_or_that_holds_none_refuses_every_change(
        client: TestClient, profile: Profile, spoil: Callable[[Path], object], says: str) -> None:
    path = secret.secret_path(profile.home)
    value, _ = secret.ensure(path, os.geteuid())
    spoil(path)
    before = sha(profile.quarantine)
    got = client.post(f"{API}/release", json={"skill": HURTS_SKILL, "model": MODEL}, headers={secret.HEADER: value})
    assert got.status_code == 403 and says in got.json()["detail"] and str(path) in got.json()["detail"], got.text
    assert "Delete it" in got.json()["detail"] or "delete it" in got.json()["detail"]
    assert sha(profile.quarantine) == before
    with pytest.raises(install.InstallError, match=says):
        install.install(profile.home)


def test_a_link_or_another_owners_file_is_not_the_secret(client: TestClient, profile: Profile,
                                                         tmp_path: Path) -> None:
    path = secret.secret_path(profile.home)
    path.parent.mkdir(parents=True, exist_ok=True)
    planted = tmp_path / "planted"
    planted.write_text("P" * 43 + "\n")
    planted.chmod(0o600)
    path.symlink_to(planted)
    got = client.post(f"{API}/release", json={"skill": HURTS_SKILL, "model": MODEL},
                      headers={secret.HEADER: "P" * 43})
    assert got.status_code == 403 and "is a link" in got.json()["detail"]
    path.unlink()
    if os.geteuid() != 0:
        pytest.skip("only root can give a file to another user")
    path.write_text("Q" * 43 + "\n")
    path.chmod(0o600)
    os.chown(path, 65534, 65534)  # nobody planted it
    got = client.post(f"{API}/release", json={"skill": HURTS_SKILL, "model": MODEL},
                      headers={secret.HEADER: "Q" * 43})
    assert got.status_code == 403 and "belongs to uid 65534" in got.json()["detail"]
    assert [e.skill for e in read_entries(profile.quarantine)] == [HURTS_SKILL]


def test_the_comparison_is_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[bytes, bytes]] = []
    real = secret.hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        seen.append((a, b))
        return real(a, b)

    monkeypatch.setattr(secret.hmac, "compare_digest", spy)
    assert secret.matches("k" * 43, "k" * 43) and not secret.matches("k" * 42 + "j", "k" * 43)
    assert seen == [(b"k" * 43, b"k" * 43), (b"k" * 42 + b"j", b"k" * 43)]
    assert not secret.matches("", "k" * 43) and not secret.matches("k" * 2000, "k" * 43)
