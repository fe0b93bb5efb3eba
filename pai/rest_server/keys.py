"""The application's typed keys."""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum

from aiohttp import ClientSession, web

from pai.launcher.loop import LauncherLoop
from pai.launcher.role import Role
from pai.launcher.service import Launcher
from pai.launcher.storethread import StoreThread
from pai.launcher.vcadmin import VcAdmin
from pai.rest_server.channel import AgentChannels
from pai.rest_server.config import MasterConfig
from pai.rest_server.reports import ReportBatcher
from pai.rest_server.service import Service
from pai.rest_server.sockets import OpenSockets
from pai.store.db import Database


class Part(Enum):
    """What a process of the master serves (``pai.rest_server.app``)."""

    WHOLE = "whole"  # users, agents and the launcher (SQLite)
    LAUNCHER = "launcher"  # the agents and the launcher (PostgreSQL: the pai master process)
    API = "api"  # the users (PostgreSQL: a gunicorn worker)

    def launches(self) -> bool:
        return self is not Part.API


CONFIG = web.AppKey("config", MasterConfig)
DB = web.AppKey("db", Database)
STORE = web.AppKey("store", StoreThread)
LAUNCHER = web.AppKey("launcher", Launcher)
LOOP = web.AppKey("loop", LauncherLoop)
VCADMIN = web.AppKey("vcadmin", VcAdmin)
HTTP = web.AppKey("http", ClientSession)
CHANNELS = web.AppKey("channels", AgentChannels)  # the agents' WebSockets, for pokes
AGENT_TOKEN = web.AppKey("agent_token", str)  # what agents present, and what the master shows their log servers
ROLE = web.AppKey("role", Role)  # whether this master's launcher leads (pai.rest_server.leading)
# a change for the launcher: its loop woken, or nothing in an API worker (the database tells the launcher: NOTIFY)
WAKE: web.AppKey[Callable[[], None]] = web.AppKey("wake")
PART = web.AppKey("part", Part)
SERVICE = web.AppKey("service", Service)  # the one way a users' request reaches the store (pai.rest_server.service)
REPORTS = web.AppKey("reports", ReportBatcher)  # trials' reports, batched (pai.rest_server.reports)
SOCKETS = web.AppKey("sockets", OpenSockets)  # the users' open WebSockets (tunnels, proxied ones)
