"""ik_llama.cpp ``llama-sweep-bench``: its markdown table, or ``--output-format jsonl`` records
(docs/formats.md, "llama-sweep-bench").

The tool fills one sequence's KV cache ``n_ubatch`` tokens at a time up to ``-c`` and, at each depth
``N_KV``, times ``TG`` generated tokens (``TG = n_ubatch / 4``) and then ``PP = n_ubatch`` prompt
tokens, both starting at position ``N_KV`` (checked: ikawrakow/ik_llama.cpp
``examples/sweep-bench/sweep-bench.cpp`` @ ``8337e4cd3861``: ``speed_pp = pp / t_pp``, ``speed_tg =
tg / t_tg``, the row printed with ``"|%6d | %6d | %6d | %8.3f | %8.2f | %8.3f | %8.2f |"``; with
``--sweep-memory`` two more columns, ``RSS HWM`` and ``VRAM delta``). One row, one run, at batch 1:

* ``prefill_tok_s = S_PP``, ``ttft_ms = T_PP`` (the prompt's processing time, engine only);
* ``decode_tok_s = S_TG``, ``tpot_ms = T_TG / TG``;
* ``workload.kv_depth_tokens = N_KV``, the way llama-bench's ``@ d<N>`` is read.

The ``main: n_kv_max = …`` line above the table gives the settings under llama.cpp's flag names;
``general.name``, ``file type`` / ``model ftype`` and "offloaded N/M layers to GPU" in the loader's
log give the model, the quantization and ``metrics.gpu_resident_share``, as for
``llama-batched-bench`` (the two tools print the same log).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from advisor.canonical import CanonicalRun, Metrics, Percentiles, Setup, Source, Workload
from advisor.errors import IngestError
from advisor.ingest.base import Input, ParserBase
from advisor.ingest.formats.llama_batched_bench import FLAGS, after_table_error, log_context
from advisor.ingest.formats.llama_bench import quantization_from_model_type
from advisor.ingest.side_files import llamacpp_offload
from advisor.ingest.values import as_float, as_int

__all__ = ["PARSERS", "LlamaSweepBenchParser"]

_COLUMNS = ("PP", "TG", "N_KV", "T_PP s", "S_PP t/s", "T_TG s", "S_TG t/s")
#: ``--sweep-memory`` appends these two (values in MiB, or ``n/a``).
_MEMORY_COLUMNS = ("RSS HWM", "VRAM delta")
# Table column → the JSONL record's key (the same names the JSONL line uses).
_KEYS = dict(zip(_COLUMNS, ("pp", "tg", "n_kv", "t_pp", "speed_pp", "t_tg", "speed_tg"), strict=True))
# The JSONL record's keys; llama-batched-bench records also carry "pl" (its batch size) and no "n_kv"
# alone, so the two are told apart by it.
_JSONL_KEYS = frozenset({"pp", "tg", "n_kv", "t_pp", "speed_pp", "t_tg", "speed_tg"})
# ggml's CUDA/ROCm device list in the start-up log ("  Device 0: NVIDIA RTX A6000, compute capability
# 8.6, VMM: yes"), the hardware when the layers are on the GPU.
_DEVICE = re.compile(r"^\s*Device \d+: ([^,]+),")


def _cells(line: str) -> list[str] | None:
    stripped = line.strip()
    if not (stripped.startswith("|") and stripped.endswith("|")):
        return None
    return [cell.strip() for cell in stripped[1:-1].split("|")]


def _is_header(cells: list[str] | None) -> bool:
    return cells is not None and (cells == list(_COLUMNS) or cells == [*_COLUMNS, *_MEMORY_COLUMNS])


def _headers(lines: Sequence[str]) -> list[int]:
    return [i for i, line in enumerate(lines) if _is_header(_cells(line))]


def _is_record(obj: object) -> bool:
    return isinstance(obj, dict) and set(obj) >= _JSONL_KEYS and "pl" not in obj


class LlamaSweepBenchParser(ParserBase):
    format_id = "llama_sweep_bench"
    description = "ik_llama.cpp llama-sweep-bench table or --output-format jsonl records"
    tool = "llama-sweep-bench"
    priority = 25

    def sniff(self, inp: Input) -> bool:
        text = inp.text
        if text is None:
            return False
        if _headers(text.splitlines()[:400]):
            return True
        for line in text.splitlines()[:400]:
            stripped = line.strip()
            if stripped.startswith("{"):
                return _is_record(Input(stripped.encode()).json)
        return False

    def read(self, inp: Input) -> tuple[list[Any], list[str]]:
        text = inp.text
        if text is None:
            raise self.fail("the body is not text", "body")
        lines = text.splitlines()
        context = log_context(lines)
        devices = [m.group(1).strip() for m in map(_DEVICE.match, lines) if m is not None]
        if devices:
            context["devices"] = devices
        headers = _headers(lines)
        rows: list[dict[str, Any]] = []
        for number, start in enumerate(headers, 1):
            end = headers[number] if number < len(headers) else len(lines)
            width = len(_cells(lines[start]) or ())
            for line in lines[start + 1 : end]:
                cells = _cells(line)
                # Warnings the backend prints between rows (a 2>&1 log) are not table lines.
                if cells is None or len(cells) != width or set("".join(cells)) <= set("-: "):
                    continue
                row = {_KEYS[c]: v for c, v in zip(_COLUMNS, cells, strict=False)} | context
                if len(headers) > 1:
                    row["table"] = number
                rows.append(row)
        if not headers:
            for line in lines:
                stripped = line.strip()
                if stripped.startswith("{"):
                    record = Input(stripped.encode()).json
                    if _is_record(record):
                        rows.append(context | record)
        if not rows:
            raise self.fail("no llama-sweep-bench rows (PP | TG | N_KV | … table or JSONL)", "body")
        notes: list[str] = []
        if len(headers) > 1:
            notes.append(f"{len(headers)} sweep tables in the file: each run is labelled with its table")
        if headers and (error := after_table_error(lines[headers[-1] + 1 :])) is not None:
            notes.append(f"the log ends in an error after the table's last row ({error!r}): later depths did not run")
        offload = llamacpp_offload(text)
        if offload is None:
            return rows, notes
        share, offload_notes = offload
        return [row | {"gpu_resident_share": share} for row in rows], notes + offload_notes

    def _num(self, row: Mapping[str, Any], key: str, prefix: str) -> float:
        value = as_float(row.get(key), f"{prefix}{key}")
        if value is None:
            raise IngestError(f"missing or non-numeric {key}", field=f"{prefix}{key}")
        if value < 0:
            raise IngestError(f"{key} cannot be negative, got {value:g}", field=f"{prefix}{key}")
        return value

    def parse_record(self, record: Any, prefix: str) -> list[CanonicalRun]:
        pp, tg, n_kv = (self._num(record, k, prefix) for k in ("pp", "tg", "n_kv"))
        t_pp, t_tg = self._num(record, "t_pp", prefix), self._num(record, "t_tg", prefix)
        notes: list[str] = []
        metrics = Metrics(gpu_resident_share=as_float(record.get("gpu_resident_share")))
        if pp > 0 and t_pp > 0:
            metrics.prefill_tok_s = as_float(record.get("speed_pp")) or pp / t_pp
            metrics.ttft_ms = Percentiles(mean=t_pp * 1000.0)
            notes.append(
                f"prefill_tok_s = S_PP, {pp:g} prompt tokens at KV depth {n_kv:g}; ttft_ms = T_PP "
                "(engine only: no sampling, no HTTP)"
            )
        if tg > 0 and t_tg > 0:
            metrics.decode_tok_s = as_float(record.get("speed_tg")) or tg / t_tg
            metrics.tpot_ms = Percentiles(mean=t_tg / tg * 1000.0)
            notes.append(f"decode_tok_s = S_TG at batch 1 from KV depth {n_kv:g}; tpot_ms = T_TG / TG")
        if metrics.prefill_tok_s is None and metrics.decode_tok_s is None:
            raise IngestError("a row with no prompt and no generation time measures nothing", field=f"{prefix}t_pp")
        args: dict[str, Any] = {}
        for key, flag in FLAGS.items():
            if (value := as_int(record.get(key))) is not None:
                args[flag] = value
        flash = as_int(record.get("flash_attn"))
        if flash is not None:
            args["flash_attn"] = {-1: "auto", 0: "off", 1: "on"}.get(flash, str(flash))
        labels = {"test": f"pp{pp:g}/tg{tg:g} @ d{n_kv:g}"}
        if (table := as_int(record.get("table"))) is not None:
            labels["table"] = str(table)
        file_type = record.get("file_type")
        model = record.get("model_name")
        hardware, gpu_count = self._hardware(record, args, notes)
        return [
            CanonicalRun(
                labels=labels,
                setup=Setup(
                    runtime="llamacpp",
                    hardware=hardware,
                    gpu_count=gpu_count,
                    model=model if isinstance(model, str) else None,
                    quantization=quantization_from_model_type(file_type) if isinstance(file_type, str) else None,
                    engine_args=args,
                ),
                workload=Workload(
                    num_requests=1,
                    concurrency=1,
                    prompt_tokens_mean=pp,
                    output_tokens_mean=tg,
                    kv_depth_tokens=n_kv,
                ),
                metrics=metrics,
                source=Source(notes=notes),
            )
        ]

    @staticmethod
    def _hardware(
        record: Mapping[str, Any], args: Mapping[str, Any], notes: list[str]
    ) -> tuple[str | None, int | None]:
        """The GPU of the log's device list, when the layers went to it (``-ngl`` not 0)."""
        devices = record.get("devices")
        if not isinstance(devices, list) or not devices or args.get("n_gpu_layers") == 0:
            return None, None
        if len(set(devices)) > 1:
            notes.append(f"the log lists {len(devices)} different devices ({', '.join(devices)}): hardware left unset")
            return None, None
        return str(devices[0]), len(devices) if len(devices) > 1 else None


PARSERS = [LlamaSweepBenchParser()]
