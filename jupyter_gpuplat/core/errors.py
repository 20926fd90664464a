"""Domain errors. Each carries a code, a message safe to show a user and a hint.

The service maps them to HTTP statuses in one place (service/errors.py).
"""

from __future__ import annotations


class GpuPlatError(Exception):
    """Base error: `message` says what was wrong, `hint` what is allowed."""

    status = 400
    code = "BadRequest"

    def __init__(self, message: str, hint: str = "", *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        if code:
            self.code = code

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message, "hint": self.hint}


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


class NotFound(GpuPlatError):
    status = 404
    code = "NotFound"


class Conflict(GpuPlatError):
    status = 409
    code = "Conflict"


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
