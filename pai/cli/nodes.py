"""``pai nodes``: the worker machines, their state, usage and last heartbeat."""

from __future__ import annotations

import time
from typing import Any

import click

from pai.cli.command import client_command, connect, master_option
from pai.cli.output import OutputFormat, format_ago, format_memory, output_option, render_table, used_total

NODE_HEADERS = ("NAME", "ADDRESS", "STATE", "GPU", "GPU MODEL", "CPU", "MEM", "LAST HEARTBEAT", "HEALTH")


def render_nodes(nodes: Any, now_ms: float) -> str:
    rows = []
    for node in nodes if isinstance(nodes, list) else []:
        used = node.get("used") or {}
        total = node.get("total") or {}
        rows.append((
            node.get("name"),
            node.get("address"),
            node.get("state"),
            used_total(used.get("gpu"), total.get("gpu")),
            _gpu_model(node),
            used_total(used.get("cpu"), total.get("cpu")),
            used_total(used.get("memoryMB"), total.get("memoryMB"), format_memory),
            format_ago(node.get("lastHeartbeat"), now_ms),
            _health(node),
        ))
    return render_table(NODE_HEADERS, rows)


def _gpu_model(node: dict[str, Any]) -> str:
    model = str(node.get("gpuType") or "-")
    memory = node.get("gpuMemoryMB") or 0
    return f"{model} ({format_memory(memory)})" if memory else model


def _health(node: dict[str, Any]) -> str:
    problems = [str(p) for p in node.get("problems") or []]
    failed = node.get("failedGpus") or []
    if failed:
        problems.append(f"failed GPUs {','.join(str(g) for g in failed)}")
    return "; ".join(problems) if problems else "ok"


@client_command("nodes")
@output_option
@master_option
def nodes(output: OutputFormat, master: str | None) -> None:
    """List nodes with usage and last heartbeat.

    GPU, CPU and memory are used/total; GPU MODEL is the model and memory of each GPU (NVML); LAST HEARTBEAT
    is how long ago the node last reported.
    """
    answer = connect(master).api.nodes()
    output.emit(answer, lambda raw: render_nodes(raw, time.time() * 1000))


def _set_state(name: str, state: str, master: str | None) -> None:
    node = connect(master).api.set_node_state(name, state)
    click.echo(f"{node.get('name', name)}: {node.get('state', state)}")


@client_command("cordon")
@click.argument("name")
@master_option
def cordon(name: str, master: str | None) -> None:
    """Keep new tasks off node NAME (running tasks stay). Admins only."""
    _set_state(name, "CORDONED", master)


@client_command("uncordon")
@click.argument("name")
@master_option
def uncordon(name: str, master: str | None) -> None:
    """Let node NAME take new tasks again. Admins only."""
    _set_state(name, "READY", master)
