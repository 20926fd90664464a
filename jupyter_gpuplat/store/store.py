"""The Store: every read and write of platform state goes through here.

Synchronous SQLAlchemy Core: each call is one short transaction (SQLite in WAL
mode commits in well under a millisecond), so the engine can call it from the
event loop and a crash never leaves half a transition.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, bindparam, create_engine, event, func, insert, select, text, update
from sqlalchemy.engine import make_url

from ..core.errors import LostLeadership
from ..core.status import FINAL
from . import facts, schema
from .faults import translate_faults
from .fencing import Fence
from .metrics import MetricStore
from .migrations import MIGRATIONS, Migration, migrate

# Built once: building a statement per call cost more than the SQLite commit (benchmarks/).
_INSERT_RUN = insert(schema.runs)
_INSERT_EVENT = insert(schema.events)
_INSERT_RUNS = insert(schema.runs).returning(schema.runs.c.seq, sort_by_parameter_order=True)
# Many events in one statement, their ids back in the order given (SQLite ≥ 3.35, PostgreSQL).
_INSERT_EVENTS = insert(schema.events).returning(schema.events.c.id, sort_by_parameter_order=True)
# PostgreSQL: many events as one small statement of arrays, their ids drawn first, in order. A VALUES
# list of thousands of placeholders costs psycopg ~50 µs a row to parse (too long to cache it).
_PG_EVENT_IDS = text(
    "SELECT nextval(pg_get_serial_sequence('gpuplat_events', 'id')) AS id FROM generate_series(1, :n) ORDER BY id"
)
_PG_INSERT_EVENTS = text(
    "INSERT INTO gpuplat_events (id, run_id, project, status, reason, message, at, details) "
    "SELECT * FROM unnest(CAST(:id AS bigint[]), CAST(:run_id AS varchar[]), CAST(:project AS varchar[]), "
    "CAST(:status AS varchar[]), CAST(:reason AS varchar[]), CAST(:message AS text[]), CAST(:at AS float8[]), "
    "CAST(:details AS json[]))"
)
_PG_ARRAYS_FROM = 64  # fewer events: the plain multi-row INSERT is as fast
_UPDATE_RUN = update(schema.runs).where(schema.runs.c.id == bindparam("_run_id"))
# Bound parameters per IN list: SQLite refuses more than 32,766 in one statement.
_IN_CHUNK = 10_000
_RUN_COLS = [c for c in schema.runs.c if c.name not in ("request", "provenance")]
# Lists show which presets a run used without decoding each whole request.
_REQUEST_PRESETS = schema.runs.c.request["presets"].label("presets")


# Execution option of an engine whose transactions read, then write (see `_begin`).
WRITES_AFTER_READS = "gpuplat_writes_after_reads"

# How long a write waits for another writer of the SQLite file. The store runs on the event
# loop, so this is also how long a locked database can stall the server per call.
DEFAULT_BUSY_TIMEOUT_SECONDS = 5.0


def make_engine(url: str, busy_timeout_seconds: float = DEFAULT_BUSY_TIMEOUT_SECONDS) -> Engine:
    engine = _make_engine(url, busy_timeout_seconds)
    translate_faults(engine)
    return engine


def _make_engine(url: str, busy_timeout_seconds: float) -> Engine:
    u = make_url(url)
    if u.get_backend_name() == "sqlite":
        if u.database and u.database != ":memory:":
            Path(u.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": busy_timeout_seconds})
        busy_ms = int(busy_timeout_seconds * 1000)

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _rec: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            # NORMAL in WAL mode is durable across process crashes (not power loss).
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute(f"PRAGMA busy_timeout={busy_ms}")
            cur.close()
            # pysqlite's legacy mode only BEGINs before DML, so DDL (migrations) ran outside any
            # transaction and a failed migration left half its tables behind. Let SQLAlchemy emit
            # BEGIN itself (the documented recipe) so every engine.begin() block is atomic.
            dbapi_conn.isolation_level = None

        @event.listens_for(engine, "begin")
        def _begin(conn: Any) -> None:
            # A transaction that reads before it writes must take the write lock first: in WAL mode
            # its read snapshot goes stale when another connection commits in between, and SQLite
            # then refuses the write at once ("database is locked"), whatever the busy timeout.
            immediate = conn.get_execution_options().get(WRITES_AFTER_READS)
            conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

        return engine
    return create_engine(url, pool_pre_ping=True)


def _insert_events(conn: Connection, evs: list[dict[str, Any]]) -> list[int]:
    """Insert timeline events (each with every column but id); their ids, in the order given."""
    if conn.dialect.name != "postgresql" or len(evs) < _PG_ARRAYS_FROM:
        return [int(i) for i in conn.execute(_INSERT_EVENTS, evs).scalars()]
    from psycopg.types.json import Json

    ids = [int(i) for i in conn.execute(_PG_EVENT_IDS, {"n": len(evs)}).scalars()]
    cols = {c: [e.get(c) for e in evs] for c in ("run_id", "project", "status", "reason", "message", "at")}
    details = [None if e.get("details") is None else Json(e["details"]) for e in evs]
    conn.execute(_PG_INSERT_EVENTS, {"id": ids, **cols, "details": details})
    return ids


def _pk(result: Any) -> int:
    key = result.inserted_primary_key
    assert key is not None
    return int(key[0])


class Store:
    def __init__(
        self,
        url: str,
        migrations: Sequence[Migration] = MIGRATIONS,
        *,
        busy_timeout_seconds: float = DEFAULT_BUSY_TIMEOUT_SECONDS,
    ) -> None:
        self.url = url
        self.engine = make_engine(url, busy_timeout_seconds)
        self.metrics = MetricStore(self.engine)
        self._fence: Fence | None = None
        try:
            self.schema_version_found = migrate(self.engine, migrations)
        except BaseException:
            self.engine.dispose()  # a refused or failed migration must not leak connections
            raise

    def close(self) -> None:
        self.engine.dispose()

    def ping(self) -> None:
        """`SELECT 1` on the pool: raises if the database does not answer (the readiness probe)."""
        with self.engine.connect() as conn:
            conn.execute(text("SELECT 1"))

    def leader(self) -> tuple[str | None, int | None]:
        """Team mode: who holds the leader lock, and its epoch (None, None before any election)."""
        with self.engine.connect() as conn:
            row = conn.execute(select(schema.leader.c.holder, schema.leader.c.epoch)).first()
        return (row.holder, row.epoch) if row is not None else (None, None)

    # ---- team mode: fencing ---------------------------------------------
    @property
    def fenced_epoch(self) -> int | None:
        return self._fence.epoch if self._fence is not None else None

    def fence(self, epoch: int, on_lost: Callable[[LostLeadership], None] | None = None) -> None:
        """From now on, every write of this store (and its metrics) commits only while `epoch` is current.

        A write after another control plane bumped the epoch raises `LostLeadership` and writes
        nothing; `on_lost` is called first (e.g. to stop this server). PostgreSQL only.
        """
        if self.engine.dialect.name != "postgresql":
            raise ValueError(f"fencing needs the shared PostgreSQL store of team mode, not {self.engine.dialect.name}")
        if self._fence is not None:
            raise RuntimeError(f"this store is already fenced (epoch {self._fence.epoch}): open a new Store")
        self._fence = Fence(self.engine, epoch, on_lost)

    # ---- platform config ---------------------------------------------
    def get_config(self) -> tuple[dict[str, Any] | None, int]:
        with self.engine.connect() as conn:
            row = conn.execute(
                select(schema.config.c.body, schema.config.c.version).order_by(schema.config.c.version.desc()).limit(1)
            ).first()
        return (row[0], row[1]) if row else (None, 0)

    def put_config(self, body: dict[str, Any], *, source: str, by: str, at: float) -> int:
        with self.engine.begin() as conn:
            res = conn.execute(insert(schema.config).values(body=body, source=source, applied_by=by, applied_at=at))
            return _pk(res)

    # ---- runs -----------------------------------------------------------
    def create_run(self, row: dict[str, Any], evs: Sequence[dict[str, Any]]) -> tuple[int, list[int]]:
        """Insert a run and its first timeline events atomically; returns its seq and the event ids."""
        ids: list[int] = []
        with self.engine.begin() as conn:
            seq = _pk(conn.execute(_INSERT_RUN, row))
            if evs:  # one statement for all of them: on PostgreSQL each statement is a round trip
                rows = [{"run_id": row["id"], "project": row["project"], "details": None, **ev} for ev in evs]
                ids = [int(i) for i in conn.execute(_INSERT_EVENTS, rows).scalars()]
        return int(seq), ids

    def create_runs(self, rows: Sequence[dict[str, Any]], evs: Sequence[Sequence[dict[str, Any]]]) -> list[int]:
        """Many runs (a sweep's children) and their first events in one transaction; their seqs in order."""
        if not rows:
            return []
        with self.engine.begin() as conn:
            seqs = [int(r.seq) for r in conn.execute(_INSERT_RUNS, list(rows))]
            events = [
                {"run_id": row["id"], "project": row["project"], **ev}
                for row, es in zip(rows, evs, strict=True)
                for ev in es
            ]
            if events:
                conn.execute(_INSERT_EVENT, events)
        return seqs

    def transition(self, run_id: str, project: str, fields: dict[str, Any], ev: dict[str, Any] | None) -> int | None:
        """Update a run and append one timeline event in one transaction; returns the event id."""
        with self.engine.begin() as conn:
            if fields:
                conn.execute(_UPDATE_RUN, {"_run_id": run_id, **fields})
            event_id = (
                None if ev is None else _pk(conn.execute(_INSERT_EVENT, {"run_id": run_id, "project": project, **ev}))
            )
            if facts.final_ids([(run_id, fields)]):
                facts.record(conn, [run_id])
            return event_id

    def transition_many(self, changes: Sequence[tuple[str, str, dict[str, Any], dict[str, Any]]]) -> list[int]:
        """Several `transition`s (run id, project, fields, event) in one transaction; the event ids in order.

        One admission cycle writes all its decisions here: one commit, not one per run. Rows are
        updated with one executemany per set of columns, events inserted by one multi-row INSERT.
        """
        if not changes:
            return []
        by_cols: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        for run_id, _, fields, _ in changes:
            if fields:
                by_cols.setdefault(tuple(fields), []).append({"_run_id": run_id, **fields})
        evs = [{"run_id": run_id, "project": project, "details": None, **ev} for run_id, project, _, ev in changes]
        with self.engine.begin() as conn:
            for rows in by_cols.values():
                conn.execute(_UPDATE_RUN, rows)
            ids = _insert_events(conn, evs)
            ended = facts.final_ids([(run_id, fields) for run_id, _, fields, _ in changes])
            if ended:
                facts.record(conn, ended)
        assert len(ids) == len(changes)
        return ids

    def set_gpu_usage(self, run_id: str, usage: dict[str, Any]) -> None:
        """Keep an ended run's `gpu_usage` on its record (the engine writes it once, after the end)."""
        with self.engine.begin() as conn:
            conn.execute(update(schema.runs).where(schema.runs.c.id == run_id).values(gpu_usage=usage))

    def provenance_of(self, ids: Sequence[str]) -> dict[str, dict[str, str]]:
        """The provenance of several runs in one query (launches of runs reloaded at start-up)."""
        if not ids:
            return {}
        r = schema.runs.c
        out: dict[str, dict[str, str]] = {}
        with self.engine.connect() as conn:
            for k in range(0, len(ids), _IN_CHUNK):
                rows = conn.execute(select(r.id, r.provenance).where(r.id.in_(list(ids[k : k + _IN_CHUNK]))))
                out.update((i, dict(p or {})) for i, p in rows)
        return out

    def append_events(self, project_by_run: dict[str, str], evs: Iterable[tuple[str, dict[str, Any]]]) -> list[int]:
        ids = []
        with self.engine.begin() as conn:
            for run_id, ev in evs:
                res = conn.execute(_INSERT_EVENT, {"run_id": run_id, "project": project_by_run[run_id], **ev})
                ids.append(_pk(res))
        return ids

    def get_run(self, run_id: str) -> dict[str, Any] | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(schema.runs).where(schema.runs.c.id == run_id)).mappings().first()
            if row is None:
                return None
            run = dict(row)
            run["timeline"] = [
                dict(e)
                for e in conn.execute(
                    select(
                        schema.events.c.id,
                        schema.events.c.status,
                        schema.events.c.reason,
                        schema.events.c.message,
                        schema.events.c.at,
                        schema.events.c.details,
                    )
                    .where(schema.events.c.run_id == run_id)
                    .order_by(schema.events.c.id)
                ).mappings()
            ]
        return run

    def list_runs(
        self,
        projects: Sequence[str],
        *,
        status: Sequence[str] = (),
        queue: str | None = None,
        user: str | None = None,
        name_contains: str | None = None,
        kind: str | None = None,
        parent: str | None = None,
        notebook: str | None = None,
        before_seq: int | None = None,
        limit: int = 100,
    ) -> list[dict[str, Any]]:
        """Newest first, keyset-paginated by seq so any page costs the same."""
        if not projects:
            return []
        r = schema.runs.c
        q = select(*_RUN_COLS, _REQUEST_PRESETS).where(r.project.in_(list(projects)))
        if status:
            q = q.where(r.status.in_(list(status)))
        if queue:
            q = q.where(r.queue == queue)
        if user:
            q = q.where(r.user == user)
        if name_contains:
            q = q.where(r.name.contains(name_contains, autoescape=True))
        if kind:
            q = q.where(r.kind == kind)
        if notebook:  # a session's notebook (the lease's `session.notebook`)
            q = q.where(r.resolved["session"]["notebook"].as_string() == notebook)
        # A sweep is one row; its children are listed by it.
        q = q.where(r.parent == parent) if parent else q.where(r.parent.is_(None))
        if before_seq is not None:
            q = q.where(r.seq < before_seq)
        q = q.order_by(r.seq.desc()).limit(limit)
        with self.engine.connect() as conn:
            return [dict(m) for m in conn.execute(q).mappings()]

    def child_counts(self, parent: str) -> dict[str, int]:
        """A sweep's children by status (one grouped count over the parent index)."""
        r = schema.runs.c
        q = select(r.status, func.count()).where(r.parent == parent).group_by(r.status)
        with self.engine.connect() as conn:
            return {str(s): int(n) for s, n in conn.execute(q).all()}

    def active_runs(self) -> list[dict[str, Any]]:
        """Every run not yet final, in submission order: what a restarted engine reloads."""
        with self.engine.connect() as conn:
            return [
                dict(m)
                for m in conn.execute(
                    select(*_RUN_COLS)
                    .where(schema.runs.c.status.not_in([s.value for s in FINAL]))
                    .order_by(schema.runs.c.seq)
                ).mappings()
            ]

    def runs_by_ids(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Full rows (without timelines) of several runs in one query."""
        if not ids:
            return {}
        with self.engine.connect() as conn:
            rows = conn.execute(select(schema.runs).where(schema.runs.c.id.in_(list(ids)))).mappings()
            return {m["id"]: dict(m) for m in rows}

    def runs_brief(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        if not ids:
            return {}
        r = schema.runs.c
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(r.id, r.name, r.user, r.project, r.status, r.gpu, r.devices, r.queue).where(r.id.in_(list(ids)))
            ).mappings()
            return {m["id"]: dict(m) for m in rows}

    def events_since(self, after_id: int, projects: Sequence[str] | None, limit: int = 1000) -> list[dict[str, Any]]:
        e, r = schema.events.c, schema.runs.c
        q = (
            select(e.id, e.run_id, e.project, e.status, e.reason, e.message, e.at, r.queue, r.user, r.name)
            .join_from(schema.events, schema.runs, e.run_id == r.id)
            .where(e.id > after_id)
            .order_by(e.id)
            .limit(limit)
        )
        if projects is not None:
            q = q.where(e.project.in_(list(projects)))
        with self.engine.connect() as conn:
            return [dict(m) for m in conn.execute(q).mappings()]

    def last_event_id(self) -> int:
        with self.engine.connect() as conn:
            return int(conn.execute(select(func.coalesce(func.max(schema.events.c.id), 0))).scalar_one())

    def count_runs(self) -> int:
        with self.engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(schema.runs)).scalar_one())
