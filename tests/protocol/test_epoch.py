"""The launcher's epoch on what carries commands to an agent (the reply, the poke), and peers of either age."""

from __future__ import annotations

from typing import Any

import pytest

from pai.domain.resources import Resources
from pai.protocol import MasterReply, Poke, ProtocolError, StartTask, StopTask

START = StartTask("a1", "alice~job", "w", 0, "", "true", {}, Resources(0, 1, 128))


def test_a_reply_keeps_its_epoch_and_its_commands_through_json() -> None:
    reply = MasterReply((START, StopTask("a2")), 0.5, 20.0, 3.0, epoch=7)
    d = reply.to_dict()
    assert d["epoch"] == 7
    assert MasterReply.from_dict(d) == reply


def test_a_poke_keeps_its_epoch_through_json() -> None:
    poke = Poke("changed", epoch=7)
    assert poke.to_dict()["epoch"] == 7
    assert Poke.from_dict(poke.to_dict()) == poke


def test_a_master_that_predates_the_epoch_sends_epoch_0() -> None:
    old_reply = {"version": 1, "commands": [START.to_dict()], "heartbeatSeconds": 1.0}
    assert MasterReply.from_dict(old_reply) == MasterReply((START,), 1.0, epoch=0)
    assert Poke.from_dict({"version": 1, "type": "poke", "reason": "changed"}).epoch == 0


def test_what_a_message_does_not_know_it_ignores() -> None:
    """The rule that lets an agent of the epoch's age read a master of a later one (and, before the epoch,
    let an older agent read a reply that carried one): unknown keys are left alone."""
    later = {**MasterReply((START,), epoch=4).to_dict(), "somethingNewer": {"x": 1}}
    assert MasterReply.from_dict(later) == MasterReply((START,), epoch=4)
    assert Poke.from_dict({**Poke(epoch=4).to_dict(), "somethingNewer": 1}) == Poke(epoch=4)


BAD_EPOCHS = [
    pytest.param(-1, id="negative"),
    pytest.param("3", id="a string"),
    pytest.param(2.5, id="a fraction"),
    pytest.param(True, id="a boolean"),
    pytest.param(None, id="null"),
]


@pytest.mark.parametrize("epoch", BAD_EPOCHS)
def test_an_epoch_that_is_not_an_integer_of_0_or_more_is_a_protocol_error(epoch: Any) -> None:
    with pytest.raises(ProtocolError, match=r"^epoch: .* is not an integer >= 0$"):
        MasterReply.from_dict({**MasterReply().to_dict(), "epoch": epoch})
    with pytest.raises(ProtocolError, match=r"^epoch: "):
        Poke.from_dict({**Poke().to_dict(), "epoch": epoch})
