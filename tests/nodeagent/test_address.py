"""The node's address against its masters' URLs (pai.nodeagent.address): a loopback or missing address is refused
when a master is on another machine, where it would register a node that nobody can reach."""

from __future__ import annotations

import pytest

from pai.nodeagent.address import is_loopback, node_address

LOCAL, REMOTE = "http://127.0.0.1:9186", "http://m1.example:9188"


@pytest.mark.parametrize(
    ("address", "masters", "expected"),
    [
        pytest.param("", [LOCAL], "127.0.0.1", id="unset-local-master"),
        pytest.param(None, ["http://localhost:9186"], "127.0.0.1", id="unset-localhost-master"),
        pytest.param(" ", ["http://[::1]:9186"], "127.0.0.1", id="blank-ipv6-loopback-master"),
        pytest.param("127.0.0.2", [LOCAL], "127.0.0.2", id="loopback-local-master"),
        pytest.param("10.0.0.7", [LOCAL], "10.0.0.7", id="cluster-ip-local-master"),
        pytest.param("10.0.0.7", [REMOTE], "10.0.0.7", id="cluster-ip-remote-master"),
        pytest.param("10.0.0.7", [LOCAL, REMOTE], "10.0.0.7", id="cluster-ip-mixed-masters"),
    ],
)
def test_an_address_that_works_is_kept_and_none_on_one_machine_is_loopback(
        address: str | None, masters: list[str], expected: str) -> None:
    assert node_address(address, masters) == expected


@pytest.mark.parametrize(
    ("address", "masters", "said"),
    [
        pytest.param("", [REMOTE], "is not set", id="unset-remote-master"),
        pytest.param(None, ["http://10.0.0.2:9188"], "is not set", id="unset-remote-ip-master"),
        pytest.param("127.0.0.1", [REMOTE], "is 127.0.0.1, a loopback address,", id="loopback-remote-master"),
        pytest.param("::1", [REMOTE], "is ::1, a loopback address,", id="ipv6-loopback-remote-master"),
        pytest.param("localhost", [REMOTE], "is localhost, a loopback address,", id="localhost-remote-master"),
        pytest.param("127.0.0.1", [LOCAL, REMOTE], "is 127.0.0.1, a loopback address,", id="one-of-two-masters-remote"),
    ],
)
def test_a_missing_or_loopback_address_with_a_master_elsewhere_is_refused_naming_the_setting(
        address: str | None, masters: list[str], said: str) -> None:
    with pytest.raises(ValueError) as info:
        node_address(address, masters)
    assert str(info.value).startswith(f"--address (PAI_AGENT_ADDRESS in /etc/pai/agent.env) {said} but the master "
                                      f"{masters[-1]} is not on this machine: set it to this machine's cluster IP")


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.1.2.3", True), ("::1", True), ("[::1]", True), ("localhost", True),
    ("LOCALHOST", True), ("a.localhost", True), ("10.0.0.1", False), ("0.0.0.0", False), ("m1.example", False),
    ("", False), (None, False)])
def test_is_loopback(host: str | None, loopback: bool) -> None:
    assert is_loopback(host) is loopback
