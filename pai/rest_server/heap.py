"""What start-up built, kept out of the garbage collector's scans: the master's and the read front's."""

from __future__ import annotations

import gc

from aiohttp import web


async def freeze_heap(app: web.Application) -> None:
    """``on_startup``, after the app's contexts have started. Keep what start-up built (modules, SQLAlchemy's
    metadata and caches, the first scheduling view) out of the cyclic garbage collector's scans: a full collection
    otherwise walks all of it and holds every thread of the process, which is what a request waiting behind it pays
    (measured: docs/architecture.md)."""
    gc.collect()
    gc.freeze()
