"""A job's secrets at rest: masked in the ``jobs`` row, their values sealed in its ``sealed`` column.

A v2 job's ``secrets`` reach three places of its row: the submitted text (``config_text``), the normalized spec's
``secrets``, and whatever was rendered from them: every role's ``command`` (``<% $secrets.x %>``) and image
``auth``. For a job that has secrets or a registry login, the row keeps

- ``config_text``: the submitted document with every secret's value replaced by ``******`` (as ``/config`` shows it;
  JSON stays JSON, YAML is written again as YAML: comments are not kept);
- ``spec``: the same masking in ``secrets``, every role's ``command`` and ``image_auth`` (username and password);
- ``sealed``: one Fernet token (``pai.store.keyring``) of ``{"secrets", "roles": {name: {command, image_auth}}}``.

A job whose roles use the ssh plugin has a key pair (``JobSpec.ssh_private_key``): its private key is sealed in the
same token (``"ssh_private_key"``; the spec keeps ""), and a job with nothing else to seal keeps its commands clear.
A trial's job has its trial's token (``JobSpec.trial_token``), sealed the same way (``"trial_token"``).

A spec read back carries the token (``JobSpec.sealed``) and its masked fields: nothing that schedules, lists or
shows jobs needs more, so nothing but the start of a task (``unsealed``) ever decrypts, and the read front and the
list processes need no key. The functions on plain dicts (the ``codec.spec_to_dict`` form) also serve the migration
that sealed the rows written before (r0014).
"""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from typing import Any

import yaml
from sqlalchemy.orm import Session

from pai.domain.jobspec import SECRET_MASK, JobSpec, RegistryAuth
from pai.store.keyring import Keyring, SecretKeyError

KEYRING_INFO = "pai.keyring"  # Session.info key of the database's keyring (pai.store.db.Database)
MASKED_AUTH_FIELDS = ("username", "password")
_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


SSH_KEY = "ssh_private_key"
SEALED_SCALARS = (SSH_KEY, "trial_token")  # fields sealed whole; the spec keeps ""


def _has_secrets(spec: dict[str, Any]) -> bool:
    """Whether a spec dict has secrets or a registry login (masked or not)."""
    return spec.get("secrets") is not None or any(r.get("image_auth") is not None for r in spec["task_roles"])


def parts_of(spec: dict[str, Any]) -> dict[str, Any] | None:
    """What of a spec dict is sealed; None for a job with neither secrets nor a registry login nor an SSH key."""
    parts: dict[str, Any] = {}
    if _has_secrets(spec):
        roles: list[dict[str, Any]] = spec["task_roles"]
        parts = {"secrets": spec.get("secrets"),
                 "roles": {r["name"]: {"command": r["command"], "image_auth": r.get("image_auth")} for r in roles}}
    parts.update({name: spec[name] for name in SEALED_SCALARS if spec.get(name)})
    return parts or None


def masked_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` with what ``parts_of`` seals masked (masking a masked spec changes nothing)."""
    out = dict(spec)
    out.update({name: "" for name in SEALED_SCALARS if name in spec})
    if not _has_secrets(spec):
        return out
    if isinstance(spec.get("secrets"), dict):
        out["secrets"] = {key: SECRET_MASK for key in spec["secrets"]}
    out["task_roles"] = [_masked_role(r) for r in spec["task_roles"]]
    return out


def _masked_role(role: dict[str, Any]) -> dict[str, Any]:
    auth = role.get("image_auth")
    masked = {**role, "command": SECRET_MASK}
    if auth is not None:
        masked["image_auth"] = {**auth, **dict.fromkeys(MASKED_AUTH_FIELDS, SECRET_MASK)}
    return masked


def restored_spec(spec: dict[str, Any], parts: dict[str, Any]) -> dict[str, Any]:
    """A masked spec dict with its sealed ``parts`` put back (a migration's downgrade)."""
    roles = parts.get("roles") or {}
    restored = {**spec, "task_roles": [{**r, **roles[r["name"]]} if r["name"] in roles else r
                                       for r in spec["task_roles"]]}
    if "secrets" in parts:
        restored["secrets"] = parts["secrets"]
    restored.update({name: parts[name] for name in SEALED_SCALARS if name in parts})
    return restored


def seal(keyring: Keyring | None, parts: dict[str, Any]) -> str:
    if keyring is None:
        raise SecretKeyError("this job has secrets and no secret key is configured to seal them (PAI_SECRET_KEY or "
                             "the master's <data-dir>/secret-key)", source="none")
    return keyring.seal(json.dumps(parts, separators=(",", ":")).encode())


def open_parts(keyring: Keyring | None, token: str) -> dict[str, Any]:
    if keyring is None:
        raise SecretKeyError("this job's secrets are sealed and no secret key is configured to open them "
                             "(PAI_SECRET_KEY or the master's <data-dir>/secret-key)", source="none")
    parts: dict[str, Any] = json.loads(keyring.open(token))
    return parts


def stored(spec: dict[str, Any], sealed: str | None, keyring: Keyring | None) -> tuple[dict[str, Any], str | None]:
    """The ``spec`` and ``sealed`` columns of a spec dict: a spec read back (``sealed`` set) keeps its token; a new
    one with secrets is sealed now."""
    if sealed is not None:
        return masked_spec(spec), sealed
    parts = parts_of(spec)
    if parts is None:
        return spec, None
    return masked_spec(spec), seal(keyring, parts)


def unsealed(s: Session, spec: JobSpec) -> JobSpec:
    """``spec`` with its sealed fields in clear (for the agent that starts one of its tasks)."""
    if spec.sealed is None:
        return spec
    parts = open_parts(s.info.get(KEYRING_INFO), spec.sealed)
    roles = parts.get("roles") or {}

    def role_of(name: str, role: Any) -> Any:
        sealed = roles.get(name)
        if sealed is None:
            return role
        auth = sealed["image_auth"]
        return replace(role, command=sealed["command"], image_auth=None if auth is None else RegistryAuth(**auth))

    return replace(spec, secrets=parts.get("secrets", spec.secrets), sealed=None,
                   task_roles=tuple(role_of(r.name, r) for r in spec.task_roles),
                   ssh_private_key=str(parts.get(SSH_KEY, "")), trial_token=str(parts.get("trial_token", "")))


def masked_text(text: str) -> str:
    """A submitted document with its ``secrets`` values masked, written again in its own syntax; a document without a
    ``secrets`` mapping is returned as it is."""
    if "secrets" not in text:
        return text
    syntax = "json"
    try:
        doc = json.loads(text)
    except ValueError:
        syntax = "yaml"
        try:
            doc = yaml.load(text, Loader=_Loader)  # a safe loader (CSafeLoader where built)
        except yaml.YAMLError:
            return text
    if not isinstance(doc, dict) or not isinstance(doc.get("secrets"), dict):
        return text
    doc = copy.copy(doc)
    doc["secrets"] = {key: SECRET_MASK for key in doc["secrets"]}
    if syntax == "json":
        return json.dumps(doc, ensure_ascii=False, indent=2) + "\n"
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
