"""What a v2 job asks to mount: ``extras.storages`` and OpenPAI's ``teamwise_storage`` runtime plugin.

Only read here (the schema has checked the shapes); the launcher resolves the names against the cluster's
storages and the user's groups at submission (``pai.domain.storage.resolve_mounts``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pai.domain.storage import StorageMount, default_mount_path

RUNTIME_PLUGIN = "com.microsoft.pai.runtimeplugin"
TEAMWISE_STORAGE = "teamwise_storage"


def requested_mounts(extras: Mapping[str, Any] | None) -> tuple[StorageMount, ...]:
    extras = extras or {}
    mounts = [
        StorageMount(item["name"], item.get("mountPath") or default_mount_path(item["name"]), f"extras.storages[{i}]")
        for i, item in enumerate(extras.get("storages") or [])
    ]
    for i, plugin in enumerate(extras.get(RUNTIME_PLUGIN) or []):
        if plugin.get("plugin") != TEAMWISE_STORAGE:
            continue
        path = f"extras.{RUNTIME_PLUGIN}[{i}].parameters.storageConfigNames"
        names = (plugin.get("parameters") or {}).get("storageConfigNames")
        if names is None:  # the user's default storages
            mounts.append(StorageMount("", "", path))
        else:
            mounts.extend(StorageMount(n, default_mount_path(n), f"{path}[{j}]") for j, n in enumerate(names))
    return tuple(mounts)
