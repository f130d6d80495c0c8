"""llama.cpp ``llama-bench -o json | jsonl | csv`` (docs/formats.md §4.1, §9.3).

One row per test, one canonical run per row:

* ``pp`` (``n_gen == 0``): ``prefill_tok_s = avg_ts``; ``ttft_ms`` is the prompt's processing time
  (``avg_ns``, engine only: no sampling, no HTTP).
* ``tg`` (``n_prompt == 0``): ``decode_tok_s = avg_ts`` at batch size 1 and KV depth ``n_depth``;
  ``tpot_ms = avg_ns / n_gen``.
* ``pg`` (both, ``-pg``): ``avg_ts`` is a *combined* rate ``(n_prompt + n_gen) / t`` and is never
  stored as prefill or decode speed (docs/formats.md §9.3). It is ``total_throughput_tok_s`` and
  ``e2e_ms``. When the file also has the matching ``pp`` test (same prompt, depth and settings),
  prefill comes from that test and decode from the remaining time, ``n_gen / (t_pg − t_pp)``, marked
  approximate.

The settings become ``setup.engine_args`` under llama.cpp's own flag names (``n_gpu_layers``,
``flash_attn``, ``cache_type_k``/``cache_type_v``, ``batch_size``, ``ubatch_size``, ``threads``);
``gpu_info`` is the hardware hint, ``model_type`` the quantization hint. ``model_filename`` may hold
local paths, so only the file's base name is kept. JSONL files with stderr mixed in (a ``2>&1``
redirect) are read by skipping the lines that are not JSON; Windows PowerShell's ``>`` writes UTF-16,
which is read too.
"""

from __future__ import annotations

import csv
import io
import json
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from advisor.canonical import CanonicalRun, Metrics, Percentiles, Setup, Source, Workload
from advisor.errors import IngestError
from advisor.ingest.base import Input, ParserBase
from advisor.ingest.units import iso_to_utc
from advisor.ingest.values import as_float, as_int

__all__ = [
    "PARSERS",
    "LlamaBenchParser",
    "model_name_from_filename",
    "quantization_from_model_type",
    "split_model_filename",
]

_REQUIRED = ("n_prompt", "n_gen", "avg_ts")
_RESULT_FIELDS = frozenset(
    {"n_prompt", "n_gen", "n_depth", "test_time", "avg_ns", "stddev_ns", "avg_ts", "stddev_ts",
     "samples_ns", "samples_ts"}
)  # fmt: skip
#: How many leading lines sniffing looks at for a JSONL record or a CSV header (stderr banners first).
_SNIFF_LINES = 40

# llama.cpp ``llama_model_ftype_name`` strings → the usual "Q4_K_M" spelling.
_K_SIZES = {"Small": "S", "Medium": "M", "Large": "L"}
_K_QUANT = re.compile(r"\b(Q[2-6])_K - (Small|Medium|Large)\b")
_PLAIN_QUANT = re.compile(r"\b(I?Q\d_[A-Z0-9_]*[A-Z0-9]|TQ\d_\d|Q\d_K)\b")
_FLOAT_QUANT = re.compile(r"\b(MXFP4|NVFP4|BF16|F16|F32)\b")
# A trailing GGUF quantization tag in a file name ("-Q4_K_M", ".Q3_K_L", "-mxfp4", "-F16").
_FILE_QUANT_SUFFIX = re.compile(r"[-_.](?:i?q\d(?:_[a-z0-9]+)*|tq\d_\d|b?f16|f32|mxfp4|nvfp4)$", re.IGNORECASE)
_SPLIT_SUFFIX = re.compile(r"-\d{5}-of-\d{5}$")
# Markers that travel with a quantization tag and say nothing about the model: Unsloth Dynamic
# ("UD"), importance-matrix builds ("imat", "imatrix", "i1").
_FILE_QUANT_MARKER = re.compile(r"[-_.](?:ud|imat|imatrix|i1)$", re.IGNORECASE)


