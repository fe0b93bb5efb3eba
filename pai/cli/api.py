"""The master's REST endpoints the CLI uses, one method each (paths and shapes of /tmp/rest_contract.md)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from pai.cli.http import HttpClient, quote_segment


@dataclass(frozen=True, slots=True)
class JobFilters:
    """Query of ``GET /api/v2/jobs``; ``None`` leaves a filter out."""

    username: str | None = None
    vc: str | None = None
    state: str | None = None
    keyword: str | None = None
    limit: int | None = None
    offset: int | None = None
    order: str = "desc"

    def query(self, *, with_total: bool) -> dict[str, str | int | None]:
        return {
            "username": self.username,
            "vc": self.vc,
            "state": self.state,
            "keyword": self.keyword,
            "offset": self.offset,
            "limit": self.limit,
            "order": self.order,
            "withTotalCount": "true" if with_total else None,
        }


def _job_path(key: str) -> str:
    return f"/api/v2/jobs/{quote_segment(key)}"


def _experiment_path(key: str) -> str:
    return f"/api/v2/experiments/{quote_segment(key)}"


class MasterApi:
    """Typed access to one master; every method raises pai.cli.errors.CliError subclasses on failure."""

    def __init__(self, http: HttpClient) -> None:
        self.http = http

    def login(self, username: str, password: str, expiration: int | None = None) -> dict[str, Any]:
        payload: dict[str, Any] = {"username": username, "password": password}
        if expiration is not None:
            payload["expiration"] = expiration
        result: dict[str, Any] = self.http.json("POST", "/api/v2/authn/basic/login", payload=payload)
        return result

    def logout(self) -> None:
        """Revoke the token this client presents."""
        self.http.json("DELETE", "/api/v2/authn/basic/logout")

    def submit(self, body: bytes, content_type: str) -> dict[str, Any]:
        resp = self.http.request("POST", "/api/v2/jobs", body=body, content_type=content_type)
        result: dict[str, Any] = self.http.decode_json("POST", "/api/v2/jobs", resp)
        return result

    def list_jobs(self, filters: JobFilters, *, with_total: bool = False) -> Any:
        """A list of JobSummary, or ``{"totalCount", "data"}`` when ``with_total``."""
        return self.http.json("GET", "/api/v2/jobs", query=filters.query(with_total=with_total))

    def job(self, key: str) -> dict[str, Any]:
        result: dict[str, Any] = self.http.json("GET", _job_path(key))
        return result

    def job_config(self, key: str) -> str:
        return self.http.request("GET", _job_path(key) + "/config").text()

    def stop_job(self, key: str) -> dict[str, Any]:
        result: dict[str, Any] = self.http.json("PUT", _job_path(key) + "/executionType", payload={"value": "STOP"})
        return result

    def task_log(self, key: str, role: str, index: int, stream: str, tail: int | None = None,
                 attempt: str | None = None) -> str:
        path = f"{_job_path(key)}/tasks/{quote_segment(role)}/{index}/logs/{stream}"
        return self.http.request("GET", path, query={"tail": tail, "attempt": attempt}).text()

    def follow_log(self, key: str, role: str, index: int, stream: str, tail: int | None = None,
                   since: str | None = None) -> AbstractContextManager[Iterator[bytes]]:
        """The task's log as it is written, across its attempts, until the task ends (chunks as they arrive)."""
        path = f"{_job_path(key)}/tasks/{quote_segment(role)}/{index}/logs/{stream}"
        return self.http.stream(path, query={"follow": "true", "tail": tail, "since": since})

    def masters(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.http.json("GET", "/api/v2/masters")
        return result

    def nodes(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.http.json("GET", "/api/v2/nodes")
        return result

    def set_node_state(self, name: str, state: str) -> dict[str, Any]:
        result: dict[str, Any] = self.http.json(
            "PUT", f"/api/v2/nodes/{quote_segment(name)}/state", payload={"value": state}
        )
        return result

    def virtual_clusters(self) -> dict[str, Any]:
        result: dict[str, Any] = self.http.json("GET", "/api/v2/virtual-clusters")
        return result

    # ---- experiments (issue 29) -------------------------------------------------------------------

    def create_experiment(self, body: bytes, content_type: str) -> dict[str, Any]:
        resp = self.http.request("POST", "/api/v2/experiments", body=body, content_type=content_type)
        result: dict[str, Any] = self.http.decode_json("POST", "/api/v2/experiments", resp)
        return result

    def experiments(self, username: str | None) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.http.json("GET", "/api/v2/experiments", query={"username": username})
        return result

    def experiment(self, key: str) -> dict[str, Any]:
        result: dict[str, Any] = self.http.json("GET", _experiment_path(key))
        return result

    def stop_experiment(self, key: str) -> dict[str, Any]:
        result: dict[str, Any] = self.http.json("PUT", _experiment_path(key) + "/executionType",
                                                payload={"value": "STOP"})
        return result

    def trial_metrics(self, trial_id: int, name: str | None = None) -> dict[str, Any]:
        """``{"trialId", "experiment", "number", "metrics": {name: [[step, value], ...]}}``."""
        result: dict[str, Any] = self.http.json("GET", f"/api/v2/trials/{trial_id}/metrics", query={"name": name})
        return result

    # ---- users and groups (OpenPAI's /api/v2/users and /api/v2/groups) ------------------------

    def users(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.http.json("GET", "/api/v2/users")
        return result

    def user(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self.http.json("GET", f"/api/v2/users/{quote_segment(name)}")
        return result

    def create_user(self, body: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = self.http.json("POST", "/api/v2/users", payload=body)
        return result

    def update_user(self, data: dict[str, Any]) -> dict[str, Any]:
        """An admin's patch of a user (``data`` names the user)."""
        result: dict[str, Any] = self.http.json("PUT", "/api/v2/users", payload={"patch": True, "data": data})
        return result

    def user_call(self, method: str, name: str, what: str = "", body: dict[str, Any] | None = None) -> Any:
        """``/api/v2/users/{name}[/what]``: delete, password, group (join or leave) and the like."""
        path = f"/api/v2/users/{quote_segment(name)}" + (f"/{what}" if what else "")
        return self.http.json(method, path, payload=body)

    def groups(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.http.json("GET", "/api/v2/groups")
        return result

    def group_call(self, method: str, name: str, what: str = "", body: dict[str, Any] | None = None) -> Any:
        """``/api/v2/groups/{name}[/what]``: get, delete, userlist."""
        path = f"/api/v2/groups/{quote_segment(name)}" + (f"/{what}" if what else "")
        return self.http.json(method, path, payload=body)

    def create_group(self, body: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = self.http.json("POST", "/api/v2/groups", payload=body)
        return result

    def update_group(self, data: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = self.http.json("PUT", "/api/v2/groups", payload={"patch": True, "data": data})
        return result
