"""The job list: one page of job summaries, read as the list shows them and nothing more.

A summary is the ``jobs`` columns the list shows, plus three totals of the job's spec (GPUs, instances, task
roles) that SQL computes from the stored spec JSON (``json_each`` on SQLite, ``json_array_elements`` on
PostgreSQL; each in the form that database runs faster): no submitted text, no spec decoded in Python, and no task
rows but an elastic role's, whose size is its members now (its task rows, less those a shrink is removing), not
the size it asked first.

Indexes (``schema.JobRow``): every filter but ``keyword`` is an equality on the first column of an index that
goes on with ``(submitted_at, id)``, the list's order, so the page's ids are an ordered range of one index
that stops at the limit (several states: a few ranges, merged by a sort of their ids); without a filter the
``(submitted_at, id, name)`` index gives the order. Only then are the page's rows read, by primary key, and
their spec totals computed: an offset or a sort never touches a wide row. ``keyword`` (a case-insensitive
substring of the name) of three characters or more is first counted in its trigram index (``pai.store.keyword``):
none, and the page is empty; a few (up to ``SPARSE``), and the page's ids come from the index; many, and the page
walks the list's order, testing each name (the ``(submitted_at, id, name)`` index holds it), and fills after a few
entries. The count of a keyword alone is the index's; with other filters it is counted within their index ranges.
A shorter keyword has no trigram: it is always the walk, and its count reads every name (its cost: docs/api.md).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from sqlalchemy import JSON, ColumnElement, Select, TableValuedAlias, case, column, func, select, true
from sqlalchemy.orm import Session

from pai.domain.errors import InvalidParametersError
from pai.domain.job import Job
from pai.domain.jobspec import DEFAULT_PRIORITY_CLASS, TaskRoleSpec
from pai.domain.states import JobState, TaskState
from pai.store import keyword as keyword_index
from pai.store.schema import JobRow, JobTagRow, TaskRow

# A task stopped because its elastic job shrank (pai.protocol.exitcodes.PlatformExit.SHRUNK; the store does not
# import the protocol): stopping, it is no longer counted in the job's size.
SHRUNK_EXIT = -402

# A keyword that matches at most this many jobs is read through its index; more, and walking the list's order finds
# a page's worth of matches sooner than the index would list them all.
SPARSE = 1_000

Order = Literal["asc", "desc"]
SortField = Literal["submissionTime", "completionTime", "jobName", "username", "vc", "state", "retries",
                    "jobPriority", "totalGpuNumber", "totalTaskNumber"]
SORT_FIELDS: tuple[SortField, ...] = get_args(SortField)


@dataclass(frozen=True, slots=True)
class JobFilters:
    """What the list asks for: filters (None: any; a tuple: any of these), a page (``limit`` is required: a list is
    always bounded), and an order (OpenPAI's ``order=<field>,ASC|DESC``; submission time by default)."""

    limit: int
    offset: int = 0
    users: tuple[str, ...] | None = None
    vcs: tuple[str, ...] | None = None
    states: tuple[JobState, ...] | None = None  # () matches nothing
    keyword: str | None = None  # a case-insensitive substring of the job's name
    tags_contain: tuple[str, ...] | None = None  # jobs with at least one of these tags
    tags_not_contain: tuple[str, ...] | None = None  # jobs with none of these tags
    sort: SortField = "submissionTime"
    order: Order = "desc"  # then by submission time and id, in the same direction
    with_total: bool = False  # also count every match, ignoring offset and limit

    def __post_init__(self) -> None:
        if self.order not in ("asc", "desc"):
            raise InvalidParametersError(f"order: {self.order!r} is not one of asc, desc", field="order")
        if self.sort not in SORT_FIELDS:
            raise InvalidParametersError(f"order: {self.sort!r} is not one of {', '.join(SORT_FIELDS)}",
                                         field="order")
        for name, value in (("offset", self.offset), ("limit", self.limit)):
            if value < 0:
                raise InvalidParametersError(f"{name}: {value} is less than the minimum of 0", field=name)


@dataclass(frozen=True, slots=True)
class JobSummary:
    """A job as the list shows it (OpenPAI's JobSummary, before rendering)."""

    id: str
    name: str
    user: str
    state: JobState
    vc: str
    priority: int
    priority_class: str
    retries: int  # counted against retryCount
    platform_retries: int  # requeues the platform caused
    submitted_at: float
    started_at: float | None
    completed_at: float | None
    exit_code: int | None
    total_gpu: int
    task_count: int
    role_count: int
    tags: tuple[str, ...] = ()

    @classmethod
    def of(cls, job: Job, tags: Sequence[str] = ()) -> JobSummary:
        """The summary of a job already in memory (the job detail shows the same fields)."""
        spec = job.spec
        sizes = [(role_size(job, r), r.resources.gpu) for r in spec.task_roles]
        return cls(id=job.id, name=job.name, user=job.user, state=job.state, vc=job.vc, priority=spec.priority,
                   priority_class=spec.priority_class, retries=job.retries, platform_retries=job.platform_retries,
                   submitted_at=job.submitted_at, started_at=job.started_at, completed_at=job.completed_at,
                   exit_code=job.exit_code, total_gpu=sum(n * gpu for n, gpu in sizes),
                   task_count=sum(n for n, _ in sizes), role_count=len(spec.task_roles), tags=tuple(sorted(tags)))


def role_size(job: Job, role: TaskRoleSpec) -> int:
    """The role's size now: its instances, or an elastic role's members not leaving after a shrink."""
    if role.elastic is None or not role.elastic.resizable:
        return role.instances
    return sum(1 for t in job.tasks if t.role == role.name
               and not (t.state is TaskState.STOPPING and t.exit_code == SHRUNK_EXIT))


_SHOWN = (JobRow.id, JobRow.name, JobRow.user_name, JobRow.state, JobRow.vc, JobRow.priority,
          JobRow.spec["priority_class"].as_string().label("priority_class"), JobRow.retries, JobRow.platform_retries,
          JobRow.submitted_at, JobRow.started_at, JobRow.completed_at, JobRow.exit_code)


def _role_totals(dialect: str) -> tuple[TableValuedAlias, list[ColumnElement[Any]]]:
    """The job row's task roles (one row each, as JSON), and what to total over them: GPUs (instances x GPUs per
    instance), instances (an elastic role's: its members now, as ``role_size``), roles."""
    if dialect == "postgresql":
        each = func.json_array_elements(JobRow.spec["task_roles"])
    else:
        each = func.json_each(JobRow.spec, "$.task_roles")
    role = each.table_valued(column("value", JSON)).alias("task_role")
    members = (select(func.count()).select_from(TaskRow)
               .where(TaskRow.job_id == JobRow.id, TaskRow.role == role.c.value["name"].as_string(),
                      ~((TaskRow.state == TaskState.STOPPING.value) & (TaskRow.exit_code == SHRUNK_EXIT)))
               .correlate_except(TaskRow).scalar_subquery())
    elastic = (role.c.value[("elastic", "min_instances")].as_integer()
               < role.c.value[("elastic", "max_instances")].as_integer())
    instances = case((elastic, members), else_=role.c.value["instances"].as_integer())
    gpus = role.c.value[("resources", "gpu")].as_integer()
    return role, [func.coalesce(func.sum(instances * gpus), 0), func.coalesce(func.sum(instances), 0),
                  func.count(role.c.value)]


def _correlated_totals(dialect: str) -> list[ColumnElement[Any]]:
    """The totals as correlated subqueries of the job row (one value per row, no grouping)."""
    role, totals = _role_totals(dialect)
    return [select(total).select_from(role).correlate(JobRow).scalar_subquery() for total in totals]


def _tags_column(dialect: str) -> ColumnElement[Any]:
    """The job row's tags as a JSON array (text on SQLite, NULL for none on PostgreSQL)."""
    agg = func.json_agg(JobTagRow.tag) if dialect == "postgresql" else func.json_group_array(JobTagRow.tag)
    return select(agg).where(JobTagRow.job_id == JobRow.id).correlate(JobRow).scalar_subquery()


def _tagged(tags: tuple[str, ...]) -> ColumnElement[bool]:
    return JobRow.id.in_(select(JobTagRow.job_id).where(JobTagRow.tag.in_(tags)))


def _conditions(f: JobFilters, dialect: str, indexed: bool) -> list[ColumnElement[bool]]:
    conditions: list[ColumnElement[bool]] = []
    if f.users is not None:
        conditions.append(JobRow.user_name.in_(f.users))
    if f.vcs is not None:
        conditions.append(JobRow.vc.in_(f.vcs))
    if f.states is not None:
        conditions.append(JobRow.state.in_([st.value for st in f.states]))
    if f.tags_contain is not None:
        conditions.append(_tagged(f.tags_contain))
    if f.tags_not_contain is not None:
        conditions.append(~_tagged(f.tags_not_contain))
    if f.keyword and indexed:
        conditions.append(keyword_index.condition(dialect, f.keyword))
    elif f.keyword:
        conditions.append(func.lower(JobRow.name).contains(f.keyword.lower(), autoescape=True))
    return conditions


def _sort_key(f: JobFilters, dialect: str) -> ColumnElement[Any] | None:
    """What a non-default order sorts by first (None: submission time, the indexed order)."""
    simple: dict[str, Any] = {  # a column or an expression
        "completionTime": JobRow.completed_at, "jobName": JobRow.name, "username": JobRow.user_name,
        "vc": JobRow.vc, "state": JobRow.state, "retries": JobRow.retries + JobRow.platform_retries,
        "jobPriority": JobRow.priority,
    }
    if f.sort in simple:
        key: ColumnElement[Any] = simple[f.sort]
        return key
    if f.sort in ("totalGpuNumber", "totalTaskNumber"):
        gpus, tasks, _ = _correlated_totals(dialect)
        return gpus if f.sort == "totalGpuNumber" else tasks
    return None


def _ordered(f: JobFilters, keys: Sequence[ColumnElement[Any]]) -> list[ColumnElement[Any]]:
    """``keys`` (the sort key if any, submission time, id) in the list's direction; a completion time sorts
    unfinished jobs last going up, first going down (OpenPAI's ``NULLS LAST`` / ``NULLS FIRST``)."""
    out: list[ColumnElement[Any]] = []
    for i, k in enumerate(keys):
        nulls = i == 0 and f.sort == "completionTime"
        if f.order == "desc":
            out.append(k.desc().nulls_first() if nulls else k.desc())
        else:
            out.append(k.asc().nulls_last() if nulls else k.asc())
    return out


def page_keys(f: JobFilters, dialect: str, indexed: bool = False) -> Select[*tuple[Any, ...]]:
    """The ids of one page, in order: only indexed columns, so that the database sorts or skips nothing wider
    (another order than submission time sorts every match by its key first). ``indexed``: the keyword is looked up
    in its index rather than tested on each name."""
    first = _sort_key(f, dialect)
    keys: list[Any] = [JobRow.submitted_at, JobRow.id]
    if first is not None:
        keys.insert(0, first.label("sort_key"))
    query = select(*keys).where(*_conditions(f, dialect, indexed))
    ordering = keys if first is None else [first, *keys[1:]]
    return query.order_by(*_ordered(f, ordering)).offset(f.offset).limit(f.limit)


def page_query(f: JobFilters, dialect: str, indexed: bool = False) -> Select[*tuple[Any, ...]]:
    """One page of summaries: the page's ids first (``page_keys``), then those rows, their spec totals and tags."""
    page = page_keys(f, dialect, indexed).subquery("page")
    order = _ordered(f, [page.c[c.key] for c in page.columns])
    tags = _tags_column(dialect).label("tags")
    role, totals = _role_totals(dialect)
    names = ("total_gpu", "task_count", "role_count")
    if dialect == "postgresql":  # it parses a json value at each call: one pass over the roles for all three totals
        grouped = [total.label(name) for total, name in zip(totals, names, strict=True)]
        query = select(*_SHOWN, *grouped, tags).select_from(page).join(JobRow, JobRow.id == page.c.id)
        query = query.outerjoin(role, true()).group_by(JobRow.id, *page.columns)
    else:  # SQLite: a correlated subquery a total costs less than grouping the page (two sorts)
        each = [total.label(name) for total, name in zip(_correlated_totals(dialect), names, strict=True)]
        query = select(*_SHOWN, *each, tags).join_from(page, JobRow, JobRow.id == page.c.id)
    return query.order_by(*order)


def count_query(f: JobFilters, dialect: str, indexed: bool = False) -> Select[Any]:
    return select(func.count()).select_from(JobRow).where(*_conditions(f, dialect, indexed))


def _tags(raw: Any) -> tuple[str, ...]:
    if raw is None:
        return ()
    return tuple(sorted(json.loads(raw) if isinstance(raw, str) else raw))


def _summary(row: Sequence[Any]) -> JobSummary:
    (job_id, name, user, state, vc, priority, priority_class, retries, platform_retries, submitted, started,
     completed, exit_code, gpus, tasks, roles, tags) = row
    return JobSummary(id=job_id, name=name, user=user, state=JobState(state), vc=vc, priority=priority,
                      priority_class=priority_class or DEFAULT_PRIORITY_CLASS, retries=retries,
                      platform_retries=platform_retries, submitted_at=submitted, started_at=started,
                      completed_at=completed, exit_code=exit_code, total_gpu=int(gpus), task_count=int(tasks),
                      role_count=int(roles), tags=_tags(tags))


def list_summaries(s: Session, f: JobFilters) -> tuple[list[JobSummary], int | None]:
    """One page of job summaries in the list's order, and how many match in all (None unless ``f.with_total``)."""
    dialect = s.get_bind().dialect.name
    matches = keyword_index.count(s, f.keyword) if f.keyword and keyword_index.indexable(f.keyword) else None
    if matches == 0:
        return [], 0 if f.with_total else None
    indexed = matches is not None and matches <= SPARSE
    page = [_summary(row) for row in s.execute(page_query(f, dialect, indexed))]
    if not f.with_total:
        return page, None
    alone = f.users is None and f.vcs is None and f.states is None and f.tags_contain is None
    if matches is not None and alone and f.tags_not_contain is None:
        return page, matches  # the keyword alone: its index counted it
    return page, int(s.scalar(count_query(f, dialect, indexed)) or 0)
