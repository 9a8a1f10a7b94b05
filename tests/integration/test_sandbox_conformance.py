"""One list of checks every sandbox backend must pass (local and docker).

The docker runs use the busybox test image (busybox find/tar/stat/timeout);
the local runs use the host's GNU tools, so file capture is checked against
both tool sets.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping

import pytest

from pytest_skillcourt.sandbox import (
    ExecResult,
    Sandbox,
    SandboxError,
    SandboxSpec,
    open_sandbox,
)
from pytest_skillcourt.sandbox import capture as capture_mod
from pytest_skillcourt.sandbox.base import TRUNCATION_MARKER
from pytest_skillcourt.sandbox.capture import (
    CaptureFailed,
    capture_changed_files,
    mark_run_start,
)
from tests.support import REPO
from tests.support.sandbox_image import ensure_test_image, require_bwrap, require_docker

BACKENDS = [
    pytest.param("local", id="local"),
    pytest.param("docker", id="docker", marks=pytest.mark.docker),
]


def _spec(backend: str, **kw: object) -> SandboxSpec:
    image = ensure_test_image() if backend == "docker" else None
    return SandboxSpec(image=image, name_hint="conformance", **kw)  # type: ignore[arg-type]


def _require(backend: str) -> None:
    if backend == "docker":
        require_docker()
    else:
        require_bwrap()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    _require(request.param)
    return request.param


@pytest.fixture
def sb(backend: str) -> Iterator[Sandbox]:
    with open_sandbox(backend, _spec(backend, env={"SPEC_VAR": "from-spec"})) as sandbox:
        yield sandbox


def _next_second() -> float:
    """``since`` after which earlier files are old (what the pipeline uses)."""
    return mark_run_start()


# -- exec ---------------------------------------------------------------------


def test_exec_stdout_and_exit_codes(sb: Sandbox) -> None:
    r = sb.exec("echo hello")
    assert (r.exit_code, r.stdout, r.stderr, r.timed_out, r.ok) == (0, "hello\n", "", False, True)
    for code in (1, 3, 42):
        r = sb.exec(f"exit {code}")
        assert r.exit_code == code and not r.ok and not r.timed_out


def test_stdout_and_stderr_are_separate(sb: Sandbox) -> None:
    r = sb.exec("echo out; echo err >&2; echo out2")
    assert r.stdout == "out\nout2\n"
    assert r.stderr == "err\n"


def test_timeout_kills_and_reports(sb: Sandbox) -> None:
    started = time.monotonic()
    r = sb.exec("sleep 30; echo finished", timeout=1)
    assert r.timed_out and not r.ok
    assert "finished" not in r.stdout
    assert time.monotonic() - started < 15


def test_command_exiting_124_quickly_is_not_a_timeout(sb: Sandbox) -> None:
    r = sb.exec("exit 124", timeout=5)
    assert r.exit_code == 124 and not r.timed_out


def test_timeout_kill_reaches_a_process_ignoring_sigterm(sb: Sandbox) -> None:
    started = time.monotonic()
    # The ignored disposition survives exec, so `sleep` itself ignores TERM
    # and only timeout's -k KILL can end it.
    r = sb.exec("trap '' TERM; exec sleep 29", timeout=1)
    elapsed = time.monotonic() - started
    assert r.timed_out
    assert 5 <= elapsed < 20, elapsed  # TERM at 1 s ignored, KILL at 1+5 s
    left = sb.exec(
        "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done"
    ).stdout
    assert "sleep 29" not in left


def test_stdin_is_passed(sb: Sandbox) -> None:
    data = b"line1\nline2\n" * 5000
    r = sb.exec("wc -l", stdin=data)
    assert r.stdout.strip() == "10000"


def test_large_output_is_cut_with_the_marker(sb: Sandbox) -> None:
    r = sb.exec("head -c 200000 /dev/zero | tr '\\0' a; head -c 100000 /dev/zero | tr '\\0' b >&2",
                output_limit=1000)
    marker_out = TRUNCATION_MARKER.format(dropped=199000)
    marker_err = TRUNCATION_MARKER.format(dropped=99000)
    assert r.stdout == "a" * 1000 + marker_out
    assert r.stderr == "b" * 1000 + marker_err


def test_binary_exec_keeps_all_stdout_bytes(sb: Sandbox) -> None:
    r = sb.exec("head -c 300000 /dev/zero", binary=True, output_limit=1000)
    assert r.stdout_bytes == b"\0" * 300000
    assert r.stdout.endswith(TRUNCATION_MARKER.format(dropped=299000))


def test_working_directory_is_workspace(sb: Sandbox) -> None:
    assert sb.exec("pwd").stdout.strip() == "/workspace"
    sb.exec("echo x > rel.txt")
    assert sb.read_file("/workspace/rel.txt") == b"x\n"


def test_environment_is_only_what_is_set(sb: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKILLCOURT_HOST_ONLY", "leak")
    r = sb.exec("env", env={"EXEC_VAR": "from-exec", "SPEC_VAR": "overridden"})
    env = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)
    assert env["HOME"] == "/root"
    assert env["EXEC_VAR"] == "from-exec"
    assert env["SPEC_VAR"] == "overridden"
    assert "SKILLCOURT_HOST_ONLY" not in env
    # Only shell/engine bookkeeping besides what was set.
    allowed = {"HOME", "PATH", "PWD", "SHLVL", "HOSTNAME", "LANG", "EXEC_VAR", "SPEC_VAR", "_", "OLDPWD"}
    assert set(env) <= allowed, set(env) - allowed
    assert sb.exec("echo $SPEC_VAR").stdout == "from-spec\n"


# -- files --------------------------------------------------------------------


def test_write_and_read_nested_files(sb: Sandbox) -> None:
    files = {
        "/workspace/a/b/c/deep.txt": b"deep\n",
        "/workspace/top.txt": b"top",
        "/root/.config/tool/conf.ini": b"[x]\ny=1\n",
        "/tmp/skill-court/answer": b"42",
    }
    sb.write_files(files)
    for path, data in files.items():
        assert sb.read_file(path) == data
    assert sb.exec("cat a/b/c/deep.txt /tmp/skill-court/answer").stdout == "deep\n42"
    sb.write_files({"/workspace/top.txt": b"replaced"})
    assert sb.read_file("/workspace/top.txt") == b"replaced"


def test_binary_files_round_trip(sb: Sandbox) -> None:
    data = bytes(range(256)) * 1000
    sb.write_files({"/workspace/blob.bin": data})
    assert sb.read_file("/workspace/blob.bin") == data
    assert sb.exec("wc -c < blob.bin").stdout.strip() == str(len(data))
    sb.exec("head -c 70000 /dev/urandom > made.bin")
    made = sb.read_file("/workspace/made.bin")
    assert len(made) == 70000
    assert sb.exec("md5sum made.bin").stdout.split()[0] == __import__("hashlib").md5(made).hexdigest()


def test_read_missing_file_raises_file_not_found(sb: Sandbox) -> None:
    with pytest.raises(FileNotFoundError):
        sb.read_file("/workspace/nope.txt")
    with pytest.raises(FileNotFoundError):
        sb.read_file("/no/such/dir/file")


def test_read_file_through_symlink_stays_inside(sb: Sandbox) -> None:
    # A planted link must resolve in the sandbox's view, never the host's.
    sb.write_files({"/workspace/inner.txt": b"inside"})
    sb.exec("ln -s /workspace/inner.txt link; ln -s /etc/hostname hostlink")
    assert sb.read_file("/workspace/link") == b"inside"
    inside_hostname = sb.exec("cat /etc/hostname").stdout.encode()
    assert sb.read_file("/workspace/hostlink") == inside_hostname


def test_close_is_idempotent_and_final(backend: str) -> None:
    sandbox = open_sandbox(backend, _spec(backend))
    assert sandbox.exec("true").ok
    sandbox.close()
    sandbox.close()
    with pytest.raises(SandboxError):
        sandbox.exec("true")


def test_sandboxes_start_fresh(backend: str) -> None:
    with open_sandbox(backend, _spec(backend)) as first:
        first.write_files({"/workspace/left.txt": b"x", "/root/left": b"y"})
    with open_sandbox(backend, _spec(backend)) as second:
        assert second.exec("ls -A /workspace /root").stdout.split() == ["/root:", "/workspace:"]


# -- file capture (README "Judging tasks without a check") --------------------------------------------------


def test_capture_finds_new_and_changed_files_not_old_ones(sb: Sandbox) -> None:
    sb.write_files({
        "/workspace/old.txt": b"old",
        "/workspace/edited.txt": b"before",
        "/workspace/moved-in.txt": b"kept mtime",
        "/root/old-root.txt": b"old",
    })
    sb.exec("touch -d '2020-01-01 00:00:00' moved-in.txt")
    since = _next_second()
    sb.exec(
        "echo new > new.txt; mkdir -p sub/dir; echo nested > sub/dir/n.txt; "
        "echo after >> edited.txt; mkdir -p /root/notes; echo r > /root/notes/r.txt; "
        # mv keeps the old mtime; only ctime says it changed
        "mv moved-in.txt sub/moved.txt; echo s > 'with space.txt'"
    )
    got = capture_changed_files(sb, since)
    paths = [p for p, _ in got.files]
    assert paths == [
        "/workspace/edited.txt",
        "/workspace/new.txt",
        "/workspace/sub/dir/n.txt",
        "/workspace/sub/moved.txt",
        "/workspace/with space.txt",
        "/root/notes/r.txt",
    ]
    assert dict(got.files)["/workspace/edited.txt"] == "beforeafter\n"
    assert (got.binary, got.dropped, got.truncated) == ((), 0, False)


def test_capture_with_no_changes_is_empty(sb: Sandbox) -> None:
    sb.write_files({"/workspace/input.txt": b"input"})
    since = _next_second()
    assert capture_changed_files(sb, since) == capture_mod.CapturedFiles.empty()


def test_capture_skips_hidden_dirs_and_root_dotfiles(sb: Sandbox) -> None:
    since = _next_second()
    sb.exec(
        "mkdir -p .git/objects sub/.cache /root/.hermes; echo g > .git/objects/o; "
        "echo c > sub/.cache/c; echo h > /root/.hermes/h; echo hist > /root/.ash_history; "
        "echo keep > .gitignore; echo v > sub/visible.txt"
    )
    got = capture_changed_files(sb, since)
    assert [p for p, _ in got.files] == ["/workspace/.gitignore", "/workspace/sub/visible.txt"]


def test_capture_limits_file_count(sb: Sandbox) -> None:
    since = _next_second()
    sb.exec("i=0; while [ $i -lt 45 ]; do echo $i > f$(printf %02d $i).txt; i=$((i+1)); done")
    got = capture_changed_files(sb, since)
    assert len(got.files) == 40
    assert got.files[0] == ("/workspace/f00.txt", "0\n")
    assert got.files[-1][0] == "/workspace/f39.txt"
    assert got.dropped == 5


def test_capture_cuts_each_file_at_64_kb(sb: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(capture_mod, "MAX_TOTAL_CHARS", 10**7)  # isolate the per-file cut
    since = _next_second()
    sb.exec("head -c 100000 /dev/zero | tr '\\0' x > big.txt; echo small > small.txt")
    got = capture_changed_files(sb, since)
    files = dict(got.files)
    assert files["/workspace/big.txt"] == "x" * 65536
    assert files["/workspace/small.txt"] == "small\n"
    assert got.truncated


def test_capture_cuts_the_total_at_16000_chars(sb: Sandbox) -> None:
    since = _next_second()
    sb.exec("for n in a b c; do head -c 10000 /dev/zero | tr '\\0' $n > $n.txt; done")
    got = capture_changed_files(sb, since)
    assert [(p, len(t)) for p, t in got.files] == [("/workspace/a.txt", 10000), ("/workspace/b.txt", 6000)]
    assert got.dropped == 1 and got.truncated
    assert sum(len(t) for _, t in got.files) == 16000


def test_capture_lists_binary_files_by_name(sb: Sandbox) -> None:
    since = _next_second()
    sb.exec("printf 'a\\000b' > nul.dat; printf '\\377\\376bad' > latin.bin; echo 'ünïcode' > u.txt")
    got = capture_changed_files(sb, since)
    assert got.binary == ("/workspace/latin.bin", "/workspace/nul.dat")
    assert got.files == (("/workspace/u.txt", "ünïcode\n"),)


class _EditedScript(Sandbox):
    """Runs the capture script with an edit, to drive each failure path for real."""

    def __init__(self, inner: Sandbox, old: str, new: str) -> None:
        self.inner, self.old, self.new = inner, old, new
        self.backend = inner.backend

    def exec(self, command: str, **kw: object) -> ExecResult:  # type: ignore[override]
        assert self.old in command
        return self.inner.exec(command.replace(self.old, self.new), **kw)  # type: ignore[arg-type]

    def write_files(self, files: Mapping[str, bytes]) -> None:
        self.inner.write_files(files)

    def read_file(self, path: str) -> bytes:
        return self.inner.read_file(path)

    def close(self) -> None:
        self.inner.close()


def _one_changed_file(sb: Sandbox) -> float:
    since = _next_second()
    sb.exec("echo data > out.txt")
    return since


def test_capture_tar_exit_1_still_counts_as_read(sb: Sandbox) -> None:
    since = _one_changed_file(sb)
    edited = _EditedScript(sb, "rc=$?\n", "rc=$?\n[ $rc -eq 0 ] && rc=1\n")
    got = capture_changed_files(edited, since)
    assert got.files == (("/workspace/out.txt", "data\n"),)


def test_capture_fails_when_tar_exits_2(sb: Sandbox) -> None:
    since = _one_changed_file(sb)
    edited = _EditedScript(sb, "rc=$?\n", "rc=$?\nrc=2\n")
    with pytest.raises(CaptureFailed, match="exited 2"):
        capture_changed_files(edited, since)


def test_capture_fails_when_a_listed_file_is_missing_for_gnu_tar(sb: Sandbox) -> None:
    since = _one_changed_file(sb)
    edited = _EditedScript(sb, 'tar -cf - "$@"', 'tar -cf - "$@" workspace/vanished')
    if "GNU" not in sb.exec("tar --version 2>&1 | head -1").stdout:
        pytest.skip("busybox tar exits 1 for a missing file; GNU tar's 2 is what this checks")
    with pytest.raises(CaptureFailed, match="exited 2"):
        capture_changed_files(edited, since)


def test_capture_fails_when_it_times_out(sb: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(capture_mod, "CAPTURE_TIMEOUT_S", 1)
    since = _one_changed_file(sb)
    edited = _EditedScript(sb, 'tar -cf - "$@"', 'sleep 20; tar -cf - "$@"')
    with pytest.raises(CaptureFailed, match="timed out"):
        capture_changed_files(edited, since)


def test_capture_fails_when_the_archive_does_not_read_back(sb: Sandbox) -> None:
    since = _one_changed_file(sb)
    edited = _EditedScript(sb, 'tar -cf - "$@"', 'echo "this is not a tar archive"')
    with pytest.raises(CaptureFailed, match="did not read back"):
        capture_changed_files(edited, since)


def test_capture_fails_on_a_cut_archive(sb: Sandbox) -> None:
    since = _next_second()
    sb.exec("head -c 30000 /dev/zero | tr '\\0' q > q.txt")
    edited = _EditedScript(sb, 'tar -cf - "$@"', 'tar -cf - "$@" | head -c 5000')
    with pytest.raises(CaptureFailed, match="did not read back"):
        capture_changed_files(edited, since)


def test_capture_fails_when_the_exec_raises(sb: Sandbox) -> None:
    since = _one_changed_file(sb)
    sb.close()  # exec on a closed sandbox raises SandboxError
    with pytest.raises(CaptureFailed, match="exec in the sandbox failed"):
        capture_changed_files(sb, since)


# -- backend selection, image ids, cleanup, errors --------------------------------


def test_resolve_backend_choices() -> None:
    from pytest_skillcourt.sandbox import resolve_backend

    with pytest.raises(ValueError, match="auto, docker, local"):
        resolve_backend("podman")
    assert resolve_backend("auto") in ("docker", "local")


def test_resolve_backend_named(backend: str) -> None:
    from pytest_skillcourt.sandbox import resolve_backend

    assert resolve_backend(backend) == backend


def test_bwrap_without_namespaces_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    from pytest_skillcourt.sandbox import local

    # A bwrap that fails the way it does in an unprivileged container; in a
    # world-readable dir because as root the probe runs under another uid.
    where = tempfile.mkdtemp(prefix="skillcourt-fakebwrap-")
    os.chmod(where, 0o755)
    fake = os.path.join(where, "bwrap")
    with open(fake, "w") as fh:
        fh.write("#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n")
    os.chmod(fake, 0o755)
    monkeypatch.setattr(local, "_probe_result", None)
    monkeypatch.setattr(local, "_tools", lambda: local._Tools(bwrap=fake, prlimit=None))
    try:
        reason = local.probe()
    finally:
        shutil.rmtree(where)
    assert "cannot create its namespaces" in reason
    assert "No permissions to creating new namespace" in reason
    assert "unprivileged_userns_clone" in reason


@pytest.mark.docker
def test_docker_image_id_and_missing_image() -> None:
    from pytest_skillcourt.sandbox import SandboxUnavailable, image_id

    require_docker()
    image = ensure_test_image()
    ident = image_id("docker", image)
    assert ident.startswith("sha256:") and image_id("docker", image) == ident
    with pytest.raises(SandboxUnavailable) as info:
        image_id("docker", "skillcourt-test:no-such-tag")
    assert "skillcourt-test:no-such-tag" in str(info.value)
    assert "docker pull" in str(info.value)


@pytest.mark.docker
def test_docker_container_settings() -> None:
    from pytest_skillcourt.sandbox import LABEL
    from pytest_skillcourt.sandbox.docker import client

    require_docker()
    spec = SandboxSpec(
        image=ensure_test_image(), env={"A": "1"}, memory_mb=300, pids=77, cpus=0.5,
        labels={"skillcourt.run": "r1"}, name_hint="settings",
    )
    with open_sandbox("docker", spec) as sandbox:
        info = client().api.inspect_container(sandbox.id)  # type: ignore[attr-defined]
    host = info["HostConfig"]
    assert info["Name"].lstrip("/").startswith("skillcourt-settings-")
    from pytest_skillcourt.sandbox.docker import OWNER_LABEL, owner_token

    assert info["Config"]["Labels"] == {LABEL: "1", "skillcourt.run": "r1", OWNER_LABEL: owner_token()}
    assert info["Config"]["WorkingDir"] == "/workspace"
    assert sorted(info["Config"]["Env"])[:2] == ["A=1", "HOME=/root"]
    assert host["NetworkMode"] == "none"
    assert not host.get("Binds") and not info.get("Mounts")
    assert host["Memory"] == host["MemorySwap"] == 300 * 1024 * 1024
    assert host["PidsLimit"] == 77 and host["NanoCpus"] == 500_000_000
    assert host["CapDrop"] == ["ALL"] and host["SecurityOpt"] == ["no-new-privileges"]
    assert host["AutoRemove"] is False


@pytest.mark.docker
def test_docker_container_removed_on_keyboard_interrupt() -> None:
    import docker.errors

    from pytest_skillcourt.sandbox.docker import client

    require_docker()
    with pytest.raises(KeyboardInterrupt), open_sandbox("docker", _spec("docker")) as sandbox:
        cid = sandbox.id  # type: ignore[attr-defined]
        raise KeyboardInterrupt
    with pytest.raises(docker.errors.NotFound):
        client().api.inspect_container(cid)


#: A child process that prints its owner token (the owner label its containers would get)
#: and lives until its stdin closes.
_OWNER = """
import sys
from pytest_skillcourt.sandbox.docker import owner_token
print(owner_token(), flush=True)
sys.stdin.read()
"""


@pytest.mark.docker
def test_cleanup_removes_leftover_containers() -> None:
    """A container of this test's own labels, owned by a child process: spared while the
    child runs, a leftover once it is killed.

    Every cleanup on the machine (another session's ``skill-court cleanup`` too) spares
    a live owner's containers, so until the kill none can take this one; after it, the
    test's own cleanup follows at once.  A container owned by a made-up dead pid from
    the start would be any cleanup's for the whole test.
    """
    import docker.errors

    from pytest_skillcourt.sandbox import cleanup_leftovers
    from pytest_skillcourt.sandbox.docker import OWNER_LABEL, client

    require_docker()
    token = {"skillcourt.test": os.urandom(6).hex()}
    child = subprocess.Popen([sys.executable, "-c", _OWNER], cwd=REPO, text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    sandbox: Sandbox | None = None
    try:
        assert child.stdout is not None
        owner = child.stdout.readline().strip()
        assert owner.split(":")[1] == str(child.pid), owner
        sandbox = open_sandbox("docker", SandboxSpec(image=ensure_test_image(), labels={OWNER_LABEL: owner, **token}))
        assert cleanup_leftovers(only_labels=token) == []  # its owner runs: not a leftover
        child.kill()
        child.wait(timeout=30)
        assert cleanup_leftovers(older_than_s=3600, only_labels=token) == []  # too young for that
        removed = cleanup_leftovers(only_labels=token)
        assert removed == [f"docker:{sandbox.name}"]  # type: ignore[attr-defined]
        with pytest.raises(docker.errors.NotFound):
            client().api.inspect_container(sandbox.id)  # type: ignore[attr-defined]
    finally:
        child.kill()
        child.wait(timeout=30)
        if sandbox is not None:
            sandbox.close()  # idempotent, and quiet when already gone


def test_cleanup_removes_abandoned_local_dirs_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """In a temporary folder of the test's own (``tempfile.tempdir``, where the local
    backend makes its sandbox folders and looks for leftovers): another session's
    cleanup cannot take the folders it abandons on purpose, and its own cleanup takes
    none of another session's."""
    import tempfile

    from pytest_skillcourt.sandbox.local import DIR_PREFIX, leftover_dirs

    require_bwrap()
    # The sandbox's own uid must reach its folder: outside pytest's private (0700) tree.
    base = tempfile.mkdtemp(prefix="skillcourt-conformance-", dir="/tmp")
    os.chmod(base, 0o755)
    monkeypatch.setattr(tempfile, "tempdir", base)
    try:
        abandoned = tempfile.mkdtemp(prefix=DIR_PREFIX + "abandoned-")
        os.makedirs(os.path.join(abandoned, "workspace"))
        open(os.path.join(abandoned, ".lock"), "w").close()
        young = tempfile.mkdtemp(prefix=DIR_PREFIX + "young-")  # maybe mid-creation: kept
        hour_ago = time.time() - 3600
        os.utime(abandoned, (hour_ago, hour_ago))
        with open_sandbox("local", SandboxSpec()) as live:
            assert os.path.dirname(live.host_dir) == base  # type: ignore[attr-defined]
            os.utime(live.host_dir, (hour_ago, hour_ago))  # type: ignore[attr-defined]
            assert leftover_dirs() == [abandoned]
            assert os.path.isdir(young)
            assert not os.path.exists(abandoned)
            assert os.path.isdir(live.host_dir)  # type: ignore[attr-defined]  # held by its lock
            assert live.exec("true").ok
        assert not os.path.exists(live.host_dir)  # type: ignore[attr-defined]
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_local_backend_imports_without_fcntl() -> None:
    # Its liveness lock is `pytest_skillcourt.core.locks` (filelock), not fcntl.flock,
    # so the package imports where fcntl is missing (Windows).
    code = ("import sys\nsys.modules['fcntl'] = None\n"
            "import pytest_skillcourt.sandbox.local as local\n"
            "from pytest_skillcourt.sandbox import get_backend\n"
            "print(get_backend('local').name)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "local"


def test_host_watchdog_reports_an_overrun_as_timed_out(
    backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Make the host deadline (timeout + 5 + slack) fall before the in-sandbox
    # timeout, as when the engine or the jail hangs: the call must still
    # return on time, as timed out.
    from pytest_skillcourt.sandbox import docker as docker_backend
    from pytest_skillcourt.sandbox import local

    monkeypatch.setattr(docker_backend if backend == "docker" else local, "HOST_SLACK_S", -7.0)
    with open_sandbox(backend, _spec(backend)) as sandbox:
        started = time.monotonic()
        r = sandbox.exec("echo begun; sleep 20", timeout=3)
        elapsed = time.monotonic() - started
        assert r.timed_out and not r.ok
        assert elapsed < 10, elapsed
        assert sandbox.exec("echo alive").stdout == "alive\n"


def test_capture_keeps_inputs_out_with_mark_run_start_and_catches_instant_writes(sb: Sandbox) -> None:
    for _ in range(3):  # different sub-second phases
        sb.write_files({"/workspace/input.txt": b"input"})
        since = mark_run_start()
        assert since - time.time() <= 0.001
        sb.exec("echo out > out.txt")  # written within milliseconds of `since`
        got = capture_changed_files(sb, since)
        assert [p for p, _ in got.files] == ["/workspace/out.txt"]
        sb.exec("rm -f out.txt")
        time.sleep(0.37)


def test_capture_includes_a_file_written_in_the_same_second_as_since(sb: Sandbox) -> None:
    # `since` taken right after writing inputs, as a caller without
    # mark_run_start does: the same-second rule errs toward showing files.
    since = time.time()
    sb.exec("echo out > out.txt")
    assert "/workspace/out.txt" in [p for p, _ in capture_changed_files(sb, since).files]
