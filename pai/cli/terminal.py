"""The local terminal of ``pai exec -t``: raw mode while the session lasts (restored however it ends), its size, and
its resizes (SIGWINCH)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import termios
import tty
from collections.abc import Callable, Iterator

from pai.protocol import exec_frames as frames


def is_terminal(fd: int) -> bool:
    return os.isatty(fd)


def size(fd: int) -> tuple[int, int]:
    """(rows, cols) of the terminal on ``fd``; the protocol's defaults where it has none."""
    try:
        cols, rows = os.get_terminal_size(fd)
    except OSError:
        return frames.DEFAULT_ROWS, frames.DEFAULT_COLS
    return rows or frames.DEFAULT_ROWS, cols or frames.DEFAULT_COLS


@contextlib.contextmanager
def raw(fd: int) -> Iterator[None]:
    """The terminal on ``fd`` in raw mode (keys go through as typed: ^C to the remote command), restored after."""
    saved = termios.tcgetattr(fd)
    try:
        tty.setraw(fd, termios.TCSANOW)
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


@contextlib.contextmanager
def on_resize(loop: asyncio.AbstractEventLoop, fd: int, send: Callable[[int, int], None]) -> Iterator[None]:
    """``send(rows, cols)`` each time the terminal on ``fd`` is resized, while the block runs."""
    loop.add_signal_handler(signal.SIGWINCH, lambda: send(*size(fd)))
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGWINCH)

