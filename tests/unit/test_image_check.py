"""An image the engine does not have and cannot pull (issue 30, point 6): the docker backend
says so in one line of the engine's own error, pulls it once however many runs ask at the
same time, and the registry offers ``--skill-court-sandbox local`` first where bubblewrap
works.  ``sandbox.ImageNotices`` keeps one explanation per image for the session's end.

The docker SDK's client is a stub answering as an engine with no registry does (``docker
pull`` refused with a 500 whose body is the DNS failure); the end-to-end test on a real
engine is ``tests/e2e/test_image_check.py``.
"""

from __future__ import annotations

import pickle
import threading
import time
from typing import Any, Iterator

import docker.errors
import pytest

from pytest_skillcourt import sandbox
from pytest_skillcourt.sandbox import ImageNotices, ImageUnavailable, SandboxUnavailable, image_id
from pytest_skillcourt.sandbox import docker as docker_backend
from pytest_skillcourt.sandbox import local as local_backend
from pytest_skillcourt.sandbox.base import ERROR_LINE_LIMIT, first_line

#: What an engine with no way out answers to ``POST /images/create`` (its explanation).
DNS_FAILURE = ('Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io '
               'on 10.255.255.53:53: no such host')
#: The SDK's wrapping of it: status, URL, reason; most of the old 500-character message.
SDK_WRAPPING = "500 Server Error for http+docker://localhost/v1.41/images/create?tag=3.12-slim&fromImage=python"


class StubAPI:
    """The low-level docker API as ``ensure_image`` uses it: no image is there; a pull
    fails as ``pull_fails`` says (an HTTP error, an error event in its stream) or works."""

    def __init__(self, pull: str = "http-error", explanation: str = DNS_FAILURE, delay_s: float = 0.0) -> None:
        self.pull_mode = pull
        self.explanation = explanation
        self.delay_s = delay_s
        self.pulls: list[tuple[str, str | None]] = []
        self.pulled = False
        self._lock = threading.Lock()

    def inspect_image(self, image: str) -> dict[str, str]:
        if self.pulled:
            return {"Id": "sha256:" + "ab" * 32}
        raise docker.errors.ImageNotFound(f"No such image: {image}")

    def pull(self, repo: str, tag: str | None = None, **kw: Any) -> Iterator[dict[str, Any]]:
        with self._lock:
            self.pulls.append((repo, tag))
        time.sleep(self.delay_s)  # a pull takes a while: the other runs ask meanwhile
        if self.pull_mode == "http-error":
            raise docker.errors.APIError(SDK_WRAPPING, explanation=self.explanation)
        assert kw.get("stream") and kw.get("decode"), "read the pull's stream: errors come in it"
        if self.pull_mode == "stream-error":
            return iter([{"status": "Pulling from library/x"},
                         {"errorDetail": {"message": "manifest unknown"},
                          "error": "manifest for x:absent not found: manifest unknown"}])
        self.pulled = True
        return iter([{"status": "Downloaded newer image"}])


class StubClient:
    def __init__(self, api: StubAPI) -> None:
        self.api = api


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Make the docker backend talk to a ``StubAPI`` (``engine(api)`` installs one); no
    image id is remembered from before."""
    monkeypatch.setattr(docker_backend, "ping", lambda: "")
    monkeypatch.setattr(docker_backend, "_image_ids", {})

    def install(api: StubAPI) -> StubAPI:
        monkeypatch.setattr(docker_backend, "client", lambda: StubClient(api))
        return api

    yield install


@pytest.fixture
def bwrap(monkeypatch: pytest.MonkeyPatch) -> Any:
    """``bwrap(works)``: the local backend's probe passes or not, whatever this host has."""
    def set_probe(works: bool) -> None:
        monkeypatch.setattr(local_backend.LocalBackend, "probe",
                            lambda self: "" if works else "local sandbox: bwrap is not installed")
    return set_probe


def test_a_failed_pull_is_one_line_of_the_engines_error_not_the_sdks_500(engine: Any, bwrap: Any) -> None:
    bwrap(False)
    engine(StubAPI(explanation=DNS_FAILURE + "\nsecond line of the engine's error " + "x" * 400))
    with pytest.raises(ImageUnavailable) as info:
        docker_backend.ensure_image("python:3.12-slim")
    err = info.value
    assert err.image == "python:3.12-slim" and err.backend == "docker"
    assert err.error == DNS_FAILURE  # its first line, nothing of the rest
    text = str(err)
    assert "http+docker://" not in text and "500 Server Error" not in text and "second line" not in text
    assert "python:3.12-slim" in text and "cannot be pulled" in text
    assert "`docker pull python:3.12-slim`" in text and "docker load" in text


