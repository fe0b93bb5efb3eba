"""The schemas are valid draft 2020-12 documents; the shipped examples parse and mean the same job."""

from __future__ import annotations

from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from pai.cli.experiments import is_experiment
from pai.cli.submit import prepare_spec
from pai.jobspec import ParsedJob, ProtocolVersion, load_schema, parse_job
from pai.jobspec.experiment import parse_experiment

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("version", list(ProtocolVersion))
def test_schema_is_valid_draft_2020_12(version: ProtocolVersion) -> None:
    schema = load_schema(version)
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["additionalProperties"] is False


def test_hello_examples_describe_the_same_job() -> None:
    v1 = parse_job((EXAMPLES / "hello-v1.json").read_bytes(), "application/json")
    v2 = parse_job((EXAMPLES / "hello-v2.yaml").read_bytes(), "application/yaml")
    assert (v1.protocol_version, v2.protocol_version) == (1, 2)
    assert (v1.spec.name, v2.spec.name) == ("hello-v1", "hello-v2")
    assert v1.spec.task_roles == v2.spec.task_roles
    assert [(r.name, r.instances) for r in v1.spec.task_roles] == [("ps", 1), ("worker", 2)]
    for role in v1.spec.task_roles:
        assert role.image == "busybox"
        assert (role.resources.cpu, role.resources.memory_mb, role.resources.gpu) == (1, 256, 0)
        assert "$PAI_TASK_ROLE_worker_HOST_LIST" in role.command
    assert v1.spec.code_dir == ""


def test_every_example_has_its_own_job_name() -> None:
    """The README submits the examples one after another to one cluster: a shared name would be a conflict (an
    experiment's trials are jobs named after it)."""
    names = {path.name: _name(path) for path in sorted(EXAMPLES.iterdir()) if path.suffix in (".json", ".yaml")}
    assert len(names) >= 3 and "experiment.yaml" in names
    assert len(set(names.values())) == len(names), names


def _name(path: Path) -> str:
    """A job example's name as submitted, or an experiment's, checked as the master checks it."""
    text = path.read_text()
    if is_experiment(text):
        return parse_experiment(text, "text/yaml").experiment.name
    return _as_submitted(path).spec.name


def _as_submitted(path: Path) -> ParsedJob:
    """An example as `pai submit` sends it (a relative codeDir resolved next to the file)."""
    prepared = prepare_spec(path.read_text(), str(path))
    return parse_job(prepared.body, prepared.content_type)


def test_torch_example_uses_its_code_dir() -> None:
    spec = _as_submitted(EXAMPLES / "torch-allreduce.json").spec
    role = spec.role("worker")
    assert (role.instances, role.resources.cpu, role.resources.memory_mb, role.resources.gpu) == (2, 1, 2048, 0)
    assert spec.code_dir == str(EXAMPLES / "torch_allreduce")  # relative to the spec file, as `pai submit` resolves it
    assert (Path(spec.code_dir) / "allreduce.py").is_file()
    assert "allreduce.py" in role.command
