"""The one route table."""

from __future__ import annotations

from aiohttp import web

from pai.rest_server import (
    attempts,
    authn,
    execrelay,
    experiments,
    groups,
    jobs,
    logfollow,
    metrics,
    openapi,
    proxy,
    proxy_auth,
    ssh,
    storages,
    submit,
    templates,
    tunnel,
    users,
    vcs,
)
from pai.rest_server import handlers as h
from pai.rest_server.dashboard import asset, index
from pai.rest_server.leading import list_masters
from pai.rest_server.stats import job_counts, usage_history, vc_queue

JOB = "/api/v2/jobs/{key:[^/]+}"  # user~job; another name is answered NoJobError (OpenPAI's VS Code extension asks
# for /api/v2/jobs/protocolversion/config and takes NoApiError to mean a v1-only cluster)
V1_JOB = "/api/v1/user/{user}/jobs/{name}"  # OpenPAI v0.14's
EXPERIMENT = "/api/v2/experiments/{key:[^/]+}"  # user~experiment
TRIAL = "/api/v2/trials/{trial:\\d{1,18}}"
PROXY = "/proxy/{key:[^/]+}/{role}/{index}/{label}{tail:(/.*)?}"
TASK = JOB + "/attempts/{attempt:\\d+}/taskRoles/{role}/taskIndex/{index:\\d+}/attempts"  # a task in a job attempt

