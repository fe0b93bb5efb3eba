"""The agents' door: the internal endpoints take the master's agent token (users' credentials:
``pai.rest_server.service.credentials``, checked inside each request's transaction)."""

from __future__ import annotations

import hmac

from aiohttp import web

from pai.domain.errors import UnauthorizedUserError
from pai.rest_server.keys import AGENT_TOKEN
from pai.rest_server.service import credentials


def check_agent(request: web.Request) -> None:
    """Internal endpoints: agents must present the master's agent token (there always is one)."""
    creds = credentials(request)
    if creds.basic_user is not None or not hmac.compare_digest(creds.token.encode(),
                                                               request.app[AGENT_TOKEN].encode()):
        raise UnauthorizedUserError("the agent token is not valid")
