"""The node agent: one process per machine that runs the master's task attempts and reports on them.

Imports only ``pai.protocol``, ``pai.domain``, the standard library and third-party libraries (aiohttp, click,
docker, asyncssh for the tasks' SSH endpoints, ...), so that it could ship as its own wheel. Entry point: the click
command ``pai.nodeagent.cli:agent`` (``pai agent``).
"""
