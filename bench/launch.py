"""Launch benchmark: ``python bench/launch.py [--runs N]`` (root: it starts its own dockerd, as the tests do).

Side by side, in one run on the same Docker Engine (tests/dockerkit.py: vfs storage, busybox image):

  docker floor        the docker SDK alone: create + start a container of the test image (the floor)
  pai submit->RUNNING a 1-task job through a real master and one docker-runtime agent: from POST /api/v2/jobs
                      until the task's own state is RUNNING in the job detail (polled every 10 ms)
  codeDir fetch       1 MB and 100 MB trees from the WebHDFS stand-in (tests/webhdfs.py): first read, then cached

Figures, not assertions. Target: pai p50 <= 2x the floor's p50.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import docker

from bench.figures import line
from pai.nodeagent.codefetch import CodeFetcher
from tests.dockerkit import IMAGE, docker_engine, missing
from tests.e2e.harness import Cluster, cluster
from tests.webhdfs import webhdfs


def docker_floor(url: str, runs: int) -> list[float]:
    client = docker.DockerClient(base_url=url)
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        c = client.containers.create(IMAGE, ["sleep", "5"], network_mode="host", init=True)
        c.start()
        times.append(time.perf_counter() - started)
        c.remove(force=True)
    client.close()
    return times


def pai_to_running(c: Cluster, runs: int) -> list[float]:
    times = []
    for i in range(runs):
        spec = {"jobName": f"launch-{i}-{time.time_ns()}", "image": IMAGE, "taskRoles": [
            {"name": "w", "taskNumber": 1, "cpuNumber": 1, "memoryMB": 128, "gpuNumber": 0, "command": "sleep 30"}]}
        started = time.perf_counter()
        key = c.submit(json.dumps(spec))
        while c.tasks(c.job(key))[0][1]["taskState"] != "RUNNING":
            time.sleep(0.01)
        times.append(time.perf_counter() - started)
        c.raw("PUT", f"/api/v2/jobs/{key}/executionType", b'{"value": "STOP"}', "application/json")
        c.wait_state(key, {"STOPPED"}, 30)
    return times


def fetch_costs(tmp: Path) -> list[str]:
    out = []
    for mb in (1, 100):
        code = tmp / "hdfs" / f"code{mb}"
        (code / "data").mkdir(parents=True)
        for j in range(max(1, mb // 10)):  # files of up to 10 MB
            (code / "data" / f"part-{j}").write_bytes(b"x" * (min(mb, 10) << 20))
        with webhdfs(tmp / "hdfs") as fs:
            fetcher = CodeFetcher(tmp / f"cache{mb}", 200 << 20)
            for label in ("first", "cached"):
                dest = tmp / f"dest-{mb}-{label}"
                started = time.perf_counter()
                result = fetcher.fetch(f"hdfs://nn:9000/code{mb}", dest, webhdfs=fs.namenode)
                took = time.perf_counter() - started
                out.append(f"codeDir fetch {mb:>3} MB {label:<7}   {took * 1000:8.1f} ms   "
                           f"({result.bytes >> 20} MB, {result.files} files, cached={result.cached})")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    reason = missing()
    if reason:
        sys.exit(f"bench/launch.py: {reason}")
    with docker_engine() as url, tempfile.TemporaryDirectory(prefix="pai-bench-") as tmp_name:
        tmp = Path(tmp_name)
        floor = docker_floor(url, args.runs)
        agent = ("--runtime", "docker", "--docker-host", url)
        with cluster(tmp, None, [("node-a", "127.0.0.2", 4)], master_args=("--heartbeat", "1"),
                     agent_args=agent) as c:
            pai = pai_to_running(c, args.runs)
        print(line("docker floor (create+start)", floor))
        print(line("pai submit -> task RUNNING", pai))
        print(f"{'ratio of p50s':<28} {statistics.median(pai) / statistics.median(floor):8.1f}x   (target <= 2x)")
        for text in fetch_costs(tmp):
            print(text)


if __name__ == "__main__":
    main()
