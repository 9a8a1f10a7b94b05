"""Isolation properties of both sandbox backends; each test fails if its
property breaks, and each has a control showing the probe itself works.

What the local (bubblewrap) backend does not give, and so is not claimed
here: a memory limit over the whole run (its limit is per process,
``RLIMIT_DATA``; the memory test below only shows one process cannot take
more), a CPU quota, a disk quota.

A sandbox for an agent that runs inside it has exactly two mounts more
(``SandboxSpec.gateway``: its own gateway folder at ``/run/skill-court``;
``agent_files``: one binary read-only under ``/opt/skill-court``): every
property below that takes ``sb`` is checked on such a sandbox too, and the
"only mounts" tests at the end check that nothing else came with them.
"""

from __future__ import annotations

import fcntl
import ipaddress
import os
import secrets
import shutil
import socket
import struct
import subprocess
import tempfile
import threading
import time
from typing import Iterator

import pytest

from pytest_skillcourt.sandbox import Sandbox, SandboxSpec, open_sandbox
from tests.support.sandbox_image import ensure_test_image, require_bwrap, require_docker

BACKENDS = [
    pytest.param("local", id="local"),
    pytest.param("docker", id="docker", marks=pytest.mark.docker),
]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "docker":
        require_docker()
    else:
        require_bwrap()
    return request.param


def _open(backend: str, **kw: object) -> Sandbox:
    image = ensure_test_image() if backend == "docker" else None
    return open_sandbox(backend, SandboxSpec(image=image, name_hint="isolation", **kw))  # type: ignore[arg-type]


#: The agent file the "mounted" sandboxes get (any regular host file would do).
AGENT_FILE = "/opt/skill-court/bin/busybox"


def _mounted(backend: str, **kw: object) -> Sandbox:
    """A sandbox with the gateway folder and one agent file, as agents inside get it."""
    return _open(backend, gateway=True, agent_files={AGENT_FILE: _host_busybox()}, **kw)


@pytest.fixture(params=["plain", "mounted"])
def sb(backend: str, request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    with (_open(backend) if request.param == "plain" else _mounted(backend)) as sandbox:
        yield sandbox


def _host_busybox() -> str:
    path = shutil.which("busybox")
    if path is None:
        pytest.fail("the host needs busybox for the control runs: apt-get install busybox-static")
    return path


# -- network --------------------------------------------------------------------


def _host_ipv4_addresses() -> list[str]:
    """Every IPv4 address of this host's interfaces, loopback first."""
    addrs = ["127.0.0.1"]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            try:
                packed = fcntl.ioctl(
                    s.fileno(), 0x8915, struct.pack("256s", name.encode()[:15])  # SIOCGIFADDR
                )
            except OSError:
                continue
            addr = socket.inet_ntoa(packed[20:24])
            if addr not in addrs:
                addrs.append(addr)
    return addrs


class _Listener:
    """A TCP listener on ``host`` (all host addresses by default) that records who connected."""

    def __init__(self, host: str = "0.0.0.0") -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, 0))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.hits: list[str] = []  # local address each connection arrived on
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            self.hits.append(conn.getsockname()[0])
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()


@pytest.fixture
def listener() -> Iterator[_Listener]:
    lst = _Listener()
    yield lst
    lst.close()


def _probe_commands(addr: str, port: int) -> list[str]:
    # Only nc: Debian's static busybox wget segfaults in its resolver even for
    # a numeric address, so a failing wget would prove nothing.
    return [f"echo hello | busybox nc -w 2 {addr} {port}"]


def test_no_route_to_host_services(sb: Sandbox, listener: _Listener) -> None:
    addrs = _host_ipv4_addresses()
    for addr in addrs:
        for cmd in _probe_commands(addr, listener.port):
            before = len(listener.hits)
            r = sb.exec(cmd, timeout=15)
            time.sleep(0.3)
            assert r.exit_code != 0, f"{cmd!r} succeeded inside the sandbox: {r}"
            assert len(listener.hits) == before, f"{cmd!r} reached the host from inside"
    # Control: the very same commands reach the listener from the host.
    bb = _host_busybox()
    for addr in addrs:
        for cmd in _probe_commands(addr, listener.port):
            before = len(listener.hits)
            subprocess.run(cmd.replace("busybox", bb), shell=True, timeout=15, capture_output=True)
            deadline = time.monotonic() + 3
            while len(listener.hits) == before and time.monotonic() < deadline:
                time.sleep(0.05)
            assert len(listener.hits) > before, f"control failed: {cmd!r} did not reach {addr} from the host"


