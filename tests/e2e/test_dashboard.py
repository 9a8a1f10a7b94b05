"""The Skill Court tab in the real ``hermes dashboard``, in headless Chromium.

A test profile (``HERMES_HOME`` in tmp) gets the plugin from the real
``skill-court hermes install`` and a store holding HELPS, HURTS with a cause,
NEUTRAL, INCONCLUSIVE and a granted appeal (``tests/support/dashboard_profile.py``).
The browser clicks the page's buttons with real input events; the assertions read
the profile's files.  Screenshots at 1400 and 420 px go to ``tests/artifacts/``.

Changes need the profile owner's dashboard secret (the 0600 file
``plugin-data/skill-court/dashboard.secret`` that install made): the tests read it as
the owner's ``cat`` would and type it into the tab's "Unlock changes" field, and a
caller holding only Hermes' session token (which ``GET /`` hands anyone) is refused.
"""

from __future__ import annotations

import json
import re
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_skillcourt.core.quarantine_file import read_entries
from pytest_skillcourt.core.store import Store
from tests.support.browser import Browser, require_chromium
from tests.support.dashboard_profile import (
    HURTS_SKILL,
    MODEL,
    OTHER_MODEL,
    Dashboard,
    Profile,
    build,
    record_appeal,
)
from tests.support.sandbox_image import require_hermes

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Profile, str]]:
    """The profile, with the plugin installed by the CLI, served by a real dashboard."""
    require_hermes()
    require_chromium()
    profile = build(tmp_path_factory.mktemp("dash") / "home")
    done = subprocess.run([sys.executable, "-m", "pytest_skillcourt.cli", "hermes", "install",
                           "--hermes-home", str(profile.home)], cwd=REPO, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "enabled now" in done.stdout
    dashboard = Dashboard(profile.home, REPO)
    try:
        yield profile, dashboard.wait_ready()
    finally:
        dashboard.close()


@pytest.fixture
def browser() -> Iterator[Browser]:
    b = Browser(1400, 1000)
    try:
        yield b
    finally:
        b.close()


def open_tab(b: Browser, url: str) -> None:
    b.goto(url + "/skill-court")
    b.wait("document.querySelectorAll('.sc-card').length >= 5", what="the verdict cards", timeout=60)


def secret_of(profile: Profile) -> str:
    """What ``cat $HERMES_HOME/plugin-data/skill-court/dashboard.secret`` prints to the profile's owner."""
    return (profile.data / "dashboard.secret").read_text(encoding="ascii").strip()


def unlock(b: Browser, value: str) -> None:
    """Paste ``value`` into the tab's "Unlock changes" field and press Unlock."""
    b.wait("document.getElementById('sc-secret')", what="the Unlock changes field")
    b.type("#sc-secret", value)
    b.click('#sc-unlock [data-action="unlock"]')


def card(skill: str, model: str) -> str:
    return f'.sc-card[data-skill="{skill}"][data-model="{model}"]'


def wait_message(b: Browser, expected: str) -> str:
    """The result message once it holds ``expected``."""
    text = b.wait(f"document.getElementById('sc-message') && document.getElementById('sc-message').innerText"
                  f".includes({json.dumps(expected)}) && document.getElementById('sc-message').innerText",
                  what=f"the message {expected!r}")
    return str(text)


def test_the_tab_lists_verdicts_harmful_first_with_their_evidence(served: tuple[Profile, str], browser: Browser) -> None:
    _, url = served
    open_tab(browser, url)
    skills = browser.js("[...document.querySelectorAll('section.sc-skill[data-skill]')].map(s => s.dataset.skill)")
    assert skills == [HURTS_SKILL, "rare-skill", "shell-tips", "csv-helper"]
    models = browser.js(f"[...document.querySelectorAll('section[data-skill=\"{HURTS_SKILL}\"] .sc-card')]"
                        ".map(c => c.dataset.model + ' ' + c.dataset.kind)")
    assert models == [f"{MODEL} HURTS", f"{OTHER_MODEL} NEUTRAL"]  # one skill's models side by side
    hurts = browser.js(f"document.querySelector('{card(HURTS_SKILL, MODEL)}').innerText")
    for shown in ("0% 0–30%", "100% 70–100%", "×2.05 [1.40, 3.00]", "3 from checks, 0 from the judge",
                  "SKILL.md line 9", "Always round totals to the nearest hundred.", "set by a trial",
                  "Fix proposed", "Apply fix", "started by hand"):
        assert shown in hurts, shown
    # hostile text from the store is text: no script ran, no element was made from it
    assert "<script>document.title='pwned'</script>" in hurts
    assert browser.js("document.title") != "pwned"
    assert browser.js("document.querySelectorAll('.sc-cause b').length") == 1  # only the page's own "Cause"
    auto = browser.js(f"document.querySelector('{card('shell-tips', MODEL)}').innerText")
    assert "automatic" in auto and "1 from the judge" in auto
    spend = browser.js("document.querySelector('.sc-spend').innerText")
    assert "Automatic trials today" in spend and "$0.0250" in spend and "judge tokens 320" in spend
    height = browser.js("document.querySelector('.sc-page').scrollHeight")
    browser.resize(1400, min(int(height) + 150, 6000))
    browser.screenshot("dashboard-1400.png")
    # the trial's report page, inside the tab (a sandboxed frame: no script of it runs)
    browser.click(f'{card(HURTS_SKILL, MODEL)} [data-action="evidence"]')
    frame = browser.wait("document.querySelector('iframe.sc-frame') && document.querySelector('iframe.sc-frame').srcdoc",
                         what="the report frame")
    assert "Skill court" in frame and "transcript (with)" in frame
    assert browser.js("document.querySelector('iframe.sc-frame').getAttribute('sandbox')") == ""
    browser.resize(420, 900)
    time.sleep(0.3)
    width, inner = browser.overflow()
    assert width <= inner, f"the tab is {width} px wide at {inner} px"
    assert browser.js("document.getElementById('sc-secret').getBoundingClientRect().right <= "
                      "document.getElementById('sc-unlock').getBoundingClientRect().right"), "the field overflows"
    height = browser.js("document.querySelector('.sc-page').scrollHeight")
    browser.resize(420, min(int(height) + 150, 9000))
    browser.screenshot("dashboard-420.png")


def test_the_routes_need_the_dashboards_session_token(served: tuple[Profile, str]) -> None:
    """Another page on this machine cannot read the court or change the quarantine file."""
    profile, url = served
    before = profile.quarantine.read_bytes()
    for method, path, body in (("GET", "state", None), ("POST", "release", {"skill": HURTS_SKILL, "model": MODEL}),
                               ("POST", "appeals/1/apply", {"file": str(profile.skill_md(HURTS_SKILL))})):
        request = urllib.request.Request(f"{url}/api/plugins/skill-court/{path}", method=method,
                                         data=None if body is None else json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(request, timeout=30)
        assert err.value.code == 401, (path, err.value.code)
    assert profile.quarantine.read_bytes() == before


def test_the_session_token_any_local_user_can_get_is_not_enough_to_change_anything(
        served: tuple[Profile, str]) -> None:
    """Another local user fetches ``GET /`` for Hermes' session token, as issue 32 did as
    ``nobody``: reading works, every change is refused with how to get the secret."""
    profile, url = served
    path = profile.data / "dashboard.secret"
    info = path.stat()
    assert stat.S_IMODE(info.st_mode) == 0o600 and info.st_uid == profile.home.stat().st_uid  # install made it
    with urllib.request.urlopen(url + "/", timeout=30) as resp:
        token = re.search(r'__HERMES_SESSION_TOKEN__="([^"]+)"', resp.read().decode()).group(1)  # type: ignore[union-attr]

    def call(method: str, route: str, body: object = None, extra: dict[str, str] | None = None) -> tuple[int, dict]:
        request = urllib.request.Request(f"{url}/api/plugins/skill-court/{route}", method=method,
                                         data=None if body is None else json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json", "X-Hermes-Session-Token": token,
                                                  **(extra or {})})
        try:
            with urllib.request.urlopen(request, timeout=30) as resp:
                return resp.status, json.load(resp)
        except urllib.error.HTTPError as err:
            return err.code, json.load(err)

    status, state = call("GET", "state")
    assert status == 200 and state["skills"] and state["secret_file"] == str(path)  # reads as before
    before = (profile.quarantine.read_bytes(), profile.skill_md(HURTS_SKILL).read_bytes())
    for route, body in (("quarantine", {"skill": "csv-helper", "model": MODEL}),
                        ("release", {"skill": HURTS_SKILL, "model": MODEL}),
                        ("appeals/1/apply", {"file": str(profile.skill_md(HURTS_SKILL))})):
        for extra in (None, {"X-Skill-Court-Secret": "guessed-" + "x" * 40}):
            status, answer = call("POST", route, body, extra)
            assert status == 403, (route, extra, answer)
            assert f"cat {path}" in answer["detail"] and "Nothing was changed" in answer["detail"]
    assert (profile.quarantine.read_bytes(), profile.skill_md(HURTS_SKILL).read_bytes()) == before


def test_release_then_quarantine_change_the_profiles_quarantine_file(served: tuple[Profile, str],
                                                                   browser: Browser) -> None:
    profile, url = served
    assert [(e.skill, e.model, e.set_by) for e in read_entries(profile.quarantine)] == [(HURTS_SKILL, MODEL, "trial")]
    before = profile.quarantine.read_bytes()
    open_tab(browser, url)
    # locked: the click is refused by the server, and the page says where the secret is
    browser.click(f'{card(HURTS_SKILL, MODEL)} [data-action="release"]')
    refused = wait_message(browser, "dashboard secret")
    assert f"cat {profile.data / 'dashboard.secret'}" in refused and "Unlock changes" in refused
    assert profile.quarantine.read_bytes() == before
    assert f"cat {profile.data / 'dashboard.secret'}" in browser.js("document.getElementById('sc-unlock').innerText")
    unlock(browser, "not-the-secret-" + "y" * 30)
    wait_message(browser, "is not the one in")
    assert browser.js("document.querySelector('.sc-unlocked')") is None
    browser.goto(url + "/skill-court")  # a fresh page: the field is empty again
    browser.wait("document.getElementById('sc-secret')", what="the Unlock changes field")
    unlock(browser, secret_of(profile))
    wait_message(browser, "Changes unlocked in this browser")
    browser.goto(url + "/skill-court")  # the browser keeps it for this profile
    browser.wait("document.querySelector('.sc-unlocked')", what="the unlocked mark after a reload")
    browser.wait(f"document.querySelector('{card(HURTS_SKILL, MODEL)} [data-action=release]')", what="the cards")
    browser.click(f'{card(HURTS_SKILL, MODEL)} [data-action="release"]')
    wait_message(browser, "Released house-format for gpt-4.1-mini")
    assert read_entries(profile.quarantine) == []
    browser.wait(f"document.querySelector('{card(HURTS_SKILL, MODEL)} [data-action=quarantine]')",
                 what="the Quarantine button")
    browser.click(f'{card(HURTS_SKILL, MODEL)} [data-action="quarantine"]')
    wait_message(browser, "Quarantined house-format for gpt-4.1-mini (set by hand)")
    entries = read_entries(profile.quarantine)
    assert [(e.skill, e.model, e.set_by) for e in entries] == [(HURTS_SKILL, MODEL, "hand")]
    browser.wait(f"document.querySelector('{card(HURTS_SKILL, MODEL)} .sc-byhand')", what="the hand mark")
    assert "set by hand" in browser.js(f"document.querySelector('{card(HURTS_SKILL, MODEL)} .sc-quarantine').innerText")


def test_apply_fix_asks_names_the_file_and_refuses_a_superseded_appeal(served: tuple[Profile, str],
                                                                       browser: Browser) -> None:
    profile, url = served
    skill_md = profile.skill_md(HURTS_SKILL)
    before = skill_md.read_bytes()
    open_tab(browser, url)
    unlock(browser, secret_of(profile))
    wait_message(browser, "Changes unlocked in this browser")
    shown = browser.js(f"document.querySelector('{card(HURTS_SKILL, MODEL)} .sc-appeal').dataset.appeal")
    # a newer appeal arrives while the page still shows the first one
    store = Store(profile.store)
    try:
        newer = record_appeal(store, profile, verdict_id=1, trial="20260102T030405-hand0001",
                              new_line="Round totals only when the user asks for rounding.")
    finally:
        store.close()
    browser.click(f'{card(HURTS_SKILL, MODEL)} [data-action="apply"]')
    dialog = browser.wait("document.getElementById('sc-dialog') && document.getElementById('sc-dialog').innerText",
                          what="the confirmation dialog")
    assert f"appeal {shown}" in dialog and str(skill_md) in dialog
    assert skill_md.read_bytes() == before  # asking writes nothing
    assert browser.js("document.activeElement.dataset.action") == "cancel"  # the safe answer has the focus
    browser.send("Input.dispatchKeyEvent", {"type": "keyDown", "key": "Escape", "code": "Escape", "windowsVirtualKeyCode": 27})
    browser.send("Input.dispatchKeyEvent", {"type": "keyUp", "key": "Escape", "code": "Escape", "windowsVirtualKeyCode": 27})
    browser.wait("!document.getElementById('sc-dialog')", what="Escape to close the dialog")
    assert skill_md.read_bytes() == before
    browser.click(f'{card(HURTS_SKILL, MODEL)} [data-action="apply"]')
    browser.wait("document.getElementById('sc-dialog')", what="the dialog again")
    browser.click('#sc-dialog [data-action="confirm"]')
    wait_message(browser, f"appeal {shown} is superseded by appeal {newer}")
    assert skill_md.read_bytes() == before
    # the reloaded page shows the newer appeal; applying it writes its draft
    browser.wait(f"document.querySelector('{card(HURTS_SKILL, MODEL)} .sc-appeal').dataset.appeal === '{newer}'",
                 what="the newer appeal")
    browser.click(f'{card(HURTS_SKILL, MODEL)} [data-action="apply"]')
    dialog = browser.wait("document.getElementById('sc-dialog') && document.getElementById('sc-dialog').innerText",
                          what="the confirmation dialog")
    assert f"appeal {newer}" in dialog and str(skill_md) in dialog
    browser.screenshot("dashboard-apply-dialog.png")
    browser.click('#sc-dialog [data-action="confirm"]')
    wait_message(browser, f"Applied appeal {newer}: {skill_md} now holds the draft")
    assert "Round totals only when the user asks for rounding." in skill_md.read_text(encoding="utf-8")
    store = Store(profile.store, readonly=True)
    try:
        assert store.appeal(newer)["status"] == "applied"  # type: ignore[index]
        assert store.appeal(int(shown))["status"] == "new"  # type: ignore[index]
    finally:
        store.close()
    browser.wait(f"document.querySelector('{card(HURTS_SKILL, MODEL)} .sc-appeal h4').innerText.startsWith('Fix applied')",
                 what="the applied mark")
    assert json.loads((profile.home / "plugins" / "skill-court" / "dashboard" / "manifest.json").read_text())["name"] \
        == "skill-court"
