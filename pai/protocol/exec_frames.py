"""The exec WebSocket's frames: the same on the agent's ``/exec``, the master's relay and the CLI.

The master relays frames verbatim, so every side imports this module (it depends on nothing of pai).

- client -> server: BINARY = stdin bytes; TEXT JSON ``{"type": "resize", "rows": R, "cols": C}`` or
  ``{"type": "eof"}`` (stdin is closed).
- server -> client: BINARY = one byte of stream id (1 stdout, 2 stderr) then the data; TEXT JSON
  ``{"type": "exit", "code": N}`` (the last frame, then the server closes) or
  ``{"type": "error", "code": "...", "message": "..."}`` (a PaiError's code and message).

The query of the upgrade request: ``cmd`` once per argument (none: the task's login shell), ``tty=1``,
``rows`` and ``cols`` (the terminal's size when tty).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Final

STDOUT: Final = 1
STDERR: Final = 2
STREAMS: Final = frozenset({STDOUT, STDERR})

RESIZE: Final = "resize"
EOF: Final = "eof"
EXIT: Final = "exit"
ERROR: Final = "error"

# Query parameters of the upgrade request.
Q_CMD: Final = "cmd"
Q_TTY: Final = "tty"
Q_ROWS: Final = "rows"
Q_COLS: Final = "cols"
DEFAULT_ROWS: Final = 24
DEFAULT_COLS: Final = 80
MAX_TERMINAL: Final = 10_000  # rows or columns beyond this are a mistake, not a terminal


class FrameError(ValueError):
    """A frame that does not follow this protocol."""


@dataclass(frozen=True, slots=True)
class Resize:
    rows: int
    cols: int


@dataclass(frozen=True, slots=True)
class Eof:
    pass


@dataclass(frozen=True, slots=True)
class Exit:
    code: int


@dataclass(frozen=True, slots=True)
class Error:
    code: str
    message: str


ClientControl = Resize | Eof
ServerControl = Exit | Error
Control = ClientControl | ServerControl


def encode_output(stream: int, data: bytes) -> bytes:
    """A BINARY server frame: stream id byte + data."""
    if stream not in STREAMS:
        raise FrameError(f"stream id {stream} is neither stdout (1) nor stderr (2)")
    return bytes((stream,)) + data


def decode_output(frame: bytes) -> tuple[int, bytes]:
    """A BINARY server frame -> (stream id, data)."""
    if not frame or frame[0] not in STREAMS:
        raise FrameError("an output frame starts with its stream id: 1 (stdout) or 2 (stderr)")
    return frame[0], frame[1:]


def encode_control(message: Control) -> str:
    """A TEXT frame (JSON) for a control message of either side."""
    match message:
        case Resize(rows, cols):
            return json.dumps({"type": RESIZE, "rows": rows, "cols": cols})
        case Eof():
            return json.dumps({"type": EOF})
        case Exit(code):
            return json.dumps({"type": EXIT, "code": code})
        case Error(code, text):
            return json.dumps({"type": ERROR, "code": code, "message": text})
    raise FrameError(f"not a control message: {message!r}")  # pragma: no cover - exhaustive above


def decode_control(text: str) -> Control:
    """A TEXT frame -> its control message; FrameError when it is not one of this protocol."""
    try:
        obj = json.loads(text)
    except ValueError as e:
        raise FrameError(f"a control frame is JSON: {e}") from e
    if not isinstance(obj, dict):
        raise FrameError("a control frame is a JSON object")
    kind = obj.get("type")
    if kind == RESIZE:
        return Resize(_size(obj, "rows"), _size(obj, "cols"))
    if kind == EOF:
        return Eof()
    if kind == EXIT:
        code = obj.get("code")
        if not isinstance(code, int) or isinstance(code, bool):
            raise FrameError("exit.code is an integer")
        return Exit(code)
    if kind == ERROR:
        code, message = obj.get("code"), obj.get("message")
        if not isinstance(code, str) or not isinstance(message, str):
            raise FrameError("error.code and error.message are strings")
        return Error(code, message)
    raise FrameError(f"unknown control frame type {kind!r}: resize, eof, exit or error")


def _size(obj: dict[str, object], key: str) -> int:
    value = obj.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= MAX_TERMINAL:
        raise FrameError(f"resize.{key} is an integer from 1 to {MAX_TERMINAL}")
    return value


def terminal_size(value: str | None, default: int, name: str) -> int:
    """``rows`` or ``cols`` of the upgrade query: absent gives ``default``; FrameError when not a size."""
    if value is None or value == "":
        return default
    if not value.isdigit() or not 0 < int(value) <= MAX_TERMINAL:
        raise FrameError(f"{name} is an integer from 1 to {MAX_TERMINAL}")
    return int(value)


def exec_query(argv: tuple[str, ...], tty: bool = False, rows: int = DEFAULT_ROWS,
               cols: int = DEFAULT_COLS) -> list[tuple[str, str]]:
    """The upgrade request's query for a command (``()``: the task's login shell)."""
    query = [(Q_CMD, arg) for arg in argv]
    if tty:
        query += [(Q_TTY, "1"), (Q_ROWS, str(rows)), (Q_COLS, str(cols))]
    return query
