"""Trace-replay benchmark: ``python bench/replay.py [--quick] [--days N] [--seed S] [--load L] [--nodes N]
[--elastic-share F]``.

Generates a Philly-shaped workload (pai.vc.workload: Jeon et al., USENIX ATC'19) of 7 days on 1,000 GPUs (125 nodes
x 8 GPUs, 64 CPUs, 512,000 MB) in four VCs, replays it through the production scheduling path (pai.vc.replay)
under two configurations, and prints the replay's figures side by side, then its own speed. Figures, not
assertions: tests never time anything.

Configurations
  guarantees   research 35 %, prod 30 %, dev 15 %, default the rest (20 %); reclaim and in-VC preemption as by
               default (every borrowed job may be reclaimed at once)
  dampers      the same VCs with minRunSeconds 1800 and maxPreemptionFraction 0.05: the what-if an operator
               would ask before turning preemption down

Elastic (``--elastic-share F``)
  that share of the jobs is elastic (pai.vc.workload: workers of 1 GPU, from half to twice their size); the
  ``guarantees`` configuration is replayed twice on the same trace, elastic and rigid (the same jobs with
  ``elastic`` stripped), both on the full-pass path (pai.vc.replay_passes, slower: keep the trace short)

Speed
  jobs/s       jobs replayed per second of wall time (arrivals to completions, preemptions included)
  wall, CPU    of the replay alone (the trace is generated once, before)
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pai.commands.replay_table import render
from pai.vc.config import parse_config
from pai.vc.replay import Setup, replay, rigid
from pai.vc.replay_report import Report, report
from pai.vc.trace import parse_nodes
from pai.vc.workload import WorkloadShape, generate

NODE = {"name": "node", "count": 125, "gpu": 8, "cpu": 64, "memoryMB": 512_000}
SHARES = {"research": "35%", "prod": "30%", "dev": "15%"}
VCS = [*({"name": n, "guaranteed": {"gpu": s, "cpu": s, "memoryMB": s}} for n, s in SHARES.items()),
       {"name": "default"}]
CONFIGS = {
    "guarantees": {"virtualClusters": VCS},
    "dampers": {"virtualClusters": VCS, "scheduler": {"minRunSeconds": 1800, "maxPreemptionFraction": 0.05}},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="one day instead of seven")
    parser.add_argument("--days", type=float, default=7.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--load", type=float, default=0.9, help="offered GPU-time over the cluster's")
    parser.add_argument("--nodes", type=int, default=125, help="nodes of 8 GPUs")
    parser.add_argument("--elastic-share", type=float, default=0.0, help="the share of elastic jobs (0 to 1)")
    args = parser.parse_args()
    days = 1.0 if args.quick else args.days

    nodes = parse_nodes([{**NODE, "count": args.nodes}], "nodes")
    shape = WorkloadShape(days=days, load=args.load, elastic_share=args.elastic_share)
    started = time.perf_counter()
    trace = generate(shape, nodes, args.seed)
    generated = time.perf_counter() - started
    gpus = sum(n.total.gpu for n in nodes)
    elastic = sum(1 for j in trace.jobs if j.elastic)
    print(f"workload: {len(trace.jobs):,} jobs ({elastic:,} elastic) over {days:g} days on {len(nodes)} nodes "
          f"({gpus:,} GPUs), load {args.load:g}, seed {args.seed}; generated in {generated:.2f} s")

    setups = {name: Setup(nodes=nodes, jobs=trace.jobs, config=parse_config(doc)) for name, doc in CONFIGS.items()}
    if elastic:
        base = setups["guarantees"]
        setups = {"rigid": rigid(base), "elastic": base}  # the change column: what elasticity changes
    reports: list[Report] = []
    speed: list[str] = []
    for name, setup in setups.items():
        wall, cpu = time.perf_counter(), time.process_time()
        log = replay(setup)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        reports.append(report(log))
        simulated = log.end - log.start
        speed.append(f"  {name:<12} {len(log.jobs):>8,} jobs  {log.passes:>7,} passes ({log.full_passes:,} full)  "
                     f"wall {wall:6.1f} s  CPU {cpu:6.1f} s  {len(log.jobs) / wall:8,.0f} jobs/s  "
                     f"{simulated / wall / 3600:6.1f} simulated h per s")
    print()
    print(render(list(setups), reports))
    print()
    print("replay speed (2-core development VM figures vary by some 30% from run to run)")
    print("\n".join(speed))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"  max resident set size of this process: {rss:,.0f} MiB")


if __name__ == "__main__":
    main()
