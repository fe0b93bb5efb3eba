"""A small blocking HTTP client for the master's REST API (stdlib ``urllib`` only)."""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pai.cli.errors import ApiError, BadResponseError, UnreachableError
from pai.cli.urls import normalize_url, quote_segment

__all__ = ["HttpClient", "normalize_url", "quote_segment"]

DEFAULT_TIMEOUT = 30.0
Query = Mapping[str, str | int | None]


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    content_type: str
    body: bytes

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


def _reason(exc: BaseException) -> str:
    if isinstance(exc, urllib.error.URLError) and isinstance(exc.reason, BaseException):
        return _reason(exc.reason)
    if isinstance(exc, urllib.error.URLError):
        return str(exc.reason)
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def _api_error(status: int, reason: str, body: bytes) -> ApiError:
    try:
        payload = json.loads(body)
    except ValueError:
        payload = None
    if isinstance(payload, dict) and isinstance(payload.get("code"), str):
        line = payload.get("line")
        return ApiError(status, payload["code"], str(payload.get("message", "")),
                        line if isinstance(line, int) and not isinstance(line, bool) else None)
    text = body.decode("utf-8", errors="replace").strip()
    return ApiError(status, f"HTTP {status}", text.splitlines()[0] if text else reason)


class HttpClient:
    """Sends requests to one master; raises ApiError / UnreachableError, never urllib's errors."""

    def __init__(self, base_url: str, token: str | None = None, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.base_url = normalize_url(base_url)
        self.token = token
        self.timeout = timeout

    def url(self, path: str, query: Query | None = None) -> str:
        url = self.base_url + path
        params = {k: str(v) for k, v in (query or {}).items() if v is not None}
        return f"{url}?{urllib.parse.urlencode(params)}" if params else url

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Query | None = None,
        body: bytes | None = None,
        content_type: str | None = None,
    ) -> Response:
        req = self._request(method, path, query, body, content_type)
        with self._open(req, self.timeout) as resp:
            try:
                return Response(resp.status, resp.headers.get_content_type(), resp.read())
            except (OSError, http.client.HTTPException) as exc:
                raise UnreachableError(self.base_url, _reason(exc)) from None

    @contextmanager
    def stream(self, path: str, *, query: Query | None = None) -> Iterator[Iterator[bytes]]:
        """``GET path`` whose answer is read as it arrives (a followed log), without a timeout; the chunks raise
        UnreachableError when the answer breaks off instead of ending."""
        with self._open(self._request("GET", path, query, None, None), None) as resp:
            yield self._chunks(resp)

    def _chunks(self, resp: http.client.HTTPResponse) -> Iterator[bytes]:
        while True:
            try:
                data = resp.read1(1 << 16)
            except (OSError, http.client.HTTPException) as exc:
                raise UnreachableError(self.base_url, f"the answer broke off: {_reason(exc)}") from None
            if not data:
                return
            yield data

    def _request(self, method: str, path: str, query: Query | None, body: bytes | None,
                 content_type: str | None) -> urllib.request.Request:
        req = urllib.request.Request(self.url(path, query), data=body, method=method)
        if content_type is not None:
            req.add_header("Content-Type", content_type)
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        return req

    def _open(self, req: urllib.request.Request, timeout: float | None) -> http.client.HTTPResponse:
        try:
            resp: http.client.HTTPResponse = urllib.request.urlopen(req, timeout=timeout)
            return resp
        except urllib.error.HTTPError as exc:
            try:
                body = exc.read()
            except OSError:
                body = b""
            finally:
                exc.close()
            raise _api_error(exc.code, str(exc.reason), body) from None
        except (urllib.error.URLError, OSError) as exc:
            raise UnreachableError(self.base_url, _reason(exc)) from None

    def json(self, method: str, path: str, *, query: Query | None = None, payload: Any = None) -> Any:
        body = None if payload is None else json.dumps(payload).encode()
        ctype = None if payload is None else "application/json"
        return self.decode_json(method, path, self.request(method, path, query=query, body=body, content_type=ctype))

    def decode_json(self, method: str, path: str, resp: Response) -> Any:
        try:
            return json.loads(resp.body)
        except ValueError:
            raise BadResponseError(method, self.url(path), f"not JSON ({resp.content_type})") from None
