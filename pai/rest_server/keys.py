"""The application's typed keys."""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import ClientSession, web

from pai.launcher.loop import LauncherLoop, StoreThread
from pai.launcher.role import Role
from pai.launcher.service import Launcher
from pai.launcher.vcadmin import VcAdmin
from pai.rest_server.channel import AgentChannels
from pai.rest_server.config import MasterConfig
from pai.store.db import Database

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
WAKE: web.AppKey[Callable[[], None]] = web.AppKey("wake")  # a change for the launcher: its loop, or nothing (NOTIFY tells it)
