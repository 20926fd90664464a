"""Tables. Runs hold the current state; events are the append-only timeline."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
)

metadata = MetaData()

# 64-bit ids on PostgreSQL (BIGSERIAL; int4 would run out at 2^31 events); SQLite's rowid alias must
# be spelled INTEGER to autoincrement, and is 64-bit anyway. Older databases are widened by v8.
Id64 = BigInteger().with_variant(Integer, "sqlite")

meta = Table(
    "gpuplat_meta",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

config = Table(
    "gpuplat_config",
    metadata,
    Column("version", Id64, primary_key=True, autoincrement=True),
    Column("body", JSON, nullable=False),
    Column("source", String(256), nullable=False, default=""),
    Column("applied_by", String(128), nullable=False, default=""),
    Column("applied_at", Float, nullable=False),
)

runs = Table(
    "gpuplat_runs",
    metadata,
    Column("seq", Id64, primary_key=True, autoincrement=True),
    Column("id", String(32), nullable=False, unique=True),
    Column("project", String(63), nullable=False),
    Column("user", String(128), nullable=False),
    Column("name", String(128), nullable=True),
    Column("kind", String(16), nullable=False),
    Column("queue", String(63), nullable=False),
    Column("status", String(16), nullable=False),
    Column("reason", String(64), nullable=False, default=""),
    Column("message", Text, nullable=False, default=""),
    Column("request", JSON, nullable=False),
    Column("resolved", JSON, nullable=False),
    Column("provenance", JSON, nullable=False),
    Column("gpu", Integer, nullable=False, default=0),
    Column("cpu_milli", Integer, nullable=False, default=0),
    # Bytes overflow a 32-bit INTEGER (2Gi already does) on PostgreSQL; SQLite integers are 64-bit anyway.
    Column("memory_bytes", BigInteger, nullable=False, default=0),
    Column("devices", JSON, nullable=True),
    Column("handle", JSON, nullable=True),
    Column("exit_code", Integer, nullable=True),
    Column("stop_requested_by", String(128), nullable=True),
    Column("created_at", Float, nullable=False),
    Column("queued_at", Float, nullable=True),
    Column("dispatched_at", Float, nullable=True),
    Column("started_at", Float, nullable=True),
    Column("finished_at", Float, nullable=True),
    Column("updated_at", Float, nullable=False),
    # What code ran: {snapshot, git: {commit, dirty, diff_path}} (v5), and where it started.
    Column("code", JSON, nullable=True),
    Column("working_dir", Text, nullable=True),
    # A sweep's child: its parent's id (v7).
    Column("parent", String(32), nullable=True),
    # The flavor (kind of GPU) it was admitted on; null where its queue has no flavors (v11).
    Column("flavor", String(63), nullable=True),
    # What it did with the GPUs it held (core.gpu_usage.summary), kept when it ended; null before (v13).
    Column("gpu_usage", JSON, nullable=True),
    Index("ix_runs_project_seq", "project", "seq"),
    Index("ix_runs_parent_seq", "parent", "seq"),
    Index("ix_runs_status", "status"),
)

events = Table(
    "gpuplat_events",
    metadata,
    Column("id", Id64, primary_key=True, autoincrement=True),
    Column("run_id", String(32), nullable=False),
    Column("project", String(63), nullable=False),
    Column("status", String(16), nullable=False),
    Column("reason", String(64), nullable=False, default=""),
    Column("message", Text, nullable=False, default=""),
    Column("at", Float, nullable=False),
    Column("details", JSON, nullable=True),
    Index("ix_events_run", "run_id", "id"),
)

# Metric series in chunks of packed arrays (int64 steps, float64 values): ingest and
# reads move a few blobs per series, not a row per point.
metric_chunks = Table(
    "gpuplat_metric_chunks",
    metadata,
    Column("run_id", String(32), nullable=False),
    Column("name", String(256), nullable=False),
    Column("chunk", Integer, nullable=False),
    Column("n", Integer, nullable=False),
    Column("steps", LargeBinary, nullable=False),
    Column("values", LargeBinary, nullable=False),
    Column("vmin", Float, nullable=True),
    Column("vmax", Float, nullable=True),
    Column("last_step", BigInteger, nullable=False),
    Column("last_value", Float, nullable=True),
    PrimaryKeyConstraint("run_id", "name", "chunk"),
)

# Params logged by the run (merged over the submitted ones) and how far each run's
# tracking files have been indexed, so indexing resumes where it stopped.
run_tracking = Table(
    "gpuplat_run_tracking",
    metadata,
    Column("run_id", String(32), primary_key=True),
    Column("params", JSON, nullable=False),
    Column("metrics_offset", BigInteger, nullable=False, default=0),
    Column("params_offset", BigInteger, nullable=False, default=0),
    Column("log_offset", BigInteger, nullable=False, default=0),  # in .gpuplat/metrics.bin (v6)
)

# Team mode: one row (id 1). Whoever holds the leader lock bumps `epoch` when it takes over;
# every state-writing transaction checks that the epoch is still its own (fencing), so a
# deposed leader's late write is refused (v8).
leader = Table(
    "gpuplat_leader",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("epoch", BigInteger, nullable=False, default=0),
    Column("holder", String(256), nullable=False, default=""),
    Column("acquired_at", Float, nullable=True),
)
