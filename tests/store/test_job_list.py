"""The job list's query (pai.store.summaries) on both backends: the summaries match the jobs, filters and order,
pages and totals, the columns it reads, and the indexes it uses."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from sqlalchemy import Select, text

from pai.domain.errors import InvalidParametersError
from pai.domain.job import Job, Task
from pai.domain.jobspec import ElasticRange
from pai.domain.resources import Resources
from pai.domain.states import JobState, TaskState
from pai.protocol.exitcodes import PlatformExit
from pai.store import jobs, summaries
from pai.store.db import Database
from pai.store.summaries import SHRUNK_EXIT, JobFilters, JobSummary, count_query, list_summaries, page_keys, page_query
from tests.dbkit import statements_of

from .builders import job, role

R, W, S = JobState.RUNNING, JobState.WAITING, JobState.STOPPED
ALL = 1_000


def _insert(db: Database, *values: Job) -> None:
    with db.session() as s:
        for value in values:
            jobs.insert_job(s, value, "{}")


@pytest.fixture
def catalogue(db: Database) -> dict[str, Job]:
    gang = (role("ps", 2, resources=Resources(0, 2, 1024)), role("worker", 3, resources=Resources(2, 8, 4096)))
    values = [
        job("train-a", "alice", submitted_at=1, virtual_cluster="dev", state=R, roles=gang, priority=100),
        job("train_b", "alice", submitted_at=2, virtual_cluster="prod", state=JobState.SUCCEEDED),
        job("eval-TRAIN", "bob", submitted_at=3, virtual_cluster="dev", state=W, roles=(role("w", 4),)),
        job("trainxb", "bob", submitted_at=4, virtual_cluster="default", state=JobState.FAILED),
        job("infer", "carol", submitted_at=5, virtual_cluster="dev", state=S, roles=(role(resources=Resources()),)),
        job("same-time", "dave", submitted_at=5, virtual_cluster="dev", state=S),  # the id breaks the tie
    ]
    values[3] = replace(values[3], retries=2, started_at=4.5, completed_at=9.25, exit_code=137)
    values = [replace(v, id=f"{i}-{v.name}") for i, v in enumerate(values)]  # "4-infer" < "5-same-time"
    _insert(db, *values)
    return {v.name: v for v in values}


@pytest.fixture(params=["index", "walk"])
def keyword_plan(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """A keyword with matches read through its index (few matches), or by walking the list's order (many)."""
    monkeypatch.setattr(summaries, "SPARSE", 1_000_000 if request.param == "index" else 0)
    return str(request.param)


def _names(db: Database, **filters: Any) -> list[str]:
    with db.session() as s:
        found, _ = list_summaries(s, JobFilters(limit=ALL, **filters))
    return [j.name for j in found]


def test_a_summary_is_what_the_job_shows(catalogue: dict[str, Job], db: Database) -> None:
    with db.session() as s:
        found, total = list_summaries(s, JobFilters(limit=ALL))
    assert total is None
    assert {j.name: j for j in found} == {name: JobSummary.of(value) for name, value in catalogue.items()}
    train_a = next(j for j in found if j.name == "train-a")
    assert (train_a.total_gpu, train_a.task_count, train_a.role_count, train_a.priority) == (6, 5, 2, 100)


def test_the_counts_follow_the_spec_not_the_task_rows(db: Database) -> None:
    """A rigid job's task rows are not read: the list shows what was asked for."""
    value = job("elastic", roles=(role("w", 3),))
    _insert(db, value)
    with db.session() as s:
        jobs.save_job(s, replace(value, tasks=(value.tasks[0], Task("w", 7))))
        found, _ = list_summaries(s, JobFilters(limit=ALL))
    assert [(j.task_count, j.total_gpu) for j in found] == [(3, 3)]


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        pytest.param({}, ["same-time", "infer", "trainxb", "eval-TRAIN", "train_b", "train-a"], id="newest first"),
        pytest.param({"order": "asc"}, ["train-a", "train_b", "eval-TRAIN", "trainxb", "infer", "same-time"],
                     id="oldest first"),
        pytest.param({"users": ("bob",)}, ["trainxb", "eval-TRAIN"], id="by user"),
        pytest.param({"vcs": ("dev",)}, ["same-time", "infer", "eval-TRAIN", "train-a"], id="by vc"),
        pytest.param({"states": (W, R)}, ["eval-TRAIN", "train-a"], id="by states"),
        pytest.param({"states": (S,), "order": "asc"}, ["infer", "same-time"], id="one state, oldest first"),
        pytest.param({"states": ()}, [], id="no states matches nothing"),
        pytest.param({"keyword": "TRAIN"}, ["trainxb", "eval-TRAIN", "train_b", "train-a"], id="keyword any case"),
        pytest.param({"keyword": "n_b"}, ["train_b"], id="underscore is literal"),
        pytest.param({"keyword": "%"}, [], id="percent is literal"),
        pytest.param({"keyword": "ra%n"}, [], id="percent is literal in a longer keyword"),
        pytest.param({"keyword": "xb"}, ["trainxb"], id="two characters: no trigram"),
        pytest.param({"keyword": "-train"}, ["eval-TRAIN"], id="keyword with a dash"),
        pytest.param({"keyword": 'ain"'}, [], id="a double quote is literal"),
        pytest.param({"keyword": "trainx"}, ["trainxb"], id="longer than a trigram"),
        pytest.param({"keyword": "aintr"}, [], id="its trigrams, not in that order"),
        pytest.param({"keyword": "train", "users": ("bob",)}, ["trainxb", "eval-TRAIN"], id="keyword and user"),
        pytest.param({"keyword": "train", "states": (S,)}, [], id="keyword and a state no match has"),
        pytest.param({"vcs": ("dev",), "users": ("alice",), "states": (R,)}, ["train-a"], id="filters combine"),
        pytest.param({"users": ("nobody",)}, [], id="no match"),
    ],
)
def test_filters_and_order(catalogue: dict[str, Job], db: Database, keyword_plan: str, filters: dict[str, Any],
                           expected: list[str]) -> None:
    assert _names(db, **filters) == expected
    with db.session() as s:
        _, total = list_summaries(s, JobFilters(limit=1, with_total=True, **filters))
    assert total == len(expected)


