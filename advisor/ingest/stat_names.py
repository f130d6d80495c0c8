"""Tools' names for statistics, read into canonical percentile sets.

Every tool spells its percentiles its own way (``p99``, ``99``, ``p99.9``, ``p99_9``, llm-d's
``p99p9``, guidellm's ``p999``), and its mean, median and spread too. :func:`percentiles_from_mapping`
reads any of them into :class:`advisor.canonical.Percentiles`, converting the unit and treating the
all-zero set a failed run prints as no measurement at all.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from advisor.canonical import PERCENTILE_KEYS, Percentiles
from advisor.errors import IngestError
from advisor.ingest.units import to_ms
from advisor.ingest.values import as_float

__all__ = ["canonical_percentile_key", "percentiles_from_mapping"]


_PERCENTILE_RE = re.compile(r"^p?(\d+(?:[._p]\d+)?)$")


def canonical_percentile_key(name: str) -> str | None:
    """The canonical key for a tool's percentile name, or None when the canonical record has none.

    Accepts ``p99``, ``99``, ``p99.9``, ``p99_9``, ``p99p9`` (llm-d) and ``p999`` (guidellm's
    99.9th). ``median`` maps to ``p50``. guidellm's ``p001``/``p01``/``p05`` (0.1 %, 1 %, 5 %) and
    other percentiles outside :data:`advisor.canonical.PERCENTILE_KEYS` are dropped.
    """
    lowered = name.strip().lower()
    if lowered == "median":
        return "p50"
    if lowered == "p999":
        return "p99_9"
    match = _PERCENTILE_RE.match(lowered)
    if match is None or lowered.startswith("p0"):
        return None
    digits = match.group(1).replace(".", "_").replace("p", "_")
    if "_" in digits:
        whole, frac = digits.split("_", 1)
        frac = frac.rstrip("0")
        digits = f"{whole}_{frac}" if frac else whole
    key = f"p{digits}"
    return key if key in PERCENTILE_KEYS else None


_STAT_ALIASES: Final[dict[str, str]] = {
    "mean": "mean",
    "avg": "mean",
    "average": "mean",
    "min": "min",
    "max": "max",
    "std": "std",
    "stddev": "std",
    "std_dev": "std",
}


def percentiles_from_mapping(
    stats: Mapping[str, object],
    *,
    unit: str | None,
    field: str,
    zero_is_missing: bool = False,
) -> Percentiles:
    """A canonical percentile set from a ``{stat name: value}`` mapping.

    ``unit`` is a time unit for :func:`to_ms` (None for quantities that are not times, kept as is).
    Statistic names may be ``mean``/``avg``, ``median``, ``min``, ``max``, ``std``/``stddev``/
    ``std_dev`` and any percentile spelling :func:`canonical_percentile_key` knows; a nested
    ``percentiles`` mapping (guidellm) is read too. An explicit percentile wins over ``median``.

    With ``zero_is_missing`` a set whose every value is 0 is returned empty: tools print 0.0 for
    "nothing measured" (a run where every request failed), never a real zero latency.
    """
    values: dict[str, float] = {}
    medians: dict[str, float] = {}

    def put(name: str, raw: object) -> None:
        sub = f"{field}.{name}"
        number = to_ms(raw, unit, sub) if unit is not None else as_float(raw, sub)
        if number is None:
            return
        if unit is None and number < 0:
            raise IngestError(f"cannot be negative, got {number}", field=sub)
        if name.strip().lower() == "median":
            medians["p50"] = number
            return
        key = _STAT_ALIASES.get(name.strip().lower()) or canonical_percentile_key(name)
        if key is not None:
            values[key] = number

    for name, raw in stats.items():
        if name == "percentiles" and isinstance(raw, Mapping):
            for pname, praw in raw.items():
                put(str(pname), praw)
        elif isinstance(name, str):
            put(name, raw)
    for key, number in medians.items():
        values.setdefault(key, number)
    if zero_is_missing and values and all(v == 0.0 for v in values.values()):
        return Percentiles()
    return Percentiles(**values)
