"""``pai vc replay TRACE --config A.yaml [--config B.yaml]`` and ``pai vc replay-gen OUT``: a workload through
the scheduler in simulated time, per configuration, side by side (docs/scheduling.md#trace-replay)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from pai.cli.command import ClientCommand, connect
from pai.commands.yamlfile import read_mapping
from pai.domain.errors import PaiError
from pai.domain.timing import FULL_PASS_SECONDS, GRACE_SECONDS
from pai.vc.config import ClusterConfig, parse_config
from pai.vc.replay import LiveJob, Setup, is_elastic, replay, rigid
from pai.vc.replay_report import Report, report
from pai.vc.snapshot import NodeView
from pai.vc.trace import Trace, TraceJob, parse_nodes, parse_trace, trace_lines
from pai.vc.workload import WorkloadShape, generate


@dataclass(frozen=True, slots=True)
class Configuration:
    name: str
    config: ClusterConfig
    nodes: tuple[NodeView, ...] = ()  # the file's own ``nodes``, when it has them


def load_configuration(path: Path) -> Configuration:
    """A cluster configuration as the master reads it (``pai master --vc-config``), plus an optional ``nodes``
    list (the trace header's form) that replaces the trace's nodes for this configuration."""
    from pai.jobspec.vcconfig import validate_cluster_config  # only when a replay runs

    doc = read_mapping(path, "a cluster configuration")
    try:
        nodes = parse_nodes(doc.pop("nodes"), "nodes") if "nodes" in doc else ()
        return Configuration(path.name, parse_config(validate_cluster_config(doc)), nodes)
    except PaiError as e:
        raise click.ClickException(f"{path}: {e.message}") from None


@click.command("replay", cls=ClientCommand)
@click.argument("trace", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--config", "configs", multiple=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A cluster configuration (the master's --vc-config file, optionally with nodes); give two or "
                   "more to compare them side by side.")
@click.option("--from-master", "master", metavar="URL",
              help="Start from this master's nodes, VCs and active jobs (read over its REST API).")
@click.option("--live-duration", type=click.FloatRange(min=0), default=3600.0, show_default=True,
              help="With --from-master: seconds each running job runs on, and each waiting job runs once started.")
@click.option("--until", type=click.FloatRange(min=0), help="Stop after this many seconds of simulated time.")
@click.option("--grace-seconds", type=click.FloatRange(min=0), default=GRACE_SECONDS, show_default=True,
              help="How long a preempted job holds its resources before it exits.")
@click.option("--full-pass-seconds", type=click.FloatRange(min=0, min_open=True), default=FULL_PASS_SECONDS,
              show_default=True,
              help="How often a full scheduling pass runs while jobs wait (as the launcher does).")
@click.option("--compare-rigid/--no-compare-rigid", default=None,
              help="Also replay the same jobs with elastic stripped (rigid at the size they ask), side by side "
                   "[default: when the trace has elastic jobs].")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
def replay_command(trace: Path, configs: tuple[Path, ...], master: str | None, live_duration: float,
                   until: float | None, grace_seconds: float, full_pass_seconds: float, compare_rigid: bool | None,
                   as_json: bool) -> None:
    """Replay the workload in TRACE (JSON Lines) through the scheduler, per configuration, and print job
    completion times, queueing delays, GPU utilization, preemptions, resizes and the jobs that never ran; with
    elastic jobs, against the same jobs rigid."""
    try:
        workload = parse_trace(trace.read_text().splitlines())
    except PaiError as e:
        raise click.ClickException(f"{trace}: {e.message}") from None
    chosen = [load_configuration(p) for p in configs]
    running: tuple[LiveJob, ...] = ()
    waiting: tuple[TraceJob, ...] = ()
    nodes = workload.nodes
    if master is not None:
        from pai.commands.replay_live import read_live

        try:
            live = read_live(connect(master).api, time.time(), live_duration)
        except PaiError as e:
            raise click.ClickException(f"{master}: {e.message}") from None
        if any(c.nodes for c in chosen):
            raise click.ClickException("with --from-master the nodes are the live cluster's: a configuration "
                                       "may not bring its own")
        nodes, running, waiting = live.nodes, live.running, live.waiting
        chosen = chosen or [Configuration(f"{master} (live)", live.config)]
    chosen = chosen or [Configuration("default configuration", ClusterConfig())]
    reports: list[Report] = []
    names: list[str] = []
    for c in chosen:
        use = c.nodes or nodes
        if not use:
            raise click.ClickException(f"no nodes to replay on: give them in the trace's header, in {c.name}, "
                                       "or use --from-master")
        setup = Setup(nodes=use, jobs=(*waiting, *workload.jobs), config=c.config, running=running, until=until,
                      grace_seconds=grace_seconds, full_pass_seconds=full_pass_seconds)
        both = is_elastic(setup) if compare_rigid is None else compare_rigid
        for name, s in ((f"{c.name} (rigid)", rigid(setup)), (f"{c.name} (elastic)", setup)) if both else (
                (c.name, setup),):
            try:
                reports.append(report(replay(s)))
            except PaiError as e:
                raise click.ClickException(f"{c.name}: {e.message}") from None
            names.append(name)
    if as_json:
        click.echo(json.dumps(_json(trace, workload, names, reports, len(running) + len(waiting)), indent=2))
        return
    from pai.commands.replay_table import render

    live_note = f", on top of {len(running)} running and {len(waiting)} waiting live jobs" if master else ""
    count = len(workload.jobs)
    click.echo(f"replay of {trace.name}: {count:,} job{'' if count == 1 else 's'}{live_note}")
    click.echo(render(names, reports))


def _json(trace: Path, workload: Trace, names: list[str], reports: list[Report], live: int) -> dict[str, Any]:
    return {"trace": str(trace), "jobs": len(workload.jobs), "liveJobs": live,
            "configurations": [{"name": n, **r.to_dict()} for n, r in zip(names, reports, strict=True)]}


def _shares(values: tuple[str, ...]) -> tuple[tuple[str, float], ...]:
    out = []
    for v in values:
        name, sep, share = v.partition("=")
        try:
            weight = float(share)
        except ValueError:
            weight = -1.0
        if not sep or not name or not weight > 0:
            raise click.BadParameter(f"{v!r}: expected NAME=SHARE with a positive share, like research=0.4",
                                     param_hint="--vc")
        out.append((name, weight))
    return tuple(out)


@click.command("replay-gen")
@click.argument("out", type=click.Path(dir_okay=False, allow_dash=True, path_type=Path))
@click.option("--days", type=click.FloatRange(min=0), default=7.0, show_default=True)
@click.option("--load", type=click.FloatRange(min=0), default=0.9, show_default=True,
              help="Offered GPU-time as a fraction of the cluster's.")
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--nodes", "node_count", type=click.IntRange(min=1), default=125, show_default=True)
@click.option("--gpus-per-node", type=click.IntRange(min=1), default=8, show_default=True)
@click.option("--cpus-per-node", type=click.IntRange(min=1), default=64, show_default=True)
@click.option("--memory-mb-per-node", type=click.IntRange(min=1), default=512_000, show_default=True)
@click.option("--vc", "vcs", multiple=True, metavar="NAME=SHARE",
              help="A VC and its share of the jobs (repeat; default research=0.4 prod=0.3 dev=0.2 default=0.1).")
@click.option("--elastic-share", type=click.FloatRange(min=0, max=1), default=0.0, show_default=True,
              help="The share of jobs that are elastic: workers of 1 GPU (a node's GPUs for jobs larger than a "
                   "node), from half to twice the size they ask.")
def replay_gen_command(out: Path, days: float, load: float, seed: int, node_count: int, gpus_per_node: int,
                       cpus_per_node: int, memory_mb_per_node: int, vcs: tuple[str, ...],
                       elastic_share: float) -> None:
    """Write a synthetic trace shaped like Microsoft's Philly GPU clusters (Jeon et al., USENIX ATC'19) to OUT
    (JSON Lines; - for stdout). Each task asks for 3/4 of a node's CPU and memory per GPU."""
    node = {"name": "node", "count": node_count, "gpu": gpus_per_node, "cpu": cpus_per_node,
            "memoryMB": memory_mb_per_node}
    base = WorkloadShape()
    shape = WorkloadShape(days=days, load=load, vcs=_shares(vcs) if vcs else base.vcs, gpus_per_node=gpus_per_node,
                          cpu_per_gpu=max(1, cpus_per_node * 3 // 4 // gpus_per_node),
                          memory_mb_per_gpu=max(1, memory_mb_per_node * 3 // 4 // gpus_per_node),
                          elastic_share=elastic_share)
    try:
        nodes = parse_nodes([node], "nodes")
        trace = generate(shape, nodes, seed)
    except PaiError as e:
        raise click.ClickException(e.message) from None
    text = "\n".join(trace_lines(trace)) + "\n"
    if str(out) == "-":
        click.echo(text, nl=False)
    else:
        out.write_text(text)
        gpus = sum(n.total.gpu for n in nodes)
        plural = "" if days == 1 else "s"
        elastic = sum(1 for j in trace.jobs if j.elastic)
        note = f", {elastic:,} of them elastic" if elastic_share else ""
        click.echo(f"{out}: {len(trace.jobs):,} jobs{note} over {days:g} day{plural} on {len(nodes)} nodes "
                   f"({gpus:,} GPUs)", err=True)

