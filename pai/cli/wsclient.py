"""A WebSocket client on a blocking socket, stdlib only (RFC 6455, client side): what ssh's ProxyCommand
(``pai.cli.sshproxy``) speaks to the master's tunnel. ssh starts that command anew for every connection, and
importing aiohttp (or even asyncio) would take most of its start; the other commands keep aiohttp
(``pai.cli.tunnel``).

It opens the handshake with the caller's headers, refuses (``ApiError`` with the master's ``{code, message}``) what
is not a ``101``, sends masked frames (one thread at a time: ``send`` holds a lock), answers pings, and hands back
data frames whole (fragments joined). One thread receives, any thread sends.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import socket
import struct
import threading
import urllib.parse
from collections.abc import Mapping
from typing import BinaryIO

from pai.cli.errors import ApiError, UnreachableError

TEXT, BINARY, CLOSE, PING, PONG = 0x1, 0x2, 0x8, 0x9, 0xA
MAX_FRAME = 16 << 20  # a frame from the master may not be larger
_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
_MAX_HEAD = 64 * 1024  # the handshake's answer: status line and headers
CONNECT_SECONDS = 10.0


class WebSocket:
    """An open client WebSocket: ``send``, ``receive`` (None once closed), ``close``; ``close_code`` and
    ``close_reason`` once the server closed it."""

    def __init__(self, sock: socket.socket, stream: BinaryIO) -> None:
        self.sock, self.stream = sock, stream
        self.close_code: int | None = None
        self.close_reason = ""
        self._lock = threading.Lock()
        self._closing = False

    def send(self, opcode: int, data: bytes) -> None:
        mask = os.urandom(4)
        n = len(data)
        head = bytes([0x80 | opcode])
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 1 << 16:
            head += bytes([0x80 | 126]) + struct.pack("!H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack("!Q", n)
        with self._lock:
            self.sock.sendall(head + mask + _masked(data, mask))

    def receive(self) -> tuple[int, bytes] | None:
        """The next data frame (TEXT or BINARY, its payload); None when the connection is closed."""
        kind, parts = 0, bytearray()
        while True:
            try:
                opcode, fin, payload = self._frame()
            except (EOFError, OSError):
                return None
            if opcode == PING:
                self.send(PONG, payload)
            elif opcode == CLOSE:
                if len(payload) >= 2:
                    self.close_code = struct.unpack("!H", payload[:2])[0]
                    self.close_reason = payload[2:].decode("utf-8", errors="replace")
                self.close()
                return None
            elif opcode in (TEXT, BINARY, 0x0):
                kind = kind or opcode
                parts += payload
                if fin:
                    return kind, bytes(parts)

    def _read(self, n: int) -> bytes:
        data = self.stream.read(n)
        if len(data) < n:
            raise EOFError
        return data

    def _frame(self) -> tuple[int, bool, bytes]:
        b0, b1 = self._read(2)
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", self._read(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", self._read(8))[0]
        if n > MAX_FRAME:
            raise EOFError(f"a frame of {n} bytes is larger than {MAX_FRAME}")
        mask = self._read(4) if b1 & 0x80 else b""
        payload = self._read(n)
        return b0 & 0x0F, bool(b0 & 0x80), _masked(payload, mask) if mask else payload

    def close(self, code: int = 1000) -> None:
        """Say goodbye (once) and close the connection."""
        if self._closing:
            return
        self._closing = True
        with contextlib.suppress(OSError):
            self.send(CLOSE, struct.pack("!H", code))
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


def _masked(data: bytes, mask: bytes) -> bytes:
    """``data`` XOR the 4-byte ``mask`` repeated (as one big integer: no loop in Python)."""
    if not data:
        return data
    n = len(data)
    key = (mask * (n // 4 + 1))[:n]
    return (int.from_bytes(data, "big") ^ int.from_bytes(key, "big")).to_bytes(n, "big")


def connect(url: str, headers: Mapping[str, str]) -> WebSocket:
    """A WebSocket to ``url`` (``http(s)://``: the master's own scheme); ApiError with the master's code and message
    when it refuses, UnreachableError when it does not answer."""
    parts = urllib.parse.urlsplit(url)
    secure = parts.scheme == "https"
    master = f"{parts.scheme}://{parts.netloc}"
    try:
        sock = socket.create_connection((parts.hostname or "", parts.port or (443 if secure else 80)),
                                        timeout=CONNECT_SECONDS)
        if secure:
            import ssl  # only for an https master: it takes a while to import

            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=parts.hostname)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        key = base64.b64encode(os.urandom(16)).decode()
        lines = [f"GET {parts.path or '/'}{'?' + parts.query if parts.query else ''} HTTP/1.1",
                 f"Host: {parts.netloc}", "Upgrade: websocket", "Connection: Upgrade", f"Sec-WebSocket-Key: {key}",
                 "Sec-WebSocket-Version: 13", *(f"{k}: {v}" for k, v in headers.items())]
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        stream = sock.makefile("rb")
        status, reason, answer = _answer(stream)
        if status != 101:
            refused = _refusal(stream, status, reason, answer)
            sock.close()
            raise refused
        expected = base64.b64encode(hashlib.sha1(key.encode() + _GUID).digest()).decode()
        if answer.get("sec-websocket-accept") != expected:
            sock.close()
            raise UnreachableError(master, "the WebSocket handshake's answer is not one for this request")
        sock.settimeout(None)
    except (OSError, EOFError, ValueError) as e:
        raise UnreachableError(master, str(e) or type(e).__name__) from None
    return WebSocket(sock, stream)


def _answer(stream: BinaryIO) -> tuple[int, str, dict[str, str]]:
    """The status, its reason and the header fields (names in lower case) of the handshake's answer."""
    lines: list[str] = []
    size = 0
    while (line := stream.readline(_MAX_HEAD)) not in (b"\r\n", b"\n"):
        size += len(line)
        if not line or size > _MAX_HEAD:
            raise EOFError("the master's answer to the WebSocket handshake ended early or is too long")
        lines.append(line.decode("latin-1").rstrip("\r\n"))
    if not lines:
        raise EOFError("the master's answer to the WebSocket handshake is empty")
    _, status, reason = [*lines[0].split(" ", 2), ""][:3]
    fields = {}
    for field in lines[1:]:
        name, colon, value = field.partition(":")
        if colon:
            fields[name.strip().lower()] = value.strip()
    return int(status), reason, fields


def _refusal(stream: BinaryIO, status: int, reason: str, answer: Mapping[str, str]) -> ApiError:
    """The master's JSON ``{code, message}`` (else the status and its reason)."""
    try:
        length = int(answer.get("content-length", "0"))
        body = json.loads(stream.read(min(length, _MAX_HEAD))) if length else {}
        return ApiError(status, str(body["code"]), str(body["message"]))
    except (ValueError, KeyError, TypeError, OSError):
        return ApiError(status, f"HTTP {status}", reason)
