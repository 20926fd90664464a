"""What a database URL names, read by SQLAlchemy's parser (callers outside the store import no SQLAlchemy)."""

from __future__ import annotations

from sqlalchemy.engine import make_url


def backend_of(url: str) -> str:
    """`sqlite`, `postgresql`, …; raises (ArgumentError) for a string that is not a database URL."""
    return make_url(url).get_backend_name()


def sqlite_path(url: str) -> str | None:
    """The SQLite file a URL names; None for another database or an in-memory one."""
    u = make_url(url)
    if u.get_backend_name() != "sqlite" or not u.database or u.database == ":memory:":
        return None
    return u.database
