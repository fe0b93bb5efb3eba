"""``pai vc replay`` and ``pai vc replay-gen``: files in, figures out, configurations side by side."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from pai.main import cli
from pai.vc.trace import parse_trace

NODE = {"name": "n", "count": 1, "gpu": 8, "cpu": 32, "memoryMB": 256_000}
OWNER_VC = {"name": "a", "guaranteed": {"gpu": 8, "cpu": 32, "memoryMB": 256_000}}
RECLAIM = {"virtualClusters": [OWNER_VC, {"name": "b"}]}
NO_RECLAIM = {"virtualClusters": [{**OWNER_VC, "preemption": {"reclaim": "Never"}}, {"name": "b"}]}


def job(name: str, at: float, duration: float, vc: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "submittedAt": at, "duration": duration, "vc": vc,
            "tasks": [{"gpu": 8, "cpu": 8, "memoryMB": 1000}], **extra}


def write_trace(path: Path, jobs: list[dict[str, Any]], nodes: list[dict[str, Any]] | None = None) -> Path:
    lines = ([json.dumps({"trace": 1, "nodes": nodes})] if nodes is not None else []) + [json.dumps(j) for j in jobs]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    trace = write_trace(tmp_path / "trace.jsonl", [job("borrower", 0, 1000, "b"), job("owner", 100, 100, "a")],
                        [NODE])
    out = {"trace": trace}
    for name, doc in (("reclaim", RECLAIM), ("never", NO_RECLAIM),
                      ("bigger", {**RECLAIM, "nodes": [{**NODE, "count": 2}]})):
        out[name] = tmp_path / f"{name}.yaml"
        out[name].write_text(yaml.safe_dump(doc))
    return out


def pai(*args: str | Path) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def row(output: str, label: str, after: str = "") -> list[str]:
    """The cells of the first row labelled ``label`` (after the line that starts with ``after``)."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(after)) if after else 0
    line = next(line for line in lines[start:] if f"  {label}  " in f"  {line.strip()}  ")
    return line.split(label, 1)[1].split()