def quantization_from_model_type(model_type: str) -> str | None:
    """The weight quantization named in llama-bench's ``model_type`` ("llama 8B Q4_K - Medium" →
    "Q4_K_M"), or None."""
    if "IQ3_S mix" in model_type:
        return "IQ3_M"
    match = _K_QUANT.search(model_type)
    if match:
        base, size = match.group(1), _K_SIZES[match.group(2)]
        # llama.cpp names plain Q2_K "Q2_K - Medium"; Q2_K_S is "Q2_K - Small".
        return "Q2_K" if (base, size) == ("Q2", "M") else f"{base}_K_{size}"
    match = _PLAIN_QUANT.search(model_type)
    if match:
        return match.group(1)
    match = _FLOAT_QUANT.search(model_type)
    return match.group(1) if match else None


def split_model_filename(path: str) -> tuple[str | None, str | None]:
    """A model name and the quantization tag from a GGUF file path.

    Only the base name is kept (the directory may be a private path), without ``.gguf``, split-file
    numbering and the trailing quantization tag, which is returned apart ("…/Llama-3.2-1B-Q4_K_M.gguf"
    → ("Llama-3.2-1B", "Q4_K_M")).
    """
    name = re.split(r"[\\/]", path.strip())[-1]
    for _ in range(3):  # "X-Q4_K_M.gguf-00001-of-00004.gguf" needs two passes
        name = re.sub(r"\.gguf$", "", name, flags=re.IGNORECASE)
        name = _SPLIT_SUFFIX.sub("", name)
    quant = None
    while True:
        # Alternate until neither is left: "X-UD-Q4_K_XL" (Unsloth Dynamic), "X-Q4_K_M-imat",
        # "X.i1-Q4_K_M" (imatrix builds) keep a marker beside the quantization tag.
        marker = _FILE_QUANT_MARKER.search(name)
        if marker:
            name = name[: marker.start()]
            continue
        match = _FILE_QUANT_SUFFIX.search(name) if quant is None else None
        if match:
            quant = match.group(0)[1:].upper()
            name = name[: match.start()]
            continue
        break
    return name or None, quant


def model_name_from_filename(path: str) -> str | None:
    """The model name part of :func:`split_model_filename`."""
    return split_model_filename(path)[0]


def _flag(value: object) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("1", "true", "0", "false"):
        return value.strip().lower() in ("1", "true")
    return None


