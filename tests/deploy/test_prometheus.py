"""deploy/prometheus: the alert rules and scrape configuration load in Prometheus's own checker and pass their unit
tests (promtool, Debian's ``prometheus`` package, which scripts/test.sh installs), and every metric they name is
one the master or an agent exports (so that renaming a metric cannot silently disarm an alert)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from pai.domain.node import Node
from pai.domain.resources import Resources
from pai.launcher.lifecycle import Admitted, Exited, Preempted
from pai.launcher.metrics import ClusterGauges, LauncherMetrics, VcUsage
from pai.nodeagent.attempt_record import AttemptRecord
from pai.nodeagent.metrics import _Disk, _Scrape
from pai.nodeagent.resources import GpuSample
from pai.nodeagent.runtime import TaskUsage
from pai.protocol import GpuHealth
from tests.store.builders import job

PROMETHEUS = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"
GRAFANA = PROMETHEUS.parent / "grafana"
# PromQL words that are not metric names
PROMQL = {"up", "and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "le", "sum",
          "rate", "avg_over_time", "histogram_quantile", "max", "min", "count", "offset", "bool"}


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        message = "promtool is not installed (Debian: prometheus); scripts/test.sh installs it"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    return found


@pytest.mark.parametrize("args", [("check", "rules", "alerts.yml"), ("check", "config", "prometheus.yml"),
                                  ("test", "rules", "alerts_test.yml")], ids=lambda a: " ".join(a))
def test_promtool_accepts_the_rules_and_their_unit_tests(args: tuple[str, ...]) -> None:
    done = subprocess.run([promtool(), *args], cwd=PROMETHEUS, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def exported_names() -> set[str]:
    """Every sample name the master and an agent export, from their real collectors with a little in them."""
    master = LauncherMetrics()
    j = job("a")
    master.job_changed(j, j, Admitted(1.0, ()))
    master.job_changed(j, j, Preempted(1.0, "b", "reclaim"))
    master.job_changed(j, replace(j, retries=1), Exited(2.0, "x", 1))
    master.pass_seconds.labels("full").observe(0.01)
    master.rest_seconds.labels("GET", "/api/v2/jobs", "2xx").observe(0.01)
    master.leader_changes.labels("elected").inc()
    node = Node("n1", "10.0.0.1", Resources(8, 16, 1024))
    vc = VcUsage("dev", Resources(4, 8, 512), Resources(8, 16, 1024), Resources(2, 2, 2), Resources(), 1, 1)
    text = master.render(ClusterGauges([(node, Resources(2, 2, 2))], [vc], {("RUNNING", "dev"): 1}, {"dev": 0}, 5))
    agent = CollectorRegistry()
    record = AttemptRecord("a1", "alice~a", "w", 0, "/tmp", vc="dev", gpus=(0,))
    agent.register(_Scrape("n1", (GpuSample(0, 50.0, 1, 2, 40.0),), (GpuHealth(0),), [TaskUsage(record, 1.0, 2)]))
    agent.register(_Disk("n1", Path("/")))
    text += generate_latest(agent)
    return {s.name for f in text_string_to_metric_families(text.decode()) for s in f.samples}


def test_every_metric_an_alert_names_is_exported() -> None:
    rules = yaml.safe_load((PROMETHEUS / "alerts.yml").read_text())
    named = {n for g in rules["groups"] for r in g["rules"] for n in metric_names(r["expr"])}
    assert {"pai_node_state", "pai_gpu_ecc_errors", "pai_task_gpu_utilization_percent", "pai_master_leader",
            "pai_master_leader_changes_total"} <= named
    assert sorted(named - exported_names()) == []


def test_every_job_an_alert_names_is_scraped() -> None:
    """An alert on ``up{job="..."}`` of a job prometheus.yml does not have would never fire."""
    rules = yaml.safe_load((PROMETHEUS / "alerts.yml").read_text())
    named = {j for g in rules["groups"] for r in g["rules"]
             for m in re.findall(r'job=~?"([^"]*)"', r["expr"]) for j in m.split("|")}
    config = yaml.safe_load((PROMETHEUS / "prometheus.yml").read_text())
    assert named == {c["job_name"] for c in config["scrape_configs"]} == {"pai-master", "pai-launcher", "pai-agent"}


def metric_names(expr: str) -> set[str]:
    expr = re.sub(r"\{[^}]*\}|\[[^]]*\]", "", expr)  # label matchers and ranges out
    expr = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", "", expr)  # grouping labels out
    return {w for w in re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*(?![a-zA-Z0-9_:]*\s*\()", expr)
            if w not in PROMQL and w not in {"vector", "topk"} and not w.isdigit()}


def panel_exprs() -> list[str]:
    dashboard = json.loads((GRAFANA / "pai-cluster.json").read_text())
    return [t["expr"] for p in dashboard["panels"] for t in p["targets"]]


def test_every_metric_the_grafana_dashboard_shows_is_exported() -> None:
    named = {n for e in panel_exprs() for n in metric_names(e)}
    assert {"pai_vc_gpus_borrowed", "pai_gpu_utilization_percent", "pai_master_leader", "pai_master_epoch"} <= named
    assert sorted(named - exported_names()) == []


def test_every_grafana_query_is_promql(tmp_path: Path) -> None:
    """promtool parses each panel's query as a recording rule's expression."""
    rules = {"groups": [{"name": "panels", "rules": [{"record": f"pai:panel_{i}", "expr": e}
                                                     for i, e in enumerate(panel_exprs())]}]}
    (tmp_path / "panels.yml").write_text(yaml.safe_dump(rules))
    done = subprocess.run([promtool(), "check", "rules", "panels.yml"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