_users: list[web.RouteDef] = [
    web.get("/api/v1", h.api_v1),
    web.get("/api/v2/info", h.info),
    web.get("/api/v2/openapi.json", openapi.openapi_json),  # job_schemas/openapi.yaml
    *[route for v in ("v1", "v2") for route in (
        web.post(f"/api/{v}/authn/basic/login", authn.login),
        web.delete(f"/api/{v}/authn/basic/logout", authn.logout),
        web.get(f"/api/{v}/authn/info", authn.authn_info),
    )],
    *[route for base in ("/api/v1/token", "/api/v2/tokens") for route in (
        web.post(base, authn.login),
        web.get(base, authn.list_tokens),
        web.post(base + "/application", authn.application_token),
        web.get(base + "/check", authn.check_token),
        web.delete(base + "/{token}", authn.revoke_token),
    )],
    web.get("/api/v2/users", users.list_users),
    web.post("/api/v2/users", users.create_user),
    web.put("/api/v2/users", users.update_user),
    web.put("/api/v2/users/me", users.update_me),
    web.get("/api/v2/users/{user}", users.get_user),
    web.delete("/api/v2/users/{user}", users.delete_user),
    web.put("/api/v2/users/{user}/password", users.set_password),
    web.put("/api/v2/users/{user}/email", users.set_email),
    web.put("/api/v2/users/{user}/admin", users.set_admin),
    web.put("/api/v2/users/{user}/virtualcluster", users.set_virtual_clusters),
    web.put("/api/v2/users/{user}/extension", users.set_extension),
    web.put("/api/v2/users/{user}/grouplist", users.set_group_list),
    web.put("/api/v2/users/{user}/group", users.add_group),
    web.delete("/api/v2/users/{user}/group", users.remove_group),
    web.get("/api/v2/groups", groups.list_groups),
    web.post("/api/v2/groups", groups.create_group),
    web.put("/api/v2/groups", groups.update_group),
    web.get("/api/v2/groups/{group}", groups.get_group),
    web.delete("/api/v2/groups/{group}", groups.delete_group),
    web.get("/api/v2/groups/{group}/userlist", groups.group_users),
    web.put("/api/v2/groups/{group}/description", groups.set_description),
    web.put("/api/v2/groups/{group}/externalname", groups.set_external_name),
    web.put("/api/v2/groups/{group}/extension", groups.set_extension),
    web.put("/api/v2/groups/{group}/extension/{attr:.+}", groups.set_extension_attr),
    web.post("/api/v1/user/{user}/jobs", submit.submit_v1),
    web.post("/api/v1/jobs", submit.submit_v1),
    web.put("/api/v1/jobs/{name}", submit.submit_v1),
    web.put(V1_JOB, submit.submit_v1),
    web.get("/api/v1/jobs", jobs.list_jobs),
    web.get("/api/v1/jobs/{key}", jobs.job_detail_handler),
    web.delete("/api/v1/jobs/{key}", jobs.delete_job),
    web.delete(V1_JOB, jobs.delete_job),
    web.get("/api/v1/user/{user}/jobs", jobs.list_jobs),
    web.get(V1_JOB, jobs.job_detail_handler),
    web.get(V1_JOB + "/config", jobs.job_config),
    web.put(V1_JOB + "/executionType", jobs.execution_type),
    web.post("/api/v2/jobs", submit.submit_v2),  # ?dryRun=true: checked, not stored
    web.get("/api/v2/job-templates", templates.list_templates),  # examples/, for the dashboard's editor
    web.get("/api/v2/jobs", jobs.list_jobs),
    web.get(JOB, jobs.job_detail_handler),
    web.get(JOB + "/config", jobs.job_config),
    web.get(JOB + "/attempts", jobs.job_attempts),
    web.get(JOB + "/attempts/{attempt:\\d+}", attempts.attempt_detail),
    web.get(TASK, attempts.task_detail),
    web.get(TASK + "/{task_attempt:\\d+}/logs", attempts.task_logs),
    web.get(JOB + "/job-attempts", attempts.list_job_attempts),
    web.get(JOB + "/job-attempts/healthz", attempts.job_attempts_healthz),
    web.get(JOB + "/job-attempts/{attempt:\\d+}", attempts.job_attempt),
    web.get(JOB + "/events", attempts.events),
    web.put(JOB + "/tag", jobs.add_tag),
    web.delete(JOB + "/tag", jobs.delete_tag),
    web.get(JOB + "/ssh", ssh.ssh_info),
    web.get(JOB + "/ssh/" + ssh.PRIVATE, ssh.private_key),
    web.get(JOB + "/ssh/" + ssh.PUBLIC, ssh.public_key),
    web.put(JOB + "/executionType", jobs.execution_type),
    web.get(JOB + "/tasks/{role}/{index}/logs/{stream:stdout|stderr}", logfollow.task_log),
    web.get(JOB + "/tasks/{role}/{index}/exec", execrelay.exec_task),  # a WebSocket
    web.get(JOB + "/tasks/{role}/{index}/ports/{label}/tunnel", tunnel.tunnel),  # WebSocket <-> the task's port
    web.put(JOB + "/priority", vcs.put_priority),
    web.post("/api/v2/experiments", experiments.create),
    web.get("/api/v2/experiments", experiments.list_experiments),
    web.get(EXPERIMENT, experiments.experiment_detail),
    web.put(EXPERIMENT + "/executionType", experiments.execution_type),
    web.post(TRIAL + "/metrics", experiments.report),  # a trial's token (pai_trial)
    web.get(TRIAL + "/metrics", experiments.metrics),
    web.post(TRIAL + "/checkpoints", experiments.add_checkpoint),
    web.get(TRIAL + "/checkpoints", experiments.checkpoints),
    web.get(TRIAL + "/checkpoints/latest", experiments.latest_checkpoint),
    web.get("/api/v2/nodes", h.list_nodes),
    web.get("/api/v2/masters", list_masters),
    web.get("/api/v2/cluster/sku-types", h.sku_types),
    web.get("/api/v2/cluster/job-counts", job_counts),
    web.get("/api/v2/virtual-clusters/{vc}/usage-history", usage_history),
    web.get("/api/v2/virtual-clusters/{vc}/queue", vc_queue),
    web.get("/api/v2/virtual-clusters/{vc}/sku-types", h.sku_types),
    web.get("/api/v2/storages", storages.list_storages),
    web.get("/api/v2/storages/{name}", storages.get_storage),
    web.put("/api/v2/storages/{name}", storages.put_storage),  # admins
    web.delete("/api/v2/storages/{name}", storages.delete_storage),
    web.put("/api/v2/nodes/{node}/state", h.set_node_state),
    web.get("/api/v1/virtual-clusters", vcs.list_vcs),
    web.get("/api/v2/virtual-clusters", vcs.list_vcs),
    web.get("/api/v1/virtual-clusters/{vc}", vcs.get_vc),
    web.get("/api/v2/virtual-clusters/{vc}", vcs.get_vc),
    web.put("/api/v1/virtual-clusters/{vc}", vcs.put_vc_v1),
    web.put("/api/v2/virtual-clusters/{vc}", vcs.put_vc_v2),
    web.put("/api/v1/virtual-clusters/{vc}/status", vcs.put_vc_status),
    web.put("/api/v2/virtual-clusters/{vc}/status", vcs.put_vc_status),
    web.delete("/api/v1/virtual-clusters/{vc}", vcs.delete_vc),
    web.delete("/api/v2/virtual-clusters/{vc}", vcs.delete_vc),
    web.post("/api/v2/proxy/session", proxy_auth.open_session),  # the pai_proxy cookie of a browser
    web.delete("/api/v2/proxy/session", proxy_auth.close_session),
    web.route("*", PROXY, proxy.proxy),  # a task's labelled port, HTTP and WebSocket (pai.rest_server.proxy)
    web.get("/", index),  # the dashboard (pai/rest_server/dashboard/static/)
    web.get("/dashboard/{file:[A-Za-z0-9_.-]+}", asset),
]