def test_only_loopback_interface_and_no_routes(sb: Sandbox) -> None:
    r = sb.exec("cat /proc/net/dev; echo ===; cat /proc/net/route")
    dev, route = r.stdout.split("===")
    interfaces = sorted(line.split(":")[0].strip() for line in dev.splitlines()[2:] if ":" in line)
    assert interfaces == ["lo"]
    assert len([line for line in route.strip().splitlines()[1:] if line.strip()]) == 0
    # Control: the host has more than loopback, so the probe can tell.
    with open("/proc/net/dev") as fh:
        assert len([line for line in fh.read().splitlines()[2:] if ":" in line]) > 1


# What a network would give a sandbox, probed directly.  Each probe's control
# runs the same command where that leak exists (a plain bridged container of
# the same image, or the host itself), so a sandbox that got a network - e.g.
# `network_mode="bridge"` with networking enabled - fails these tests.
# Only this machine's own addresses are ever contacted.


def _docker_bridge_gateway() -> str | None:
    """The host's address on Docker's default bridge (where a bridged container reaches
    the host), or None when no engine answers here."""
    from tests.support.sandbox_image import docker_available

    if not docker_available():
        return None
    from pytest_skillcourt.sandbox.docker import client

    for config in client().api.inspect_network("bridge").get("IPAM", {}).get("Config") or []:
        if config.get("Gateway"):
            return str(config["Gateway"])
        if config.get("Subnet"):  # the engine chose it: the host's address in that subnet
            subnet = ipaddress.ip_network(config["Subnet"], strict=False)
            for addr in _host_ipv4_addresses():
                if ipaddress.ip_address(addr) in subnet:
                    return addr
    return None


def _bridged_container(command: str, **host_config: object) -> str:
    """The output of ``command`` in a plain bridged container of the test image: what a
    sandbox with a network would see (the control of the probes below)."""
    from pytest_skillcourt.sandbox.base import LABEL
    from pytest_skillcourt.sandbox.docker import NAME_PREFIX, client

    require_docker()
    api = client().api
    created = api.create_container(
        ensure_test_image(), command=["sh", "-c", command], labels={LABEL: "1"},
        name=f"{NAME_PREFIX}isolation-control-{secrets.token_hex(4)}",
        host_config=api.create_host_config(network_mode="bridge", **host_config))
    try:
        api.start(created["Id"])
        api.wait(created["Id"], timeout=60)
        return api.logs(created["Id"], stdout=True, stderr=True).decode(errors="replace")
    finally:
        api.remove_container(created["Id"], force=True)


def test_no_service_on_the_docker_bridge_address_is_reachable(sb: Sandbox) -> None:
    gateway = _docker_bridge_gateway()
    if gateway is None:
        pytest.skip("no Docker bridge on this host: nothing is bound to its address")
    listener = _Listener(gateway)  # a service meant for containers only
    try:
        cmd = f"echo hello | busybox nc -w 2 {gateway} {listener.port}"
        r = sb.exec(cmd, timeout=15)
        time.sleep(0.3)
        assert r.exit_code != 0 and listener.hits == [], f"{cmd!r} reached {gateway} from inside: {r}"
        # Control: the same command from a bridged container of the same image reaches it.
        _bridged_container(cmd)
        deadline = time.monotonic() + 5
        while not listener.hits and time.monotonic() < deadline:
            time.sleep(0.05)
        assert listener.hits == [gateway], "control failed: a bridged container did not reach the bridge address"
    finally:
        listener.close()


#: The engine sockets a sandbox must never see (Docker, containerd), then every socket
#: file anywhere but the kernel's trees, and the variables that point at an engine.
SOCKET_PROBE = (
    "for s in /var/run/docker.sock /run/docker.sock /run/containerd/containerd.sock "
    "/var/run/containerd/containerd.sock /run/podman/podman.sock; do "
    '[ -e "$s" ] && echo "FOUND $s"; done; '
    "find / \\( -path /proc -o -path /sys -o -path /usr \\) -prune -o -type s -print 2>/dev/null; "
    'echo "DOCKER_HOST=${DOCKER_HOST:-}"; echo "CONTAINER_HOST=${CONTAINER_HOST:-}"'
)


