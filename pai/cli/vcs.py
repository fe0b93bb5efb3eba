"""``pai vc list``: the virtual clusters with their shares, usage and queues."""

from __future__ import annotations

from typing import Any

from pai.cli.command import client_command, connect, master_option
from pai.cli.output import OutputFormat, output_option, render_table

VC_HEADERS = ("NAME", "STATUS", "GUARANTEED", "MAX", "USED", "BORROWED", "RUNNING", "PENDING")


def _res(r: dict[str, Any] | None) -> str:
    r = r or {}
    return f"{r.get('gpu', 0)} GPU {r.get('cpu', 0)} CPU"


def render_vcs(vcs: Any) -> str:
    rows = [
        (
            name,
            vc.get("status"),
            f"{vc.get('capacity')}% ({_res(vc.get('resourcesGuaranteed'))})",
            f"{vc.get('maxCapacity')}%",
            _res(vc.get("resourcesUsed")),
            _res(vc.get("resourcesBorrowed")),
            vc.get("numRunningJobs"),
            vc.get("numPendingJobs"),
        )
        for name, vc in (vcs.items() if isinstance(vcs, dict) else [])
    ]
    return render_table(VC_HEADERS, rows)


@client_command("list")
@output_option
@master_option
def vc_list(output: OutputFormat, master: str | None) -> None:
    """List virtual clusters: guaranteed and max shares, usage, borrowing, running and pending jobs."""
    answer = connect(master).api.virtual_clusters()
    output.emit(answer, render_vcs)
