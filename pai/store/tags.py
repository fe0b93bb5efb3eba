"""Job tags: free-form labels a job's owner adds and removes (OpenPAI's ``/api/v2/jobs/{job}/tag``).

A tag is a row of ``job_tags`` (``(job_id, tag)`` is the key, so adding one twice is one row); the job list reads
a page's tags with the page (``pai.store.summaries``) and filters on them through the ``(tag, job_id)`` index.
"""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import CursorResult, delete, select
from sqlalchemy.orm import Session

from pai.store.schema import JobTagRow

MAX_LENGTH = 256


def add_tag(s: Session, job_id: str, tag: str) -> bool:
    """Tag the job; False when it already had the tag (nothing changes)."""
    if s.get(JobTagRow, (job_id, tag)) is not None:
        return False
    s.add(JobTagRow(job_id=job_id, tag=tag))
    return True


def remove_tag(s: Session, job_id: str, tag: str) -> bool:
    """Untag the job; False when it did not have the tag."""
    result = s.execute(delete(JobTagRow).where(JobTagRow.job_id == job_id, JobTagRow.tag == tag))
    return bool(cast(CursorResult[Any], result).rowcount)


def tags_of(s: Session, job_id: str) -> list[str]:
    """The job's tags, in alphabetical order."""
    return list(s.scalars(select(JobTagRow.tag).where(JobTagRow.job_id == job_id).order_by(JobTagRow.tag)))
