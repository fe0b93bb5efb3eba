"""``GET /api/v2/job-templates``: the example jobs and experiments shipped with pai, for the dashboard's editor.

They are the repository's ``examples/`` (``hello-v2.yaml``, ``experiment.yaml``, ...), reached through the link
``pai/rest_server/examples`` and shipped as package data of ``pai.rest_server`` (pyproject.toml; a wheel holds the
files themselves), so that a master installed from a checkout serves them as one run from it. They are read once.
A job whose ``codeDir`` is relative (``torch-allreduce.json``) is left out: only ``pai submit`` uploads that code.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

import yaml
from aiohttp import web

from pai.rest_server.keys import SERVICE
from pai.rest_server.service import Context, credentials, reads

SUFFIXES = {".yaml": "yaml", ".yml": "yaml", ".json": "json"}


@cache
def templates() -> tuple[dict[str, str], ...]:
    """Every example document by file name: ``{name, file, syntax, kind, text}``; ``kind`` job or experiment."""
    found = []
    root = resources.files(__package__).joinpath("examples")
    for entry in sorted(root.iterdir(), key=lambda e: e.name) if root.is_dir() else ():
        stem, dot, suffix = entry.name.rpartition(".")
        if not entry.is_file() or f"{dot}{suffix}" not in SUFFIXES:
            continue
        text = entry.read_text(encoding="utf-8")
        doc = yaml.safe_load(text)  # JSON is YAML
        if isinstance(doc, dict) and _local_code(doc.get("codeDir")):
            continue
        kind = "experiment" if isinstance(doc, dict) and doc.get("type") == "experiment" else "job"
        found.append({"name": stem, "file": entry.name, "syntax": SUFFIXES[f"{dot}{suffix}"], "kind": kind,
                      "text": text})
    return tuple(found)


def _local_code(code_dir: object) -> bool:
    return isinstance(code_dir, str) and not code_dir.startswith("/") and "://" not in code_dir


@reads
def _templates(c: Context) -> list[dict[str, str]]:
    return list(templates())


async def list_templates(request: web.Request) -> web.Response:
    answer: list[dict[str, Any]] = await request.app[SERVICE](credentials(request), _templates)
    return web.json_response(answer)
