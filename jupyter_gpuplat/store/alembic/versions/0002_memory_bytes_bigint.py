"""v2: gpuplat_runs.memory_bytes as BIGINT on PostgreSQL.

v1 made it a 32-bit INTEGER there (no-op on SQLite, whose integers are 64-bit; databases
created after this change already have BIGINT).
"""

from __future__ import annotations

from alembic import op
from sqlalchemy import text

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name == "postgresql":
        conn.execute(text("ALTER TABLE gpuplat_runs ALTER COLUMN memory_bytes TYPE BIGINT"))
