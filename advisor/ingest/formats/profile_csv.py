"""The CSV exports of NVIDIA genai-perf and aiperf (docs/formats.md §6.4).

``profile_export_genai_perf.csv`` and ``profile_export_aiperf.csv`` hold the same numbers as their
JSON twins in sections separated by a blank line: first ``Metric,avg,min,max,p…`` rows, one per
distribution, the unit in parentheses after the display name ("Time To First Token (ms)"); then
``Metric,Value`` rows for the scalars ("Request Throughput (per sec)"). The rows are turned into the
JSON twin's ``{unit, avg, p50, …}`` metric objects and read by the same code
(:func:`advisor.ingest.formats.genai_perf.parse_profile`), so both forms give the same run.

Pitfalls: genai-perf formats numbers with thousands separators (``"1,146.31"``, quoted); aiperf
prints nanosecond timestamps as floats; both write CRLF. The CSV has no model, no configuration and
no start time: the JSON twin has them, and a note says so.

``genai-perf analyze`` writes ``analyze_export_genai_perf.csv``: one row per run configuration of a
sweep (``Config Name,Concurrency,ISL,…``, p99 columns), then a GPU section. Each row is a run.
"""

from __future__ import annotations

import csv
import io
import re
from typing import Any

from advisor.canonical import CanonicalRun, Metrics, Percentiles, Setup, Source, Workload
from advisor.errors import IngestError
from advisor.ingest.base import Input, ParserBase
from advisor.ingest.formats.genai_perf import parse_profile

__all__ = ["PARSERS", "AiperfCsvParser", "GenaiPerfAnalyzeCsvParser", "GenaiPerfCsvParser", "csv_sections"]

_NAME_UNIT = re.compile(r"^(?P<name>.*?)\s*(?:\((?P<unit>[^()]*)\))?\s*$")
#: Display names only aiperf writes (genai-perf has no benchmark duration and no chunk latency).
_AIPERF_ONLY = ("benchmark duration", "inter chunk latency", "error request count", "output token count")
_STAT_HEADER = "metric"
#: The second header cell of the first section: "Metric,avg,min,…" (genai-perf, aiperf), or "Metric,Value"
#: when only scalars were written.
_FIRST_STATS = ("avg", "value")
_ANALYZE_HEADER = "config name"


def csv_sections(text: str) -> list[list[list[str]]]:
    """The blank-line separated sections of a CSV text, each a list of rows (header first)."""
    sections: list[list[list[str]]] = []
    current: list[list[str]] = []
    try:
        rows = list(csv.reader(io.StringIO(text)))
    except csv.Error as exc:  # a stray carriage return inside a field: a corrupted or truncated file
        raise IngestError(f"not a readable CSV: {exc}", field="body") from exc
    for row in rows:
        if not any(cell.strip() for cell in row):
            if current:
                sections.append(current)
            current = []
            continue
        current.append([cell.strip() for cell in row])
    if current:
        sections.append(current)
    return sections


def _number(cell: str, field: str) -> float | None:
    """A CSV cell as a number: genai-perf writes thousands separators (``1,146.31``); "N/A" or an
    empty cell is None."""
    text = cell.replace(",", "").strip()
    if not text or text.upper() in ("N/A", "NA", "NAN", "NONE"):
        return None
    try:
        return float(text)
    except ValueError as exc:
        raise IngestError(f"not a number: {cell!r}", field=field) from exc


def _metric_sections(sections: list[list[list[str]]]) -> list[list[list[str]]]:
    return [s for s in sections if s[0] and s[0][0].lower() == _STAT_HEADER and len(s[0]) >= 2]


def _first_line(inp: Input) -> str | None:
    if inp.json is not None or inp.text is None:
        return None
    for line in inp.text.splitlines():
        if line.strip():
            return line.strip().lower()
    return None


def profile_doc(sections: list[list[list[str]]]) -> dict[str, Any]:
    """The JSON twin's metric objects (``{"Time To First Token": {"unit": "ms", "avg": …}}``) from the
    ``Metric,…`` sections of the CSV."""
    doc: dict[str, Any] = {}
    for section in _metric_sections(sections):
        header = [h.lower() for h in section[0]]
        for row in section[1:]:
            match = _NAME_UNIT.match(row[0])
            if match is None or not match.group("name"):
                continue
            name, unit = match.group("name"), match.group("unit")
            obj: dict[str, Any] = {"unit": unit}
            for stat, cell in zip(header[1:], row[1:], strict=False):
                key = "avg" if stat == "value" else stat
                value = _number(cell, f"{row[0]}.{stat}")
                if value is not None:
                    obj[key] = value
            if len(obj) > 1:
                doc.setdefault(name, obj)
    return doc


