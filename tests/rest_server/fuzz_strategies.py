"""Hypothesis strategies for bad input: job specs with one to three nasty mutations, raw bodies with any content
type, JSON bodies for every JSON endpoint, and URLs with odd segments and queries."""

from __future__ import annotations

import copy
import json
from typing import Any
from urllib.parse import quote

import yaml
from hypothesis import strategies as st

from tests.jobspec.builders import v1_job, v1_role, v2_job, v2_role

Path = tuple[str | int, ...]


def _nested(levels: int) -> Any:
    value: Any = "leaf"
    for _ in range(levels):
        value = [value]
    return value


LONG_TEXT = st.builds(lambda n, c: c * n, st.sampled_from([65, 256, 4097, 32_769, 65_537, 100_000]),
                      st.sampled_from(["x", "é", "\x00", "\U0001d54f", "<% $parameters.p %>"]))
NASTY_TEXT = st.sampled_from(["", " ", "a\x00b", "\ud800", "\udfff x", "..", "/etc/passwd", "hdfs://h:1/../x",
                              "<% $secrets.nope %>", "<% $parameters.p[99999999999999] %>", "${{x}}", "\u202e", "²"])
HUGE_INTS = st.sampled_from([2**31 - 1, 2**31, 2**53, 2**63, 2**64, 10**400, -1, -(2**63) - 1, 0, 65_536, 10_001])
NASTY = st.one_of(
    HUGE_INTS,
    st.integers(),
    st.floats(),  # NaN and infinities included: JSON carries them as NaN/Infinity tokens, YAML as .nan/.inf
    st.booleans(),
    st.none(),
    st.text(max_size=20),
    LONG_TEXT,
    NASTY_TEXT,
    st.integers(min_value=1, max_value=200).map(_nested),
    st.lists(st.integers(), max_size=4),
    st.dictionaries(st.text(max_size=6), st.integers(), max_size=3),
)


def _paths(doc: Any, prefix: Path = ()) -> list[Path]:
    out: list[Path] = []
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else []
    for key, value in items:
        out.append((*prefix, key))
        out.extend(_paths(value, (*prefix, key)))
    return out


def _mutate(doc: Any, path: Path, action: str, value: Any) -> None:
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    last = path[-1]
    if action == "delete":
        del parent[last]
    elif action == "add" and isinstance(parent, dict):
        parent[f"unknown{len(parent)}"] = value
    else:
        parent[last] = value


def _base(version: int) -> dict[str, Any]:
    if version == 1:
        return v1_job(v1_role(portList=[{"label": "p", "beginAt": 0, "portNumber": 1}]), jobEnvs={"E": "v"},
                      retryCount=1, extras={"gangAllocation": True})
    roles = {"worker": v2_role(commands=["echo <% $parameters.p %>"], taskRetryCount=1)}
    return v2_job(roles, parameters={"p": "x"}, secrets={"s": "y"}, jobRetryCount=1,
                  defaults={"virtualCluster": "default"})


def _serialize(doc: dict[str, Any], syntax: str) -> bytes:
    if syntax == "yaml":
        try:
            return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True).encode("utf-8", "surrogatepass")
        except (yaml.YAMLError, RecursionError):
            pass
    return json.dumps(doc).encode()


@st.composite
def mutated_specs(draw: st.DrawFn) -> tuple[bytes, str | None]:
    """A valid v1 or v2 job after one to three mutations (replace, delete, add an unknown field)."""
    doc = copy.deepcopy(_base(draw(st.sampled_from([1, 2]))))
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        paths = _paths(doc)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        _mutate(doc, path, draw(st.sampled_from(["replace", "replace", "delete", "add"])), draw(NASTY))
    body = _serialize(doc, draw(st.sampled_from(["json", "yaml"])))
    return body, draw(st.sampled_from([None, "application/json", "text/yaml", "application/yaml", "text/plain"]))


DEEP_YAML = ("a:\n" + "".join("  " * i + "- \n" for i in range(1, 300))).encode()
ALIAS_BOMB = "\n".join(["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
                       + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]).encode()