@pytest.mark.parametrize(
    ("offset", "limit", "expected"),
    [
        pytest.param(0, 2, ["trainxb", "eval-TRAIN"], id="first page"),
        pytest.param(2, 2, ["train_b", "train-a"], id="second page"),
        pytest.param(3, 2, ["train-a"], id="last page"),
        pytest.param(9, 2, [], id="past the end"),
        pytest.param(0, 0, [], id="limit zero"),
    ],
)
def test_pages_and_the_total(catalogue: dict[str, Job], db: Database, keyword_plan: str, offset: int, limit: int,
                             expected: list[str]) -> None:
    names = ("trainxb", "eval-TRAIN", "train_b", "train-a")
    with db.session() as s:
        found, total = list_summaries(s, JobFilters(limit=limit, offset=offset, keyword="train", with_total=True))
    assert [j.name for j in found] == expected and total == len(names)


def test_an_elastic_role_counts_its_members_now_less_those_leaving(db: Database) -> None:
    """Asked 3 (1 to 6), grown to 5, shrinking to 4: w[4] stops with the shrink's exit code and is not counted."""
    value = job("stretchy", roles=(replace(role("w", 3), elastic=ElasticRange(1, 6)),
                                        role("ps", 2, resources=Resources(0, 2, 1024))))
    _insert(db, value)
    run = TaskState.RUNNING
    members = (*(Task("w", i, run) for i in range(4)), Task("w", 4, TaskState.STOPPING, exit_code=SHRUNK_EXIT),
               *(t for t in value.tasks if t.role == "ps"))
    with db.session() as s:
        jobs.save_job(s, replace(value, tasks=members))
        found, _ = list_summaries(s, JobFilters(limit=ALL))
        stored = jobs.get_job(s, value.key)
    assert [(j.task_count, j.total_gpu) for j in found] == [(6, 4)]  # 4 workers of 1 GPU, 2 ps of none
    assert found == [JobSummary.of(stored)]  # the job in memory reads the same
    assert SHRUNK_EXIT == PlatformExit.SHRUNK


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        pytest.param({"order": "sideways"}, "order: 'sideways' is not one of asc, desc", id="order"),
        pytest.param({"offset": -1}, "offset: -1 is less than the minimum of 0", id="offset"),
        pytest.param({"limit": -1}, "limit: -1 is less than the minimum of 0", id="limit"),
    ],
)
def test_bad_filters_name_the_field(bad: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidParametersError, match=f"^{message}$"):
        JobFilters(**{"limit": 1, **bad})


def test_the_list_reads_no_submitted_text_and_task_rows_only_of_elastic_roles(catalogue: dict[str, Job],
                                                                            db: Database) -> None:
    with statements_of(db.engine) as statements, db.session() as s:
        list_summaries(s, JobFilters(limit=ALL, with_total=True))
    reads = [q for q in statements if q.lstrip().upper().startswith("SELECT")]
    assert len(reads) == 2  # the page and the count
    assert not any("config_text" in q for q in reads)
    # task rows only in an elastic role's branch (its members now): a rigid job's are never counted
    assert all(q.count("FROM tasks") <= q.count("CASE WHEN") for q in reads)
    shown = set(page_query(JobFilters(limit=1), db.dialect).selected_columns.keys())
    assert not shown & {"spec", "config_text", "waiting_reason", "exit_reason"}  # the spec's totals: in SQL


