"""The exec WebSocket's frames: what each side sends, and what is not a frame."""

from __future__ import annotations

import pytest

from pai.protocol import exec_frames as frames


@pytest.mark.parametrize(
    ("message", "text"),
    [
        pytest.param(frames.Resize(40, 120), '{"type": "resize", "rows": 40, "cols": 120}', id="resize"),
        pytest.param(frames.Eof(), '{"type": "eof"}', id="eof"),
        pytest.param(frames.Exit(137), '{"type": "exit", "code": 137}', id="exit"),
        pytest.param(frames.Error("TaskNotRunningError", "gone"),
                     '{"type": "error", "code": "TaskNotRunningError", "message": "gone"}', id="error"),
    ],
)
def test_control_frames_round_trip(message: frames.Control, text: str) -> None:
    assert frames.encode_control(message) == text
    assert frames.decode_control(text) == message


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        pytest.param("resize", "JSON", id="not-json"),
        pytest.param("[1]", "JSON object", id="not-an-object"),
        pytest.param('{"type": "stdin"}', "unknown control frame type 'stdin'", id="unknown-type"),
        pytest.param('{"type": "resize", "rows": 0, "cols": 80}', "resize.rows", id="zero-rows"),
        pytest.param('{"type": "resize", "rows": 24, "cols": "80"}', "resize.cols", id="string-cols"),
        pytest.param('{"type": "resize", "rows": true, "cols": 80}', "resize.rows", id="bool-rows"),
        pytest.param('{"type": "resize", "rows": 24, "cols": 100000}', "resize.cols", id="huge-cols"),
        pytest.param('{"type": "exit", "code": "0"}', "exit.code", id="string-code"),
        pytest.param('{"type": "error", "code": 1, "message": "x"}', "error.code", id="numeric-error-code"),
    ],
)
def test_what_is_not_a_control_frame(text: str, complaint: str) -> None:
    with pytest.raises(frames.FrameError, match=complaint):
        frames.decode_control(text)


def test_output_frames_carry_their_stream() -> None:
    assert frames.encode_output(frames.STDOUT, b"out") == b"\x01out"
    assert frames.decode_output(b"\x02err") == (frames.STDERR, b"err")
    assert frames.decode_output(b"\x01") == (frames.STDOUT, b"")
    for bad in (b"", b"\x00x", b"\x03x"):
        with pytest.raises(frames.FrameError):
            frames.decode_output(bad)
    with pytest.raises(frames.FrameError):
        frames.encode_output(0, b"stdin is not an output")


def test_the_upgrade_query() -> None:
    assert frames.exec_query(("ls", "-l")) == [("cmd", "ls"), ("cmd", "-l")]
    assert frames.exec_query(("bash",), tty=True, rows=50, cols=132) == [
        ("cmd", "bash"), ("tty", "1"), ("rows", "50"), ("cols", "132")]
    assert frames.terminal_size(None, 24, "rows") == 24
    assert frames.terminal_size("50", 24, "rows") == 50
    for bad in ("0", "-1", "x", "10001", "²"):
        with pytest.raises(frames.FrameError, match="rows"):
            frames.terminal_size(bad, 24, "rows")
