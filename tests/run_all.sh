#!/usr/bin/env bash
# Set up everything the test suite needs on a fresh Debian/Ubuntu machine, then run it.
#   bash tests/run_all.sh [extra pytest args]
# Installs (as root, or with sudo): docker.io, bubblewrap, busybox-static (the
# rootfs of the local test image: no registry is needed), chromium (renders
# the HTML report headless); starts dockerd when
# no engine answers; installs this package with its test extras and hermes-agent.
# In CI (CI=true) Docker, bubblewrap and Hermes tests must run: they fail
# instead of skipping when their dependency is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
[ -x /bin/bash-static ] || need+=(bash-static)
[ -x /bin/busybox ] && /bin/busybox --list 2>/dev/null | grep -qx timeout && ldd /bin/busybox 2>&1 | grep -q "not a dynamic" || need+=(busybox-static)
if [ ${#need[@]} -gt 0 ]; then
  echo "== installing ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
  echo "== starting dockerd"
  ($SUDO nohup dockerd >/tmp/skill-court-dockerd.log 2>&1 &)
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { echo "dockerd did not start; see /tmp/skill-court-dockerd.log"; tail -20 /tmp/skill-court-dockerd.log; exit 1; }
fi

echo "== installing pytest-skillcourt with its test extras"
python3 -m pip install -q --disable-pip-version-check -e '.[dev,hermes]'

if [ "${CI:-}" = "true" ]; then
  export SKILL_COURT_REQUIRE_DOCKER=1 SKILL_COURT_REQUIRE_BWRAP=1 SKILL_COURT_REQUIRE_HERMES=1 \
         SKILL_COURT_REQUIRE_CHROMIUM=1
fi
echo "== running the tests"
exec python3 -m pytest -p no:cacheprovider "$@"