RAW_SAMPLES = [
    b"[" * 100_000, b"{" * 100_000, b"{", b"[", b"}", b"\x00" * 16, b"{\x00}", b"\xef\xbb\xbf{", b"\xff\xfe\x00",
    DEEP_YAML, ALIAS_BOMB, b"a: &a [*a]", b"9" * 5000, b'{"jobName": ' + b"9" * 5000 + b"}", b'{"a": 1e400}',
    b'{"a": NaN}', b"!!python/object/apply:os.system [ls]", b"a: !!binary a", b"a: !!set {b}", b"---\n...\n---\n",
    b"- [" * 2000, b'{"a":' * 10_000, b"a: " + b"b" * 100_000, b"a:\n\t- b", b"? [a]\n: 1", b'"\\ud800"',
    b'{"jobName": "\\u0000"}', b"{protocolVersion: 2, taskRoles: {" + b"a" * 70 + b": {}}}",
]
CONTENT_TYPES = st.one_of(
    st.none(),
    st.sampled_from(["application/json", "text/yaml", "application/x-yaml", "text/plain", "multipart/form-data",
                     "application/json; charset=latin-1", "application/octet-stream", "*/*", "json", ";;;"]),
    st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=40),
)
RAW_BODIES = st.one_of(
    st.sampled_from(RAW_SAMPLES),
    st.binary(max_size=512),
    st.text(max_size=512).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.text(alphabet="[]{}:,-&*!|>?# \n\t\"'0123456789.eE", max_size=400).map(str.encode),
)

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | HUGE_INTS | st.floats() | st.text(max_size=12) | NASTY_TEXT,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=8,
)
# (method, path, which token, keys a valid body would have)
JSON_ENDPOINTS = [
    ("POST", "/api/v2/authn/basic/login", "none", ["username", "password", "expiration"]),
    ("PUT", "/api/v2/jobs/admin~nope/executionType", "user", ["value"]),
    ("PUT", "/api/v2/jobs/admin~nope/priority", "user", ["value"]),
    ("PUT", "/api/v1/virtual-clusters/fuzz", "user", ["vcCapacity", "vcMaxCapacity"]),
    ("PUT", "/api/v2/virtual-clusters/fuzz", "user", ["guaranteed", "max", "lendingLimit", "userLimits", "name"]),
    ("PUT", "/api/v2/virtual-clusters/fuzz/status", "user", ["vcStatus"]),
    ("PUT", "/api/v2/nodes/nope/state", "user", ["value"]),
    ("PUT", "/api/v2/storages/fuzz", "user", ["name", "path", "readOnly", "groups", "default"]),
    ("POST", "/api/internal/agents/nope/heartbeat", "agent", ["node", "containers", "resources"]),
]


@st.composite
def json_requests(draw: st.DrawFn) -> tuple[str, str, str, bytes]:
    method, path, token, keys = draw(st.sampled_from(JSON_ENDPOINTS))
    body: Any = draw(st.one_of(
        JSON_VALUES,
        st.fixed_dictionaries({}, optional={k: st.one_of(NASTY, JSON_VALUES) for k in keys}),
    ))
    return method, path, token, json.dumps(body).encode("utf-8", "surrogatepass")


SEGMENTS = st.one_of(st.text(max_size=30).map(lambda s: quote(s.encode("utf-8", "surrogatepass"), safe="")),
                     st.sampled_from(["%ff", "%00", "%2e%2e", "%2F", "..", "~", "a~b", "%c0%af", "x" * 300]))
URL_TEMPLATES = ["/api/v2/jobs/{}~{}", "/api/v2/jobs/{}~{}/config", "/api/v2/jobs/{}~{}/attempts",
                 "/api/v2/jobs/{}~{}/tasks/{}/{}/logs/stdout", "/api/v2/virtual-clusters/{}", "/api/v1/user/{}/jobs",
                 "/api/v2/jobs?username={}&vc={}&keyword={}&state={}", "/api/v2/jobs?offset={}&limit={}&order={}",
                 "/{}/{}", "/api/v2/nodes/{}/state", "/api/v2/storages/{}"]


@st.composite
def urls(draw: st.DrawFn) -> tuple[str, str]:
    template = draw(st.sampled_from(URL_TEMPLATES))
    segments = [draw(SEGMENTS) for _ in range(template.count("{}"))]
    return draw(st.sampled_from(["GET", "GET", "POST", "PUT", "DELETE"])), template.format(*segments)
