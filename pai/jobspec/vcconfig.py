"""The cluster configuration (``job_schemas/vc-config.json``) and the bodies of the user and group API
(``job_schemas/users-api.json``): validation with errors naming the field."""

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

CONFIG_SCHEMA = "vc-config.json"
SCENARIO_SCHEMA = "vc-scenario.json"
USERS_API_SCHEMA = "users-api.json"


@cache
def _schema(name: str) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(resources.files("job_schemas").joinpath(name).read_text())
    return schema


@cache
def _validator(definition: str | None, name: str = CONFIG_SCHEMA) -> Draft202012Validator:
    schema = _schema(name)
    if definition is not None:  # validate one part (e.g. a single VC) against its definition
        schema = {**schema, "$ref": f"#/$defs/{definition}"}
        schema.pop("properties", None)
        schema.pop("additionalProperties", None)
        schema.pop("required", None)
        schema.pop("type", None)
    return Draft202012Validator(schema)


def _check(doc: Any, definition: str | None, prefix: str, name: str = CONFIG_SCHEMA) -> None:
    error = best_match(_validator(definition, name).iter_errors(doc))
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


def validate_storage(doc: Any) -> dict[str, Any]:
    """One entry of ``storages`` (the body of ``PUT /api/v2/storages/{name}``)."""
    _check(doc, "storage", "")
    assert isinstance(doc, dict)
    return doc


def load_cluster_config(text: str, source: str) -> dict[str, Any]:
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise InvalidParametersError(f"{source}: not valid YAML: {e}".replace("\n", " ")) from None
    return validate_cluster_config(doc)


def validate_scenario(doc: Any) -> dict[str, Any]:
    """A what-if scenario for ``pai vc simulate`` (``job_schemas/vc-scenario.json``); its ``vcs``, ``scheduler``
    and ``priorityClasses`` follow the cluster configuration's rules."""
    _check(doc, None, "", SCENARIO_SCHEMA)
    assert isinstance(doc, dict)
    for i, vc in enumerate(doc.get("vcs", [])):
        _check(vc, "virtualCluster", f"vcs[{i}]")
    if "scheduler" in doc:
        _check(doc["scheduler"], "scheduler", "scheduler")
    _check({"priorityClasses": doc.get("priorityClasses", {})}, None, "")
    return doc


def validate_users_api_body(doc: Any, definition: str) -> dict[str, Any]:
    """A body of the user and group API against its definition in ``job_schemas/users-api.json``."""
    if not isinstance(doc, dict):
        raise InvalidParametersError("body: must be a JSON object", field="body")
    _check(doc, definition, "", USERS_API_SCHEMA)
    return doc
