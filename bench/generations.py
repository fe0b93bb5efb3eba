"""What reading a cache's generation costs per lookup: ``python bench/generations.py [--runs N] [--database-url URL]``.

On a SQLite file and on PostgreSQL (``--database-url``, default the tests' server, in a schema of its own), each
timed ``--runs`` times, one transaction each:

  select 1                 a transaction of one ``SELECT 1``: what the request's own transaction costs anyway
  generation read          ``generations.value(s, "accounts")`` timed inside an open transaction: what each lookup
                           adds now (the request's transaction is open already)
  caller, cache hit        ``Accounts.caller(s, token)`` with the token cached: the generation read and a dict
  caller, cache miss       the same after a bump: the generation read, the token's and its user's rows

Figures, not assertions (docs/architecture.md, "Caches across processes").
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import text
from sqlalchemy.orm import Session

from pai.launcher.accounts import Accounts
from pai.store import credentials, generations
from pai.store.db import Database
from tests.dbkit import database_url


def timed(runs: int, setup: Callable[[Session], object], measure: Callable[[Session], object], db: Database,
          ) -> list[float]:
    """Seconds of ``measure`` in each of ``runs`` transactions, after ``setup`` in the same transaction."""
    times = []
    for _ in range(runs):
        with db.session() as s:
            setup(s)
            began = time.perf_counter()
            measure(s)
            times.append(time.perf_counter() - began)
    return times


def line(name: str, values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return f"  {name:<26} p50 {statistics.median(values) * 1e3:7.3f} ms   p95 {p95 * 1e3:7.3f} ms   (n={len(values)})"


def bench(label: str, url: str, runs: int) -> None:
    db = Database(url)
    try:
        db.migrate()
        accounts = Accounts(db, time.time)
        accounts.ensure_admin("bench", "pw")
        token, _ = accounts.login("bench", "pw", 3600)
        one = text("SELECT 1")

        def select_one(s: Session) -> object:
            return s.execute(one).scalar()

        def nothing(_s: Session) -> object:
            return None

        def bump(s: Session) -> None:
            generations.bump(s, generations.ACCOUNTS)

        for _ in range(200):  # warm: connections, statement caches
            with db.session() as s:
                accounts.caller(s, token)
        print(f"{label}:")
        print(line("select 1", timed(runs, nothing, select_one, db)))
        print(line("generation read", timed(runs, select_one, lambda s: generations.value(s, "accounts"), db)))
        print(line("caller, cache hit", timed(runs, select_one, lambda s: accounts.caller(s, token), db)))
        misses = []
        for _ in range(runs // 4):
            with db.session() as s:
                bump(s)
            misses += timed(1, select_one, lambda s: accounts.caller(s, token), db)
        print(line("caller, cache miss", misses))
    finally:
        db.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5000)
    parser.add_argument("--database-url", help="a PostgreSQL database (default: the tests' server, own schema)")
    args = parser.parse_args()
    credentials.DEFAULT_PARAMS = credentials.ScryptParams(n=2**8)  # the bench's one login need not be slow
    with tempfile.TemporaryDirectory(prefix="pai-bench-") as tmp:
        bench("SQLite (a file, WAL)", f"sqlite:///{tmp}/pai.db", args.runs)
        postgres: AbstractContextManager[str] = (nullcontext(args.database_url) if args.database_url
                                                 else database_url("postgresql", Path(tmp)))
        with postgres as url:
            bench("PostgreSQL", url, args.runs)


if __name__ == "__main__":
    main()
