"""The README's first command: ``pai up --run examples/hello-v1.json`` on an embedded cluster."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_pai_up_runs_the_hello_example_to_succeeded_and_leaves_no_process(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path), "PAI_DATA_DIR": str(tmp_path / "unused")}
    proc = subprocess.run([sys.executable, "-m", "pai", "up", "--run", str(ROOT / "examples" / "hello-v1.json"),
                           "--data-dir", str(tmp_path / "data")],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "admin~hello: SUCCEEDED" in out
    for line in ("role=ps index=0 workers=", "role=worker index=0 workers=", "role=worker index=1 workers="):
        assert line in out, out
    # Everything the command started is gone: no master or agent still holds the data directory.
    leftovers = subprocess.run(["pgrep", "-f", str(tmp_path / "data")], capture_output=True, text=True)
    assert leftovers.stdout.strip() == ""
