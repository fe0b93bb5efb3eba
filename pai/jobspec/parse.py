"""parse_job: a submitted body (v1 JSON or v2 YAML) -> a validated, normalized :class:`ParsedJob`."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pai.domain.jobspec import PRIORITY_CLASSES, SECRET_MASK, JobSpec, SpecWarning
from pai.domain.limits import DEFAULT_JOB_LIMITS, JobLimits
from pai.jobspec import v1, v2
from pai.jobspec.decode import Syntax, decode
from pai.jobspec.limits import check_job_limits
from pai.jobspec.schema import ProtocolVersion, validate
from pai.jobspec.unhonoured import unhonoured

MASK = SECRET_MASK


@dataclass(frozen=True, slots=True)
class ParsedJob:
    spec: JobSpec
    protocol_version: int
    config: dict[str, Any]  # the document as submitted (templates unrendered, secrets in clear)
    text: str  # the body as submitted
    warnings: tuple[SpecWarning, ...] = ()  # fields accepted and not honoured on this cluster


def parse_job(
    body: bytes | str,
    content_type: str | None = None,
    priority_classes: Mapping[str, int] = PRIORITY_CLASSES,
    limits: JobLimits = DEFAULT_JOB_LIMITS,
) -> ParsedJob:
    """Decode, validate and normalize a job spec.

    Raises ``domain.InvalidProtocolError`` (``.field`` = the field path) for malformed JSON/YAML, a body that is
    not a mapping or is nested too deeply, a schema violation, a job past the cluster's ``limits`` or a broken
    reference between sections. Everything is checked before anything is built for the job's tasks. What is
    accepted but not honoured on this cluster is in ``warnings``.
    """
    decoded = decode(body, content_type)
    version = ProtocolVersion.of(decoded.config, from_json=decoded.syntax is Syntax.JSON)
    validate(decoded.config, version)
    check_job_limits(decoded.config, version, limits)
    config = copy.deepcopy(decoded.config)  # normalizing must never change what /config returns
    normalize = v1.normalize if version is ProtocolVersion.V1 else v2.normalize
    spec = normalize(config, priority_classes)
    warnings = unhonoured(decoded.config, version)
    return ParsedJob(spec=spec, protocol_version=int(version), config=decoded.config, text=decoded.text,
                     warnings=warnings)


def stored_config(text: str) -> tuple[dict[str, Any], int]:
    """A job's submitted text as it was accepted, with secrets masked, and its protocol version; not validated
    again (for ``/config``): the cluster's priority classes may have changed since, and what was accepted
    stays readable."""
    decoded = decode(text, bounded=False)
    version = ProtocolVersion.of(decoded.config, from_json=decoded.syntax is Syntax.JSON)
    return mask_secrets(decoded.config), int(version)


def masked_config(parsed: ParsedJob) -> dict[str, Any]:
    """The submitted config with every secret value replaced by ``"******"`` (for ``/config``)."""
    return mask_secrets(parsed.config)


def mask_secrets(config: dict[str, Any]) -> dict[str, Any]:
    config = copy.deepcopy(config)
    secrets = config.get("secrets")
    if isinstance(secrets, dict):
        config["secrets"] = {key: MASK for key in secrets}
    return config
