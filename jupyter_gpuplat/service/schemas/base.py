"""The bases of the response models (service/schemas/models.py): closed and open objects."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

Number = int | float
Seconds = float


class _Out(BaseModel):
    """A response object: fields it does not declare are refused when rendering (schema drift is a bug)."""

    model_config = ConfigDict(extra="forbid")


def _open_schema(schema: dict[str, Any]) -> None:
    # JSON Schema's default already allows other keys; saying nothing keeps the generated
    # TypeScript types to the declared fields (no index signature).
    schema.pop("additionalProperties", None)


class _Open(BaseModel):
    """A response object that other layers extend: undeclared fields pass through."""

    model_config = ConfigDict(extra="allow", json_schema_extra=_open_schema)
