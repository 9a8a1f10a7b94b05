#!/usr/bin/env bash
# Set up everything the test suite needs on a fresh Debian/Ubuntu machine, then run it.
#   bash tests/run_all.sh [extra pytest args]
# Installs (as root, or with sudo): docker.io, bubblewrap, busybox-static (the
# rootfs of the local test image: no registry is needed), chromium (renders
# the HTML report headless); starts dockerd when
# no engine answers; installs this package with its test extras and hermes-agent,
# and the Claude Code and Codex CLIs from npm into tests/.npm.
# In CI (CI=true) Docker, bubblewrap, Hermes, chromium, Claude Code and Codex
# tests must run: they fail instead of skipping when their dependency is missing.
# The browser tests (the report page, the dashboard tab) leave their screenshots in
# tests/artifacts/ (SKILL_COURT_ARTIFACTS moves it): keep that folder as the CI artifact.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v tmux >/dev/null 2>&1 || need+=(tmux)  # the interactive Hermes CLI of the automatic-trial test
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
# An editable install compiles no bytecode, and where PYTHONDONTWRITEBYTECODE is set nothing
# caches it: the suite's hundreds of pytest subprocesses would each compile the package again.
python3 -m compileall -q pytest_skillcourt >/dev/null

# Hermes' own skills (skills/ and optional-skills/ of the hermes-agent sdist), the
# libraries tests/integration/test_builtin_vs_hermes.py compares the built-in agent
# with real Hermes on; into tests/.hermes-sdist (git-ignored; SKILL_COURT_HERMES_SDIST moves it).
HERMES_SDIST="${SKILL_COURT_HERMES_SDIST:-tests/.hermes-sdist}" HERMES_SDIST_VERSION=0.19.0
if [ ! -d "$HERMES_SDIST/hermes_agent-$HERMES_SDIST_VERSION/optional-skills" ]; then
  echo "== downloading the hermes-agent $HERMES_SDIST_VERSION sdist into $HERMES_SDIST"
  mkdir -p "$HERMES_SDIST"
  python3 -m pip download -q --disable-pip-version-check --no-binary :all: --no-deps \
    "hermes-agent==$HERMES_SDIST_VERSION" -d "$HERMES_SDIST"
  tar -xzf "$HERMES_SDIST/hermes_agent-$HERMES_SDIST_VERSION.tar.gz" -C "$HERMES_SDIST" \
    "hermes_agent-$HERMES_SDIST_VERSION/skills" "hermes_agent-$HERMES_SDIST_VERSION/optional-skills"
fi

# The real agent CLIs (Claude Code, Codex), pinned, from npm into tests/.npm
# (git-ignored; SKILL_COURT_NPM_DIR moves it; tests/support/agent_clis.py finds them).
# Install scripts must run: Claude Code's postinstall puts its native binary in
# place, and npm 11 runs it only for packages named in "allowScripts".
NPM_DIR="${SKILL_COURT_NPM_DIR:-tests/.npm}"
CLAUDE_CODE_VERSION=2.1.332 CODEX_VERSION=0.171.0
npm_has() {  # package $1 at version $2 is installed in $NPM_DIR
  [ "$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["version"])' \
       "$NPM_DIR/node_modules/$1/package.json" 2>/dev/null)" = "$2" ]
}
if ! npm_has @anthropic-ai/claude-code "$CLAUDE_CODE_VERSION" || ! npm_has @openai/codex "$CODEX_VERSION"; then
  command -v npm >/dev/null 2>&1 || { $SUDO apt-get update -qq; DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq npm >/dev/null; }
  echo "== installing @anthropic-ai/claude-code@$CLAUDE_CODE_VERSION and @openai/codex@$CODEX_VERSION into $NPM_DIR"
  mkdir -p "$NPM_DIR"
  cat >"$NPM_DIR/package.json" <<JSON
{"name": "skill-court-test-clis", "private": true,
 "dependencies": {"@anthropic-ai/claude-code": "$CLAUDE_CODE_VERSION", "@openai/codex": "$CODEX_VERSION"},
 "allowScripts": {"@anthropic-ai/claude-code": true}}
JSON
  # Exact versions: 2.1.332 declares node >= 22, and for a range npm would pick an older
  # release that fits the local node; the CLI is a native binary and needs no node.
  npm install --prefix "$NPM_DIR" --no-audit --no-fund --loglevel=error
fi

if [ "${CI:-}" = "true" ]; then
  export SKILL_COURT_REQUIRE_DOCKER=1 SKILL_COURT_REQUIRE_BWRAP=1 SKILL_COURT_REQUIRE_HERMES=1 \
         SKILL_COURT_REQUIRE_CHROMIUM=1 SKILL_COURT_REQUIRE_CLAUDE=1 SKILL_COURT_REQUIRE_CODEX=1
fi
if [ $# -gt 0 ]; then
  echo "== running the tests"
  exec python3 -m pytest -p no:cacheprovider "$@"
fi
# The whole suite in two parts.  First, on two workers: the unit tests (in-process, no
# sandbox, no agent) and the automatic-trial tests (each with its own Hermes home, test
# server, TMPDIR and local sandboxes; most of their time is Hermes starting).  Then the
# rest, one test at a time: those share the Docker engine, the temp folder and the
# machine's timing with each other.  Both parts always run; the first failure's status wins.
PARALLEL=(tests/e2e/test_auto_trials.py tests/unit)
echo "== running the tests (1 of 2, on 2 workers: ${PARALLEL[*]})"
first=0
python3 -m pytest -p no:cacheprovider -p no:benchmark -n 2 --dist worksteal "${PARALLEL[@]}" || first=$?
echo "== running the tests (2 of 2: the rest, one at a time)"
second=0
python3 -m pytest -p no:cacheprovider "${PARALLEL[@]/#/--ignore=}" || second=$?
[ "$first" -ne 0 ] && exit "$first"
exit "$second"