def test_no_engine_socket_is_in_the_sandbox(sb: Sandbox) -> None:
    r = sb.exec(SOCKET_PROBE, timeout=120)
    lines = r.stdout.splitlines()
    assert not [line for line in lines if line.startswith("FOUND")], r.stdout
    sockets = [line for line in lines if line.startswith("/") and not line.startswith("/run/skill-court/")]
    assert sockets == [], f"socket files inside the sandbox: {sockets}"
    assert "DOCKER_HOST=" in lines and "CONTAINER_HOST=" in lines, r.stdout
    # Control: the probe finds the engine's socket where it is mounted, as the
    # usual "docker in docker" mount would put it.
    engine = "/var/run/docker.sock"
    if os.path.exists(engine) and not os.environ.get("DOCKER_HOST"):
        leaked = _bridged_container(SOCKET_PROBE, binds=[f"{engine}:{engine}"])
        assert f"FOUND {engine}" in leaked and engine in leaked.splitlines(), leaked
    else:  # no local engine: the probe's first half run on the host still sees a host socket
        found = subprocess.run(["sh", "-c", "find /run /var/run -type s 2>/dev/null | head -1"],
                               capture_output=True, text=True, timeout=60).stdout
        if not found.strip():
            pytest.skip("no engine socket and no socket under /run on this host to control against")


#: Every view of the network interfaces: /proc/net/dev, /sys/class/net, the IPv6
#: addresses and the kernel's routing trie (whose "/32 host LOCAL" entries are the
#: sandbox's own addresses).
INTERFACE_PROBE = (
    "cat /proc/net/dev; echo ===; ls /sys/class/net 2>/dev/null; echo ===; "
    "cat /proc/net/if_inet6 2>/dev/null; echo ===; cat /proc/net/fib_trie 2>/dev/null"
)


def _interface_views(output: str) -> tuple[list[str], list[str], list[str], list[str]]:
    """(interfaces in /proc/net/dev, in /sys/class/net, interfaces with IPv6
    addresses, local IPv4 addresses) from ``INTERFACE_PROBE``'s output."""
    dev, sysnet, inet6, fib = output.split("===")
    names = sorted(line.split(":")[0].strip() for line in dev.splitlines()[2:] if ":" in line)
    v6 = sorted({line.split()[-1] for line in inet6.splitlines() if line.strip()})
    local, last = [], ""
    for line in fib.splitlines():
        if "|--" in line:
            last = line.split("|--")[1].strip()
        elif "/32 host LOCAL" in line and last not in local:
            local.append(last)
    return names, sorted(sysnet.split()), v6, sorted(local)


def test_interfaces_are_only_loopback_in_every_view(sb: Sandbox) -> None:
    names, sysnet, v6, local = _interface_views(sb.exec(INTERFACE_PROBE).stdout)
    assert names == ["lo"]
    assert sysnet in ([], ["lo"])  # the local backend mounts no /sys
    assert v6 in ([], ["lo"])
    assert all(addr.startswith("127.") for addr in local), local
    # Control: where there is a network, every view shows it.
    if _docker_bridge_gateway() is not None:
        names, sysnet, v6, local = _interface_views(_bridged_container(INTERFACE_PROBE))
        assert "eth0" in names and "eth0" in sysnet, (names, sysnet)
        assert [addr for addr in local if not addr.startswith("127.")], local
    else:
        with open("/proc/net/dev") as fh:
            assert len([line for line in fh.read().splitlines()[2:] if ":" in line]) > 1
        assert len(os.listdir("/sys/class/net")) > 1


# -- environment ----------------------------------------------------------------


def test_host_api_key_is_not_visible(backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    canary = "sk-skillcourt-canary-" + secrets.token_hex(8)
    control = "spec-canary-" + secrets.token_hex(8)
    monkeypatch.setenv("OPENAI_API_KEY", canary)
    monkeypatch.setenv("SKILLCOURT_HOST_CANARY", canary)
    with _open(backend, env={"SPEC_CANARY": control}) as sandbox:
        r = sandbox.exec(
            "env; cat /proc/1/environ /proc/self/environ; "
            "for p in /proc/[0-9]*; do cat $p/environ; done 2>/dev/null | tr '\\0' '\\n'"
        )
    seen = r.stdout
    assert canary not in seen
    assert "OPENAI_API_KEY" not in seen
    # Control: the probe does read the environments it searches.
    assert control in seen


# -- host paths -----------------------------------------------------------------


def _marker_dirs() -> list[str]:
    dirs = [tempfile.mkdtemp(prefix="skillcourt-hostmarker-")]
    for base in ("/work", os.getcwd(), os.path.expanduser("~")):
        if os.path.isdir(base) and os.access(base, os.W_OK):
            dirs.append(tempfile.mkdtemp(prefix=".skillcourt-hostmarker-", dir=base))
    return dirs


def test_no_host_path_is_visible(sb: Sandbox) -> None:
    marker = "skillcourt-marker-" + secrets.token_hex(8)
    dirs = _marker_dirs()
    try:
        for d in dirs:
            with open(os.path.join(d, marker), "w") as fh:
                fh.write("host secret")
        r = sb.exec(
            f"find / -path /proc -prune -o -path /sys -prune -o -name {marker} -print 2>/dev/null; "
            "ls -d /work /home/* /opt/* 2>/dev/null; true",
            timeout=120,
        )
        assert marker not in r.stdout
        assert "/work" not in r.stdout.split()
        for d in dirs:
            assert sb.exec(f"test -e {d}/{marker}").exit_code != 0
        # Control: the same find on the host finds every marker.
        found = subprocess.run(
            ["find", *dirs, "-name", marker], capture_output=True, text=True, timeout=60
        ).stdout.split()
        assert len(found) == len(dirs)
    finally:
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)


