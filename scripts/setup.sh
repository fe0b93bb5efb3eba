#!/usr/bin/env bash
# Install everything pai and its tests need on a fresh Debian machine (run as root, or with sudo rights).
# Idempotent: a second run installs nothing new.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}

# Python packages: the project with its dev extras, and PyTorch's CPU build for the distributed example.
$PY -m pip install --quiet --disable-pip-version-check -e '.[dev]'
if ! $PY -c 'import torch' 2>/dev/null; then
  $PY -m pip install --quiet --disable-pip-version-check 'torch==2.13.0'
fi

# PostgreSQL runs on these machines; start it if it was stopped (the suite also runs against it).
if command -v pg_ctlcluster >/dev/null 2>&1 && ! pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
fi
