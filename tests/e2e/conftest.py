from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.dbkit import BACKENDS, database_url
from tests.e2e.harness import Cluster, cluster

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module", params=BACKENDS)
def two_agents(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A master and two agents with 2 CPUs each on 127.0.0.2 and 127.0.0.3."""
    tmp = tmp_path_factory.mktemp(f"cluster-{request.param}")
    config = tmp / "cluster.json"  # the examples' code (examples/torch_allreduce) may be a job's codeDir
    config.write_text(json.dumps({"localPaths": [{"path": str(EXAMPLES)}]}))
    with database_url(request.param, tmp) as url, cluster(
        tmp, url, [("node-a", "127.0.0.2", 2), ("node-b", "127.0.0.3", 2)], master_args=("--vc-config", str(config))
    ) as c:
        yield c
