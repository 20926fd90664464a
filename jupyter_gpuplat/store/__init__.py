"""Persistence behind one interface: SQLite (embedded default) or PostgreSQL."""

from .faults import StoreUnavailable
from .store import Store

__all__ = ["Store", "StoreUnavailable"]
