"""The job list: one page of job summaries, read as the list shows them and nothing more.

A summary is the ``jobs`` columns the list shows, plus three totals of the job's spec (GPUs, instances, task
roles) that SQL computes from the stored spec JSON (``json_each`` on SQLite, ``json_array_elements`` on
PostgreSQL; each in the form that database runs faster): no task rows, no submitted text, no spec decoded in
Python.

Indexes (``schema.JobRow``): every filter but ``keyword`` is an equality on the first column of an index that
goes on with ``(submitted_at, id)``, the list's order, so the page's ids are an ordered range of one index
that stops at the limit (several states: a few ranges, merged by a sort of their ids); without a filter the
``(submitted_at, id, name)`` index gives the order. Only then are the page's rows read, by primary key, and
their spec totals computed: an offset or a sort never touches a wide row. ``keyword`` (a case-insensitive
substring of the name) of three characters or more is first counted in its trigram index (``pai.store.keyword``):
none, and the page is empty; a few (up to ``SPARSE``), and the page's ids come from the index; many, and the page
walks the list's order, testing each name (the ``(submitted_at, id, name)`` index holds it), and fills after a few
entries. The count of a keyword alone is the index's; with other filters it is counted within their index ranges.
A shorter keyword has no trigram: it is always the walk, and its count reads every name (~30 ms per 100,000 jobs
on SQLite).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import JSON, ColumnElement, Select, TableValuedAlias, column, func, select, true
from sqlalchemy.orm import Session

from pai.domain.errors import InvalidParametersError
from pai.domain.job import Job
from pai.domain.states import JobState
from pai.store import keyword as keyword_index
from pai.store.schema import JobRow

# A keyword that matches at most this many jobs is read through its index; more, and walking the list's order finds
# a page's worth of matches sooner than the index would list them all.
SPARSE = 1_000

Order = Literal["asc", "desc"]


@dataclass(frozen=True, slots=True)
class JobFilters:
    """What the list asks for: filters (None: any), a page (``limit`` is required: a list is always bounded)."""

    limit: int
    offset: int = 0
    username: str | None = None
    vc: str | None = None
    states: tuple[JobState, ...] | None = None  # () matches nothing
    keyword: str | None = None  # a case-insensitive substring of the job's name
    order: Order = "desc"  # by submission time (then id)
    with_total: bool = False  # also count every match, ignoring offset and limit

    def __post_init__(self) -> None:
        if self.order not in ("asc", "desc"):
            raise InvalidParametersError(f"order: {self.order!r} is not one of asc, desc", field="order")
        for name, value in (("offset", self.offset), ("limit", self.limit)):
            if value < 0:
                raise InvalidParametersError(f"{name}: {value} is less than the minimum of 0", field=name)


@dataclass(frozen=True, slots=True)
class JobSummary:
    """A job as the list shows it (OpenPAI's JobSummary, before rendering)."""

    name: str
    user: str
    state: JobState
    vc: str
    priority: int
    retries: int
    submitted_at: float
    started_at: float | None
    completed_at: float | None
    exit_code: int | None
    total_gpu: int
    task_count: int
    role_count: int

    @classmethod
    def of(cls, job: Job) -> JobSummary:
        """The summary of a job already in memory (the job detail shows the same fields)."""
        spec = job.spec
        return cls(name=job.name, user=job.user, state=job.state, vc=job.vc, priority=spec.priority,
                   retries=job.retries, submitted_at=job.submitted_at, started_at=job.started_at,
                   completed_at=job.completed_at, exit_code=job.exit_code, total_gpu=spec.total.gpu,
                   task_count=spec.instance_count, role_count=len(spec.task_roles))


_SHOWN = (JobRow.name, JobRow.user_name, JobRow.state, JobRow.vc, JobRow.priority, JobRow.retries,
          JobRow.submitted_at, JobRow.started_at, JobRow.completed_at, JobRow.exit_code)


def _role_totals(dialect: str) -> tuple[TableValuedAlias, list[ColumnElement[Any]]]:
    """The job row's task roles (one row each, as JSON), and what to total over them: GPUs (instances x GPUs per
    instance), instances, roles."""
    if dialect == "postgresql":
        each = func.json_array_elements(JobRow.spec["task_roles"])
    else:
        each = func.json_each(JobRow.spec, "$.task_roles")
    role = each.table_valued(column("value", JSON)).alias("task_role")
    instances = role.c.value["instances"].as_integer()
    gpus = role.c.value[("resources", "gpu")].as_integer()
    return role, [func.coalesce(func.sum(instances * gpus), 0), func.coalesce(func.sum(instances), 0),
                  func.count(role.c.value)]


def _conditions(f: JobFilters, dialect: str, indexed: bool) -> list[ColumnElement[bool]]:
    conditions: list[ColumnElement[bool]] = []
    if f.username is not None:
        conditions.append(JobRow.user_name == f.username)
    if f.vc is not None:
        conditions.append(JobRow.vc == f.vc)
    if f.states is not None:
        conditions.append(JobRow.state.in_([st.value for st in f.states]))
    if f.keyword and indexed:
        conditions.append(keyword_index.condition(dialect, f.keyword))
    elif f.keyword:
        conditions.append(func.lower(JobRow.name).contains(f.keyword.lower(), autoescape=True))
    return conditions


def page_keys(f: JobFilters, dialect: str, indexed: bool = False) -> Select[*tuple[Any, ...]]:
    """The ids of one page, in order: only indexed columns, so that the database sorts or skips nothing wider.
    ``indexed``: the keyword is looked up in its index rather than tested on each name."""
    keys = (JobRow.submitted_at, JobRow.id)
    query = select(*keys).where(*_conditions(f, dialect, indexed))
    return query.order_by(*(k.desc() if f.order == "desc" else k.asc() for k in keys)).offset(f.offset).limit(f.limit)


def page_query(f: JobFilters, dialect: str, indexed: bool = False) -> Select[*tuple[Any, ...]]:
    """One page of summaries: the page's ids first (``page_keys``), then those rows and their spec totals."""
    page = page_keys(f, dialect, indexed).subquery("page")
    role, totals = _role_totals(dialect)
    names = ("total_gpu", "task_count", "role_count")
    if dialect == "postgresql":  # it parses a json value at each call: one pass over the roles for all three totals
        grouped = [total.label(name) for total, name in zip(totals, names, strict=True)]
        query = select(*_SHOWN, *grouped).select_from(page).join(JobRow, JobRow.id == page.c.id)
        query = query.outerjoin(role, true()).group_by(JobRow.id)
    else:  # SQLite: a correlated subquery a total costs less than grouping the page (two sorts)
        each = [select(total).select_from(role).correlate(JobRow).scalar_subquery().label(name)
                for total, name in zip(totals, names, strict=True)]
        query = select(*_SHOWN, *each).join_from(page, JobRow, JobRow.id == page.c.id)
    return query.order_by(*(k.desc() if f.order == "desc" else k.asc() for k in (JobRow.submitted_at, JobRow.id)))


def count_query(f: JobFilters, dialect: str, indexed: bool = False) -> Select[Any]:
    return select(func.count()).select_from(JobRow).where(*_conditions(f, dialect, indexed))


def _summary(row: Sequence[Any]) -> JobSummary:
    name, user, state, vc, priority, retries, submitted, started, completed, exit_code, gpus, tasks, roles = row
    return JobSummary(name=name, user=user, state=JobState(state), vc=vc, priority=priority, retries=retries,
                      submitted_at=submitted, started_at=started, completed_at=completed, exit_code=exit_code,
                      total_gpu=int(gpus), task_count=int(tasks), role_count=int(roles))


def list_summaries(s: Session, f: JobFilters) -> tuple[list[JobSummary], int | None]:
    """One page of job summaries by submission time, and how many match in all (None unless ``f.with_total``)."""
    dialect = s.get_bind().dialect.name
    matches = keyword_index.count(s, f.keyword) if f.keyword and keyword_index.indexable(f.keyword) else None
    if matches == 0:
        return [], 0 if f.with_total else None
    indexed = matches is not None and matches <= SPARSE
    page = [_summary(row) for row in s.execute(page_query(f, dialect, indexed))]
    if not f.with_total:
        return page, None
    if matches is not None and f.username is None and f.vc is None and f.states is None:
        return page, matches  # the keyword alone: its index counted it
    return page, int(s.scalar(count_query(f, dialect, indexed)) or 0)