class _ProfileCsvParser(ParserBase):
    aiperf: bool
    priority = 45

    def sniff(self, inp: Input) -> bool:
        first = _first_line(inp)
        if first is None or not first.startswith("metric,"):
            return False
        if first.split(",")[1].strip() not in _FIRST_STATS:
            # "Metric,run A,run B": a table comparing runs (the vLLM summaries a script tabulated),
            # not the tool's export, whose first section heads its columns with statistics.
            return False
        text = (inp.text or "").lower()
        looks_aiperf = any(f"\n{name}" in text for name in _AIPERF_ONLY) or "aiperf" in (inp.file_name or "")
        return looks_aiperf == self.aiperf

    def records(self, inp: Input) -> list[Any] | None:
        if inp.text is None or inp.json is not None:
            return None
        sections = csv_sections(inp.text)
        return [sections] if _metric_sections(sections) else None

    def parse_record(self, record: Any, prefix: str) -> list[CanonicalRun]:
        doc = profile_doc(record)
        names = {_norm(k) for k in doc}
        if "time_to_first_token" not in names and "inter_token_latency" not in names:
            raise self.fail("no Time To First Token or Inter Token Latency row", "body")
        run = parse_profile(doc, aiperf=self.aiperf)
        run.source.notes.append(
            "read from the CSV export, which has no model, configuration or start time: the JSON twin "
            f"(profile_export_{'aiperf' if self.aiperf else 'genai_perf'}.json) has them"
        )
        return [run]


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.strip().lower()).strip("_")


class GenaiPerfCsvParser(_ProfileCsvParser):
    format_id = "genai_perf_csv"
    description = "NVIDIA genai-perf profile_export_genai_perf.csv"
    tool = "genai-perf"
    aiperf = False


class AiperfCsvParser(_ProfileCsvParser):
    format_id = "aiperf_csv"
    description = "NVIDIA aiperf profile_export_aiperf.csv"
    tool = "aiperf"
    aiperf = True


# genai-perf analyze columns → (canonical metric, statistic). Names are matched case-insensitively.
_ANALYZE_LATENCY = {
    "time to first token": "ttft_ms",
    "inter token latency": "tpot_ms",
    "request latency": "e2e_ms",
}
_STAT = re.compile(r"^(?P<stat>avg\.?|p\d+(?:\.\d+)?|min|max|std)\s+(?P<name>.+?)\s*\((?P<unit>[^()]*)\)$", re.I)


class GenaiPerfAnalyzeCsvParser(ParserBase):
    format_id = "genai_perf_analyze_csv"
    description = "NVIDIA genai-perf analyze_export_genai_perf.csv (one row per configuration of a sweep)"
    tool = "genai-perf"
    priority = 45

    def sniff(self, inp: Input) -> bool:
        first = _first_line(inp)
        return first is not None and first.startswith("config name,") and "time to first token" in first

    def records(self, inp: Input) -> list[Any] | None:
        if inp.text is None or inp.json is not None:
            return None
        sections = [s for s in csv_sections(inp.text) if s[0] and s[0][0].lower() == _ANALYZE_HEADER]
        if not sections:
            return None
        header = sections[0][0]
        return [dict(zip(header, row, strict=False)) for row in sections[0][1:]]

    def parse_record(self, record: Any, prefix: str) -> list[CanonicalRun]:
        metrics = Metrics()
        workload = Workload()
        notes = ["genai-perf analyze exports only the columns it was asked for (p99 by default)"]
        for column, cell in record.items():
            key = column.strip().lower()
            field = f"{prefix}{column}"
            if key == "concurrency":
                workload.concurrency = _number(cell, field)
            elif key == "isl":
                workload.prompt_tokens_mean = _number(cell, field)
                notes.append("prompt_tokens_mean is the configured ISL of the sweep, not a measurement")
            elif key == "num prompts":
                value = _number(cell, field)
                workload.num_requests = int(value) if value is not None else None
            elif key.startswith("avg. output token throughput"):
                metrics.output_throughput_tok_s = _number(cell, field)
            elif key.startswith("request throughput"):
                metrics.request_throughput_rps = _number(cell, field)
            else:
                match = _STAT.match(column.strip())
                if match is None:
                    continue
                name = match.group("name").lower()
                stat = match.group("stat").lower().rstrip(".").replace(".", "_")
                stat = "mean" if stat == "avg" else stat
                target = _ANALYZE_LATENCY.get(name)
                if target is None or match.group("unit") != "ms" or stat not in Percentiles.__struct_fields__:
                    continue
                setattr(getattr(metrics, target), stat, _number(cell, field))
        name = record.get("Config Name")
        labels = {"config_name": name} if isinstance(name, str) and name else {}
        return [
            CanonicalRun(labels=labels, setup=Setup(), workload=workload, metrics=metrics, source=Source(notes=notes))
        ]


PARSERS = [GenaiPerfCsvParser(), AiperfCsvParser(), GenaiPerfAnalyzeCsvParser()]
