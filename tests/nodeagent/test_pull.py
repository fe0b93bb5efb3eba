"""Image pull failures, classified from the Docker Engine's own words: named cases of the messages that Docker
Engine 20.10 answers (seen with tests/dockerkit.py's dockerd, or written by moby's distribution/errors.go)."""

from __future__ import annotations

import pytest

from pai.nodeagent.pull import Outcome, PullRetry, classify, failure
from pai.protocol import PlatformExit

MISSING, INVALID, DENIED, UNREACHABLE = Outcome.MISSING, Outcome.INVALID, Outcome.DENIED, Outcome.UNREACHABLE
REG = "127.0.0.1:5000"

CASES = [
    # (name, the engine's HTTP status or None (an error line in the pull's stream), its message, outcome)
    ("a tag the registry does not have", 404,
     f"manifest for {REG}/team/img:2 not found: manifest unknown: manifest unknown", MISSING),
    ("a repository the registry does not have", 404, f"repository {REG}/team/nope not found: name unknown: "
     "repository name not known to registry", MISSING),
    ("docker hub: no such repository (or private)", 404, "pull access denied for pai-test/absent, repository does "
     "not exist or may require 'docker login': denied: requested access to the resource is denied", MISSING),
    ("a registry answering its NAME_UNKNOWN code", 500, "name unknown", MISSING),
    ("no image for the node's platform", 404, "no matching manifest for linux/arm64/v8 in the manifest list entries",
     MISSING),
    ("a name with capitals", 400, "invalid reference format: repository name must be lowercase", INVALID),
    ("a 404 in words the table does not know", 404, "something else entirely", MISSING),
    ("connection refused", 500, 'Get "http://127.0.0.1:57585/v2/": dial tcp 127.0.0.1:57585: connect: '
     "connection refused", UNREACHABLE),
    ("DNS: no such host", 500, 'Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io on '
     "10.255.255.53:53: no such host", UNREACHABLE),
    ("DNS: server misbehaving", 500, 'Get "https://reg.example/v2/": dial tcp: lookup reg.example: '
     "server misbehaving", UNREACHABLE),
    ("DNS: temporary failure", 500, "Temporary failure in name resolution", UNREACHABLE),
    ("no route to host", 500, 'Get "https://10.1.2.3/v2/": dial tcp 10.1.2.3:443: connect: no route to host',
     UNREACHABLE),
    ("timeout awaiting headers", 500, 'Get "https://reg.example/v2/": net/http: request canceled while waiting for '
     "connection (Client.Timeout exceeded while awaiting headers)", UNREACHABLE),
    ("i/o timeout", 500, 'Get "https://reg.example/v2/": dial tcp 10.1.2.3:443: i/o timeout', UNREACHABLE),
    ("TLS handshake timeout", 500, 'Get "https://reg.example/v2/": net/http: TLS handshake timeout', UNREACHABLE),
    ("connection reset mid-layer", None, "read tcp 10.0.0.5:40312->10.1.2.3:443: read: connection reset by peer",
     UNREACHABLE),
    ("unexpected EOF mid-layer", None, "unexpected EOF", UNREACHABLE),
    ("registry 503", 500, "received unexpected HTTP status: 503 Service Unavailable", UNREACHABLE),
    ("registry 502", 500, "received unexpected HTTP status: 502 Bad Gateway", UNREACHABLE),
    ("registry 500 with a body that is not JSON", 500,
     "error parsing HTTP 500 response body: invalid character '<' looking for beginning of value", UNREACHABLE),
    ("rate limit (docker hub)", 500, "toomanyrequests: You have reached your pull rate limit. You may increase the "
     "limit by authenticating and upgrading: https://www.docker.com/increase-rate-limit", UNREACHABLE),
    ("rate limit (429 status)", 500, "received unexpected HTTP status: 429 Too Many Requests", UNREACHABLE),
    ("a layer the registry lost", None, "unknown blob", UNREACHABLE),
    ("an untrusted certificate", 500, 'Get "https://reg.example/v2/": x509: certificate signed by unknown authority',
     UNREACHABLE),
    ("a plain HTTP registry not listed as insecure", 500,
     'Get "https://reg.example:5000/v2/": http: server gave HTTP response to HTTPS client', UNREACHABLE),
    ("the node's disk full while extracting", None, "write /var/lib/docker/tmp/x: no space left on device",
     Outcome.NODE_DISK),
    ("the engine's data root read-only", 500, "mkdir /var/lib/docker/tmp/x: read-only file system", Outcome.NODE_DISK),
    ("the node's files refused", None, "open /var/lib/docker/image/overlay2/.tmp-x: permission denied", UNREACHABLE),
    ("the engine not answering", None, "('Connection aborted.', ConnectionResetError(104, 'Connection reset by "
     "peer'))", UNREACHABLE),
    ("words no case names", 500, "something nobody has seen", UNREACHABLE),
    ("an image whose name looks like a network error", 404,
     f"manifest for {REG}/team/eof-timeout:1 not found: manifest unknown: manifest unknown", MISSING),
    ("no credentials for a private registry", 500,
     f'Head "http://{REG}/v2/team/img/manifests/1": no basic auth credentials', DENIED),
    ("wrong credentials", 500, "unauthorized: authentication required", DENIED),
    ("wrong password (docker hub)", 500, "unauthorized: incorrect username or password", DENIED),
    ("a registry answering its DENIED code", 500, "denied", DENIED),
    ("gcr: no permission", 500, 'denied: Permission denied for "v1" from request "/v2/p/img/manifests/v1".',
     DENIED),
    ("a registry answering 403 without a body", 500, "received unexpected HTTP status: 403 Forbidden", DENIED),
]


