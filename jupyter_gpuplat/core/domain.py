"""A sweep param's domain (`{"values": [..]}`, `{"uniform": [lo, hi]}`, ...) and its compact CLI form.

Pure: points and draws come from the domain alone and a given `random.Random`.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable
from typing import Annotated, Any, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)

from .config import validation_messages
from .errors import InvalidInput

MAX_CHILDREN = 10_000  # children of one sweep, and so points of one domain
MAX_VALUE_CHARS = 4096
MAX_INT = 2**63 - 1  # params are stored as JSON and compared across runs: integers within 64 bits
DOMAIN_KINDS = ("values", "range", "linspace", "uniform", "loguniform", "choice")
CONTINUOUS = ("uniform", "loguniform")
PARAM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,127}")
PARAM_NAME_HINT = "a param name starts with a letter or '_' and holds letters, digits, '_', '.' and '-' (1-128)"


def _param_name(v: str) -> str:
    # It becomes a `--name` flag and a key of GPUPLAT_PARAMS.
    if not PARAM_NAME.fullmatch(v):
        raise ValueError(f"{v!r}: {PARAM_NAME_HINT}")
    return v


def _value(v: Any) -> Any:
    # One message per bad value, before the union would give one per branch.
    if isinstance(v, bool | str):
        if isinstance(v, str) and ("\x00" in v or len(v) > MAX_VALUE_CHARS):
            raise ValueError(f"a string param value must hold no NUL and at most {MAX_VALUE_CHARS} characters")
        return v
    return _number(v)


def _number(v: Any) -> Any:
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise ValueError(f"must be a number, got {v!r}")
    if isinstance(v, float) and not math.isfinite(v):
        raise ValueError(f"must be a finite number, got {v!r}")
    if isinstance(v, int) and abs(v) > MAX_INT:
        raise ValueError(f"must be an integer within 64 bits (-{MAX_INT}..{MAX_INT})")
    return v


Value = Annotated[str | int | float | bool, BeforeValidator(_value)]
Number = Annotated[int | float, BeforeValidator(_number)]
ParamName = Annotated[str, AfterValidator(_param_name)]
Values = Annotated[list[Value], Field(min_length=1, max_length=MAX_CHILDREN)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _tidy(x: float) -> float:
    # 0.1 * 3 is 0.30000000000000004: a param shown and compared across runs reads 0.3.
    return float(f"{x:.15g}")


class Domain(_Strict):
    """Exactly one of: a list, a range, a linspace, a continuous interval, a choice."""

    values: Values | None = None
    range: list[Number] | None = None  # [start, stop, step]: stop exclusive, floats allowed
    linspace: list[Number] | None = None  # [start, stop, num]: num points, both ends included
    uniform: list[Number] | None = None  # [lo, hi]
    loguniform: list[Number] | None = None  # [lo, hi], 0 < lo
    choice: Values | None = None

    @model_serializer(mode="wrap")
    def _only_given(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # {"uniform": [0, 1]} reads back as written, not with five nulls beside it
        return {k: v for k, v in handler(self).items() if v is not None}

    @property
    def kind(self) -> str:
        return next(k for k in DOMAIN_KINDS if getattr(self, k) is not None)

    @property
    def bounds(self) -> list[int | float]:
        """The numbers of a range, linspace, uniform or loguniform."""
        return list(getattr(self, self.kind))

    @model_validator(mode="after")
    def _check(self) -> Self:
        given = [k for k in DOMAIN_KINDS if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of {', '.join(DOMAIN_KINDS)} (got {', '.join(given) or 'none'})")
        kind = given[0]
        if kind in ("values", "choice"):
            return self
        arity = {"range": "[start, stop, step]", "linspace": "[start, stop, num]"}.get(kind, "[lo, hi]")
        nums = self.bounds
        if len(nums) != arity.count(",") + 1:
            raise ValueError(f"{kind} takes {arity}, got {nums}")
        if kind == "range" and nums[2] == 0:
            raise ValueError("range's step must not be 0")
        if kind == "linspace" and not (isinstance(nums[2], int) and 1 <= nums[2] <= MAX_CHILDREN):
            raise ValueError(f"linspace's num must be an integer from 1 to {MAX_CHILDREN}, got {nums[2]}")
        if kind in CONTINUOUS and not nums[0] < nums[1]:
            raise ValueError(f"{kind} needs lo < hi, got {nums}")
        if kind == "loguniform" and nums[0] <= 0:
            raise ValueError(f"loguniform needs 0 < lo (it draws evenly in log space), got lo={nums[0]}")
        if kind == "range":
            n = self.size()
            if n == 0:
                raise ValueError(f"range {nums} gives no values (stop is exclusive; a negative step counts down)")
            if n > MAX_CHILDREN:
                raise ValueError(f"range {nums} gives more than {MAX_CHILDREN:,} values (at most {MAX_CHILDREN:,})")
        return self

    @property
    def discrete(self) -> bool:
        return self.kind not in CONTINUOUS

    def size(self) -> int:
        """How many points a discrete domain has."""
        kind = self.kind
        if kind in ("values", "choice"):
            return len(getattr(self, kind))
        if kind == "linspace":
            return int(self.bounds[2])
        if kind != "range":
            raise ValueError(f"{kind} is continuous: it has no points to count")
        start, stop, step = self.bounds
        if all(isinstance(x, int) for x in (start, stop, step)):
            return min(len(range(int(start), int(stop), int(step))), MAX_CHILDREN + 1)
        steps = (stop - start) / step  # inf when stop - start overflows
        if not steps <= MAX_CHILDREN:
            return MAX_CHILDREN + 1
        n = max(0, math.ceil(steps))
        # float division can land a hair above a whole number: stop stays exclusive
        while n and (_tidy(start + (n - 1) * step) - stop) * step >= 0:
            n -= 1
        return n

    def points(self) -> list[Any]:
        """Every value of a discrete domain, in order."""
        kind = self.kind
        if kind in ("values", "choice"):
            return list(getattr(self, kind))
        nums = self.bounds
        if kind == "range" and all(isinstance(x, int) for x in nums):
            return list(range(*(int(x) for x in nums)))
        if kind == "range":
            return [_tidy(nums[0] + i * nums[2]) for i in range(self.size())]
        start, stop, num = nums
        if num == 1:
            return [float(start)]
        last = int(num) - 1
        # weighted ends, not start + i * (stop - start): that difference overflows near the float limit
        return [_tidy(start * (1 - i / last) + stop * (i / last)) for i in range(last)] + [float(stop)]

    def sampler(self) -> Callable[[random.Random], Any]:
        """Draws one value from a given rng (kind random); the points of a discrete domain are listed once."""
        if self.kind == "uniform":
            lo, hi = self.bounds
            return lambda rng: rng.uniform(lo, hi)
        if self.kind == "loguniform":
            lo, hi = self.bounds
            log_lo, log_hi = math.log(lo), math.log(hi)
            return lambda rng: min(max(math.exp(rng.uniform(log_lo, log_hi)), lo), hi)
        points = self.points()
        return lambda rng: rng.choice(points)


def _scalar(text: str) -> int | float | str:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        number = float(text)
    except ValueError:
        return text
    if not math.isfinite(number):
        raise InvalidInput(
            f"{text!r} is not a finite number", "give a finite number (nan and inf are not param values)"
        )
    return number


PARAM_FORMS = (
    "name=v1,v2 (values), name=choice:a,b, name=range:start:stop:step, name=linspace:start:stop:num, "
    "name=uniform:lo:hi, name=loguniform:lo:hi"
)


def parse_param(text: str) -> tuple[str, Domain]:
    """`lr=1e-3,3e-4` or `lr=loguniform:1e-5:1e-2` (the CLI's and the magic's form) as (name, domain)."""
    name, sep, spec = text.partition("=")
    name = name.strip()
    if not sep or not name or not spec:
        raise InvalidInput(f"param {text!r} is not name=domain", f"give one of {PARAM_FORMS}")
    if not PARAM_NAME.fullmatch(name):
        raise InvalidInput(f"param {text!r}: bad name {name!r}", PARAM_NAME_HINT)
    prefix, colon, rest = spec.partition(":")
    kind, items = (prefix, rest) if colon and prefix in DOMAIN_KINDS else ("values", spec)
    parts = items.split("," if kind in ("values", "choice") else ":")
    if "" in parts:
        raise InvalidInput(f"param {text!r}: an empty item in {items!r}", f"give one of {PARAM_FORMS}")
    try:
        return name, Domain.model_validate({kind: [_scalar(x) for x in parts]})
    except InvalidInput as exc:
        raise InvalidInput(f"param {text!r}: {exc.message}", exc.hint) from None
    except ValidationError as exc:
        msgs = validation_messages(exc, prefix=name)
        raise InvalidInput(f"param {text!r}: " + "; ".join(msgs), f"give one of {PARAM_FORMS}") from None
