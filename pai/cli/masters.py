"""``pai masters``: the masters of the cluster, which one leads, at which epoch, and when each last renewed."""

from __future__ import annotations

import time
from typing import Any

from pai.cli.command import client_command, connect, master_option
from pai.cli.output import OutputFormat, format_ago, output_option, render_table

MASTER_HEADERS = ("URL", "ROLE", "EPOCH", "LAST RENEWAL", "ANSWERED")


def render_masters(masters: Any, now_ms: float) -> str:
    rows = [(m.get("url"), m.get("role"), m.get("epoch"), format_ago(m.get("lastRenewal"), now_ms),
             "yes" if m.get("self") else "no")
            for m in masters if isinstance(m, dict)] if isinstance(masters, list) else []
    return render_table(MASTER_HEADERS, rows)


@client_command("masters")
@output_option
@master_option
def masters(output: OutputFormat, master: str | None) -> None:
    """List the masters: which leads (its launcher holds the lease), the epoch, and each one's last renewal.

    ANSWERED: yes for the master that answered this request."""
    answer = connect(master).api.masters()
    output.emit(answer, lambda raw: render_masters(raw, time.time() * 1000))
