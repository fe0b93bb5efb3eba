"""pai started from a directory that holds a ``pai/`` of its own (a stale copy, a checkout's leftovers, a data
folder): the interpreters pai starts do not import it, and the master's modules do not need ``pai/__init__.py``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pai.cli.ssh import pai_command

ROOT = Path(__file__).resolve().parents[1]

# What an editable install (``pip install -e``) adds to sys.meta_path: a finder of the checkout's top-level packages
# and their children, consulted after sys.path's own finder (setuptools' ``__editable__`` finder, which maps
# ``pai`` to the checkout's directory). It is put right after sys.path's finder, before any such finder of this
# environment, so that ``pai`` comes from this checkout.
EDITABLE = """
import importlib.machinery, sys

class Editable:
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        root = sys.argv[1]
        if fullname == "pai":
            return importlib.machinery.PathFinder.find_spec("pai", [root])
        if fullname.rpartition(".")[0] == "pai":
            return importlib.machinery.PathFinder.find_spec(fullname, [root + "/pai"])
        return None

sys.meta_path.insert(sys.meta_path.index(importlib.machinery.PathFinder) + 1, Editable)
import pai
print("pai is", "a namespace package" if pai.__file__ is None else pai.__file__)
import pai.rest_server.routes
from pai.rest_server import handlers, openapi
print("version", handlers.__version__, openapi.__version__)
"""


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSAFEPATH")}


def test_the_master_s_modules_load_when_the_working_directory_makes_pai_a_namespace(tmp_path: Path) -> None:
    """``python -m pai master`` puts the working directory first on sys.path; its ``pai/``, no regular package,
    makes ``pai`` a namespace package over an editable install, whose ``__init__`` never runs (it was: ImportError:
    cannot import name '__version__' from 'pai' (unknown location))."""
    (tmp_path / "pai" / "__pycache__").mkdir(parents=True)
    r = subprocess.run([sys.executable, "-c", EDITABLE, str(ROOT)], capture_output=True, text=True, cwd=tmp_path,
                       env=_env(), timeout=120)
    assert r.returncode == 0, r.stderr
    assert "pai is a namespace package" in r.stdout  # the case itself, or the test proves nothing
    assert "version 0.1.0 0.1.0" in r.stdout


def test_ssh_s_proxy_command_ignores_a_pai_in_the_working_directory(tmp_path: Path) -> None:
    """ssh runs ``pai ssh``'s ProxyCommand where the user is; a stale ``pai/`` there is not imported (the agent's
    watchdog and SFTP children are started with the same ``-P``)."""
    command = pai_command()
    stale = tmp_path / "pai"
    stale.mkdir()
    (stale / "__init__.py").write_text("raise ImportError('the stale pai/ of the working directory')\n")
    r = subprocess.run([*command, "--help"], capture_output=True, text=True, cwd=tmp_path,
                       env={**_env(), "PYTHONPATH": str(ROOT)}, timeout=60)
    assert "stale pai/" not in r.stderr
    assert r.returncode in (0, 2), r.stderr  # its usage (argparse), from this checkout's module
    unsafe = subprocess.run([c for c in command if c != "-P"] + ["--help"], capture_output=True, text=True,
                            cwd=tmp_path, env={**_env(), "PYTHONPATH": str(ROOT)}, timeout=60)
    assert "stale pai/" in unsafe.stderr  # without -P it would have been imported