def test_host_etc_secrets_are_not_visible(sb: Sandbox) -> None:
    r = sb.exec("cat /etc/shadow /etc/gshadow /etc/machine-id 2>/dev/null; ls /etc/ssh 2>/dev/null; true")
    assert r.stdout == ""
    host_users = []
    with open("/etc/passwd") as fh:
        host_users = [line.split(":")[0] for line in fh if not line.startswith(("root:", "nobody:"))]
    inside = sb.exec("cat /etc/passwd").stdout
    for user in host_users:
        if sb.backend == "local":  # the docker image has its own /etc; local must not show the host's
            assert f"\n{user}:" not in "\n" + inside


# -- resource limits --------------------------------------------------------------

#: A bounded fork bomb: every process forks two more, 8 levels deep, so at most
#: 511 processes even if nothing contains it; each records itself, sleeps and
#: waits for its children (so the whole tree has run when the exec returns).
FORK_BOMB = (
    "b() { echo x >> /tmp/forks; if [ $1 -gt 0 ]; then b $(($1-1)) & b $(($1-1)) & fi; "
    "sleep 2; wait; }; b 8 2>/dev/null; wait"
)


def test_fork_bomb_is_contained_by_the_pids_limit(backend: str) -> None:
    pids = 48
    with _open(backend, pids=pids) as sandbox:
        started = time.monotonic()
        r = sandbox.exec(FORK_BOMB, timeout=30)
        elapsed = time.monotonic() - started
        forks = sandbox.read_file("/tmp/forks").count(b"x")  # no process needed to read it
    assert elapsed < 30 and not r.timed_out
    # The limit caps processes alive at once; a branch whose fork failed dies
    # and frees its slot, so over the whole run somewhat more than `pids` may
    # have started, but far from the 511 of an uncontained bomb.
    assert forks <= 3 * pids, f"{forks} processes started under a pids limit of {pids}"
    assert forks >= 8, "the bomb did not run at all"
    # Control: without the limit in the way (a limit above the bound) all 511 start.
    with _open(backend, pids=1024) as sandbox:
        sandbox.exec(FORK_BOMB, timeout=30)
        assert sandbox.read_file("/tmp/forks").count(b"x") == 511
    # The host is fine: it still forks promptly.
    t = time.monotonic()
    subprocess.run(["true"], check=True, timeout=10)
    assert time.monotonic() - t < 10


#: Holds N MB in one shell variable (busybox and dash alike).
def _memory_hog(mb: int) -> str:
    return f"x=$(head -c {mb * 1024 * 1024} /dev/zero | tr '\\0' a); echo held=${{#x}}"


def test_memory_hog_is_stopped_by_the_memory_limit(backend: str) -> None:
    with _open(backend, memory_mb=64) as sandbox:
        started = time.monotonic()
        r = sandbox.exec(_memory_hog(256), timeout=60)
        elapsed = time.monotonic() - started
        assert f"held={256 * 1024 * 1024}" not in r.stdout
        assert r.exit_code != 0 and not r.timed_out, r
        assert elapsed < 60
        # Control: the same command within the limit succeeds in the same sandbox.
        small = sandbox.exec(_memory_hog(8), timeout=60)
        assert small.stdout.strip() == f"held={8 * 1024 * 1024}", small


# -- runs do not see each other ---------------------------------------------------


