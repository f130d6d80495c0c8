"""Tolerant reading of JSON/YAML values: numbers that may be strings, containers that may drift.

Tools disagree on how they write a number: llmperf writes some integers as strings, vLLM writes
infinity as ``"inf"``, SGLang the bare token ``Infinity``. Schemas drift between versions, so a
mapping or list that is missing reads as an empty one instead of raising.

Every helper raises only :class:`advisor.errors.IngestError`.
"""

from __future__ import annotations

import math
from typing import Any

from advisor.errors import IngestError

__all__ = ["as_dict", "as_float", "as_int", "as_list", "dig"]


def as_float(value: object, field: str | None = None, *, allow_inf: bool = False) -> float | None:
    """A number from a JSON/YAML value: ints, floats and numeric strings (llmperf writes some
    integers as strings, vLLM writes ``"inf"``). Missing, null, NaN and non-numeric values are None.

    Infinity is returned only with ``allow_inf`` (request rates); elsewhere it is rejected, because a
    latency or a token count cannot be infinite.
    """
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
    else:
        return None
    if math.isnan(number):
        return None
    if math.isinf(number):
        if allow_inf and number > 0:
            return number
        raise IngestError(f"must be a finite number, got {value!r}", field=field)
    return number


def as_int(value: object, field: str | None = None) -> int | None:
    """An integer count from an int, an integral float or a numeric string; None otherwise."""
    number = as_float(value, field)
    if number is None:
        return None
    if number != int(number):
        return None
    return int(number)


def as_dict(value: object) -> dict[str, Any]:
    """The value when it is a mapping with string keys, else an empty dict (schemas drift)."""
    if isinstance(value, dict):
        return value
    return {}


def as_list(value: object) -> list[Any]:
    """The value when it is a list, else an empty list (schemas drift)."""
    return value if isinstance(value, list) else []


def dig(doc: object, *path: str | int) -> Any:
    """Follow ``path`` through nested dicts/lists; None as soon as a step is missing."""
    current: Any = doc
    for step in path:
        if isinstance(step, int):
            if isinstance(current, list) and -len(current) <= step < len(current):
                current = current[step]
            else:
                return None
        elif isinstance(current, dict):
            current = current.get(step)
        else:
            return None
    return current
