"""Headless Chromium driven through the DevTools protocol, for the page tests
(``tests/e2e/test_dashboard.py``, ``tests/e2e/test_html_report.py``).

Debian's ``chromium`` started ``--headless --no-sandbox --disable-gpu
--remote-debugging-port=0`` with a private profile; the port comes from the
``DevToolsActivePort`` file it writes; one page target is driven over its
websocket (``websockets.sync``).  Clicks are real input events
(``Input.dispatchMouseEvent`` at the element's centre), typing is
``Input.insertText`` into the clicked field, screenshots are
``Page.captureScreenshot`` of the whole page at the emulated width.

Artifacts go to ``$SKILL_COURT_ARTIFACTS``, else ``tests/artifacts/`` (git-ignored),
where CI keeps them.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

ARTIFACTS = Path(os.environ.get("SKILL_COURT_ARTIFACTS") or Path(__file__).resolve().parents[1] / "artifacts")


def chromium_path() -> str | None:
    """The Chromium executable, or None."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def require_chromium() -> str:
    """The executable; skip (fail under ``SKILL_COURT_REQUIRE_CHROMIUM=1``) without one."""
    exe = chromium_path()
    if exe is None:
        if os.environ.get("SKILL_COURT_REQUIRE_CHROMIUM") == "1":
            pytest.fail("chromium is not installed but SKILL_COURT_REQUIRE_CHROMIUM=1 (apt-get install chromium)")
        pytest.skip("chromium is not installed (apt-get install chromium); set SKILL_COURT_REQUIRE_CHROMIUM=1 "
                    "to make this a failure")
    try:
        import websockets.sync.client  # noqa: F401
    except ImportError:
        pytest.fail("the DevTools client needs the websockets package (pip install -e '.[dev]')")
    return exe


class BrowserError(AssertionError):
    """The page did not do what a test waited for; the message says what and shows the page's text."""


class Browser:
    """One headless Chromium with one page."""

    def __init__(self, width: int = 1400, height: int = 1000) -> None:
        from websockets.sync.client import connect

        exe = require_chromium()
        self._profile = Path(tempfile.mkdtemp(prefix="skill-court-chromium-"))
        self._proc = subprocess.Popen(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-extensions", "--mute-audio", f"--user-data-dir={self._profile}",
             "--remote-debugging-port=0", f"--window-size={width},{height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        port_file = self._profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not port_file.exists() or not port_file.read_text().strip():
            if self._proc.poll() is not None or time.monotonic() > deadline:
                err = self._proc.stderr.read().decode(errors="replace")[-2000:] if self._proc.stderr else ""
                self.close()
                raise BrowserError(f"chromium did not start: {err}")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as resp:
            targets = json.load(resp)
        page = next(t for t in targets if t.get("type") == "page")
        self._ws = connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=30)
        self._next = 0
        self.events: list[dict[str, Any]] = []
        self.send("Page.enable")
        self.send("Runtime.enable")
        self.resize(width, height)

    # -- protocol -----------------------------------------------------------------

    def send(self, method: str, params: dict[str, Any] | None = None, timeout: float = 60) -> dict[str, Any]:
        """One DevTools command; returns its result (raises on a protocol error)."""
        self._next += 1
        ident = self._next
        self._ws.send(json.dumps({"id": ident, "method": method, "params": params or {}}))
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError(f"{method}: no answer in {timeout} s")
            message = json.loads(self._ws.recv(timeout=left))
            if message.get("id") == ident:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error']}")
                return dict(message.get("result") or {})
            if "method" in message:
                self.events.append(message)

    def js(self, expression: str, timeout: float = 60) -> Any:
        """The value of a JS expression in the page (promises awaited)."""
        got = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                             "awaitPromise": True}, timeout=timeout)
        if "exceptionDetails" in got:
            raise BrowserError(f"JS error in {expression[:200]!r}: {got['exceptionDetails']}")
        return got.get("result", {}).get("value")

    # -- page ---------------------------------------------------------------------

    def resize(self, width: int, height: int = 1000) -> None:
        """Emulate a screen ``width`` CSS pixels wide."""
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600})

    def goto(self, url: str) -> None:
        self.send("Page.navigate", {"url": url})
        self.wait("document.readyState === 'complete'", what=f"{url} to load")

    def wait(self, expression: str, *, what: str, timeout: float = 30) -> Any:
        """Poll until ``expression`` is truthy; returns its value."""
        deadline = time.monotonic() + timeout
        probe = f"(() => {{ const v = ({expression}); return v instanceof Node ? true : v; }})()"
        while True:
            value = self.js(probe)
            if value:
                return value
            if time.monotonic() > deadline:
                text = self.js("document.body ? document.body.innerText.slice(0, 3000) : ''")
                raise BrowserError(f"timed out waiting for {what} ({expression}); the page says:\n{text}")
            time.sleep(0.1)

    def click(self, selector: str) -> None:
        """A real mouse click at the centre of the first element matching ``selector``."""
        box = self.js(f"""(() => {{ const el = document.querySelector({json.dumps(selector)});
            if (!el) return null; el.scrollIntoView({{block: 'center'}});
            const r = el.getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; }})()""")
        if box is None:
            raise BrowserError(f"nothing matches {selector!r} to click")
        x, y = box
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left",
                                                   "clickCount": 0 if kind == "mouseMoved" else 1})

    def type(self, selector: str, text: str) -> None:
        """Click the first element matching ``selector`` (a real click gives it the focus) and
        type ``text`` into it as the keyboard would (``Input.insertText``: one input event,
        as a paste makes)."""
        self.click(selector)
        focused = self.js(f"document.activeElement === document.querySelector({json.dumps(selector)})")
        if not focused:
            raise BrowserError(f"clicking {selector!r} did not give it the focus")
        self.send("Input.insertText", {"text": text})

    def overflow(self) -> tuple[int, int]:
        """(document.scrollingElement.scrollWidth, innerWidth): no horizontal overflow when the first is not larger."""
        got = self.js("[document.scrollingElement.scrollWidth, window.innerWidth]")
        return int(got[0]), int(got[1])

    def screenshot(self, name: str) -> Path:
        """The whole page as ``ARTIFACTS/name`` (PNG); returns the path."""
        width, height = self.js("[window.innerWidth, Math.max(document.documentElement.scrollHeight, "
                                "document.body ? document.body.scrollHeight : 0)]")
        shot = self.send("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": width, "height": min(int(height), 12000), "scale": 1}})
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / name
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    def close(self) -> None:
        try:
            if getattr(self, "_ws", None) is not None:
                self._ws.close()
        finally:
            if self._proc.poll() is None:
                self._proc.terminate()
                try:
                    self._proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait()
            shutil.rmtree(self._profile, ignore_errors=True)
