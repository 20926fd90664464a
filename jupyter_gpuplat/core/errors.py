"""Domain errors. Each carries a code, a message safe to show a user and a hint.

The service maps them to HTTP statuses in one place (service/errors.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Self


class GpuPlatError(Exception):
    """Base error: `message` says what was wrong, `hint` what is allowed."""

    status = 400
    code = "BadRequest"
    # More fields the API answers with the error (a refused submit's `rules` and `alternatives`).
    answers: Mapping[str, Any] = MappingProxyType({})

    def __init__(self, message: str, hint: str = "", *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        if code:
            self.code = code

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "hint": self.hint, **self.answers}

    def with_hint(self, hint: str) -> Self:
        """The same error (class, status, code and every extra field) with another hint."""
        out = type(self).__new__(type(self), *self.args)
        out.__dict__.update(self.__dict__)
        out.hint = hint
        return out


class InvalidInput(GpuPlatError):
    status = 400
    code = "InvalidInput"


class Unprocessable(GpuPlatError):
    """Well-formed but refused by a rule (policy, quota fit)."""

    status = 422
    code = "PolicyViolation"


class Forbidden(GpuPlatError):
    status = 403
    code = "Forbidden"


class FieldNotAllowed(Forbidden):
    """A field a member may not set in a run's own fields (core/member_rules.py).

    `field` names it (`volumes[data].host_path`, `env.NVIDIA_VISIBLE_DEVICES`), `rule` is the
    rule's id (`volumes.connection`), `allowed` what is allowed instead. `at` and `wanted` (where in
    the run's fields, and the value asked for) let refusal.py find a preset that sets it; they are
    not shown.
    """

    code = "FieldNotAllowed"

    def __init__(
        self,
        message: str,
        hint: str,
        *,
        field: str,
        rule: str,
        allowed: Sequence[str],
        at: tuple[str, ...] = (),
        wanted: Any = None,
    ) -> None:
        super().__init__(message, hint)
        self.field = field
        self.rule = rule
        self.allowed = list(allowed)
        self.at = at
        self.wanted = wanted

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "field": self.field, "rule": self.rule, "allowed": list(self.allowed)}


class NotFound(GpuPlatError):
    status = 404
    code = "NotFound"


class Conflict(GpuPlatError):
    status = 409
    code = "Conflict"


class StoreInUse(Conflict):
    """Embedded mode: another Jupyter server owns this store and this one cannot be its client.

    409, not 503: waiting does not clear it (the owner keeps the store for its whole life); the
    message names the owner (pid, URL, root dir), the hint another store or the owner's Lab.
    """

    code = "StoreInUse"


class ConfigErrors(InvalidInput):
    """A platform config refused whole; `errors` lists every problem by path."""

    code = "InvalidConfig"

    def __init__(self, errors: list[str]) -> None:
        self.errors = errors
        super().__init__(
            f"{len(errors)} error(s) in platform config: " + "; ".join(errors),
            "fix every listed path; nothing was applied",
        )


class Unavailable(GpuPlatError):
    """A part the platform needs (its database, its disk) is failing for now; retrying may work."""

    status = 503
    code = "Unavailable"
    retry_after_seconds = 5


class NotLeader(Unavailable):
    """Team mode: this control plane is a standby; the leader serves requests (retrying reaches it)."""

    code = "NotLeader"
    retry_after_seconds = 2


class LostLeadership(NotLeader):
    """A write was refused because another control plane took over (its fencing epoch is newer)."""

    code = "NotLeader"