def test_two_configurations_side_by_side_with_the_change(files: dict[str, Path]) -> None:
    result = pai("vc", "replay", files["trace"], "--config", files["reclaim"], "--config", files["never"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "replay of trace.jsonl: 2 jobs"
    assert lines[1].split() == ["reclaim.yaml", "never.yaml", "change"]
    assert row(result.output, "preemptions") == ["1", "0", "-1", "(-100%)"]
    # VC a's owner waits for the grace period when it reclaims, for the borrower's whole run when it may not
    assert row(result.output, "queueing delay mean", after="VC a") == ["10s", "15m", "00s", "+14m", "50s", "(+8900%)"]
    assert row(result.output, "completion time mean", after="VC b") == ["20m", "10s", "16m", "40s", "-3m", "30s",
                                                                        "(-17%)"]
    assert row(result.output, "GPUs") == ["8", "8", "="]


def test_json_has_every_figure_of_every_configuration(files: dict[str, Path]) -> None:
    result = pai("vc", "replay", files["trace"], "--config", files["reclaim"], "--config", files["never"], "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert (out["jobs"], [c["name"] for c in out["configurations"]]) == (2, ["reclaim.yaml", "never.yaml"])
    reclaim, never = out["configurations"]
    assert reclaim["vcs"]["a"]["queueingSeconds"]["mean"] == 10 and never["vcs"]["a"]["queueingSeconds"]["mean"] == 900
    assert reclaim["vcs"]["b"]["completionSeconds"]["p99"] == 1210 and reclaim["preemptions"] == 1
    assert reclaim["lostGpuHours"] == pytest.approx(8 * 110 / 3600)
    assert never["spanSeconds"] == 1100 and never["utilization"] == pytest.approx(1.0)
    assert set(reclaim["overall"]) == {"jobs", "completed", "neverRan", "preemptions", "completionSeconds",
                                       "queueingSeconds"}


def test_a_configuration_may_bring_its_own_nodes(files: dict[str, Path]) -> None:
    result = pai("vc", "replay", files["trace"], "--config", files["reclaim"], "--config", files["bigger"], "--json")
    assert result.exit_code == 0, result.output
    reclaim, bigger = json.loads(result.output)["configurations"]
    assert (reclaim["capacityGpus"], bigger["capacityGpus"]) == (8, 16)
    assert bigger["preemptions"] == 0 and bigger["overall"]["queueingSeconds"]["p99"] == 0


def test_without_a_configuration_everything_runs_in_the_default_vc(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "t.jsonl", [job("x", 0, 60, "default"), job("y", 0, 60, "default")], [NODE])
    result = pai("vc", "replay", trace)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[1].split() == ["default", "configuration"]
    assert row(result.output, "queueing delay p99", after="overall") == ["1m", "00s"]


@pytest.mark.parametrize(("jobs", "nodes", "config", "message"), [
    ([job("j", 0, 1, "a"), {"name": "k"}], [NODE], RECLAIM, "trace.jsonl: line 3: tasks: a job needs at least"),
    ([job("j", 0, 1, "a")], None, RECLAIM, "no nodes to replay on"),
    ([job("j", 0, 1, "a")], [NODE], {"virtualClusters": [{"name": "a", "guaranteed": {"gpu": "lots"}}]},
     "c.yaml: virtualClusters[0].guaranteed.gpu"),
    ([job("j", 0, 1, "a")], [NODE], {"virtualClusters": [{"name": "a", "guaranteed": {"gpu": 9}}]},
     "c.yaml: guarantees sum to 9 GPU"),
    ([job("j", 0, 1, "a", priority="gold")], [NODE], RECLAIM, "c.yaml: job j: unknown priority class 'gold'"),
])
def test_errors_name_the_file_and_the_field(tmp_path: Path, jobs: list[dict[str, Any]],
                                            nodes: list[dict[str, Any]] | None, config: dict[str, Any],
                                            message: str) -> None:
    trace = write_trace(tmp_path / "trace.jsonl", jobs, nodes)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    result = CliRunner().invoke(cli, ["vc", "replay", str(trace), "--config", str(tmp_path / "c.yaml")])
    assert result.exit_code == 1
    assert message in result.output


def test_replay_gen_writes_a_trace_the_replay_reads(tmp_path: Path) -> None:
    out = tmp_path / "gen.jsonl"
    result = pai("vc", "replay-gen", out, "--days", "1", "--nodes", "4", "--seed", "2", "--vc", "x=3", "--vc",
                 "y=1")
    assert result.exit_code == 0, result.output
    trace = parse_trace(out.read_text().splitlines())
    assert len(trace.nodes) == 4 and sum(n.total.gpu for n in trace.nodes) == 32
    assert {j.vc for j in trace.jobs} == {"x", "y"} and len(trace.jobs) > 20
    assert f"{out}: {len(trace.jobs)} jobs over 1 day on 4 nodes (32 GPUs)" in result.output
    stdout = pai("vc", "replay-gen", "-", "--days", "1", "--nodes", "4", "--seed", "2", "--vc", "x=3", "--vc",
                 "y=1")
    assert stdout.output == out.read_text()
    config = tmp_path / "xy.yaml"
    config.write_text(yaml.safe_dump({"virtualClusters": [{"name": "x"}, {"name": "y"}]}))
    replayed = pai("vc", "replay", out, "--config", config, "--json")
    figures = json.loads(replayed.output)["configurations"][0]
    assert figures["overall"]["jobs"] == len(trace.jobs) and figures["capacityGpus"] == 32


@pytest.mark.parametrize("share", ["research", "research=lots", "=0.4", "research=0"])
def test_replay_gen_refuses_a_malformed_share(tmp_path: Path, share: str) -> None:
    result = CliRunner().invoke(cli, ["vc", "replay-gen", str(tmp_path / "t.jsonl"), "--vc", share])
    assert result.exit_code == 2 and "expected NAME=SHARE" in result.output
    assert not (tmp_path / "t.jsonl").exists()


def test_a_full_pass_period_of_zero_is_refused(files: dict[str, Path]) -> None:
    result = CliRunner().invoke(cli, ["vc", "replay", str(files["trace"]), "--full-pass-seconds", "0"])
    assert result.exit_code == 2 and "--full-pass-seconds" in result.output


def test_the_documented_example_prints_what_the_docs_show(tmp_path: Path) -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "scheduling.md").read_text()
    example = text[text.index("## Trace replay"):]
    example = example[example.index("### Example"):]
    blocks = re.findall(r"```(\w+)\n(.*?)```", example, re.S)
    (_, trace), (_, reclaim), (_, no_reclaim), (_, shown) = blocks[:4]
    for name, body in (("trace.jsonl", trace), ("reclaim.yaml", reclaim), ("no-reclaim.yaml", no_reclaim)):
        (tmp_path / name).write_text(body)
    result = pai("vc", "replay", tmp_path / "trace.jsonl", "--config", tmp_path / "reclaim.yaml", "--config",
                 tmp_path / "no-reclaim.yaml")
    assert result.exit_code == 0, result.output
    printed = result.output.splitlines()
    for line in shown.splitlines():
        assert line in printed


def test_an_unreachable_master_is_one_line_on_stderr(files: dict[str, Path]) -> None:
    result = CliRunner().invoke(cli, ["vc", "replay", str(files["trace"]), "--from-master", "http://127.0.0.1:9"])
    assert result.exit_code == 1
    assert result.output.startswith("error: ") and "127.0.0.1:9" in result.output


ELASTIC = {"name": "e", "submittedAt": 0, "duration": 100, "tasks": [{"instances": 2, "gpu": 1}],
           "elastic": {"main": {"minInstances": 1, "maxInstances": 4}}}
FOUR_GPUS = [{"name": "n", "gpu": 4, "cpu": 16, "memoryMB": 64_000}]


def test_an_elastic_trace_is_compared_with_the_same_jobs_rigid(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "elastic.jsonl", [ELASTIC], FOUR_GPUS)
    result = pai("vc", "replay", trace, "--full-pass-seconds", "10")
    assert result.exit_code == 0, result.output
    header = result.output.splitlines()[1].split()
    assert header == ["default", "configuration", "(rigid)", "default", "configuration", "(elastic)", "change"]
    # alone on 4 GPUs it grows from 2 to 4 at the first periodic pass (10 s) and ends at 55 s instead of 100 s
    assert row(result.output, "resizes") == ["0", "1", "+1"]
    assert row(result.output, "idle-capacity") == ["0", "1", "+1"]
    assert row(result.output, "completion time mean", "overall") == ["1m", "40s", "55s", "-45s", "(-45%)"]
    assert row(result.output, "preemptions") == ["0", "0", "="]
    figures = json.loads(pai("vc", "replay", trace, "--full-pass-seconds", "10", "--json").output)
    (rigid, elastic) = figures["configurations"]
    assert (rigid["name"], elastic["name"]) == ("default configuration (rigid)", "default configuration (elastic)")
    assert (rigid["resizes"], elastic["resizes"]) == ({}, {"idle-capacity": 1})
    assert elastic["gpuHours"] == pytest.approx((2 * 10 + 4 * 45) / 3600)


def test_the_comparison_can_be_left_out_or_asked_for(tmp_path: Path, files: dict[str, Path]) -> None:
    trace = write_trace(tmp_path / "elastic.jsonl", [ELASTIC], FOUR_GPUS)
    alone = pai("vc", "replay", trace, "--no-compare-rigid")
    assert "(rigid)" not in alone.output and "(elastic)" not in alone.output and "change" not in alone.output
    assert "idle-capacity" in alone.output
    rigid_trace = pai("vc", "replay", files["trace"], "--config", files["reclaim"], "--compare-rigid")
    assert "reclaim.yaml (rigid)" in rigid_trace.output and "reclaim.yaml (elastic)" in rigid_trace.output
    assert row(rigid_trace.output, "completion time mean", "overall")[-1] == "="


def test_a_bad_elastic_in_a_trace_names_the_line_and_the_field(tmp_path: Path) -> None:
    bad = {**ELASTIC, "elastic": {"main": {"minInstances": 3, "maxInstances": 4}}}
    trace = write_trace(tmp_path / "bad.jsonl", [bad], FOUR_GPUS)
    result = CliRunner().invoke(cli, ["vc", "replay", str(trace)])
    assert result.exit_code == 1
    assert ("line 2.elastic.main.minInstances: 3 is greater than instances 2 (minInstances <= instances <= "
            "maxInstances)") in result.output


def test_replay_gen_makes_a_share_of_the_same_jobs_elastic(tmp_path: Path) -> None:
    args = ["--days", "1", "--nodes", "4", "--seed", "2"]
    plain = parse_trace(pai("vc", "replay-gen", "-", *args).output.splitlines())
    result = pai("vc", "replay-gen", tmp_path / "e.jsonl", *args, "--elastic-share", "0.5")
    mixed = parse_trace((tmp_path / "e.jsonl").read_text().splitlines())
    elastic = [j for j in mixed.jobs if j.elastic]
    assert f"{len(mixed.jobs)} jobs, {len(elastic)} of them elastic over 1 day" in result.output
    assert 0.3 < len(elastic) / len(mixed.jobs) < 0.7
    same = [(j.name, j.submitted_at, j.duration, j.gpus, j.vc, j.priority) for j in plain.jobs]
    assert [(j.name, j.submitted_at, j.duration, j.gpus, j.vc, j.priority) for j in mixed.jobs] == same
    for j in elastic:  # workers of 1 GPU (8 for a job larger than a node), from half to twice as many
        (e,) = j.elastic
        per = 1 if j.gpus <= 8 else 8
        assert {t.resources.gpu for t in j.tasks} == {per}
        assert (e.min_instances, e.max_instances) == (max(1, len(j.tasks) // 2), 2 * len(j.tasks))
    assert mixed.header["generator"]["elasticShare"] == 0.5
    assert pai("vc", "replay-gen", "-", *args, "--elastic-share", "1.5").exit_code == 2


def test_simulate_shows_an_elastic_job_growing(tmp_path: Path) -> None:
    scenario = {"nodes": FOUR_GPUS, "now": 100,
                "running": [{"name": "e", "elastic": {"main": {"minInstances": 1, "maxInstances": 3}},
                             "tasks": [{"gpu": 1, "instances": 2, "node": "n"}]}]}
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(scenario))
    out = json.loads(pai("vc", "simulate", path).output)
    assert [(z["job"], z["from"], z["to"], z["added"]) for z in out["resized"]] == [("e", 2, 3, {"main-2": "n"})]
