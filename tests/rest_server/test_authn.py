"""Logging in and out and the token API as OpenPAI's clients use them: forms as well as JSON, application tokens,
revocation that takes effect at once, and OpenPAI's error codes."""

from __future__ import annotations

import base64

import pytest

from pai.store import tokens, users
from pai.store.credentials import token_digest
from tests.rest_server.conftest import ADMIN_PASSWORD, Api

FORM = "application/x-www-form-urlencoded"
LOGIN_PATHS = ["/api/v1/authn/basic/login", "/api/v2/authn/basic/login", "/api/v1/token", "/api/v2/tokens"]


def reference(token: str) -> str:
    return tokens.token_reference(token_digest(token))


async def add_user(api: Api, name: str) -> None:
    await api.write(lambda s: users.create_user(s, name, f"{name}-password"))


async def form_login(api: Api, path: str, body: str) -> tuple[int, dict[str, object]]:
    status, answer = await api.call("POST", path, body=body, content_type=FORM)
    assert isinstance(answer, dict)
    return status, answer


async def works(api: Api, token: str) -> bool:
    status, _ = await api.call("GET", "/api/v2/jobs?limit=1", token=token)
    assert status in (200, 401)
    return status == 200


@pytest.mark.parametrize("path", LOGIN_PATHS)
async def test_a_form_login_gives_a_working_token_on_every_login_path(api: Api, path: str) -> None:
    """The JS SDK posts ``expiration=4000&password=...&username=...`` as a form."""
    status, answer = await form_login(api, path, f"expiration=4000&password={ADMIN_PASSWORD}&username=admin")
    assert status == 200, answer
    assert (answer["user"], answer["admin"]) == ("admin", True)
    token = answer["token"]
    assert isinstance(token, str) and await works(api, token)
    status, check = await api.call("GET", "/api/v2/tokens/check", token=token)
    assert status == 200 and check["exp"] - check["iat"] == 4000 and check["application"] is False


@pytest.mark.parametrize(("body", "status", "code", "field"), [
    ("username=admin&password=wrong", 400, "IncorrectPasswordError", "Password"),
    ("username=nobody&password=whatever", 400, "NoUserError", "nobody"),
    ("username=admin", 400, "InvalidParametersError", "password"),
    (f"username=admin&password={ADMIN_PASSWORD}&expiration=soon", 400, "InvalidParametersError", "expiration"),
    (f"username=admin&username=root&password={ADMIN_PASSWORD}", 400, "InvalidParametersError", "username"),
], ids=["wrong password", "unknown user", "no password", "expiration not a number", "a field twice"])
async def test_bad_form_logins_get_openpais_codes(api: Api, body: str, status: int, code: str, field: str) -> None:
    got, answer = await form_login(api, "/api/v2/authn/basic/login", body)
    assert (got, answer["code"]) == (status, code)
    assert field in str(answer["message"])
    assert "token" not in answer


@pytest.mark.parametrize("version", ["v1", "v2"])
async def test_authn_info_says_how_to_log_in(api: Api, version: str) -> None:
    status, info = await api.call("GET", f"/api/{version}/authn/info", token="")
    assert status == 200
    assert info == {"authn_type": "basic", "loginURI": "/api/v1/authn/basic/login", "loginURIMethod": "post"}


async def test_logout_revokes_the_token_presented_and_only_it(api: Api) -> None:
    first, second = api.token, await api.login()
    assert first is not None and first != second
    status, answer = await api.call("DELETE", "/api/v2/authn/basic/logout", token=first)
    assert (status, answer) == (200, {"message": "Logout successfully"})
    assert not await works(api, first)
    assert await works(api, second)


async def test_an_application_token_never_expires_and_speaks_for_its_user(api: Api) -> None:
    status, answer = await api.call("POST", "/api/v2/tokens/application", json_body={})
    assert status == 200 and answer["application"] is True
    app_token = answer["token"]
    status, check = await api.call("GET", "/api/v2/tokens/check", token=app_token)
    assert status == 200 and check["application"] is True and "exp" not in check
    assert (check["username"], check["admin"]) == ("admin", True)
    basic = base64.b64encode(f"admin:{app_token}".encode()).decode()
    resp = await api.client.get("/api/v2/jobs?limit=1", headers={"Authorization": f"Basic {basic}"})
    assert resp.status == 200


