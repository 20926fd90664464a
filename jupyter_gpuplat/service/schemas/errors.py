"""The error body every refusal answers with: code, message, hint, and a refused submit's rules and alternatives.

Split out of service/schemas/models.py (which re-exports every name here).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from .base import _Out

# ---- errors -------------------------------------------------------------------------------------


class RefusingRule(_Out):
    """One rule that refuses a run request, with its own limit."""

    rule: str = Field(description="The rule's code, e.g. ExceedsQueueQuota, MaxRunResources, NoCapacity")
    limit: str | None = Field(description="Its own limit, e.g. '2 gpu'; null for a rule without a number")
    message: str


class Alternative(_Out):
    """Request fields to change so that the policy accepts the run (checked by the policy itself)."""

    changes: dict[str, Any] = Field(description="queue, presets and/or resources, as a request gives them")
    hint: str


FIELD_DOC = "FieldNotAllowed: the run field a member may not set, e.g. volumes[data].host_path, env.HOME"
RULE_DOC = "FieldNotAllowed: the rule, e.g. volumes.connection, placement.preset, image.allowed, env.reserved"
ALLOWED_DOC = "FieldNotAllowed: what is allowed instead (connection names, preset:NAME, image patterns, ...)"


class ErrorDetail(_Out):
    code: str = Field(description="A stable code, e.g. InvalidRequest, NotFound, Forbidden")
    message: str
    hint: str
    field: str | None = Field(default=None, description=FIELD_DOC)
    rule: str | None = Field(default=None, description=RULE_DOC)
    allowed: list[str] | None = Field(default=None, description=ALLOWED_DOC)
    rules: list[RefusingRule] | None = Field(
        default=None, description="A refused run request: every refusing rule, each with its own limit"
    )
    alternatives: list[Alternative] | None = Field(
        default=None, description="A refused run request: variants the policy accepts (what the hints suggest)"
    )


class Error(_Out):
    """Every refusal: `{"error": {code, message, hint}}` (a refused run request adds rules, alternatives;
    FieldNotAllowed adds field, rule, allowed)."""

    error: ErrorDetail