def test_an_error_in_the_pulls_stream_is_the_one_quoted(engine: Any) -> None:
    """The engine may accept the pull and report its failure in the stream; the old code
    then quoted the inspect after it ("No such image"), not why."""
    engine(StubAPI(pull="stream-error"))
    with pytest.raises(ImageUnavailable) as info:
        docker_backend.ensure_image("x:absent")
    assert info.value.error == "manifest for x:absent not found: manifest unknown"


def test_a_long_first_line_is_cut_to_fit() -> None:
    line = first_line("\n\n  " + "y" * 500 + "\nz")
    assert len(line) == ERROR_LINE_LIMIT and line.endswith("...")
    assert first_line("short\nrest") == "short"


def test_runs_asking_at_once_share_one_pull_and_its_error(engine: Any) -> None:
    api = engine(StubAPI(delay_s=0.3))
    errors: list[BaseException] = []

    def ask() -> None:
        try:
            docker_backend.ensure_image("python:3.12-slim")
        except SandboxUnavailable as exc:
            errors.append(exc)

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert api.pulls == [("python", "3.12-slim")]
    assert len(errors) == 8 and all(isinstance(e, ImageUnavailable) for e in errors)
    # a failure is not remembered past the check: a later session may have loaded the image
    with pytest.raises(ImageUnavailable):
        docker_backend.ensure_image("python:3.12-slim")
    assert len(api.pulls) == 2


def test_a_pulled_image_is_remembered_for_the_process(engine: Any) -> None:
    api = engine(StubAPI(pull="works"))
    first = docker_backend.ensure_image("busybox")
    assert first.startswith("sha256:") and docker_backend.ensure_image("busybox") == first
    assert api.pulls == [("busybox", "latest")]


def test_the_local_sandbox_is_the_first_fix_where_bubblewrap_works(engine: Any, bwrap: Any) -> None:
    engine(StubAPI())
    bwrap(True)
    with pytest.raises(ImageUnavailable) as info:
        image_id("docker", "python:3.12-slim")
    assert info.value.fixes[0] == sandbox.LOCAL_FIX
    assert "Fix: rerun with `--skill-court-sandbox local`" in str(info.value)
    assert "`docker pull python:3.12-slim`" in info.value.fixes[1]


def test_without_bubblewrap_the_fixes_are_getting_the_image(engine: Any, bwrap: Any) -> None:
    engine(StubAPI())
    bwrap(False)
    with pytest.raises(ImageUnavailable) as info:
        image_id("docker", "python:3.12-slim")
    assert "--skill-court-sandbox local" not in str(info.value)
    assert info.value.fixes[0].startswith("`docker pull python:3.12-slim`")


def test_check_image_returns_the_failure_for_the_session_to_keep(engine: Any, bwrap: Any) -> None:
    engine(StubAPI())
    bwrap(False)
    found = sandbox.check_image("docker", "python:3.12-slim")
    assert isinstance(found, ImageUnavailable)
    again = pickle.loads(pickle.dumps(found))  # it travels whole (threads, processes)
    assert str(again) == str(found) and again.fixes == found.fixes


def unavailable(image: str = "python:3.12-slim") -> ImageUnavailable:
    return ImageUnavailable("docker", image, "the default socket", DNS_FAILURE,
                            (sandbox.LOCAL_FIX, "`docker pull x`"))


def test_notices_explain_each_image_once_and_each_run_in_one_short_line() -> None:
    notices = ImageNotices()
    messages = [notices.failed("python:3.12-slim", unavailable()) for _ in range(24)]
    assert len(set(messages)) == 1 and len(messages[0]) < 200
    assert DNS_FAILURE not in messages[0] and ImageNotices.TITLE in messages[0]
    lines = notices.lines()
    assert sum(DNS_FAILURE in line for line in lines) == 1
    assert any("--skill-court-sandbox local" in line for line in lines)
    assert lines[0].startswith("the runs on image 'python:3.12-slim' failed")


def test_a_workers_notices_reach_the_controller_once() -> None:
    output: dict[str, object] = {}
    worker = ImageNotices(output)
    worker.failed("python:3.12-slim", unavailable())
    worker.failed("other:1", SandboxUnavailable("docker sandbox: cannot inspect image 'other:1'"))
    controller = ImageNotices()
    controller.failed("python:3.12-slim", unavailable())
    controller.merge(output[ImageNotices.WORKER_KEY])  # type: ignore[arg-type]
    controller.merge(output[ImageNotices.WORKER_KEY])  # type: ignore[arg-type]
    lines = controller.lines()
    assert sum(DNS_FAILURE in line for line in lines) == 1
    assert lines[-1] == "the runs on image 'other:1' failed: docker sandbox: cannot inspect image 'other:1'"
