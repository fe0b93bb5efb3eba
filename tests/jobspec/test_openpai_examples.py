"""OpenPAI's own example jobs (tests/jobspec/openpai_examples/README.md: v1 at tag v0.14.0, v2 ``examples/`` and
``marketplace-v2/``) are accepted unmodified, through the entry point ``POST /api/v2/jobs`` uses, with the default
cluster settings; the one OpenPAI's REST server refuses too is refused, for the same reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from pai.domain.errors import InvalidProtocolError
from pai.domain.jobspec import SshPlugin
from pai.jobspec import ParsedJob, parse_job

EXAMPLES = Path(__file__).resolve().parent / "openpai_examples"
CONTENT_TYPES = {".json": "application/json", ".yaml": "text/yaml"}
# rel path -> (field, words of the message), and why OpenPAI refuses it too.
REFUSED = {
    # OpenPAI's REST server reads JSON with body-parser (JSON.parse): no comments. v0.14's web portal stripped
    # them from a file it imported, before it posted the job.
    "v1/mpi/cntk-mpi.json": ("", "malformed JSON: Expecting property name enclosed in double quotes at line 5"),
}
# What pai accepts in these examples and does not do: the ssh plugin's jobssh in a job with gangAllocation: false
# (OpenPAI's plugin turns it off there too).
UNHONOURED = {"extras.com.microsoft.pai.runtimeplugin[0].parameters.jobssh"}


def _examples() -> list[str]:
    return sorted(str(p.relative_to(EXAMPLES)) for p in EXAMPLES.rglob("*") if p.suffix in CONTENT_TYPES)


ACCEPTED = [rel for rel in _examples() if rel not in REFUSED]


def _parse(rel: str) -> ParsedJob:
    path = EXAMPLES / rel
    return parse_job(path.read_bytes(), CONTENT_TYPES[path.suffix])


def test_every_example_was_copied() -> None:
    folders = [rel.split("/", 1)[0] for rel in _examples()]
    assert {f: folders.count(f) for f in set(folders)} == {"v1": 22, "v2": 17, "marketplace-v2": 13}


@pytest.mark.parametrize("rel", ACCEPTED)
def test_openpai_example_is_accepted(rel: str) -> None:
    parsed = _parse(rel)
    text = (EXAMPLES / rel).read_text()
    doc = json.loads(text) if rel.endswith(".json") else yaml.safe_load(text)
    assert parsed.protocol_version == (1 if rel.startswith("v1/") else 2)
    assert len(parsed.spec.task_roles) == len(doc["taskRoles"])
    assert {w.field for w in parsed.warnings} <= UNHONOURED


@pytest.mark.parametrize(("rel", "field", "words"), [(rel, *why) for rel, why in REFUSED.items()])
def test_openpai_example_openpai_refuses_too(rel: str, field: str, words: str) -> None:
    with pytest.raises(InvalidProtocolError) as caught:
        _parse(rel)
    assert caught.value.field == field and words in caught.value.message


@pytest.mark.parametrize(("rel", "retry_count"), [("v1/serving/serving.tensorflow.json", -2),
                                                  ("v1/ocr-serving/serving.ocr.json", -2),
                                                  ("v1/pytorch/pytorch.mnist.json", 0)])
def test_v014_serving_examples_retry_after_every_exit(rel: str, retry_count: int) -> None:
    assert _parse(rel).spec.retry_count == retry_count


def test_v014_paths_keep_openpais_variables_for_submission() -> None:
    """``$PAI_DEFAULT_FS_URI`` and ``$PAI_USERNAME`` are replaced when the job is submitted (pai.domain.pathvars)."""
    spec = _parse("v1/cntk/cntk.g2p.json").spec
    assert spec.code_dir == "$PAI_DEFAULT_FS_URI/$PAI_USERNAME/examples/cntk/code"


def test_the_ssh_plugin_the_v2_examples_ask_for_is_honoured() -> None:
    parsed = _parse("v2/pytorch_cifar10/yaml/Resnet18_1gpu.yaml")
    assert parsed.warnings == ()
    assert [r.ssh for r in parsed.spec.task_roles] == [SshPlugin(job_ssh=True)]


def test_the_horovod_example_waits_at_the_ssh_barrier_before_its_commands() -> None:
    role = _parse("marketplace-v2/horovod-pytorch-synthetic-benchmark.yaml").spec.task_roles[0]
    assert role.ssh == SshPlugin(job_ssh=True)
    barrier, _, rest = role.command.partition("sshbarrier: every task answers over SSH")
    assert 'left="master-0 worker-0"' in barrier and "mpirun" in rest
