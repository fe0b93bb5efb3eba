"""An elastic job's page (issue 31), in real headless Chromium against a real master and agent (process runtime, 3
GPUs by configuration): a job that asks 3 workers (1 to 3) while another job holds 2 of the node's GPUs starts at 1
and its page says so beside the role's title, with its range; once the holder is stopped it grows into the 2 GPUs
freed (a full pass every second; resizes at least 1 s apart) and the page shows its new size and the resize, as
does its latest attempt's task count.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from pai.cli.api import MasterApi
from pai.cli.http import HttpClient
from tests.e2e.browser import WAIT_MS, shot, sign_in
from tests.e2e.harness import Cluster, cluster

ALICE = ("alice", "alice-password")
CONFIG = {"scheduler": {"elastic": {"resizeIntervalSeconds": 1}}}


def spec(name: str, instances: int, gpu: int, elastic: dict[str, Any] | None = None) -> bytes:
    doc: dict[str, Any] = {
        "protocolVersion": 2, "name": name, "type": "job",
        "prerequisites": [{"type": "dockerimage", "name": "img", "uri": "busybox"}],
        "taskRoles": {"worker": {"instances": instances, "dockerImage": "img",
                                 "resourcePerInstance": {"cpu": 1, "memoryMB": 128, "gpu": gpu},
                                 "commands": ["sleep 600"]}},
    }
    if elastic:
        doc["extras"] = {"elastic": {"worker": elastic}}
    return yaml.safe_dump(doc).encode()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, pw: Any) -> Iterator[Cluster]:
    tmp = tmp_path_factory.mktemp("elastic-page")
    config = tmp / "cluster.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    with cluster(tmp, None, [("node-a", "127.0.0.2", 6)], agent_args=("--runtime", "process", "--gpus", "3"),
                 master_args=("--vc-config", str(config), "--full-pass-seconds", "1")) as c:
        c.api.create_user({"username": ALICE[0], "password": ALICE[1]})
        yield c


def alice(c: Cluster) -> MasterApi:
    api = MasterApi(HttpClient(c.url, timeout=10))
    api.http.token = api.login(*ALICE)["token"]
    return api


def test_an_elastic_job_shows_its_size_and_range_and_grows_with_its_resizes(site: Cluster, page: Any,
                                                                            pw: Any) -> None:
    expect = pw.expect
    expect.set_options(timeout=WAIT_MS)
    api = alice(site)
    holder = str(api.submit(spec("holder", 1, 2), "text/yaml")["jobName"])
    site.wait_state(holder, {"RUNNING"})
    key = str(api.submit(spec("stretchy", 3, 1, {"minInstances": 1, "maxInstances": 3}), "text/yaml")["jobName"])
    try:
        site.wait_state(key, {"RUNNING"})
        sign_in(page, site.url, *ALICE, expect)
        page.goto(f"{site.url}/#/jobs/{key}")
        size = page.locator("[data-role=worker] h3 .elastic-size")
        expect(size).to_have_text("size 1 (min 1, max 3)")  # admitted at its minimum: 1 GPU of 3 was free
        expect(page.locator("tr[data-task^=worker-]")).to_have_count(1)
        resizes = page.locator("#resizes")
        expect(resizes).to_contain_text("No resize yet")
        shot(page, "job-elastic-min")

        api.stop_job(holder)  # its 2 GPUs idle: the next full pass grows the job into both, one resize
        expect(size).to_have_text("size 3 (min 1, max 3)")
        expect(page.locator("tr[data-task^=worker-]")).to_have_count(3)
        rows = resizes.locator("tbody tr")
        expect(rows).to_have_count(1)
        expect(rows.first).to_contain_text("grew to 3: 2 GPUs idle")
        expect(page.locator("span.ev-resized")).to_have_count(1)  # also in the history
        shot(page, "job-elastic-grown")
        latest = api.http.json("GET", f"/api/v2/jobs/{key}/job-attempts")[0]
        assert (latest["isLatest"], latest["totalTaskNumber"], latest["totalGpuNumber"]) == (True, 3, 3)
    finally:
        for k in (key, holder):
            api.stop_job(k)
