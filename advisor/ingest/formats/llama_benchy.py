"""eugr ``llama-benchy``: llama-bench-style pp/tg tests against an OpenAI-compatible endpoint, as its
markdown table (``--format md``, the default, printed or ``--save-result``), ``--format json`` or
``--format csv`` (docs/formats.md, "llama-benchy").

Checked against eugr/llama-benchy ``src/llama_benchy/results.py`` and ``runner.py`` @ ``ae09cab52c9d``
(v0.2–0.4 write the same table; v0.3 added the ``peak`` columns):

* each (depth, pp, tg, concurrency) case sends ``concurrency`` requests at once, ``--runs`` times, and
  reports a ``pp<N>`` row (prefill) and a ``tg<N>`` row (generation) of the *same* requests; every
  cell is ``mean ± std`` over the runs;
* a ``pp`` rate is ``prompt_tokens / est_ppt`` with ``est_ppt = ttfr − latency``. Without
  ``--enable-prefix-caching`` the ``@ d<D>`` context is sent inside the prompt, so the timed prompt
  is ``pp + D`` tokens (``expected_pp + expected_ctx``) processed from an empty cache; with it, a
  ``ctx_pp @ d<D>`` request first loads the ``D``-token context, and ``pp<N> @ d<D>`` then times
  ``N`` tokens after ``D`` cached ones;
* at concurrency above 1, ``t/s (total)`` is the batch's rate (all requests' tokens over the span
  from the first start to the last first token, or first to last token for ``tg``) and
  ``t/s (req)`` the mean per-request rate; at concurrency 1 the one ``t/s`` is both;
* ``tg`` rates exclude the first token: ``(tokens − 1) / (last token − first token)``.

Mapping, one run per row: ``prefill_tok_s`` is the ``pp`` row's ``t/s`` (``t/s (total)``), and
``ttft_ms`` its ``e2e_ttft`` (client-side, HTTP included, ``mean`` and ``std``);
``decode_tok_s`` is the ``tg`` row's per-request rate and ``output_throughput_tok_s`` its total.
The prompt and the KV depth follow the prefix-caching rule above, so the physics sees the tokens
that were actually timed. The tool is engine-agnostic: the runtime and hardware are not in the file.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Mapping, Sequence
from typing import Any

from advisor.canonical import CanonicalRun, Metrics, Percentiles, Setup, Source, Workload
from advisor.errors import IngestError
from advisor.ingest.base import Input, ParserBase
from advisor.ingest.units import iso_to_utc
from advisor.ingest.values import as_float, as_int

__all__ = ["PARSERS", "LlamaBenchyParser"]

# "pp2048", "tg32 @ d4096", "ctx_pp @ d4096 (c2)", "pp2048 @ d4 (c10)" (results.py _generate_rows).
_TEST = re.compile(
    r"^(?:(?P<ctx>ctx_)(?P<ctx_kind>pp|tg)|(?P<kind>pp|tg)(?P<n>\d+))"
    r"(?:\s*@\s*d(?P<depth>\d+))?(?:\s*\(c(?P<c>\d+)\))?$"
)
_CELL = re.compile(r"^(-?\d+(?:\.\d+)?)(?:\s*±\s*(\d+(?:\.\d+)?))?$")
_VERSION = re.compile(r"^llama-benchy \(([^)\s]+)\)\s*$")
_LATENCY_MODE = re.compile(r"\|\s*latency mode:\s*(\w+)")
# Markdown header cell → the CSV's column stem (results.py writes <stem>_mean / <stem>_std).
_MD_COLUMNS = {
    "t/s": "t_s",
    "t/s (total)": "t_s",
    "t/s (req)": "t_s_req",
    "peak t/s": "peak_ts",
    "peak t/s (req)": "peak_ts_req",
    "ttfr (ms)": "ttfr",
    "est_ppt (ms)": "est_ppt",
    "e2e_ttft (ms)": "e2e_ttft",
}
_CSV_HEAD = ("model", "test_name", "t_s_mean", "t_s_std")
# The JSON report's keys (BenchmarkRun / BenchmarkMetadata of results.py).
_JSON_RUN_KEYS = frozenset({"concurrency", "context_size", "prompt_size", "response_size", "is_context_prefill_phase"})


def _cells(line: str) -> list[str] | None:
    stripped = line.strip()
    if not (stripped.startswith("|") and stripped.endswith("|")):
        return None
    return [cell.strip() for cell in stripped[1:-1].split("|")]


def _is_header(cells: Sequence[str] | None) -> bool:
    return (
        cells is not None
        and len(cells) >= 3
        and cells[0] == "model"
        and cells[1] == "test"
        and "est_ppt (ms)" in cells
        and set(cells[2:]) <= set(_MD_COLUMNS)
    )


def _is_json_report(doc: object) -> bool:
    if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list) or "latency_mode" not in doc:
        return False
    first = doc["benchmarks"][0] if doc["benchmarks"] else None
    return isinstance(first, dict) and set(first) >= _JSON_RUN_KEYS


class LlamaBenchyParser(ParserBase):
    format_id = "llama_benchy"
    description = "llama-benchy results (markdown table, --format json or --format csv)"
    tool = "llama-benchy"
    priority = 25

    def sniff(self, inp: Input) -> bool:
        text = inp.text
        if text is None:
            return False
        stripped = text.lstrip("\ufeff \r\n\t")
        if stripped.startswith("{"):
            return _is_json_report(inp.json)
        if stripped.startswith(",".join(_CSV_HEAD)):
            return True
        return any(_is_header(_cells(line)) for line in text.splitlines()[:400])

    def read(self, inp: Input) -> tuple[list[Any], list[str]]:
        text = inp.text
        if text is None:
            raise self.fail("the body is not text", "body")
        stripped = text.lstrip("\ufeff \r\n\t")
        if stripped.startswith("{"):
            return self._json_rows(inp.require_json())
        if stripped.startswith(",".join(_CSV_HEAD)):
            rows = [dict(r) for r in csv.DictReader(io.StringIO(stripped))]
            return self._paired([self._table_row(r, f"[{i}].") for i, r in enumerate(rows)]), []
        return self._md_rows(text.splitlines())

    # --- the three shapes, read to one row shape -------------------------------------------------

    def _md_rows(self, lines: Sequence[str]) -> tuple[list[Any], list[str]]:
        rows: list[dict[str, Any]] = []
        columns: list[str] = []
        version = mode = None
        for line in lines:
            if (found := _VERSION.match(line.strip())) is not None:
                version = found.group(1)
            if (found_mode := _LATENCY_MODE.search(line)) is not None:
                mode = found_mode.group(1)
            cells = _cells(line)
            if cells is None:
                continue
            if _is_header(cells):
                columns = cells
                continue
            if not columns or len(cells) != len(columns) or set("".join(cells)) <= set("-: "):
                continue
            flat: dict[str, Any] = {"model": cells[0], "test_name": cells[1]}
            for column, cell in zip(columns[2:], cells[2:], strict=True):
                if not cell:
                    continue
                value = _CELL.match(cell)
                if value is None:
                    raise self.fail(
                        f"row {cells[1]!r}: {column} is not 'mean ± std': {cell!r}", f"[{len(rows)}].{column}"
                    )
                stem = _MD_COLUMNS[column]
                flat[f"{stem}_mean"] = value.group(1)
                flat[f"{stem}_std"] = value.group(2)
            rows.append(self._table_row(flat, f"[{len(rows)}]."))
        if not rows:
            raise self.fail("no llama-benchy rows (| model | test | t/s | … | e2e_ttft (ms) | table)", "body")
        for row in rows:
            row["version"], row["latency_mode"] = version, mode
        return self._paired(rows), []

    def _table_row(self, flat: Mapping[str, Any], prefix: str) -> dict[str, Any]:
        """One md/CSV row: the test name split, each ``<stem>_mean`` / ``<stem>_std`` a number."""
        name = str(flat.get("test_name") or "").strip()
        test = _TEST.match(name)
        if test is None:
            raise self.fail(f"unknown test name {name!r} (pp<N>, tg<N>, ctx_pp, ctx_tg)", f"{prefix}test_name")
        row: dict[str, Any] = {
            "model": flat.get("model") or None,
            "test": name,
            "kind": test.group("kind") or test.group("ctx_kind"),
            "context_phase": test.group("ctx") is not None,
            "n": int(test.group("n")) if test.group("n") else None,
            "depth": int(test.group("depth") or 0),
            "concurrency": int(test.group("c") or 1),
            "prefix": prefix,
        }
        for stem in set(_MD_COLUMNS.values()):
            for part in ("mean", "std"):
                value = as_float(flat.get(f"{stem}_{part}") or None, f"{prefix}{stem}_{part}")
                if value is not None:
                    row[f"{stem}_{part}"] = value
        return row

    def _json_rows(self, doc: Any) -> tuple[list[Any], list[str]]:
        if not _is_json_report(doc):
            raise self.fail("not a llama-benchy JSON report (benchmarks[] with prompt_size, context_size…)", "body")
        caching = bool(doc.get("prefix_caching_enabled"))
        several = (as_int(doc.get("max_concurrency")) or 1) > 1
        rows: list[dict[str, Any]] = []
        for index, bench in enumerate(doc["benchmarks"]):
            prefix = f"benchmarks[{index}]."
            if not isinstance(bench, dict):
                raise self.fail("a benchmark entry is not an object", f"benchmarks[{index}]")
            common = {
                "model": doc.get("model"),
                "context_phase": bool(bench.get("is_context_prefill_phase")),
                "depth": as_int(bench.get("context_size")) or 0,
                "concurrency": as_int(bench.get("concurrency")) or 1,
                "pp": as_int(bench.get("prompt_size")),
                "tg": as_int(bench.get("response_size")),
                "prefix_caching": caching,
                "version": doc.get("version"),
                "latency_mode": doc.get("latency_mode"),
                "timestamp": doc.get("timestamp"),
                "prefix": prefix,
            }
            pairs = {
                "pp": {"t_s": "pp_throughput", "t_s_req": "pp_req_throughput", "ttfr": "ttfr",
                       "est_ppt": "est_ppt", "e2e_ttft": "e2e_ttft"},
                "tg": {"t_s": "tg_throughput", "t_s_req": "tg_req_throughput", "peak_ts": "peak_throughput",
                       "peak_ts_req": "peak_req_throughput"},
            }  # fmt: skip
            for kind, keys in pairs.items():
                if not isinstance(bench.get(keys["t_s"]), dict):
                    continue
                row = dict(common, kind=kind)
                for stem, key in keys.items():
                    metric = bench.get(key)
                    if isinstance(metric, dict):
                        for part in ("mean", "std"):
                            value = as_float(metric.get(part), f"{prefix}{key}.{part}")
                            if value is not None:
                                row[f"{stem}_{part}"] = value
                row["test"] = self._name(row, several)
                rows.append(row)
        if not rows:
            raise self.fail("the JSON report holds no pp or tg results", "benchmarks")
        return rows, []

    @staticmethod
    def _paired(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """A table's pp and tg rows of one case come from the same requests: give each row both sizes.
        ctx_ rows mean the run used --enable-prefix-caching (they exist only then)."""
        caching = any(r["context_phase"] for r in rows)
        for i, row in enumerate(rows):
            row["prefix_caching"] = caching
            key = (row["context_phase"], row["depth"], row["concurrency"])
            partner = next(
                (
                    other
                    for other in (rows[i - 1] if i else None, rows[i + 1] if i + 1 < len(rows) else None)
                    if other is not None
                    and other["kind"] != row["kind"]
                    and (other["context_phase"], other["depth"], other["concurrency"]) == key
                ),
                None,
            )
            for kind in ("pp", "tg"):
                source = row if row["kind"] == kind else partner
                row[kind] = source["n"] if source is not None else None
        return rows

    # --- one row, one run --------------------------------------------------------------------------

    def parse_record(self, record: Any, prefix: str) -> list[CanonicalRun]:
        where = record.get("prefix", prefix)
        kind, depth, concurrency = record["kind"], int(record["depth"]), int(record["concurrency"])
        context_phase, caching = bool(record["context_phase"]), bool(record["prefix_caching"])
        rate, rate_std = record.get("t_s_mean"), record.get("t_s_std")
        if rate is None:
            raise IngestError(f"{record.get('test') or kind}: no t/s", field=f"{where}t_s")
        for stem in ("t_s", "t_s_req", "peak_ts", "peak_ts_req", "ttfr", "est_ppt", "e2e_ttft"):
            value = record.get(f"{stem}_mean")
            if value is not None and value < 0:
                raise IngestError(f"{stem} cannot be negative, got {value:g}", field=f"{where}{stem}")
        pp, tg = as_int(record.get("pp")), as_int(record.get("tg"))
        prompt: int | None
        notes: list[str] = []
        # What the timed prompt was (runner.py): see the module docstring.
        if context_phase:
            prompt, kv_depth = depth, 0
            notes.append(
                f"ctx phase (--enable-prefix-caching): the {depth}-token context sent alone, from an empty cache"
            )
        elif caching or depth == 0:
            prompt, kv_depth = pp, depth
            if depth:
                notes.append(f"prefix caching on: {pp} prompt tokens timed after the {depth}-token context was cached")
        else:
            prompt, kv_depth = (pp + depth if pp is not None else None), 0
            notes.append(
                f"no prefix caching: the @ d{depth} context is sent in the prompt, so {pp} + {depth} tokens are "
                "timed from an empty cache (llama-benchy divides their sum by the prefill time)"
            )
        metrics = Metrics()
        labels: dict[str, str] = {"test": str(record["test"])}
        if kind == "pp":
            metrics.prefill_tok_s = rate
            metrics.ttft_ms = Percentiles(mean=record.get("e2e_ttft_mean"), std=record.get("e2e_ttft_std"))
            if (ppt := record.get("est_ppt_mean")) is not None:
                labels["est_ppt_ms"] = f"{ppt:g}"
            notes.append(
                "pp row: prefill_tok_s = t/s" + (" (total, all requests at once)" if concurrency > 1 else "")
                + "; ttft_ms = e2e_ttft, measured by the client (HTTP included)"
            )  # fmt: skip
        else:
            per_request = record.get("t_s_req_mean") if concurrency > 1 else rate
            metrics.decode_tok_s = per_request if per_request is not None else rate
            metrics.output_throughput_tok_s = rate
            if (peak := record.get("peak_ts_mean")) is not None:
                labels["peak_tok_s"] = f"{peak:g}"
            notes.append(
                "tg row: decode_tok_s = t/s per request, output_throughput_tok_s = t/s"
                + (" (total)" if concurrency > 1 else "") + "; both leave out each request's first token"
            )  # fmt: skip
        if rate_std is not None:
            labels["t_s_std"] = f"{rate_std:g}"
        if (mode := record.get("latency_mode")) is not None:
            labels["latency_mode"] = str(mode)
        version = record.get("version")
        notes_measured: list[str] = []
        measured_at = (
            iso_to_utc(record.get("timestamp"), f"{where}timestamp", notes_measured)
            if record.get("timestamp")
            else None
        )
        model = record.get("model")
        return [
            CanonicalRun(
                measured_at=measured_at,
                labels=labels,
                setup=Setup(model=model if isinstance(model, str) and model else None),
                workload=Workload(
                    concurrency=concurrency,
                    prompt_tokens_mean=prompt,
                    output_tokens_mean=tg,
                    kv_depth_tokens=kv_depth,
                    streaming=True,
                ),
                metrics=metrics,
                source=Source(tool_version=str(version) if version else None, notes=notes + notes_measured),
            )
        ]

    @staticmethod
    def _name(record: Mapping[str, Any], several: bool) -> str:
        """The table's test name of a JSON result (results.py ``_generate_rows``)."""
        kind, depth, c = record["kind"], record["depth"], record["concurrency"]
        if record["context_phase"]:
            return f"ctx_{kind} @ d{depth}" + (f" (c{c})" if several else "")
        return f"{kind}{record.get(kind)}" + (f" @ d{depth}" if depth else "") + (f" (c{c})" if several else "")


PARSERS = [LlamaBenchyParser()]
