"""The tables, as SQLAlchemy ORM models. Migrations under ``migrations/`` create exactly this schema.

Times are seconds since the epoch (``float``, like the domain). JSON columns hold plain lists and dicts;
nullable ones store SQL NULL for ``None``.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Double,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

NAME = String(255)
NULLABLE_JSON = JSON(none_as_null=True)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map = {float: Double(), str: NAME, dict[str, Any]: JSON(), list[Any]: JSON()}


class UserRow(Base):
    __tablename__ = "users"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(unique=True)
    password_hash: Mapped[str] = mapped_column(Text)
    created_at: Mapped[float]
    email: Mapped[str] = mapped_column(default="", server_default="")
    extension: Mapped[dict[str, Any]] = mapped_column(JSON(), default=dict, server_default="{}")


class GroupRow(Base):
    """OpenPAI's groups: what a group grants is in ``extension.acls`` (pai.domain.groups)."""

    __tablename__ = "groups"

    name: Mapped[str] = mapped_column(primary_key=True)
    description: Mapped[str] = mapped_column(Text, default="", server_default="")
    external_name: Mapped[str] = mapped_column(default="", server_default="")
    extension: Mapped[dict[str, Any]] = mapped_column(JSON(), default=dict, server_default="{}")
    created_at: Mapped[float]


class MembershipRow(Base):
    """A user in a group; ``position`` keeps the user's group list in the order it was given."""

    __tablename__ = "memberships"

    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    group_name: Mapped[str] = mapped_column(ForeignKey("groups.name", ondelete="CASCADE"), primary_key=True,
                                            index=True)
    position: Mapped[int]


class TokenRow(Base):
    __tablename__ = "tokens"

    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)  # sha256 hex of the token
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    expires_at: Mapped[float | None]  # None: never expires
    created_at: Mapped[float]
    application: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


