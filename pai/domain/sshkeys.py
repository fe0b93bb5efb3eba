"""OpenSSH public key lines (``ssh-ed25519 AAAA... comment``), as users give them: checked without a crypto library.

A line is ``type base64-blob [comment]``; the blob starts with its own type as an SSH string (RFC 4253 §6.6), which
must be the line's. That catches what people paste by mistake (a private key, a fingerprint, a cut-off line)
without judging the key's numbers, which the SSH endpoint does when it loads the key.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import struct

KEY_TYPES = frozenset({
    "ssh-ed25519", "ssh-rsa", "ssh-dss", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com", "sk-ecdsa-sha2-nistp256@openssh.com",
})
MAX_KEY_CHARS = 16384  # an RSA key of 16384 bits is about 2,800 characters


def key_problem(line: str) -> str | None:
    """Why ``line`` is not one OpenSSH public key line, in words; None when it is one."""
    text = line.strip()
    if not text:
        return "it is empty"
    if len(text) > MAX_KEY_CHARS:
        return f"it is longer than {MAX_KEY_CHARS} characters"
    if "PRIVATE KEY" in text:
        return "it is a private key: give the public one (the .pub file)"
    parts = text.split()
    if len(parts) < 2 or parts[0] not in KEY_TYPES:
        return f"it does not start with a public key type ({', '.join(sorted(KEY_TYPES))})"
    try:
        blob = base64.b64decode(parts[1], validate=True)
        (size,) = struct.unpack(">I", blob[:4])
        inner = blob[4:4 + size].decode("ascii")
    except (binascii.Error, struct.error, UnicodeDecodeError, ValueError):
        return "its key is not base64 of an SSH public key"
    if inner != parts[0]:
        return f"its key is of type {inner!r}, the line says {parts[0]!r}"
    return None


def valid_keys(lines: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """The lines that are public keys, stripped, each once, in order."""
    return tuple(dict.fromkeys(line.strip() for line in lines if key_problem(line) is None))


def fingerprint(line: str) -> str:
    """``SHA256:...`` as ``ssh-keygen -l`` shows a key (of a line ``key_problem`` accepts)."""
    digest = hashlib.sha256(base64.b64decode(line.split()[1])).digest()
    return "SHA256:" + base64.b64encode(digest).decode("ascii").rstrip("=")
