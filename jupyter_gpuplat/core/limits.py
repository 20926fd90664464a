"""A refusal by a numeric limit: which resource, the limit's value and whose limit it is.

Policy (core/policy.py) and the platform's capacity refuse with these, so a refusal can name
each refusing rule with its own limit and its hints can be checked against every limit
(core/refusal.py).
"""

from __future__ import annotations

from .errors import Unprocessable
from .resources import fmt_amount

# Resource names as requests give them, and their attribute on Resources/Quota.
ATTRS = {"gpu": "gpu", "cpu": "cpu_milli", "memory": "memory_bytes"}


def amount_text(resource: str, value: int) -> str:
    """`2 gpu`, `16 cpu`, `128Gi memory`."""
    return f"{fmt_amount(resource, value)} {resource}"


class LimitExceeded(Unprocessable):
    """A request above a limit: `resource` (gpu, cpu, memory) is over `limit` (base units)."""

    def __init__(self, message: str, hint: str, *, code: str, resource: str, limit: int, requested: int) -> None:
        super().__init__(message, hint, code=code)
        self.resource = resource
        self.limit = limit
        self.requested = requested

    @property
    def limit_text(self) -> str:
        return amount_text(self.resource, self.limit)