class JobRow(Base):
    __tablename__ = "jobs"
    __table_args__ = (
        UniqueConstraint("user_name", "name"),
        Index(None, "state"),
        Index(None, "vc"),
        Index(None, "submitted_at"),
        # The job list's order, alone and after each of its equality filters (pai.store.summaries): a page is one
        # ordered index range. ``keyword`` (a name substring) cannot use an index range; ``name`` rides along in the
        # order index so that its scan reads the index, not the rows.
        Index(None, "submitted_at", "id", "name"),
        Index(None, "user_name", "submitted_at", "id"),
        Index(None, "vc", "submitted_at", "id"),
        Index(None, "state", "submitted_at", "id"),
        # A user's latest finished jobs in a VC, with their run times from the index alone (pai.store.durations)
        Index(None, "user_name", "vc", "state", "completed_at", "started_at"),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    user_name: Mapped[str]
    name: Mapped[str]
    vc: Mapped[str]
    state: Mapped[str] = mapped_column(String(16))
    priority: Mapped[int]
    protocol_version: Mapped[int]
    config_text: Mapped[str] = mapped_column(Text)  # the job as submitted, its secrets' values masked (sealing.py)
    spec: Mapped[dict[str, Any]]  # codec.spec_to_dict of the normalized JobSpec, secret-bearing fields masked
    sealed: Mapped[str | None] = mapped_column(Text)  # those fields, encrypted (pai.store.sealing); None: it has none
    submitted_at: Mapped[float]
    started_at: Mapped[float | None]
    completed_at: Mapped[float | None]
    retries: Mapped[int] = mapped_column(default=0)
    platform_retries: Mapped[int] = mapped_column(default=0)
    exit_code: Mapped[int | None]
    exit_reason: Mapped[str | None] = mapped_column(Text)
    waiting_reason: Mapped[dict[str, Any] | None] = mapped_column(NULLABLE_JSON)
    preempted_by: Mapped[str | None]
    last_resized_at: Mapped[float | None]  # an elastic job's last resize (migration 0021)

    tasks: Mapped[list[TaskRow]] = relationship(
        back_populates="job", cascade="all, delete-orphan", passive_deletes=True
    )


class TaskRow(Base):
    __tablename__ = "tasks"
    __table_args__ = (Index(None, "job_id"), Index(None, "node"))

    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    role: Mapped[str] = mapped_column(primary_key=True)
    task_index: Mapped[int] = mapped_column(primary_key=True)
    state: Mapped[str] = mapped_column(String(16))
    node: Mapped[str | None]
    address: Mapped[str | None]
    ports: Mapped[dict[str, Any]]  # {label: [port, ...]}
    gpus: Mapped[list[Any]]
    attempt_id: Mapped[str | None]
    exit_code: Mapped[int | None]
    exit_reason: Mapped[str | None] = mapped_column(Text)
    retries: Mapped[int] = mapped_column(default=0)
    started_at: Mapped[float | None]
    finished_at: Mapped[float | None]

    job: Mapped[JobRow] = relationship(back_populates="tasks")


class JobTagRow(Base):
    """A job's tags (OpenPAI's ``PUT /api/v2/jobs/{job}/tag``); the list filters on them (``tagsContain``)."""

    __tablename__ = "job_tags"
    __table_args__ = (Index(None, "tag", "job_id"),)

    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    tag: Mapped[str] = mapped_column(String(256), primary_key=True)


class TaskAttemptRow(Base):
    __tablename__ = "task_attempts"

    attempt_id: Mapped[str] = mapped_column(primary_key=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    job_attempt: Mapped[int]
    role: Mapped[str]
    task_index: Mapped[int]
    node: Mapped[str | None]
    state: Mapped[str] = mapped_column(String(16))
    exit_code: Mapped[int | None]
    exit_reason: Mapped[str | None] = mapped_column(Text)
    started_at: Mapped[float | None]
    finished_at: Mapped[float | None]


class JobEventRow(Base):
    __tablename__ = "job_events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    at: Mapped[float]
    kind: Mapped[str] = mapped_column(String(64))
    message: Mapped[str] = mapped_column(Text)
    details: Mapped[dict[str, Any] | None] = mapped_column(NULLABLE_JSON)


class NodeRow(Base):
    __tablename__ = "nodes"

    name: Mapped[str] = mapped_column(primary_key=True)
    address: Mapped[str]
    gpu: Mapped[int]
    cpu: Mapped[int]
    memory_mb: Mapped[int]
    gpu_type: Mapped[str | None]
    labels: Mapped[dict[str, Any]]
    state: Mapped[str] = mapped_column(String(16))
    last_heartbeat: Mapped[float]
    log_port: Mapped[int] = mapped_column(default=0)
    failed_gpus: Mapped[list[Any]]
    port_low: Mapped[int]
    port_high: Mapped[int]
    admin_state: Mapped[str | None] = mapped_column(String(16))
    problems: Mapped[list[Any]] = mapped_column(JSON, default=list)
    gpu_memory_mb: Mapped[int] = mapped_column(default=0)


class VirtualClusterRow(Base):
    """One VC as written in the cluster configuration (``job_schemas/vc-config.json``), with its status."""

    __tablename__ = "virtual_clusters"

    name: Mapped[str] = mapped_column(primary_key=True)
    position: Mapped[int]
    spec: Mapped[dict[str, Any]]
    status: Mapped[str] = mapped_column(String(16))
    updated_at: Mapped[float]


class ClusterSettingRow(Base):
    """Cluster-wide sections of the configuration (``scheduler``, ``priorityClasses``, ``storages``, ...), as
    written: a JSON object or list."""

    __tablename__ = "cluster_settings"

    key: Mapped[str] = mapped_column(primary_key=True)
    value: Mapped[dict[str, Any] | list[Any]] = mapped_column(JSON())


class VcUsageRow(Base):
    """One sample of a virtual cluster's usage (``pai.launcher.usage``: every minute, kept a few days): what its jobs
    held, its guarantee and maximum then, and how many of its jobs ran and waited."""

    __tablename__ = "vc_usage_samples"
    __table_args__ = (Index(None, "at"),)  # the pruning of old samples

    vc: Mapped[str] = mapped_column(primary_key=True)
    at: Mapped[float] = mapped_column(primary_key=True)
    gpu: Mapped[int]
    cpu: Mapped[int]
    memory_mb: Mapped[int]
    guaranteed_gpu: Mapped[int]
    guaranteed_cpu: Mapped[int]
    guaranteed_memory_mb: Mapped[int]
    max_gpu: Mapped[int]
    max_cpu: Mapped[int]
    max_memory_mb: Mapped[int]
    running_jobs: Mapped[int]
    waiting_jobs: Mapped[int]


class SecretKeyCheckRow(Base):
    """One row: a known text sealed with the secret key, so that a master with another key refuses to start
    (pai.store.keyring.verify)."""

    __tablename__ = "secret_key_check"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    token: Mapped[str] = mapped_column(Text)


class LeaseRow(Base):
    """A lease (pai.store.leases): who holds it, at which epoch (the fencing token), renewed and expiring when (on
    PostgreSQL by the database server's clock)."""

    __tablename__ = "leases"

    name: Mapped[str] = mapped_column(primary_key=True)
    holder: Mapped[str] = mapped_column(Text)  # "" once released
    epoch: Mapped[int] = mapped_column(BigInteger)
    renewed_at: Mapped[float]
    expires_at: Mapped[float]




class MasterRow(Base):
    """A master that asked for the launcher's lease lately (pai.store.masters): what ``GET /api/v2/masters`` lists.
    Renewed with each of its lease ticks."""

    __tablename__ = "masters"

    holder: Mapped[str] = mapped_column(Text, primary_key=True)  # "<url>#<random>", as in the lease
    url: Mapped[str] = mapped_column(Text)
    epoch: Mapped[int] = mapped_column(BigInteger)  # the term it leads at; a standby: the lease's, as it last saw it
    seen_at: Mapped[float]


class GenerationRow(Base):
    """A counter per cache of the masters' processes (pai.store.generations): bumped by every write that changes what
    the cache holds, in the write's transaction; a cached value is used only while the counter is what it was cached
    at."""

    __tablename__ = "generations"

    name: Mapped[str] = mapped_column(Text, primary_key=True)  # "accounts", "cluster"
    value: Mapped[int] = mapped_column(BigInteger)


class InteractiveSessionRow(Base):
    """An open interactive session (exec, a tunnel) of a user in a task (pai.store.sessions): refreshed while it lives,
    deleted when it ends; one not refreshed lately is not counted (its API worker died)."""

    __tablename__ = "interactive_sessions"
    __table_args__ = (Index(None, "user_name", "seen_at"),)

    id: Mapped[str] = mapped_column(primary_key=True)
    user_name: Mapped[str]
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    kind: Mapped[str] = mapped_column(String(16))  # exec, tunnel
    detail: Mapped[str] = mapped_column(Text)  # the command, the port
    opened_at: Mapped[float]
    seen_at: Mapped[float]



class ExperimentRow(Base):
    """A hyperparameter search (pai.store.experiments): its spec as posted (normalized JSON), its trials below."""

    __tablename__ = "experiments"
    __table_args__ = (UniqueConstraint("user_name", "name"), Index(None, "state"))

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_name: Mapped[str]
    name: Mapped[str]
    vc: Mapped[str]
    spec: Mapped[dict[str, Any]]
    state: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[float]
    ended_at: Mapped[float | None]
    stop_requested: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


class TrialRow(Base):
    """A trial of an experiment: its hyperparameters and its job (None until submitted; SET NULL when the job is
    deleted alone). ``token_hash``: sha256 of the trial's token, the only credential of its reports. ``points``: how
    many metric rows it has (kept here so that the cap is checked without counting them)."""

    __tablename__ = "trials"
    __table_args__ = (UniqueConstraint("experiment_id", "number"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    experiment_id: Mapped[int] = mapped_column(ForeignKey("experiments.id", ondelete="CASCADE"))
    number: Mapped[int]
    hparams: Mapped[dict[str, Any]]
    job_id: Mapped[str | None] = mapped_column(String(36), ForeignKey("jobs.id", ondelete="SET NULL"), index=True)
    state: Mapped[str] = mapped_column(String(16))
    stopped_by: Mapped[str | None] = mapped_column(String(16))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    stop_requested: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    points: Mapped[int] = mapped_column(default=0, server_default="0")
    created_at: Mapped[float]
    # the searcher's metric as reported so far (pai.store.trial_reports): its value at the latest step, and its best
    # value with the first step that reported it; kept by every report, so a view never aggregates the values
    latest_step: Mapped[int | None] = mapped_column(BigInteger)
    latest_value: Mapped[float | None]
    best_step: Mapped[int | None] = mapped_column(BigInteger)
    best_value: Mapped[float | None]


class TrialMetricRow(Base):
    """One reported value: the primary key makes a report idempotent per (trial, step, name); the first one stays."""

    __tablename__ = "trial_metrics"

    trial_id: Mapped[int] = mapped_column(ForeignKey("trials.id", ondelete="CASCADE"), primary_key=True)
    step: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    name: Mapped[str] = mapped_column(primary_key=True)
    value: Mapped[float]
    reported_at: Mapped[float] = mapped_column(default=0.0, server_default="0")  # the searcher replays in this order


class TrialCheckpointRow(Base):
    """A checkpoint a trial wrote (where, at which step, the trial's own metadata); the same step again replaces it."""

    __tablename__ = "trial_checkpoints"

    trial_id: Mapped[int] = mapped_column(ForeignKey("trials.id", ondelete="CASCADE"), primary_key=True)
    step: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    path: Mapped[str] = mapped_column(Text)
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", JSON())
    created_at: Mapped[float]


metadata = Base.metadata