def _plan(db: Database, query: Select[*tuple[Any, ...]]) -> str:
    """How the database runs ``query``: SQLite's EXPLAIN QUERY PLAN, or PostgreSQL's EXPLAIN with scans of the
    whole table and sorts priced out (the tables here are tiny; this asks which indexes *can* serve)."""
    sql = str(query.compile(db.engine, compile_kwargs={"literal_binds": True}))
    with db.session() as s:
        if db.dialect == "sqlite":
            return "\n".join(str(row[-1]) for row in s.execute(text(f"EXPLAIN QUERY PLAN {sql}")))
        s.execute(text("SET LOCAL enable_seqscan = off"))
        s.execute(text("SET LOCAL enable_sort = off"))
        return "\n".join(str(row[0]) for row in s.execute(text(f"EXPLAIN {sql}")))


@pytest.mark.parametrize(
    ("filters", "index"),
    [
        pytest.param({}, "ix_jobs_submitted_at_id_name", id="no filter"),
        pytest.param({"order": "asc"}, "ix_jobs_submitted_at_id_name", id="no filter, oldest first"),
        pytest.param({"offset": 3}, "ix_jobs_submitted_at_id_name", id="a later page"),
        pytest.param({"users": ("bob",)}, "ix_jobs_user_name_submitted_at_id", id="username"),
        pytest.param({"vcs": ("dev",)}, "ix_jobs_vc_submitted_at_id", id="vc"),
        pytest.param({"states": (S,)}, "ix_jobs_state_submitted_at_id", id="state"),
        pytest.param({"keyword": "train"}, "ix_jobs_submitted_at_id_name", id="keyword, many matches: walks the order"),
    ],
)
def test_each_filter_and_the_order_use_an_index(catalogue: dict[str, Job], db: Database, filters: dict[str, Any],
                                                index: str) -> None:
    plan = _plan(db, page_keys(JobFilters(limit=20, **filters), db.dialect))
    scan = next(line for line in plan.splitlines() if " jobs" in line)
    assert index in scan, plan
    assert "TEMP B-TREE" not in plan and "Sort" not in plan, plan  # the index gives the order: no sort
    if db.dialect == "sqlite":  # the page's ids come from the index alone (with a keyword too: it holds the name)
        assert "COVERING INDEX" in scan, plan


def test_several_states_use_an_index(catalogue: dict[str, Job], db: Database) -> None:
    """Several states are several ranges: the planner reads their ids from the state index and sorts them, or
    walks the order index and filters (PostgreSQL here, where sorts are priced out). Never the whole table."""
    plan = _plan(db, page_keys(JobFilters(limit=20, states=(W, R)), db.dialect))
    assert "ix_jobs_state_submitted_at_id" in plan or "ix_jobs_submitted_at_id_name" in plan, plan


def test_the_page_reads_its_rows_by_primary_key(catalogue: dict[str, Job], db: Database) -> None:
    plan = _plan(db, page_query(JobFilters(limit=20, users=("bob",)), db.dialect))
    assert "ix_jobs_user_name_submitted_at_id" in plan, plan
    assert "sqlite_autoindex_jobs_1 (id=?)" in plan or "pk_jobs" in plan, plan


def test_the_count_of_a_filter_reads_its_index(catalogue: dict[str, Job], db: Database) -> None:
    plan = _plan(db, count_query(JobFilters(limit=1, users=("bob",)), db.dialect))
    assert "user_name" in plan and ("COVERING INDEX" in plan or db.dialect == "postgresql"), plan


def test_a_keyword_with_few_matches_is_read_through_its_index(catalogue: dict[str, Job], db: Database) -> None:
    plan = _plan(db, page_keys(JobFilters(limit=20, keyword="train"), db.dialect, indexed=True))
    assert ("VIRTUAL TABLE" in plan if db.dialect == "sqlite" else "ix_job_names_name_lower" in plan), plan
    assert "SCAN jobs" not in plan, plan


def test_the_keyword_index_follows_new_jobs_and_counts_alone(catalogue: dict[str, Job], db: Database) -> None:
    """A job inserted later is found through the index; a keyword alone is counted by the index (one read fewer)."""
    _insert(db, replace(job("late-TRAINING", "erin", submitted_at=9), id="9-late"))
    with statements_of(db.engine) as statements, db.session() as s:
        found, total = list_summaries(s, JobFilters(limit=2, keyword="training", with_total=True))
    assert ([j.name for j in found], total) == (["late-TRAINING"], 1)
    assert len([q for q in statements if q.lstrip().upper().startswith("SELECT")]) == 2  # the index's count, the page
    with db.session() as s:
        assert list_summaries(s, JobFilters(limit=2, keyword="nowhere", with_total=True)) == ([], 0)
