"""Which third-party modules a tree imports that ``pyproject.toml`` does not declare.

A fresh ``pip install`` of the project has only what ``[project] dependencies`` names, so an undeclared import
works on a developer's machine and breaks at the first import everywhere else. Imports are read statically
(``import x``, ``from x import y`` and ``importlib.import_module("x")``) from every ``.py`` file.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from importlib.metadata import packages_distributions
from pathlib import Path
from typing import Any


def normalize(requirement: str) -> str:
    """A distribution name as PEP 503 compares it, from a requirement like ``psycopg[binary]>=3.1``."""
    name = re.split(r"[\s<>=!~;\[(@]", requirement.strip(), maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True, slots=True)
class Requirements:
    runtime: frozenset[str]
    extras: Mapping[str, frozenset[str]]

    @classmethod
    def read(cls, pyproject: Path) -> Requirements:
        project: dict[str, Any] = tomllib.loads(pyproject.read_text())["project"]
        extras = project.get("optional-dependencies", {})
        return cls(
            runtime=frozenset(normalize(r) for r in project.get("dependencies", [])),
            extras={name: frozenset(normalize(r) for r in reqs) for name, reqs in extras.items()},
        )

    def with_extras(self, *names: str) -> frozenset[str]:
        return self.runtime.union(*(self.extras.get(n, frozenset()) for n in names))


def imported_modules(source: str) -> Iterator[str]:
    """Top-level names of the absolute imports in ``source``."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from (alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.split(".")[0]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.args[0].value.split(".")[0]


@dataclass(frozen=True, slots=True)
class Undeclared:
    module: str
    distributions: tuple[str, ...]
    file: str

    def __str__(self) -> str:
        return f"{self.module} (distribution {'/'.join(self.distributions)}) imported in {self.file}"


def undeclared(
    files: Iterable[Path],
    declared: frozenset[str],
    local: frozenset[str],
    root: Path,
    module_to_dists: Mapping[str, list[str]] | None = None,
) -> list[Undeclared]:
    """Every third-party module imported in ``files`` that no declared distribution provides.

    A module not installed here maps to the distribution of its own name, which is how an undeclared,
    uninstalled dependency shows up in a fresh environment."""
    known = packages_distributions() if module_to_dists is None else module_to_dists
    found: dict[str, Undeclared] = {}
    for path in sorted(files):
        for module in imported_modules(path.read_text()):
            if module in sys.stdlib_module_names or module in local or module == "__future__" or module in found:
                continue
            dists = tuple(sorted({normalize(d) for d in known.get(module, [module])}))
            if not declared.intersection(dists):
                found[module] = Undeclared(module, dists, str(path.relative_to(root)))
    return sorted(found.values(), key=lambda u: u.module)
