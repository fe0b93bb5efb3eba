"""A YAML (or JSON) file that must hold a mapping, read for a command: its errors are the command's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click


def read_mapping(path: Path, what: str) -> dict[str, Any]:
    """The mapping in ``path``; a file that is not YAML, or not a mapping, is a ClickException naming it and
    ``what`` it should be."""
    import yaml  # imported when a file is read: ``pai vc list`` does not wait for it

    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise click.ClickException(f"{path}: not valid YAML/JSON: {e}") from None
    if not isinstance(doc, dict):
        raise click.ClickException(f"{path}: not {what}: expected a mapping")
    return doc
