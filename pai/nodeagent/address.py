"""The node's cluster address (``pai agent --address``, ``PAI_AGENT_ADDRESS`` in deploy/agent.env.example), checked
against the masters' URLs at the agent's start. Pure: no I/O.

The address is what the master fetches task logs from and what the other tasks of a job reach this node's tasks
at (``PAI_HOST_IP_*``, host lists, ``MASTER_ADDR``). A loopback address works only when the masters are on this
machine too; with a master elsewhere it would register a node nobody can reach, so the agent refuses to start:

============================  ======================  ====================================
``--address``                 the masters' URLs       result
============================  ======================  ====================================
unset (empty)                 all loopback            127.0.0.1 (a one-machine cluster)
unset (empty)                 any other               refused: set it
loopback (127.x, ::1, ...)    all loopback            as given
loopback                      any other               refused: set it to this machine's IP
any other                     any                     as given
============================  ======================  ====================================
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from urllib.parse import urlsplit

DEFAULT_ADDRESS = "127.0.0.1"


def is_loopback(host: str | None) -> bool:
    """``localhost`` (and its subdomains) or an IP of 127.0.0.0/8 or ::1; a host name is not."""
    if not host:
        return False
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def node_address(address: str | None, masters: Sequence[str]) -> str:
    """The address the agent registers with, or ValueError saying which setting to change and why."""
    address = (address or "").strip()
    remote = [url for url in masters if not is_loopback(urlsplit(url).hostname)]
    if address and not (is_loopback(address) and remote):
        return address
    if not remote:
        return address or DEFAULT_ADDRESS
    said = "is not set" if not address else f"is {address}, a loopback address,"
    raise ValueError(
        f"--address (PAI_AGENT_ADDRESS in /etc/pai/agent.env) {said} but the master {remote[0]} is not on this "
        "machine: set it to this machine's cluster IP, which the master fetches task logs from and other nodes' "
        "tasks reach this node's tasks at")
