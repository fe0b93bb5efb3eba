"""How long the launcher expects each active job to run, for the ETAs of waiting reasons: its declared
``extras.expectedDurationSeconds``, else the typical run time of its user's jobs in its VC (``pai.store.durations``:
the median of their last 20 successful runs, when there are 3), else unknown.

Typical run times are kept per ``(user, vc)`` and read from the store for the active jobs that declare none, many
pairs to a query: a pair not known yet is read in the pass that first meets it (an incremental pass meets the few
jobs that changed), and every known pair is read again on a full pass once it is ``MAX_AGE_SECONDS`` old. A pass
whose jobs all declare a duration, or whose pairs are all known and fresh, reads nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from pai.domain.job import Job
from pai.store import durations as store_durations

MAX_AGE_SECONDS = 300.0

Pair = tuple[str, str]  # (user, vc)


@dataclass
class TypicalDurations:
    max_age_seconds: float = MAX_AGE_SECONDS
    _known: dict[Pair, float | None] = field(default_factory=dict)  # pair -> typical run time (None: none)
    _read_at: dict[Pair, float] = field(default_factory=dict)
    reads: int = 0  # pairs read from the store so far

    def load(self, s: Session, jobs: Iterable[Job], now: float, *, renew: bool = False) -> None:
        """Read the typical run times ``jobs`` need that are not known, in one query. ``renew`` (a full pass, with
        every active job): also those read ``max_age_seconds`` ago or more, and forget those no job needs."""
        wanted = {(j.user, j.vc) for j in jobs if j.spec.expected_seconds is None and not j.state.is_terminal()}
        if renew:  # (a full pass: ``jobs`` are every active job) pairs no active job needs now are forgotten
            for gone in self._known.keys() - wanted:
                del self._known[gone], self._read_at[gone]
        todo = [p for p in wanted if p not in self._known
                or (renew and now - self._read_at[p] >= self.max_age_seconds)]
        if not todo:
            return
        found = store_durations.typical_run_seconds(s, todo)
        for pair in todo:
            self._known[pair] = found.get(pair)
            self._read_at[pair] = now
        self.reads += len(todo)

    def of(self, job: Job) -> float | None:
        """The typical run time of ``job``'s user's jobs in its VC, as last read (None: none, or not read)."""
        return self._known.get((job.user, job.vc))
