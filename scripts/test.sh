#!/usr/bin/env bash
# The whole test suite: set up, install the test tools, check dependencies, lint, types and import contracts,
# then run pytest. Installs into the same Python as scripts/setup.sh (see scripts/python.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. scripts/python.sh

# The test tools, and PyTorch's CPU build for the distributed example's test (only the tests need it).
"$PY" -m pip install --quiet --disable-pip-version-check -e '.[dev,torch]'
"$PY" -m pip check

# Debian packages the tests use: a Docker Engine (tests/dockerkit.py starts its own dockerd on a private socket),
# busybox-static (its test image), a registry with password auth (tests/registrykit.py), and Node.js with npm.
# Root, or sudo, installs them.
need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v busybox >/dev/null 2>&1 || need+=(busybox-static)
command -v docker-registry >/dev/null 2>&1 || need+=(docker-registry)
# promtool (Debian's prometheus package): tests/deploy/test_prometheus.py checks the alert rules and runs their tests.
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
# Node.js and npm: tests/e2e/test_js_sdk.py installs OpenPAI's JavaScript SDK from npm and drives a master with it.
command -v npm >/dev/null 2>&1 || need+=(nodejs npm)
# Chromium: tests/e2e/test_dashboard.py drives the dashboard in headless Chromium through Playwright (from PyPI, the
# dev extras), with Debian's browser at /usr/bin/chromium: Playwright downloads no browser of its own.
[ -x /usr/bin/chromium ] || need+=(chromium)
# OpenSSH's client (ssh, ssh-keygen, scp, sftp): the SSH tests drive the agents' SSH endpoints with it.
command -v ssh >/dev/null 2>&1 && command -v ssh-keygen >/dev/null 2>&1 || need+=(openssh-client)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo -n"
  echo "test setup: installing Debian packages: ${need[*]}"
  if ! { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}"; } >/dev/null; then
    echo "test setup: could not install ${need[*]} (needs root or sudo); the tests that need them will be skipped (failed under CI=true)" >&2
  fi
fi

# PostgreSQL runs on these machines; start it if it was stopped (the suite also runs against it).
if command -v pg_ctlcluster >/dev/null 2>&1 && ! pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
fi

bin=$("$PY" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')
"$PY" -m ruff check pai pai_trial tests bench
"$PY" -m mypy
"$bin/lint-imports"
# pytest exits 5 when it collected no test: that is a failure here too.
"$PY" -m pytest -q "$@"
