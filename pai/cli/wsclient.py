"""A WebSocket client on asyncio's streams, stdlib only (RFC 6455, client side): what ssh's ProxyCommand
(``pai.cli.sshproxy``) speaks to the master's tunnel. ssh starts that command anew for every connection, and
importing aiohttp would take most of its start; the other commands keep aiohttp (``pai.cli.tunnel``).

It opens the handshake with the caller's headers, refuses (``ApiError`` with the master's ``{code, message}``) what
is not a ``101``, sends masked frames, answers pings, and hands back data frames whole (fragments joined).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import os
import struct
import urllib.parse
from collections.abc import Mapping

from pai.cli.errors import ApiError, UnreachableError

TEXT, BINARY, CLOSE, PING, PONG = 0x1, 0x2, 0x8, 0x9, 0xA
MAX_FRAME = 16 << 20  # a frame from the master may not be larger
_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
_MAX_HEAD = 64 * 1024  # the handshake's answer: status line and headers
CONNECT_SECONDS = 10.0


class WebSocket:
    """An open client WebSocket: ``send``, ``receive`` (None once closed), ``close``; ``close_code`` and
    ``close_reason`` once the server closed it."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.close_code: int | None = None
        self.close_reason = ""
        self._closing = False

    async def send(self, opcode: int, data: bytes) -> None:
        mask = os.urandom(4)
        n = len(data)
        head = bytes([0x80 | opcode])
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 1 << 16:
            head += bytes([0x80 | 126]) + struct.pack("!H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack("!Q", n)
        self.writer.write(head + mask + _masked(data, mask))
        await self.writer.drain()

    async def receive(self) -> tuple[int, bytes] | None:
        """The next data frame (TEXT or BINARY, its payload); None when the connection is closed."""
        kind, parts = 0, bytearray()
        while True:
            try:
                opcode, fin, payload = await self._frame()
            except (asyncio.IncompleteReadError, ConnectionError):
                return None
            if opcode == PING:
                await self.send(PONG, payload)
            elif opcode == CLOSE:
                if len(payload) >= 2:
                    self.close_code = struct.unpack("!H", payload[:2])[0]
                    self.close_reason = payload[2:].decode("utf-8", errors="replace")
                await self.close()
                return None
            elif opcode in (TEXT, BINARY, 0x0):
                kind = kind or opcode
                parts += payload
                if fin:
                    return kind, bytes(parts)

    async def _frame(self) -> tuple[int, bool, bytes]:
        b0, b1 = await self.reader.readexactly(2)
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", await self.reader.readexactly(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", await self.reader.readexactly(8))[0]
        if n > MAX_FRAME:
            raise ConnectionError(f"a frame of {n} bytes is larger than {MAX_FRAME}")
        mask = await self.reader.readexactly(4) if b1 & 0x80 else b""
        payload = await self.reader.readexactly(n)
        return b0 & 0x0F, bool(b0 & 0x80), _masked(payload, mask) if mask else payload

    async def close(self, code: int = 1000) -> None:
        """Say goodbye (once) and close the connection."""
        if not self._closing:
            self._closing = True
            with contextlib.suppress(ConnectionError):
                await self.send(CLOSE, struct.pack("!H", code))
        self.writer.close()


def _masked(data: bytes, mask: bytes) -> bytes:
    """``data`` XOR the 4-byte ``mask`` repeated (as one big integer: no loop in Python)."""
    if not data:
        return data
    n = len(data)
    key = (mask * (n // 4 + 1))[:n]
    return (int.from_bytes(data, "big") ^ int.from_bytes(key, "big")).to_bytes(n, "big")


async def connect(url: str, headers: Mapping[str, str]) -> WebSocket:
    """A WebSocket to ``url`` (``http(s)://``: the master's own scheme); ApiError with the master's code and message
    when it refuses, UnreachableError when it does not answer."""
    parts = urllib.parse.urlsplit(url)
    secure = parts.scheme == "https"
    host, port = parts.hostname or "", parts.port or (443 if secure else 80)
    master = f"{parts.scheme}://{parts.netloc}"
    try:
        ssl_context = None
        if secure:
            import ssl  # only for an https master: it takes a while to import

            ssl_context = ssl.create_default_context()
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port, ssl=ssl_context,
                                                                        limit=_MAX_HEAD), CONNECT_SECONDS)
        key = base64.b64encode(os.urandom(16)).decode()
        lines = [f"GET {parts.path or '/'}{'?' + parts.query if parts.query else ''} HTTP/1.1",
                 f"Host: {parts.netloc}", "Upgrade: websocket", "Connection: Upgrade", f"Sec-WebSocket-Key: {key}",
                 "Sec-WebSocket-Version: 13", *(f"{k}: {v}" for k, v in headers.items())]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        status, reason, answer = await _answer(reader)
        if status != 101:
            refused = await _refusal(reader, status, reason, answer)
            writer.close()
            raise refused
        expected = base64.b64encode(hashlib.sha1(key.encode() + _GUID).digest()).decode()
        if answer.get("sec-websocket-accept") != expected:
            writer.close()
            raise UnreachableError(master, "the WebSocket handshake's answer is not one for this request")
    except (OSError, TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as e:
        raise UnreachableError(master, str(e) or type(e).__name__) from None
    return WebSocket(reader, writer)


async def _answer(reader: asyncio.StreamReader) -> tuple[int, str, dict[str, str]]:
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
    _, status, reason = ([*head[0].split(" ", 2), ""])[:3]
    fields = {}
    for line in head[1:]:
        name, colon, value = line.partition(":")
        if colon:
            fields[name.strip().lower()] = value.strip()
    return int(status), reason, fields


async def _refusal(reader: asyncio.StreamReader, status: int, reason: str, answer: Mapping[str, str]) -> ApiError:
    """The master's JSON ``{code, message}`` (else the status and its reason)."""
    try:
        length = int(answer.get("content-length", "0"))
        body = json.loads(await reader.readexactly(min(length, _MAX_HEAD))) if length else {}
        return ApiError(status, str(body["code"]), str(body["message"]))
    except (ValueError, KeyError, TypeError, asyncio.IncompleteReadError):
        return ApiError(status, f"HTTP {status}", reason)
