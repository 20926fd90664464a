"""Fault injection: failing calls, dropped watches, refused verbs."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from .store import ApiError

_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    409: "Conflict",
    410: "Expired",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


@dataclass
class _Rule:
    verb: str | None  # get, list, watch, create, update, patch, delete, deletecollection; None: any
    resource: str | None  # plural or plural/subresource (pods/log); None: any
    code: int
    message: str
    times: int | None  # None: until cleared


class Faults:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[_Rule] = []
        self.watch_generation = 0  # bumped by drop_watches(): every open watch ends abruptly
        self.injected = 0

    def fail_next(
        self,
        verb: str | None = None,
        resource: str | None = None,
        code: int = 500,
        times: int | None = 1,
        message: str = "injected fault",
    ) -> None:
        """The next `times` matching calls (None: all until `clear()`) answer `code`."""
        with self._lock:
            self._rules.append(_Rule(verb, resource, code, message, times))

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    def take(self, verb: str, resource: str) -> ApiError | None:
        with self._lock:
            for rule in self._rules:
                if rule.verb not in (None, verb) or rule.resource not in (None, resource):
                    continue
                if rule.times is not None:
                    rule.times -= 1
                    if rule.times <= 0:
                        self._rules.remove(rule)
                self.injected += 1
                return ApiError(rule.code, _REASONS.get(rule.code, "InternalError"), rule.message)
        return None

    def drop_watches(self) -> None:
        """Close every open watch connection without ending the chunked stream (a network drop)."""
        with self._lock:
            self.watch_generation += 1
