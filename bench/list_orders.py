"""List orders benchmark: ``python bench/list_orders.py [--backend sqlite|postgresql] [--jobs N] [--elastic-share S]``.

Stores N finished jobs (default 100,000, as ``bench/api_lists.py`` does) and reads the first page (20 jobs) of
the job list in each of OpenPAI's orders through the store (``pai.store.summaries.list_summaries``), printing
the best of three reads per order: submission time is the order of the list's indexes; every other order sorts
the matches first, and the GPU and task totals are computed from each job's spec. ``--elastic-share S``: that
share of the jobs are elastic (a role of 2 instances, 1..4, that ran at 3: ``bench.api_lists.finished_job``), whose
totals count their task rows (the correlated subquery of ``pai.store.summaries``); the jobs are otherwise the same.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.api_lists import store
from pai.store.db import Database
from pai.store.summaries import SORT_FIELDS, JobFilters, list_summaries
from tests.dbkit import database_url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--elastic-share", type=float, default=0.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pai-bench-") as tmp, database_url(args.backend, Path(tmp)) as url:
        seconds, _ = store(url, args.jobs, args.elastic_share)
        print(f"{args.backend}: stored {args.jobs} jobs ({args.elastic_share:g} elastic) in {seconds:.1f} s")
        db = Database(url)
        try:
            for sort in SORT_FIELDS:
                best = float("inf")
                for _ in range(3):
                    started = time.perf_counter()
                    with db.session() as s:
                        list_summaries(s, JobFilters(limit=20, sort=sort))
                    best = min(best, time.perf_counter() - started)
                print(f"  order={sort},DESC limit=20: {best * 1000:.0f} ms")
        finally:
            db.dispose()


if __name__ == "__main__":
    main()
