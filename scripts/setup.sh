#!/usr/bin/env bash
# Set up pai on this machine: what the README's first command (`pai up --run examples/hello-v1.json`) needs.
#
# Needs: Python >= 3.11 with venv and pip. Installs the project (runtime dependencies only) into the active
# virtual environment; outside one, into python3's own environment; where that Python is managed by the OS
# (PEP 668, e.g. Debian's /usr/bin/python3), into .venv here, with `pai` linked onto PATH.
# Debian packages (later: the Docker Engine for the docker runtime) need root or sudo.
# Idempotent: a second run installs nothing new. The test suite's extra tools come from scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/python.sh

if ! command -v "$PY" >/dev/null 2>&1; then
  echo "setup: no Python found ($PY); install Python 3.11 or newer (Debian: apt-get install python3 python3-venv)" >&2
  exit 1
fi
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "setup: pai needs Python >= 3.11; $PY is $("$PY" -c 'import sys; print(sys.version.split()[0])')." \
       "Set PYTHON=/path/to/python3.11 or activate a newer virtual environment." >&2
  exit 1
fi
if [ -z "${VIRTUAL_ENV:-}" ] && [ "$PY" != .venv/bin/python ] \
   && "$PY" -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")))'; then
  echo "setup: $PY is managed by the operating system; installing pai into $(pwd)/.venv"
  "$PY" -m venv .venv
  PY=.venv/bin/python
fi

"$PY" -m pip install --quiet --disable-pip-version-check -e .

# `pai` on PATH: an active virtual environment has it already; pyenv finds it once its shims are rehashed;
# otherwise link it into /usr/local/bin (root) or ~/.local/bin, replacing a link left by an earlier setup.
scripts_dir=$("$PY" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')
if [ -z "${VIRTUAL_ENV:-}" ]; then
  if command -v pyenv >/dev/null 2>&1 && [[ "$scripts_dir" == "$(pyenv root)"/* ]]; then
    pyenv rehash
  elif [ "$(readlink -f "$(command -v pai 2>/dev/null || echo none)")" != "$(readlink -f "$scripts_dir/pai")" ]; then
    for bin in /usr/local/bin "$HOME/.local/bin"; do
      if mkdir -p "$bin" 2>/dev/null && [ -w "$bin" ]; then
        ln -sf "$scripts_dir/pai" "$bin/pai"
        echo "setup: linked $bin/pai -> $scripts_dir/pai"
        case ":$PATH:" in *":$bin:"*) ;; *) echo "setup: add $bin to your PATH to run pai" >&2 ;; esac
        break
      fi
    done
  fi
fi
echo "setup: pai $("$PY" -c 'import importlib.metadata as m; print(m.version("pai"))') installed for $("$PY" -c 'import sys; print(sys.executable)')"