def test_two_sandboxes_do_not_see_each_other(backend: str) -> None:
    marker = "skillcourt-other-" + secrets.token_hex(6)
    with _open(backend) as a, _open(backend) as b:
        a.write_files({f"/workspace/{marker}": b"a", f"/root/{marker}": b"a", f"/tmp/{marker}": b"a"})
        # A process of A that lives while B looks.
        holder = threading.Thread(target=a.exec, args=(f"sleep 3 # {marker}",), kwargs={"timeout": 10})
        holder.start()
        try:
            time.sleep(1)
            r = b.exec(
                # The marker comes in through the environment so B's own
                # command line does not contain it.
                "find / -path /proc -prune -o -path /sys -prune -o -name \"$M*\" -print 2>/dev/null; "
                "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done",
                timeout=120,
                env={"M": marker},
            )
            # Control: A sees its own file and its own process.
            own = a.exec(
                f"ls /workspace/{marker}; for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done"
            )
        finally:
            holder.join()
    assert marker not in r.stdout
    assert f"/workspace/{marker}" in own.stdout
    if backend == "docker":
        # Local execs each get their own pid namespace, so only a container
        # shows other execs' processes; A's must show there.
        assert f"sleep 3 # {marker}" in own.stdout


# -- the mounts of an agent that runs inside: exactly these two ---------------------------


#: Mount points that are not host folders: kernel and memory file systems.
_VIRTUAL = ("proc", "sysfs", "tmpfs", "devpts", "mqueue", "cgroup", "cgroup2", "devtmpfs", "overlay")


def _host_mounts(sandbox: Sandbox) -> set[str]:
    """Mount points inside the sandbox backed by a host file system (from mountinfo)."""
    r = sandbox.exec("cat /proc/self/mountinfo")
    assert r.ok, r
    points = set()
    for line in r.stdout.splitlines():
        fields = line.split()
        fstype = fields[fields.index("-") + 1]
        if fstype not in _VIRTUAL:
            points.add(fields[4])
    return points


def test_the_gateway_folder_and_the_agent_file_are_the_only_mounts(backend: str) -> None:
    with _open(backend) as plain, _mounted(backend) as sandbox:
        assert plain.gateway_dir is None
        folder = sandbox.gateway_dir
        assert folder and os.path.isdir(folder) and os.listdir(folder) == []
        # Beside what a plain sandbox of the backend has (the system view, docker's /etc files),
        # exactly the two mounts the spec asked for.
        assert _host_mounts(sandbox) - _host_mounts(plain) == {"/run/skill-court", AGENT_FILE}
        # The folder is shared both ways and writable; the agent file runs and is read-only.
        with open(os.path.join(folder, "from-host"), "w") as fh:
            fh.write("host\n")
        r = sandbox.exec(f"cat /run/skill-court/from-host; echo inside > /run/skill-court/from-inside; "
                         f"{AGENT_FILE} true && echo ran; echo x > {AGENT_FILE} || echo refused; "
                         "ls /opt/skill-court; ls /opt/skill-court/bin")
        assert r.stdout.split() == ["host", "ran", "refused", "bin", "busybox"], r
        with open(os.path.join(folder, "from-inside")) as fh:
            assert fh.read() == "inside\n"
        with open(_host_busybox(), "rb") as fh:
            assert fh.read(64) == sandbox.read_file(AGENT_FILE)[:64]
    assert not os.path.exists(folder)  # the folder goes with the sandbox


@pytest.mark.docker
def test_docker_mounts_are_exactly_the_gateway_folder_and_the_agent_file() -> None:
    from pytest_skillcourt.sandbox.docker import client

    require_docker()
    with _mounted("docker") as sandbox:
        info = client().api.inspect_container(sandbox.id)  # type: ignore[attr-defined]
    mounts = sorted((m["Type"], m["Source"], m["Destination"], m["RW"]) for m in info["Mounts"])
    assert mounts == sorted([("bind", sandbox.gateway_dir, "/run/skill-court", True),
                             ("bind", os.path.realpath(_host_busybox()), AGENT_FILE, False)])
    assert not info["HostConfig"].get("Binds") and info["HostConfig"]["NetworkMode"] == "none"


def test_two_sandboxes_have_their_own_gateway_folders(backend: str) -> None:
    with _mounted(backend) as a, _mounted(backend) as b:
        assert a.gateway_dir != b.gateway_dir
        a.exec("echo a > /run/skill-court/mine")
        assert b.exec("ls -A /run/skill-court").stdout.strip() == ""
        assert os.listdir(str(a.gateway_dir)) == ["mine"]


@pytest.mark.parametrize("files", [
    {"/usr/bin/agent": "/bin/sh"},                      # outside /opt/skill-court
    {"/opt/skill-court/../../etc/passwd": "/bin/sh"},   # not a plain path
    {"/opt/skill-court/bin/dir": "/usr"},               # a folder, not one file
    {"/opt/skill-court/bin/none": "/nonexistent/agent"},
])
def test_agent_files_must_be_single_host_files_under_opt_skill_court(backend: str, files: dict) -> None:
    from pytest_skillcourt.sandbox import SandboxError

    with pytest.raises(SandboxError, match="agent_files"):
        _open(backend, agent_files=files)
