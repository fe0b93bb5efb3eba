"""The master's URL as the user gives it, and path segments: stdlib only and light, for ``pai.cli.sshproxy`` (ssh's
ProxyCommand starts a process per connection) as much as for every command."""

from __future__ import annotations

import urllib.parse


def normalize_url(url: str) -> str:
    """``host:9186`` -> ``http://host:9186``; no trailing slash."""
    url = url.strip()
    if "://" not in url:
        url = "http://" + url
    return url.rstrip("/")


def quote_segment(segment: str) -> str:
    """One URL path segment; ``~`` stays (job keys are ``user~job``)."""
    return urllib.parse.quote(segment, safe="~")


def tunnel_path(key: str, role: str, index: int, label: str) -> str:
    """The master's tunnel to task ``role[index]`` of job ``key``'s port ``label`` (a WebSocket)."""
    return (f"/api/v2/jobs/{quote_segment(key)}/tasks/{quote_segment(role)}/{index}/ports/{quote_segment(label)}"
            "/tunnel")
