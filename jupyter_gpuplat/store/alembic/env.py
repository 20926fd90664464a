"""Alembic's environment for the store's revisions.

`store.migrations.migrate` runs it with the connection it holds (in `config.attributes`),
inside its own transaction and lock, so this file neither connects, begins nor commits.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from alembic import context
from alembic.runtime.migration import MigrationContext, MigrationInfo
from sqlalchemy import Connection, create_engine

from jupyter_gpuplat.store import schema

config = context.config
applied = config.attributes.get("applied")


def _record(ctx: MigrationContext, step: MigrationInfo, heads: Collection[Any], run_args: Mapping[str, Any]) -> None:
    if applied is not None and step.is_upgrade and not step.is_stamp:
        applied.append(str(step.up_revision_id))


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=schema.metadata,
        transactional_ddl=True,  # SQLite too: its DDL is transactional, and a failed revision must leave nothing
        on_version_apply=_record,
    )
    with context.begin_transaction():
        context.run_migrations()


connection = config.attributes.get("connection")
if connection is not None:
    _run(connection)
else:  # the `alembic` command line of a developer, with sqlalchemy.url set
    engine = create_engine(config.get_main_option("sqlalchemy.url") or "sqlite://")
    with engine.begin() as conn:
        _run(conn)
