"""Persistence behind one interface: SQLite (embedded default) or PostgreSQL."""

from .store import Store

__all__ = ["Store"]
