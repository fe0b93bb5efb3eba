"""pai_trial against ``FakeMaster``: a stdlib HTTP server standing in for the master's trial routes (which a later
change adds), recording every request. It keeps the first value per (step, name), answers ``stop`` once told to,
and can drop connections or answer 503 a number of times, or not listen yet."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

import pai_trial
from pai_trial import MasterUnreachableError, TrialClient, TrialError

TOKEN = "the-trials-token"


@dataclass
class Recorded:
    method: str
    path: str
    authorization: str | None
    body: Any


@dataclass
class FakeMaster:
    port: int
    requests: list[Recorded] = field(default_factory=list)
    metrics: dict[tuple[int, str], float] = field(default_factory=dict)
    checkpoints: dict[int, dict[str, Any]] = field(default_factory=dict)
    stop: bool = False
    drop_next: int = 0  # close this many connections without an answer
    unavailable_next: int = 0  # answer 503 this many times
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def listen(self) -> None:
        master = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._serve()

            def do_POST(self) -> None:
                self._serve()

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                master.requests.append(Recorded(self.command, self.path, self.headers.get("Authorization"), body))
                if master.drop_next:
                    master.drop_next -= 1
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if master.unavailable_next:
                    master.unavailable_next -= 1
                    return self._answer(503, {"code": "UnavailableError", "message": "restarting"})
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    return self._answer(403, {"code": "ForbiddenUserError", "message": "not this trial's token"})
                return self._answer(200, master.route(self.command, self.path, body))

            def _answer(self, status: int, body: Any) -> None:
                raw = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def route(self, method: str, path: str, body: Any) -> Any:
        if (method, path) == ("POST", "/api/v2/trials/7/metrics"):
            fresh = {(body["step"], n): v for n, v in body["metrics"].items() if (body["step"], n) not in self.metrics}
            self.metrics.update(fresh)
            return {"stored": len(fresh), "stop": self.stop}
        if (method, path) == ("POST", "/api/v2/trials/7/checkpoints"):
            self.checkpoints[body["step"]] = body
            return body
        if (method, path) == ("GET", "/api/v2/trials/7/checkpoints/latest"):
            return self.checkpoints[max(self.checkpoints)] if self.checkpoints else None
        raise AssertionError(f"no route {method} {path}")

    def close(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def master() -> Iterator[FakeMaster]:
    fake = FakeMaster(free_port())
    fake.listen()
    yield fake
    fake.close()


class Waits(list[float]):
    """Records the client's backoff instead of sleeping; ``then`` runs at the n-th wait."""

    def __init__(self, then: dict[int, Any] | None = None) -> None:
        super().__init__()
        self.then = then or {}

    def __call__(self, seconds: float) -> None:
        self.append(seconds)
        action = self.then.get(len(self))
        if action is not None:
            action()


def client(master: FakeMaster, waits: Waits | None = None, **options: Any) -> TrialClient:
    return TrialClient("7", TOKEN, master.url + "/", {"lr": 0.1}, sleep=Waits() if waits is None else waits, **options)


def test_reports_carry_the_token_and_the_step_and_a_repeated_step_is_sent_as_is(master: FakeMaster) -> None:
    trial = client(master)
    assert trial.report(1, {"loss": 0.5, "acc": 1}) is False
    assert trial.report(1, {"loss": 0.4}) is False  # a resumed trial reports step 1 again: the master keeps 0.5
    assert [(r.method, r.path, r.authorization, r.body) for r in master.requests] == [
        ("POST", "/api/v2/trials/7/metrics", f"Bearer {TOKEN}", {"step": 1, "metrics": {"loss": 0.5, "acc": 1.0}}),
        ("POST", "/api/v2/trials/7/metrics", f"Bearer {TOKEN}", {"step": 1, "metrics": {"loss": 0.4}}),
    ]
    assert master.metrics == {(1, "loss"): 0.5, (1, "acc"): 1.0}


def test_should_stop_answers_the_last_reports_answer(master: FakeMaster) -> None:
    trial = client(master)
    assert trial.should_stop() is False  # before any report
    trial.report(1, {"loss": 1.0})
    assert trial.should_stop() is False
    master.stop = True
    assert trial.should_stop() is False  # not asked yet: no request is made by should_stop
    assert trial.report(2, {"loss": 1.0}) is True and trial.should_stop() is True
    assert len(master.requests) == 2


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf"), "0.5", None, True])
def test_a_value_that_is_not_a_finite_number_is_refused_before_sending(master: FakeMaster, value: object) -> None:
    with pytest.raises(ValueError, match="metric loss must be a finite number"):
        client(master).report(1, {"acc": 0.5, "loss": value})
    assert master.requests == []


