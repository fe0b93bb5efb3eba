"""Password KDF and token digests (pure, no database)."""

from __future__ import annotations

import pytest

from pai.store.credentials import ScryptParams, check_password, hash_password, new_token, token_digest

FAST = ScryptParams(n=2**10)


def test_production_cost_is_scrypt_n16384_r8_p1() -> None:
    scheme, n, r, p, salt, key = hash_password("s3cret", ScryptParams()).split("$")
    assert (scheme, n, r, p) == ("scrypt", str(2**14), "8", "1")
    assert len(salt) == 22 and len(key) == 43  # 16 and 32 bytes, unpadded base64


def test_same_password_gets_a_new_salt_each_time() -> None:
    assert hash_password("pw", FAST) != hash_password("pw", FAST)


@pytest.mark.parametrize(
    ("candidate", "ok"),
    [
        pytest.param("correct horse", True, id="right password"),
        pytest.param("correct hors", False, id="prefix"),
        pytest.param("Correct horse", False, id="case differs"),
        pytest.param("", False, id="empty"),
    ],
)
def test_check_password(candidate: str, ok: bool) -> None:
    assert check_password(candidate, hash_password("correct horse", FAST)) is ok


def test_check_uses_the_parameters_stored_in_the_hash() -> None:
    encoded = hash_password("pw", ScryptParams(n=2**11, r=4, p=2))
    assert encoded.split("$")[1:4] == ["2048", "4", "2"]
    assert check_password("pw", encoded)


@pytest.mark.parametrize(
    "encoded",
    [
        pytest.param("", id="empty"),
        pytest.param("pbkdf2$1$2$3$abc$def", id="other scheme"),
        pytest.param("scrypt$1024$8$1$abc", id="missing field"),
        pytest.param("scrypt$x$8$1$abc$def", id="non-numeric n"),
        pytest.param("scrypt$1000$8$1$abc$def", id="n not a power of two"),
        pytest.param("scrypt$1024$8$1$@@@$def", id="bad base64"),
    ],
)
def test_malformed_hash_never_matches(encoded: str) -> None:
    assert check_password("pw", encoded) is False


def test_tokens_are_random_and_digests_stable() -> None:
    a, b = new_token(), new_token()
    assert a != b and len(a) >= 43
    assert token_digest(a) == token_digest(a) != token_digest(b)
    assert len(token_digest(a)) == 64 and a not in token_digest(a)