@pytest.mark.parametrize(("name", "status", "message", "outcome"), CASES, ids=[c[0] for c in CASES])
def test_the_engines_words_decide_the_outcome(name: str, status: int | None, message: str, outcome: Outcome) -> None:
    assert classify(status, message).outcome is outcome


EXITS = [
    # (outcome, the attempt's exit code)
    (MISSING, PlatformExit.IMAGE_NOT_FOUND),
    (INVALID, PlatformExit.IMAGE_NOT_FOUND),
    (DENIED, PlatformExit.IMAGE_NOT_FOUND),
    (UNREACHABLE, PlatformExit.IMAGE_PULL_FAILED),
    (Outcome.NODE_DISK, PlatformExit.NODE_DISK_FULL),
]


@pytest.mark.parametrize(("outcome", "code"), EXITS, ids=[o.value for o, _ in EXITS])
def test_only_an_unreachable_registry_is_the_platforms_transient_exit(outcome: Outcome, code: PlatformExit) -> None:
    assert outcome.exit_code is code


def test_the_reason_names_the_case_and_quotes_the_engine() -> None:
    refused = 'Get "http://127.0.0.1:9/v2/": dial tcp 127.0.0.1:9: connect: connection refused'
    gone = failure("127.0.0.1:9/img:1", classify(500, refused), refused, 3)
    assert gone.exit_code == PlatformExit.IMAGE_PULL_FAILED
    assert gone.reason == f"image '127.0.0.1:9/img:1' could not be pulled (connection failed, 3 tries): {refused}"
    absent = "manifest for r/img:2 not found: manifest unknown: manifest unknown"
    missing = failure("r/img:2", classify(404, absent), absent, 1)
    assert (missing.exit_code, missing.reason) == (
        PlatformExit.IMAGE_NOT_FOUND, f"image 'r/img:2' does not exist (manifest unknown): {absent}")
    denied = failure("r/img:1", classify(500, "unauthorized: authentication required"), "unauthorized: x", 1)
    assert "registry credentials" in denied.reason and denied.reason.endswith("unauthorized: x")
    assert failure("r/img:1", classify(None, ""), "line\n  two\n" + "x" * 900, 1).reason.endswith(
        "line two " + "x" * 491)  # one line, at most 500 characters of the engine's words


RETRIES = [
    # (name, policy, the waits between tries)
    ("the default: 3 tries, 2 s then 4 s apart", PullRetry(), (2.0, 4.0)),
    ("one try: no wait", PullRetry(tries=1), ()),
    ("no tries still asks once", PullRetry(tries=0), ()),
    ("linear", PullRetry(tries=4, first_delay=1.0, factor=1.0), (1.0, 1.0, 1.0)),
]


@pytest.mark.parametrize(("name", "policy", "delays"), RETRIES, ids=[c[0] for c in RETRIES])
def test_the_backoff_between_tries(name: str, policy: PullRetry, delays: tuple[float, ...]) -> None:
    assert policy.delays() == delays
