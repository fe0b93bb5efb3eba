"""Password hashing (stdlib scrypt) and API token generation/digests. Pure functions, no database."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from functools import cache

SCHEME = "scrypt"
TOKEN_BYTES = 32


@dataclass(frozen=True, slots=True)
class ScryptParams:
    n: int = 2**14
    r: int = 8
    p: int = 1
    salt_bytes: int = 16
    key_bytes: int = 32

    @property
    def maxmem(self) -> int:
        return 256 * self.n * self.r * self.p + (1 << 20)


# Read at call time, so tests may lower the cost (the real KDF still runs, just cheaper).
DEFAULT_PARAMS = ScryptParams()


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _derive(password: str, salt: bytes, params: ScryptParams, key_bytes: int) -> bytes:
    return hashlib.scrypt(
        password.encode("utf-8"),
        salt=salt,
        n=params.n,
        r=params.r,
        p=params.p,
        maxmem=params.maxmem,
        dklen=key_bytes,
    )


def hash_password(password: str, params: ScryptParams | None = None) -> str:
    """``scrypt$n$r$p$salt$hash`` with a fresh random salt (salt and hash in unpadded url-safe base64)."""
    params = params or DEFAULT_PARAMS
    salt = secrets.token_bytes(params.salt_bytes)
    key = _derive(password, salt, params, params.key_bytes)
    return "$".join([SCHEME, str(params.n), str(params.r), str(params.p), _b64(salt), _b64(key)])


def check_password(password: str, encoded: str) -> bool:
    """True when ``password`` matches ``encoded``; a malformed ``encoded`` never matches."""
    parts = encoded.split("$")
    if len(parts) != 6 or parts[0] != SCHEME:
        return False
    try:
        params = ScryptParams(n=int(parts[1]), r=int(parts[2]), p=int(parts[3]))
        salt, expected = _unb64(parts[4]), _unb64(parts[5])
        actual = _derive(password, salt, params, len(expected))
    except ValueError:
        return False
    return hmac.compare_digest(actual, expected)


@cache
def _dummy_hash(params: ScryptParams) -> str:
    return hash_password(secrets.token_urlsafe(16), params)


def burn_check(password: str) -> None:
    """Spend the time of one ``check_password``: run when a user does not exist, so a login takes as long either way."""
    check_password(password, _dummy_hash(DEFAULT_PARAMS))


def new_token() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


def token_digest(token: str) -> str:
    """What the database keeps instead of the token: its sha256, hex."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()
