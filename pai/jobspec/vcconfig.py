"""The cluster configuration (``job_schemas/vc-config.json``): validation with errors naming the field."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

import yaml
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from pai.domain.errors import InvalidParametersError
from pai.jobspec.schema import describe


@cache
def _schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(resources.files("job_schemas").joinpath("vc-config.json").read_text())
    return schema


@cache
def _validator(definition: str | None) -> Draft202012Validator:
    schema = _schema()
    if definition is not None:  # validate one part (e.g. a single VC) against its definition
        schema = {**schema, "$ref": f"#/$defs/{definition}"}
        schema.pop("properties", None)
        schema.pop("additionalProperties", None)
        schema.pop("type", None)
    return Draft202012Validator(schema)


def _check(doc: Any, definition: str | None, prefix: str) -> None:
    error = best_match(_validator(definition).iter_errors(doc))
    if error is not None:
        field, rule = describe(error)
        path = f"{prefix}.{field}" if prefix and field else (field or prefix or "<root>")
        raise InvalidParametersError(f"{path}: {rule}", field=path)


def validate_cluster_config(doc: Any) -> dict[str, Any]:
    """A whole configuration document (the file ``pai master --vc-config`` reads)."""
    _check(doc, None, "")
    assert isinstance(doc, dict)
    return doc


def validate_vc(doc: Any) -> dict[str, Any]:
    """One entry of ``virtualClusters`` (the body of ``PUT /api/v2/virtual-clusters/{vc}``)."""
    _check(doc, "virtualCluster", "")
    assert isinstance(doc, dict)
    return doc


def load_cluster_config(text: str, source: str) -> dict[str, Any]:
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise InvalidParametersError(f"{source}: not valid YAML: {e}".replace("\n", " ")) from None
    return validate_cluster_config(doc)