_monitor: list[web.RouteDef] = [
    web.get("/healthz", h.healthz),
    web.get("/metrics", metrics.metrics),  # Prometheus
    web.get("/metrics/agents", metrics.agent_targets),  # Prometheus's http_sd_configs
]

AGENTS = ("/api/internal/agents/register", "/api/internal/agents/{node}/heartbeat",
          "/api/internal/agents/{node}/channel")
_agents: list[web.RouteDef] = [
    web.post(AGENTS[0], h.agent_register),
    web.post(AGENTS[1], h.agent_heartbeat),
    web.get(AGENTS[2], h.agent_channel),
]
# An API worker's answer to an agent: the leading launcher's URL (NotLeaderError), where the agent goes
_elsewhere: list[web.RouteDef] = [web.route(r.method, r.path, h.agent_elsewhere) for r in _agents]


def _slash_optional(route: web.RouteDef) -> web.RouteDef:
    """``/api/...`` answers with or without a trailing slash, as OpenPAI's (Express) routes do: its JS SDK asks for
    ``/api/v2/users/``."""
    if not route.path.startswith("/api/"):
        return route
    return web.RouteDef(route.method, route.path + "{trailing_slash:/?}", route.handler, route.kwargs)


PYLON = "/rest-server"  # where OpenPAI's pylon serves the rest-server's API: its clients call /rest-server/api/...


def _under_pylon(routes: list[web.RouteDef]) -> list[web.RouteDef]:
    """The API's routes also under ``/rest-server`` (OpenPAI's VS Code extension and Python SDK ask there)."""
    return [web.RouteDef(r.method, PYLON + r.path, r.handler, r.kwargs) for r in routes if r.path.startswith("/api/")]


_api = [_slash_optional(r) for r in _users]
user_routes: list[web.RouteDef] = [*_api, *_under_pylon(_api)]
monitor_routes: list[web.RouteDef] = _monitor
agent_routes: list[web.RouteDef] = [_slash_optional(r) for r in _agents]
elsewhere_routes: list[web.RouteDef] = [_slash_optional(r) for r in _elsewhere]
routes: list[web.RouteDef] = [*user_routes, *monitor_routes, *agent_routes]  # the whole master's (SQLite)