@pytest.mark.parametrize("step", [-1, 1.5, True, "3"])
def test_a_bad_step_is_refused_before_sending(master: FakeMaster, step: object) -> None:
    with pytest.raises(ValueError, match="step must be an integer"):
        client(master).report(step, {"loss": 1.0})  # type: ignore[arg-type]
    assert master.requests == []


def test_dropped_connections_and_503_are_retried_with_growing_waits(master: FakeMaster) -> None:
    master.drop_next, master.unavailable_next = 2, 2
    waits = Waits()
    assert client(master, waits, backoff=0.5, max_backoff=3.0).report(4, {"loss": 0.1}) is False
    assert waits == [0.5, 1.0, 2.0, 3.0] and len(master.requests) == 5
    assert master.metrics == {(4, "loss"): 0.1}


def test_a_master_not_listening_yet_is_waited_for(master: FakeMaster) -> None:
    master.close()
    later = FakeMaster(free_port())
    waits = Waits(then={3: later.listen})  # the master comes back during the third wait
    try:
        trial = TrialClient("7", TOKEN, later.url, sleep=waits)
        assert trial.report(1, {"loss": 1.0}) is False
        assert len(waits) == 3 and len(later.requests) == 1
    finally:
        later.close()


def test_retries_end_with_master_unreachable(master: FakeMaster) -> None:
    master.unavailable_next = 10
    with pytest.raises(TrialError) as refused:  # the last answer is the master's own
        client(master, attempts=3).report(1, {"loss": 1.0})
    assert refused.value.status == 503 and len(master.requests) == 3
    master.close()
    waits = Waits()
    with pytest.raises(MasterUnreachableError, match="no answer after 3 attempts"):
        client(master, waits, attempts=3).report(1, {"loss": 1.0})
    assert len(waits) == 2


def test_a_refusal_is_not_retried_and_names_its_code(master: FakeMaster) -> None:
    wrong = TrialClient("7", "another-trials-token", master.url, sleep=Waits())
    with pytest.raises(TrialError) as refused:
        wrong.report(1, {"loss": 1.0})
    assert (refused.value.status, refused.value.code) == (403, "ForbiddenUserError") and len(master.requests) == 1


def test_checkpoints_are_recorded_and_the_latest_found(master: FakeMaster) -> None:
    trial = client(master)
    assert trial.latest_checkpoint() is None
    trial.checkpoint(10, "/ckpt/10", {"epoch": 1})
    trial.checkpoint(20, "/ckpt/20")
    assert trial.latest_checkpoint() == {"step": 20, "path": "/ckpt/20", "metadata": {}}
    assert master.requests[1].body == {"step": 10, "path": "/ckpt/10", "metadata": {"epoch": 1}}
    with pytest.raises(ValueError, match="path"):
        trial.checkpoint(30, "")


def test_the_module_functions_use_the_environment(master: FakeMaster, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pai_trial, "_client", None)
    monkeypatch.setenv("PAI_TRIAL_HPARAMS", '{"lr": 0.01, "optimizer": "adam"}')
    assert pai_trial.hparams() == {"lr": 0.01, "optimizer": "adam"}
    for name in ("PAI_TRIAL_ID", "PAI_TRIAL_TOKEN", "PAI_MASTER_URL"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(RuntimeError, match="not in a pai trial: PAI_TRIAL_ID, PAI_TRIAL_TOKEN, PAI_MASTER_URL"):
        pai_trial.report(1, {"loss": 1.0})
    monkeypatch.setenv("PAI_TRIAL_ID", "7")
    monkeypatch.setenv("PAI_TRIAL_TOKEN", TOKEN)
    monkeypatch.setenv("PAI_MASTER_URL", master.url)
    master.stop = True
    assert pai_trial.report(3, {"loss": 1.0}) is True and pai_trial.should_stop() is True
    pai_trial.checkpoint(3, "/ckpt/3", {"a": 1})
    assert pai_trial.latest_checkpoint() == {"step": 3, "path": "/ckpt/3", "metadata": {"a": 1}}
    assert pai_trial.client().hparams == {"lr": 0.01, "optimizer": "adam"}
