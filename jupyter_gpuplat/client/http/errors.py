"""The one error family of every Python client of the REST API, and its one decoder.

`decode_error(status, body, wording)` turns an error answer into an exception: the service's
`{"error": {code, message, hint, ...}}` as the core class of its status (`InvalidInput` 400,
`Forbidden` 403, `NotFound` 404, `Conflict` 409, `Unprocessable` 422, `Unavailable` 503;
`NotLeader` by its code, `FieldNotAllowed` keeping `field`, `rule` and `allowed`), and a 3xx as
`NotAuthenticated` (a redirect is a login page: the token was not taken). `unreachable()` is the
error of no answer at all (`Unreachable`, an `Unavailable`). Each is also a `GpuPlatAPIError`
with `.status` and the whole `.error` object (a refused run's `rules` and `alternatives`), so a
user catching `GpuPlatAPIError` and the service catching `NotFound` or `Unavailable` both hold.

What the server did not word itself (no answer, an answer without an error object, a redirect)
each face words for its reader: `Wording` (the client's `CLIENT`; the control plane's is in
`service/remote/control_plane.py`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ...core.errors import (
    Conflict,
    FieldNotAllowed,
    Forbidden,
    GpuPlatError,
    InvalidInput,
    NotFound,
    NotLeader,
    Unavailable,
    Unprocessable,
)

__all__ = [
    "CLIENT",
    "GpuPlatAPIError",
    "Unreachable",
    "Wording",
    "decode_error",
    "unreachable",
]


class GpuPlatAPIError(GpuPlatError):
    """The service refused a request, or could not be reached; `message` and `hint` say why.

    `error` is the service's whole error object: a refused run adds `rules` and `alternatives`,
    and FieldNotAllowed `field`, `rule` and `allowed`.
    """

    def __init__(
        self,
        message: str,
        hint: str = "",
        *,
        status: int = 0,
        code: str | None = "Error",
        error: dict[str, Any] | None = None,
    ) -> None:
        # Not super(): in an answer class below the next in line is a core class (FieldNotAllowed's
        # __init__ wants its fields); the fields every GpuPlatError has are set here once.
        GpuPlatError.__init__(self, message, hint, code=code)
        self.status = status
        self.error = error or {}

    def __str__(self) -> str:
        return f"{self.message}" + (f" (hint: {self.hint})" if self.hint else "")


# An answer of one status is both a GpuPlatAPIError and the core error the service raised.
class InvalidInputAnswer(GpuPlatAPIError, InvalidInput):
    pass


class ForbiddenAnswer(GpuPlatAPIError, Forbidden):
    pass


class NotFoundAnswer(GpuPlatAPIError, NotFound):
    pass


class ConflictAnswer(GpuPlatAPIError, Conflict):
    pass


class UnprocessableAnswer(GpuPlatAPIError, Unprocessable):
    pass


class UnavailableAnswer(GpuPlatAPIError, Unavailable):
    pass


class NotLeaderAnswer(GpuPlatAPIError, NotLeader):
    pass


class Unreachable(GpuPlatAPIError, Unavailable):
    """No HTTP answer: refused, reset, timed out, or a stream cut mid-way."""

    code = "Unreachable"


class FieldNotAllowedAnswer(GpuPlatAPIError, FieldNotAllowed):
    """FieldNotAllowed as answered: `field`, `rule` and `allowed` from the error object."""

    def __init__(
        self, message: str, hint: str = "", *, status: int = 403, code: str | None = None, error: dict[str, Any]
    ) -> None:
        super().__init__(message, hint, status=status, code=code, error=error)
        self.field = str(error["field"])
        self.rule = str(error.get("rule"))
        self.allowed = [a for a in error.get("allowed") or [] if isinstance(a, str)]
        self.at: tuple[str, ...] = ()
        self.wanted: Any = None


_BY_STATUS: dict[int, type[GpuPlatAPIError]] = {
    400: InvalidInputAnswer,
    403: ForbiddenAnswer,
    404: NotFoundAnswer,
    409: ConflictAnswer,
    422: UnprocessableAnswer,
    503: UnavailableAnswer,
}


@dataclass(frozen=True)
class Wording:
    """How a face words what the server did not: no answer, an answer without an error object, a redirect.

    `{where}`/`{exc}` and `{status}`/`{text}` (the body's first 300 characters) are filled in;
    `unworded_code` is the code of an error object without one (None: its class's own).
    """

    unreachable: str = "cannot reach {where}: {exc}"
    unreachable_hint: str = ""
    unreachable_status: int = 0
    unworded: str = "HTTP {status}: {text}"
    unworded_code: str | None = "Error"
    redirect: str = "the server answered {status}, a redirect (a login page): it did not take the token"
    redirect_hint: str = "check the token (GPUPLAT_TOKEN)"


CLIENT = Wording()  # the Python client's (kernels, scripts, the CLI, the magics and widgets)


def unreachable(where: str, exc: BaseException | str | None, wording: Wording = CLIENT) -> Unreachable:
    """The error of no answer at all from `where`."""
    return Unreachable(
        wording.unreachable.format(where=where, exc=exc),
        wording.unreachable_hint,
        status=wording.unreachable_status,
        code="Unreachable",
    )


def decode_error(status: int, body: bytes, wording: Wording = CLIENT) -> GpuPlatAPIError:
    """An error answer (3xx, 4xx, 5xx) as the error the service raised (see the module's docstring)."""
    if 300 <= status < 400:
        return ForbiddenAnswer(
            wording.redirect.format(status=status), wording.redirect_hint, status=status, code="NotAuthenticated"
        )
    try:
        err = json.loads(body or b"{}").get("error")
    except (ValueError, AttributeError):
        err = None
    err = dict(err) if isinstance(err, dict) else {}
    message = err.get("message")
    if not isinstance(message, str) or not message:
        text = body.decode("utf-8", "replace")[:300]
        message = wording.unworded.format(status=status, text=text)
    hint = str(err.get("hint") or "")
    code = err.get("code") or wording.unworded_code
    if code == "FieldNotAllowed" and isinstance(err.get("field"), str):
        return FieldNotAllowedAnswer(message, hint, status=status, code=code, error=err)
    cls = NotLeaderAnswer if code == "NotLeader" else _BY_STATUS.get(status, GpuPlatAPIError)
    return cls(message, hint, status=status, code=code, error=err)
