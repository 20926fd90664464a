"""What the Kubernetes API said when it refused a call: the Status message, for people."""

from __future__ import annotations

import json


def api_error(exc: Exception) -> str:
    """The Kubernetes Status message of an ApiException, else its text."""
    body = getattr(exc, "body", None)
    if body:
        try:
            return str(json.loads(body).get("message") or body)
        except (ValueError, AttributeError):
            return str(body)
    status, reason = getattr(exc, "status", None), getattr(exc, "reason", None)
    return f"{status} {reason}" if status else str(exc)