async def test_basic_takes_only_a_users_own_application_token(api: Api) -> None:
    assert api.token is not None
    for credentials in (f"admin:{api.token}", "bob:anything", "no-colon", "admin:"):
        basic = base64.b64encode(credentials.encode()).decode()
        resp = await api.client.get("/api/v2/jobs?limit=1", headers={"Authorization": f"Basic {basic}"})
        assert resp.status == 401, credentials
        assert (await resp.json())["code"] == "UnauthorizedUserError"


@pytest.mark.parametrize(("method", "path"), [
    ("GET", "/api/v2/tokens"),
    ("POST", "/api/v2/tokens/application"),
    ("DELETE", "/api/v2/authn/basic/logout"),
    ("DELETE", "/api/v2/tokens/{own}"),
])
async def test_an_application_token_may_not_manage_tokens(api: Api, method: str, path: str) -> None:
    _, answer = await api.call("POST", "/api/v2/tokens/application", json_body={})
    app_token = answer["token"]
    status, refused = await api.call(method, path.format(own=app_token), token=app_token)
    assert (status, refused["code"]) == (403, "ForbiddenUserError")
    assert await works(api, app_token)


async def test_tokens_are_listed_by_reference_and_revoked_by_token_or_reference(api: Api) -> None:
    first = api.token
    assert first is not None
    _, answer = await api.call("POST", "/api/v2/tokens/application", json_body={})
    app_token = answer["token"]
    other = await api.login()
    status, listed = await api.call("GET", "/api/v2/tokens")
    assert status == 200
    assert listed["tokens"] == [reference(t) for t in (first, app_token, other)]  # oldest first; never the token
    status, _ = await api.call("DELETE", f"/api/v2/tokens/{reference(app_token)}")
    assert status == 200 and not await works(api, app_token)
    status, _ = await api.call("DELETE", f"/api/v2/tokens/{first}", token=other)
    assert status == 200 and not await works(api, first)
    assert await works(api, other)
    status, listed = await api.call("GET", "/api/v2/tokens", token=other)
    assert listed["tokens"] == [reference(other)]


async def test_a_token_is_revoked_by_its_owner_only(api: Api) -> None:
    await add_user(api, "bob")
    admin_token = api.token
    assert admin_token is not None
    bob = await api.login("bob", "bob-password")
    status, refused = await api.call("DELETE", f"/api/v2/tokens/{admin_token}", token=bob)
    assert (status, refused["code"]) == (403, "ForbiddenUserError")
    assert await works(api, admin_token)  # a refused request changes nothing
    status, refused = await api.call("DELETE", f"/api/v2/tokens/{reference(admin_token)}", token=bob)
    assert (status, refused["code"]) == (403, "ForbiddenUserError")  # by its reference too
    assert await works(api, admin_token)
    status, _ = await api.call("DELETE", "/api/v2/tokens/token-0123456789abcdef", token=bob)
    assert status == 200  # a reference that names no token: done, as OpenPAI answers
    status, _ = await api.call("DELETE", "/api/v2/tokens/no-such-token", token=bob)
    assert status == 200  # as OpenPAI: revoking what does not exist is done
    status, _ = await api.call("DELETE", f"/api/v2/tokens/{bob}", token=bob)
    assert status == 200 and not await works(api, bob)


@pytest.mark.parametrize(("method", "path", "status", "words"), [
    ("GET", "/api/v2/no-such-thing", 404, "API /api/v2/no-such-thing is not found"),
    ("GET", "/api/v1/user/admin/jobs/nothing/else/here", 404, "is not found"),
    ("DELETE", "/api/v2/authn/info", 405, "API DELETE /api/v2/authn/info is not found (it takes GET"),
])
async def test_an_unknown_api_is_noapierror(api: Api, method: str, path: str, status: int, words: str) -> None:
    got, answer = await api.call(method, path)
    assert (got, answer["code"]) == (status, "NoApiError")
    assert words in answer["message"]
