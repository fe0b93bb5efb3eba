"""Every import is declared: a fresh ``pip install`` must have everything the code imports."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.depcheck import Requirements, imported_modules, normalize, undeclared

ROOT = Path(__file__).resolve().parents[1]
LOCAL = frozenset({"pai", "pai_trial", "job_schemas", "tests", "bench", "examples"})


def _py(*folders: str) -> list[Path]:
    return [p for folder in folders for p in (ROOT / folder).rglob("*.py")]


def test_every_module_pai_imports_is_a_declared_runtime_dependency() -> None:
    missing = undeclared(_py("pai"), Requirements.read(ROOT / "pyproject.toml").runtime, LOCAL, ROOT)
    assert not missing, "pyproject.toml [project] dependencies do not declare: " + "; ".join(map(str, missing))


def test_pai_trial_imports_the_standard_library_only() -> None:
    # it runs inside any trial's image, where pai and its dependencies are not installed
    missing = undeclared(_py("pai_trial"), frozenset(), frozenset({"pai_trial"}), ROOT)
    assert not missing, "pai_trial imports more than the standard library: " + "; ".join(map(str, missing))


def test_tests_and_benchmarks_import_only_what_the_dev_and_torch_extras_declare() -> None:
    declared = Requirements.read(ROOT / "pyproject.toml").with_extras("dev", "torch")
    missing = undeclared(_py("tests", "bench", "examples"), declared, LOCAL, ROOT)
    assert not missing, "pyproject.toml does not declare (dev/torch extras): " + "; ".join(map(str, missing))


def test_a_dependency_removed_from_pyproject_is_named(tmp_path: Path) -> None:
    text = (ROOT / "pyproject.toml").read_text()
    assert '"alembic>=' in text
    (tmp_path / "pyproject.toml").write_text("\n".join(line for line in text.splitlines() if '"alembic>=' not in line))
    missing = undeclared(_py("pai"), Requirements.read(tmp_path / "pyproject.toml").runtime, LOCAL, ROOT)
    assert [m.module for m in missing] == ["alembic"]
    assert "alembic (distribution alembic) imported in pai/" in str(missing[0])


@pytest.mark.parametrize(
    ("source", "modules"),
    [
        pytest.param("import yaml, os.path", ["yaml", "os"], id="import-list"),
        pytest.param("from sqlalchemy.orm import Session", ["sqlalchemy"], id="from-import"),
        pytest.param("from . import sibling\nfrom .x import y", [], id="relative-imports-are-local"),
        pytest.param("def f():\n    import pynvml\n", ["pynvml"], id="import-inside-a-function"),
        pytest.param("importlib.import_module('docker.errors')", ["docker"], id="import-module-literal"),
    ],
)
def test_imports_are_read_from_source(source: str, modules: list[str]) -> None:
    assert list(imported_modules(source)) == modules


@pytest.mark.parametrize(
    ("module", "known", "declared", "missing"),
    [
        pytest.param("yaml", {"yaml": ["PyYAML"]}, {"pyyaml"}, False, id="module-named-unlike-its-distribution"),
        pytest.param("pynvml", {"pynvml": ["nvidia-ml-py"]}, {"nvidia-ml-py"}, False, id="nvidia-ml-py"),
        pytest.param("yaml", {"yaml": ["PyYAML"]}, {"click"}, True, id="installed-but-undeclared"),
        pytest.param("docker", {}, {"click"}, True, id="neither-installed-nor-declared"),
        pytest.param("json", {}, set(), False, id="stdlib"),
    ],
)
def test_declared_is_judged_by_distribution(tmp_path: Path, module: str, known: dict[str, list[str]],
                                            declared: set[str], missing: bool) -> None:
    (tmp_path / "m.py").write_text(f"import {module}\n")
    found = undeclared([tmp_path / "m.py"], frozenset(declared), frozenset(), tmp_path, known)
    assert bool(found) is missing


def test_requirement_names_compare_as_pep_503_does() -> None:
    assert normalize("psycopg[binary]>=3.1") == "psycopg"
    assert normalize("Nvidia_ML.Py >= 12") == "nvidia-ml-py"
    assert normalize("torch==2.13.0") == "torch"
