"""Prometheus text exposition parsed into samples: one scrape, or a file of several.

:func:`parse_scrape` reads one exposition with ``prometheus_client``'s own parser (never a
hand-written one) into a :class:`Scrape`; :func:`parse_scrapes` splits a file holding several
scrapes (``cat before.prom after.prom``, or blocks headed by ``# scraped_at: <RFC 3339>``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from prometheus_client.parser import text_string_to_metric_families

from advisor.errors import IngestError, MalformedInput
from advisor.ingest.prometheus.engines import ENGINES, MODEL_LABEL, PREFIXES, RENAMES

__all__ = ["LabelSet", "Scrape", "parse_scrape", "parse_scrapes", "split_scrapes"]

LabelSet = tuple[tuple[str, str], ...]

_SAMPLE_SUFFIXES = ("", "_total", "_created", "_bucket", "_sum", "_count")
_SCRAPED_AT = re.compile(r"^#\s*scraped_at\s*[:=]?\s*(\S+)\s*$", re.IGNORECASE)
_DIRECTIVE = re.compile(r"^#\s*(HELP|TYPE)\s+(\S+)")


@dataclass(frozen=True)
class Scrape:
    """One ``/metrics`` exposition: every sample by name and label set."""

    samples: Mapping[str, Mapping[LabelSet, float]]
    taken_at: datetime | None = None
    #: Older metric names that were read as their newer equivalents (for source notes).
    renamed: tuple[str, ...] = ()

    @property
    def engine(self) -> str | None:
        """The serving engine, by metric prefix (the one with most series wins)."""
        sizes = {
            engine: sum(len(v) for k, v in self.samples.items() if k.startswith(prefix))
            for engine, prefix in PREFIXES.items()
        }
        best = max(ENGINES, key=lambda e: sizes[e])
        return best if sizes[best] else None

    @property
    def models(self) -> tuple[str, ...]:
        """The distinct ``model_name`` label values of the engine's series, sorted."""
        engine = self.engine
        if engine is None:
            return ()
        prefix = PREFIXES[engine]
        found = {
            dict(labels)[MODEL_LABEL]
            for name, series in self.samples.items()
            if name.startswith(prefix)
            for labels in series
            if MODEL_LABEL in dict(labels)
        }
        return tuple(sorted(found))

    def series(self, name: str) -> Mapping[LabelSet, float]:
        return self.samples.get(name, {})


def parse_scrape(text: str, *, taken_at: datetime | None = None) -> Scrape:
    """Parse one Prometheus text exposition.

    ``taken_at`` is when it was scraped (the live probe knows); otherwise the newest sample
    timestamp is used when the exposition carries timestamps. Raises :class:`MalformedInput` for
    text that is not an exposition.
    """
    samples: dict[str, dict[LabelSet, float]] = {}
    newest: float | None = None
    try:
        families = list(text_string_to_metric_families(text))
    except Exception as exc:  # the parser raises ValueError, IndexError, … on garbage
        raise MalformedInput(f"not Prometheus text exposition: {exc}", field="body") from exc
    for family in families:
        for sample in family.samples:
            value = float(sample.value)
            if math.isnan(value):
                continue  # a NaN gauge is "no data", never a number to average
            labels: LabelSet = tuple(sorted((str(k), str(v)) for k, v in sample.labels.items()))
            samples.setdefault(sample.name, {})[labels] = value
            if sample.timestamp is not None:
                ts = float(sample.timestamp)
                newest = ts if newest is None else max(newest, ts)
    if taken_at is None and newest is not None:
        taken_at = datetime.fromtimestamp(newest, UTC)
    renamed: list[str] = []
    for old, new in RENAMES:
        old_names = [old + s for s in _SAMPLE_SUFFIXES if old + s in samples]
        if old_names and not any(new + s in samples for s in _SAMPLE_SUFFIXES):
            for old_name in old_names:
                samples[new + old_name[len(old) :]] = samples.pop(old_name)
            renamed.append(f"{old} (read as {new})")
    return Scrape(samples=samples, taken_at=taken_at, renamed=tuple(renamed))


def split_scrapes(text: str) -> list[tuple[str, datetime | None]]:
    """Split text holding one or more concatenated expositions.

    A new scrape starts at a ``# scraped_at: <RFC 3339 or epoch seconds>`` line, or where a ``# HELP``
    or ``# TYPE`` line repeats one already seen in the current scrape (plain ``cat a.prom b.prom``).
    Returns each scrape's text with its ``scraped_at`` time, if given.
    """
    chunks: list[tuple[list[str], datetime | None]] = [([], None)]
    seen: set[tuple[str, str]] = set()
    for line in text.splitlines():
        stamp = _SCRAPED_AT.match(line.strip())
        if stamp:
            when = _parse_time(stamp.group(1))
            if any(not ln.startswith("#") and ln.strip() for ln in chunks[-1][0]):
                chunks.append(([], when))
            else:
                chunks[-1] = (chunks[-1][0], when)
            seen = set()
            continue
        directive = _DIRECTIVE.match(line.strip())
        if directive:
            key = (directive.group(1).upper(), directive.group(2))
            if key in seen:
                chunks.append(([], None))
                seen = set()
            seen.add(key)
        chunks[-1][0].append(line)
    return [("\n".join(lines) + "\n", when) for lines, when in chunks if any(ln.strip() for ln in lines)]


def parse_scrapes(text: str) -> list[Scrape]:
    """Every scrape in ``text`` (see :func:`split_scrapes`), in file order."""
    return [parse_scrape(chunk, taken_at=when) for chunk, when in split_scrapes(text)]


def _parse_time(value: str) -> datetime:
    try:
        if re.fullmatch(r"\d+(\.\d+)?", value):
            return datetime.fromtimestamp(float(value), UTC)
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00") if value.endswith("Z") else value)
    except (ValueError, OverflowError, OSError) as exc:
        raise IngestError(f"scraped_at {value!r} is not an RFC 3339 time", field="scraped_at") from exc
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
