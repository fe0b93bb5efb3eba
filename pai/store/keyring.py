"""The master's secret key: what seals the job secrets kept in the database (``pai.store.sealing``).

Keys are Fernet keys (``cryptography``: AES-128-CBC with HMAC-SHA256, urlsafe base64 of 32 bytes). A keyring is one
or more of them, newest first: it seals with the first and opens with any (``MultiFernet``), so that a key being
rotated stays readable until every token has been sealed again (``pai.store.rotation``).

Where the keys come from, first found wins:

1. ``PAI_SECRET_KEY``: one key, or several separated by commas (newest first);
2. ``<data-dir>/secret-key``: one key a line (newest first), mode 0600, written by the master's first start
   (``load(data_dir, create=True)``).

A database remembers which key sealed it: ``secret_key_check`` holds a token of a known text (``verify``). A master
whose keys do not open it refuses to start, naming where its keys came from, instead of failing on each job later.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from sqlalchemy import Connection, Engine, insert, inspect, select

from pai.domain.errors import PaiError
from pai.store.private import restrict, write_private
from pai.store.schema import SecretKeyCheckRow

KEY_ENV = "PAI_SECRET_KEY"
KEY_FILE = "secret-key"
CHECK_TEXT = b"pai secret key check"
CACHED_TOKENS = 4096  # opened tokens kept (a job's token is opened at each of its tasks' starts)


class SecretKeyError(PaiError):
    """The secret key is missing, malformed, or not the one that sealed this database. ``source`` says where the keys
    came from (``PAI_SECRET_KEY``, a key file, or "none")."""

    def __init__(self, message: str, *, source: str) -> None:
        super().__init__(message)
        self.source = source


class Keyring:
    """Fernet keys, newest first; ``source`` says where they came from (for messages, never the keys)."""

    def __init__(self, keys: Sequence[str], source: str) -> None:
        self.keys = tuple(keys)
        self.source = source
        if not self.keys:
            raise SecretKeyError(f"{source} holds no key", source=source)
        try:
            fernets = [Fernet(key.encode("ascii")) for key in self.keys]
        except (ValueError, UnicodeEncodeError):
            raise SecretKeyError(f"{source}: a key is not a Fernet key (urlsafe base64 of 32 bytes; make one with "
                                 "`pai secret-key generate`)", source=source) from None
        self._fernet = MultiFernet(fernets)
        self._open = lru_cache(maxsize=CACHED_TOKENS)(self._decrypt)

    @classmethod
    def generate(cls, source: str = "a new key") -> Keyring:
        return cls((Fernet.generate_key().decode("ascii"),), source)

    def seal(self, plaintext: bytes) -> str:
        token: bytes = self._fernet.encrypt(plaintext)
        return token.decode("ascii")

    def open(self, token: str) -> bytes:
        """The plaintext of ``token``; SecretKeyError when none of the keys sealed it (or it was altered)."""
        opened: bytes = self._open(token)
        return opened

    def rotate(self, token: str) -> str:
        """``token`` sealed again with the newest key (it must open with one of the keys)."""
        try:
            rotated: bytes = self._fernet.rotate(token.encode("ascii"))
        except InvalidToken:
            raise self._refused() from None
        return rotated.decode("ascii")

    def with_older(self, older: Keyring) -> Keyring:
        """This keyring's keys, then ``older``'s that it lacks: seals with the newest, opens what either opens."""
        return Keyring(self.keys + tuple(k for k in older.keys if k not in self.keys),
                       f"{self.source} and {older.source}")

    def _decrypt(self, token: str) -> bytes:
        try:
            plaintext: bytes = self._fernet.decrypt(token.encode("ascii"))
        except InvalidToken:
            raise self._refused() from None
        return plaintext

    def _refused(self) -> SecretKeyError:
        return SecretKeyError(
            f"the secret key from {self.source} does not open the secrets sealed in this database: every master of "
            f"one database needs the key that sealed them (the same {KEY_ENV}, or a copy of the first master's "
            f"<data-dir>/{KEY_FILE}); see docs/operations.md, The secret key", source=self.source)

    def __repr__(self) -> str:
        return f"Keyring({len(self.keys)} key(s) from {self.source})"


def parse_keys(text: str, separator: str | None = None) -> tuple[str, ...]:
    return tuple(k.strip() for k in text.split(separator) if k.strip())


def key_file(data_dir: Path) -> Path:
    return data_dir / KEY_FILE


def configured(data_dir: Path, env: dict[str, str] | None = None) -> Keyring | None:
    """The keys ``PAI_SECRET_KEY`` or the data directory's key file give, None when neither does."""
    value = os.environ.get(KEY_ENV, "") if env is None else env.get(KEY_ENV, "")
    if value.strip():
        return Keyring(parse_keys(value, ","), KEY_ENV)
    path = key_file(data_dir)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    restrict(path)  # left wider by hand or by an older version
    return Keyring(parse_keys(text), str(path))


def load(data_dir: Path, *, create: bool, env: dict[str, str] | None = None, database: Engine | None = None
         ) -> Keyring:
    """The configured keyring; with ``create``, a key file made in ``data_dir`` when none is configured, unless
    ``database`` already holds secrets sealed with a key (another master's: this one must be given that key)."""
    found = configured(data_dir, env)
    if found is not None:
        return found
    path = key_file(data_dir)
    if not create:
        raise SecretKeyError(f"no secret key: set {KEY_ENV} or keep the master's key in {path}", source="none")
    if database is not None and has_check(database):
        raise SecretKeyError(
            f"no secret key ({KEY_ENV} is not set and {path} does not exist), and this database's secrets were "
            f"sealed with a key: give this master that key ({KEY_ENV}, or a copy of the first master's "
            f"<data-dir>/{KEY_FILE}); see docs/operations.md, The secret key", source="none")
    keyring = Keyring.generate(str(path))
    write_private(path, keyring.keys[0] + "\n")
    return keyring


def save(path: Path, keyring: Keyring) -> None:
    """Write ``keyring``'s keys to the key file ``path`` (newest first, mode 0600, atomically)."""
    write_private(path, "".join(f"{k}\n" for k in keyring.keys))


def has_check(engine: Engine) -> bool:
    """Whether a key has sealed this database (its check value is there)."""
    with engine.connect() as connection:
        if not inspect(connection).has_table(SecretKeyCheckRow.__tablename__):
            return False
        return connection.scalar(select(SecretKeyCheckRow.id)) is not None


def verify(connection: Connection, keyring: Keyring) -> None:
    """Refuse a keyring that does not open this database's check value; record one for a database that has none (its
    first start with a key). Runs after the migrations, in their transaction."""
    if not inspect(connection).has_table(SecretKeyCheckRow.__tablename__):
        return  # the schema is older than the secret key (a migration test stopping short of head)
    token = connection.scalar(select(SecretKeyCheckRow.token).where(SecretKeyCheckRow.id == 1))
    if token is None:
        connection.execute(insert(SecretKeyCheckRow).values(id=1, token=keyring.seal(CHECK_TEXT)))
        return
    if keyring.open(token) != CHECK_TEXT:
        raise keyring._refused()