def _flash_attn(value: object) -> str | None:
    """``flash_attn`` as llama-server's ``--flash-attn`` value: an int (-1 auto) in current builds, a
    bool in older ones."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return "on" if value.strip().lower() == "true" else "off"
    number = as_int(value)
    if number is None:
        return None
    return {-1: "auto", 0: "off", 1: "on"}.get(number)


def _text(value: object) -> str | None:
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


def _is_row(obj: object) -> bool:
    return isinstance(obj, dict) and all(k in obj for k in _REQUIRED)


def _csv_header_at(lines: Sequence[str]) -> int | None:
    for i, line in enumerate(lines[:_SNIFF_LINES]):
        stripped = line.strip().replace('"', "")
        if stripped.startswith("build_commit,") and all(f",{k}," in f",{stripped}," for k in _REQUIRED):
            return i
    return None


# The markdown table (``-o md``, the default): display names → the JSON field names.
_MD_COLUMNS = {
    "model": "model_type",
    "backend": "backends",
    "ngl": "n_gpu_layers",
    "threads": "n_threads",
    "n_batch": "n_batch",
    "n_ubatch": "n_ubatch",
    "type_k": "type_k",
    "type_v": "type_v",
    "main_gpu": "main_gpu",
    "sm": "split_mode",
    "nkvo": "no_kv_offload",
    "fa": "flash_attn",
    "ts": "tensor_split",
    "mmap": "use_mmap",
    "embd": "embeddings",
    "dev": "devices",
    "n_cpu_moe": "n_cpu_moe",
    "ncmoe": "n_cpu_moe",
}
_MD_SIZE = re.compile(r"^([0-9.]+)\s*(KiB|MiB|GiB|TiB)$")
_MD_PARAMS = re.compile(r"^([0-9.]+)\s*([KMBT])$")
_MD_RATE = re.compile(r"^(\d+(?:\.\d+)?)\s*(?:±\s*(\d+(?:\.\d+)?))?$")
# "pp512", "tg128", "pp512+tg128", older "pp 512" / "tg 128", each optionally "@ d<depth>".
_MD_TEST = re.compile(r"^(?:pp\s*(\d+))?\+?(?:tg\s*(\d+))?(?:\s*@\s*d(\d+))?$")
_MD_BUILD = re.compile(r"^build:\s*([0-9a-f]+)\s*\((\d+)\)")
# Device lines of the backends' start-up banner on stderr (``2>&1`` puts them above the table):
# CUDA/ROCm "  Device 0: NVIDIA GeForce RTX 4090, compute capability 8.9, VMM: yes", Vulkan
# "ggml_vulkan: 0 = AMD Radeon RX 7900 XTX (RADV NAVI31) (radv) | uma: 0 | …".
_BANNER_DEVICE = re.compile(r"^\s*Device \d+: ([^,]+),|^ggml_vulkan: \d+ = (.+?) \([^()]*\) \|")
# The command pasted above the table ("$ ./llama-bench -m models/x.gguf -fa 1"): its -m / --model
# is the model file the markdown table does not print (llama-bench's usage: "-m, --model <filename>").
_MD_COMMAND = re.compile(r"(?:^|[\s/\\])llama-bench(?:\.exe)?\s+(?P<args>.*)$")
_MD_MODEL_LINE = re.compile(r"^\s*Model:\s*(\S+\.gguf)\s*$", re.IGNORECASE)
_BINARY_UNITS = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
_DECIMAL_UNITS = {"K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}


def _md_cells(line: str) -> list[str] | None:
    stripped = line.strip()
    if not (stripped.startswith("|") and stripped.endswith("|")):
        return None
    return [cell.strip() for cell in stripped[1:-1].split("|")]


def _is_md_header(cells: Sequence[str] | None) -> bool:
    """llama-bench's table header: ``model`` first, ``test`` and ``t/s`` last; or the same header a
    user cropped of its wide ``model`` column (GitHub comments do), which keeps ``size`` and ``params``."""
    if not cells or cells[-1] != "t/s" or "test" not in cells:
        return False
    return cells[0] == "model" or (cells[0] == "size" and "params" in cells)


def _md_header_at(lines: Sequence[str]) -> int | None:
    for i, line in enumerate(lines):
        if _is_md_header(_md_cells(line)):
            return i
    return None


def _md_value(column: str, cell: str) -> tuple[str, Any] | None:
    """One markdown cell as ``(JSON field, value)``: sizes back to bytes, parameter counts back to a
    count (both rounded to the table's two decimals), numbers as numbers."""
    if column == "size":
        match = _MD_SIZE.match(cell)
        return ("model_size", float(match.group(1)) * _BINARY_UNITS[match.group(2)]) if match else None
    if column == "params":
        match = _MD_PARAMS.match(cell)
        return ("model_n_params", float(match.group(1)) * _DECIMAL_UNITS[match.group(2)]) if match else None
    field = _MD_COLUMNS.get(column, column)
    number = as_float(cell) if re.fullmatch(r"-?[0-9.]+", cell) else None
    return field, (number if number is not None else cell)


def _md_rows(lines: Sequence[str], header: int) -> tuple[list[dict[str, Any]], list[str]]:
    """The rows of llama-bench's markdown tables (a file may hold several, each with its header)."""
    rows: list[dict[str, Any]] = []
    columns: list[str] = []
    unbuilt = 0  # rows[unbuilt:] have not met their table's "build:" footer yet
    # Each run prints its own device banner above its table: a script that runs llama-bench once
    # per GPU set (one card, then both) pastes a banner per table, and each table's rows are on the
    # devices of the banner above it, not of the first one.
    table_devices = _banner_devices(lines[:header])
    pending: list[str] = []
    for line in lines[header:]:
        if (device := _BANNER_DEVICE.match(line)) is not None:
            pending.append((device.group(1) or device.group(2)).strip())
            continue
        if (found := _MD_BUILD.match(line.strip())) is not None:
            # llama-bench prints the footer after its table: it is the build of the rows since the
            # previous footer (a paste may compare two builds, or llama.cpp and a fork).
            for built in rows[unbuilt:]:
                built.setdefault("build_commit", found.group(1))
                built.setdefault("build_number", int(found.group(2)))
            unbuilt = len(rows)
            continue
        cells = _md_cells(line)
        if cells is None:
            continue
        if _is_md_header(cells):
            columns = cells
            if pending:
                table_devices, pending = pending, []
            continue
        if not columns or len(cells) != len(columns) or set("".join(cells)) <= set("-: "):
            continue
        row: dict[str, Any] = {}
        cell_test = ""
        for column, cell in zip(columns, cells, strict=True):
            if column == "test":
                cell_test = cell
                test = _MD_TEST.match(cell)
                if test is None or not (test.group(1) or test.group(2)):
                    row = {}
                    break
                row["n_prompt"] = int(test.group(1) or 0)
                row["n_gen"] = int(test.group(2) or 0)
                row["n_depth"] = int(test.group(3) or 0)
            elif column == "t/s":
                rate = _MD_RATE.match(cell)
                if rate is None:
                    # A test row whose rate is no number ("inf", "nan", a template's "X.XX") is a
                    # malformed measurement: refused, never dropped from the table in silence.
                    raise IngestError(
                        f"llama_bench: the t/s of test {cell_test!r} is {cell!r}, not a rate",
                        field=f"[{len(rows)}].avg_ts",
                        format="llama_bench",
                    )
                row["avg_ts"] = float(rate.group(1))
                if rate.group(2) is not None:
                    row["stddev_ts"] = float(rate.group(2))
            elif (pair := _md_value(column, cell)) is not None:
                row[pair[0]] = pair[1]
        if row and row.get("avg_ts"):
            if table_devices:
                row.setdefault("gpu_info", ", ".join(table_devices))
            # The table prints rates only; the time of one repetition is n / rate (the mean of the
            # samples' rates, so within the table's rounding of the mean time).
            row["avg_ns"] = (row["n_prompt"] + row["n_gen"]) / row["avg_ts"] * 1e9
            rows.append(row)
    notes: list[str] = []
    # Every command of the paste must name the same one model, and every row be of one model type.
    models = set(_command_models(lines))
    where = "the llama-bench command above the table (-m)"
    if not models:
        # A benchmark script's own header naming the one GGUF file it ran ("Model: /path/x.gguf",
        # 1337hero/rx7900xtx-llama-bench-vulcan benchmark-results/*.txt).
        models = {m.group(1) for m in map(_MD_MODEL_LINE.match, lines[:header]) if m is not None}
        where = "the 'Model: <file>.gguf' line above the table"
    if len(models) == 1 and "," not in (model := next(iter(models))) and len({r.get("model_type") for r in rows}) == 1:
        for row in rows:
            row.setdefault("model_filename", model)
        notes.append(f"model_filename from {where}")
    notes.insert(
        0,
        "llama-bench markdown table: size and params are rounded to two decimals, and the table has "
        "no times (ttft_ms and tpot_ms are n / t/s)",
    )
    return rows, notes


def _banner_devices(lines: Sequence[str]) -> list[str]:
    """The device names of the start-up banner lines in ``lines``."""
    return [(m.group(1) or m.group(2)).strip() for m in map(_BANNER_DEVICE.match, lines) if m is not None]


def _command_models(lines: Sequence[str]) -> list[str]:
    """The ``-m``/``--model`` values of the llama-bench command lines in ``lines`` (all of them: one
    command may name several models, and a paste may hold several commands)."""
    models: list[str] = []
    for line in lines:
        if (command := _MD_COMMAND.search(line)) is None:
            continue
        try:
            words = shlex.split(command.group("args"))
        except ValueError:  # an unbalanced quote: read the words as they stand
            words = command.group("args").split()
        for i, word in enumerate(words):
            if word in ("-m", "--model") and i + 1 < len(words):
                models.append(words[i + 1])
            elif word.startswith("--model="):
                models.append(word.split("=", 1)[1])
    return models


def _json_rows(lines: Sequence[str]) -> tuple[list[dict[str, Any]], int]:
    """JSON-Lines records, skipping lines that are not JSON objects (stderr mixed into the file)."""
    rows: list[dict[str, Any]] = []
    skipped = 0
    for line in lines:
        stripped = line.strip()
        if not stripped:
            continue
        if not stripped.startswith("{"):
            skipped += 1
            continue
        try:
            obj = json.loads(stripped)
        except ValueError:
            skipped += 1
            continue
        if isinstance(obj, dict):
            rows.append(obj)
        else:
            skipped += 1
    return rows, skipped


class LlamaBenchParser(ParserBase):
    format_id = "llama_bench"
    description = "llama.cpp llama-bench results (-o json, jsonl or csv): one run per pp/tg/pg test"
    tool = "llama-bench"
    #: docs/formats.md §9.4 rule 2, right after Prometheus text.
    priority = 20

    def sniff(self, inp: Input) -> bool:
        doc = inp.json
        if isinstance(doc, list):
            return bool(doc) and _is_row(doc[0])
        if isinstance(doc, dict):
            return _is_row(doc)
        text = inp.text
        if text is None:
            return False
        lines = text.splitlines()
        if _csv_header_at(lines) is not None or _md_header_at(lines[:_SNIFF_LINES]) is not None:
            return True
        for line in lines[:_SNIFF_LINES]:
            stripped = line.strip()
            if stripped.startswith("{"):
                try:
                    return _is_row(json.loads(stripped))
                except ValueError:
                    return False
        return False

    def read(self, inp: Input) -> tuple[list[Any], list[str]]:
        rows, notes = self._rows(inp)
        rows = [r for r in rows if _is_row(r)]
        if not rows:
            raise self.fail("no llama-bench test rows (objects with n_prompt, n_gen and avg_ts)", field="body")
        return rows, notes

    def parse_records(self, records: list[Any]) -> list[CanonicalRun]:
        # A pg test is split with the help of the matching pp test, so each row sees them all.
        return [self._run(row, index, records) for index, row in enumerate(records)]

    # ---------------------------------------------------------------------------------------------

    def _rows(self, inp: Input) -> tuple[list[dict[str, Any]], list[str]]:
        doc = inp.json
        if isinstance(doc, list):
            return [r for r in doc if isinstance(r, dict)], []
        if isinstance(doc, dict):
            return [doc], []
        text = inp.text
        if text is None:
            raise self.fail("the body is not text", field="body")
        lines = text.splitlines()
        header = _csv_header_at(lines)
        if header is not None:
            reader = csv.DictReader(io.StringIO("\n".join(lines[header:])))
            rows = [dict(r) for r in reader if any((v or "").strip() for v in r.values())]
            return rows, ["llama-bench CSV: every value read from a quoted string"]
        md_header = _md_header_at(lines)
        if md_header is not None:
            return _md_rows(lines, md_header)
        rows, skipped = _json_rows(lines)
        notes = [f"skipped {skipped} non-JSON line(s) (stderr mixed into the file)"] if skipped else []
        return rows, notes

    def _num(self, row: Mapping[str, Any], key: str, index: int, *, required: bool = False) -> float | None:
        field = f"[{index}].{key}"
        value = as_float(row.get(key), field)
        if value is None:
            if required:
                raise self.fail(f"missing or non-numeric {key}", field=field)
            return None
        if value < 0:
            raise self.fail(f"{key} cannot be negative, got {value:g}", field=field)
        return value

    def _run(self, row: Mapping[str, Any], index: int, rows: Sequence[Mapping[str, Any]]) -> CanonicalRun:
        n_prompt = int(self._num(row, "n_prompt", index, required=True) or 0)
        n_gen = int(self._num(row, "n_gen", index, required=True) or 0)
        n_depth = int(self._num(row, "n_depth", index) or 0)
        avg_ts = self._num(row, "avg_ts", index, required=True)
        avg_ns = self._num(row, "avg_ns", index)
        stddev_ns = self._num(row, "stddev_ns", index)
        samples = self._samples(row, index)
        if n_prompt == 0 and n_gen == 0:
            raise self.fail("a test with n_prompt = 0 and n_gen = 0 measures nothing", field=f"[{index}]")
        notes: list[str] = []
        metrics = Metrics()
        kind = "pp" if n_gen == 0 else "tg" if n_prompt == 0 else "pg"
        if kind == "pp":
            metrics.prefill_tok_s = avg_ts
            metrics.ttft_ms = _times(avg_ns, stddev_ns, samples, 1)
            notes.append("pp test: ttft_ms is the time to process the prompt (engine only: no sampling, no HTTP)")
        elif kind == "tg":
            metrics.decode_tok_s = avg_ts
            metrics.tpot_ms = _times(avg_ns, stddev_ns, samples, n_gen)
            notes.append("tg test: decode at batch size 1; tpot_ms = avg_ns / n_gen")
        else:
            metrics.total_throughput_tok_s = avg_ts
            metrics.e2e_ms = _times(avg_ns, stddev_ns, samples, 1)
            notes.append(
                "pg test: avg_ts is the combined (n_prompt + n_gen) / t rate, kept as "
                "total_throughput_tok_s, never as prefill or decode speed"
            )
            self._split_pg(
                row,
                rows,
                n_prompt=n_prompt,
                n_gen=n_gen,
                n_depth=n_depth,
                avg_ns=avg_ns,
                metrics=metrics,
                notes=notes,
            )

        test = f"pp{n_prompt}" if kind == "pp" else f"tg{n_gen}" if kind == "tg" else f"pp{n_prompt}+tg{n_gen}"
        if n_depth:
            test += f" @ d{n_depth}"
        workload = Workload(
            concurrency=1,
            prompt_tokens_mean=n_prompt,
            output_tokens_mean=n_gen,
            kv_depth_tokens=n_depth,
        )
        setup, labels = self._setup(row, index, notes)
        labels["test"] = test
        build = as_int(row.get("build_number"))
        commit = _text(row.get("build_commit"))
        version = f"b{build}" if build is not None else None
        return CanonicalRun(
            measured_at=iso_to_utc(row.get("test_time"), f"[{index}].test_time", notes),
            labels=labels,
            setup=setup,
            workload=workload,
            metrics=metrics,
            source=Source(
                tool_version=f"{version} ({commit})" if version and commit else version or commit,
                notes=notes,
            ),
        )

    def _samples(self, row: Mapping[str, Any], index: int) -> list[float]:
        raw = row.get("samples_ns")
        if not isinstance(raw, list):
            return []
        values = [as_float(v, f"[{index}].samples_ns") for v in raw]
        out = [v for v in values if v is not None]
        if any(v < 0 for v in out):
            raise self.fail("samples_ns cannot be negative", field=f"[{index}].samples_ns")
        return out

    def _split_pg(
        self,
        row: Mapping[str, Any],
        rows: Sequence[Mapping[str, Any]],
        *,
        n_prompt: int,
        n_gen: int,
        n_depth: int,
        avg_ns: float | None,
        metrics: Metrics,
        notes: list[str],
    ) -> None:
        """Prefill and decode of a pg test, from the matching pp test of the same file."""
        settings = _settings_key(row)
        match = next(
            (
                r
                for r in rows
                if as_int(r.get("n_gen")) == 0
                and as_int(r.get("n_prompt")) == n_prompt
                and (as_int(r.get("n_depth")) or 0) == n_depth
                and _settings_key(r) == settings
            ),
            None,
        )
        pp_ns = as_float(match.get("avg_ns")) if match is not None else None
        pp_ts = as_float(match.get("avg_ts")) if match is not None else None
        if match is None or avg_ns is None or pp_ns is None or pp_ts is None:
            notes.append("no matching pp test in the file: prefill and decode speeds not derived")
            return
        decode_ns = avg_ns - pp_ns
        if decode_ns <= 0:
            notes.append("the pg test is not slower than its pp test: decode speed not derived")
            return
        metrics.prefill_tok_s = pp_ts
        metrics.decode_tok_s = n_gen / decode_ns * 1e9
        metrics.tpot_ms = Percentiles(mean=decode_ns / n_gen / 1e6)
        notes.append(
            f"prefill_tok_s from the matching pp{n_prompt} test; decode_tok_s = n_gen / (t_pg − t_pp), "
            "approximate (generation runs at depth + n_prompt)"
        )

    def _setup(self, row: Mapping[str, Any], index: int, notes: list[str]) -> tuple[Setup, dict[str, str]]:
        labels: dict[str, str] = {}
        setup = Setup(runtime="llamacpp")
        build = as_int(row.get("build_number"))
        if build is not None:
            setup.runtime_version = f"b{build}"
        gpu_info = _text(row.get("gpu_info"))
        cpu_info = _text(row.get("cpu_info"))
        ngl = as_int(row.get("n_gpu_layers"))
        devices = [d.strip() for d in re.split(r", |/", gpu_info) if d.strip()] if gpu_info else []
        if devices and ngl != 0:
            setup.hardware = devices[0]
            if len(devices) > 1:
                if len(set(devices)) == 1:
                    setup.gpu_count = len(devices)
                else:
                    labels["gpu_info"] = gpu_info or ""
                    notes.append(
                        f"gpu_info lists {len(devices)} different devices; hardware is the first, {devices[0]!r}"
                    )
        elif cpu_info:
            setup.hardware = cpu_info
            if devices:
                notes.append("n_gpu_layers = 0: the weights stay in system memory, so the CPU is the hardware")
        if cpu_info:
            labels["cpu_info"] = cpu_info
        if backends := _text(row.get("backends")):
            labels["backends"] = backends
        if commit := _text(row.get("build_commit")):
            labels["build_commit"] = commit

        model_type = _text(row.get("model_type"))
        if model_type:
            labels["model_type"] = model_type
            setup.quantization = quantization_from_model_type(model_type)
        if (filename := _text(row.get("model_filename"))) is not None:
            setup.model, file_quant = split_model_filename(filename)
            setup.quantization = setup.quantization or file_quant
        size, n_params = as_float(row.get("model_size")), as_float(row.get("model_n_params"))
        for key, number in (("model_n_params", n_params), ("model_size", size)):
            if number is not None:
                labels[key] = str(round(number))
        if size and n_params:
            # The weights' measured density: file bytes × 8 / parameters. It includes the tensors a
            # quantization keeps wider (embeddings, output), so it exceeds the format's nominal bits.
            labels["bits_per_weight"] = f"{size * 8 / n_params:.3f}"
            notes.append(
                f"bits_per_weight = model_size × 8 / model_n_params = {size * 8 / n_params:.3f} "
                "(measured from the file, embeddings and output tensors included)"
            )

        type_k, type_v = _text(row.get("type_k")), _text(row.get("type_v"))
        if type_k and type_k == type_v:
            setup.kv_cache_dtype = type_k
        elif type_k and type_v:
            notes.append(f"K and V caches differ ({type_k} / {type_v}): kv_cache_dtype left unset")
        args = setup.engine_args
        flags = (("n_gpu_layers", "n_gpu_layers"), ("n_batch", "batch_size"), ("n_ubatch", "ubatch_size"))
        for key, flag in (*flags, ("n_threads", "threads")):
            if (value := as_int(row.get(key))) is not None:
                args[flag] = value
        if (fa := _flash_attn(row.get("flash_attn"))) is not None:
            args["flash_attn"] = fa
        if type_k:
            args["cache_type_k"] = type_k
        if type_v:
            args["cache_type_v"] = type_v
        if split_mode := _text(row.get("split_mode")):
            args["split_mode"] = split_mode
        if (n_cpu_moe := as_int(row.get("n_cpu_moe"))) and n_cpu_moe > 0:
            args["n_cpu_moe"] = n_cpu_moe
        if _flag(row.get("no_kv_offload")):
            args["no_kv_offload"] = True
        tensor_split = _text(row.get("tensor_split"))
        if tensor_split and tensor_split.strip("0./") != "":
            args["tensor_split"] = tensor_split
        return setup, labels


def _settings_key(row: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, json.dumps(v, sort_keys=True)) for k, v in row.items() if k not in _RESULT_FIELDS))


def _times(avg_ns: float | None, stddev_ns: float | None, samples_ns: Sequence[float], per: int) -> Percentiles:
    """Repetition times in ms, divided by ``per`` (tokens, for a per-token time)."""
    if avg_ns is None:
        return Percentiles()
    # Divided, not multiplied by 1e-6: ns → ms then reads exactly as the tool printed it.
    divisor = 1e6 * per
    out = Percentiles(mean=avg_ns / divisor)
    if stddev_ns is not None and len(samples_ns) != 1:
        out.std = stddev_ns / divisor
    if samples_ns:
        out.min = min(samples_ns) / divisor
        out.max = max(samples_ns) / divisor
    return out


PARSERS = [LlamaBenchParser()]
