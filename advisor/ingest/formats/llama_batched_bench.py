"""llama.cpp ``llama-batched-bench``: its markdown table, or ``--output-format jsonl`` records
(docs/formats.md §4.3).

One row per (PP, TG, B) case: ``B`` sequences of ``PP`` prompt tokens are processed in one batch
(or one shared prompt, ``-pps``), then ``TG`` tokens are generated for all ``B`` at once. The tool
prints aggregate speeds (``tools/batched-bench/batched-bench.cpp``): ``S_PP = B·PP / T_PP`` (``PP /
T_PP`` with a shared prompt), ``S_TG = B·TG / T_TG``, ``S = N_KV / T``. Mapping, per row:

* ``prefill_tok_s = S_PP`` (the prompts' batch processed at once, like a llama-bench ``pp`` test of
  ``B·PP`` tokens); ``ttft_ms = T_PP``, the time until every sequence has its first token;
* ``decode_tok_s = TG / T_TG`` per sequence at batch ``B``; ``output_throughput_tok_s = S_TG``;
  ``tpot_ms = T_TG / TG``;
* ``e2e_ms = T``, ``total_throughput_tok_s = S``; ``concurrency = B``.

The ``main: n_kv_max = …, n_batch = …`` line above the table (``llama_batched_bench: …`` in builds
where the tool is a function of the one ``llama`` binary), and every JSONL record, gives the
settings, under llama.cpp's flag names; ``general.name`` and ``file type`` from the loader's log, when
the file holds it, give the model and the quantization, and its "offloaded N/M layers to GPU" line
``metrics.gpu_resident_share`` (:func:`advisor.ingest.side_files.llamacpp_offload`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from advisor.canonical import CanonicalRun, Metrics, Percentiles, Setup, Source, Workload
from advisor.errors import IngestError
from advisor.ingest.base import Input, ParserBase
from advisor.ingest.formats.llama_bench import quantization_from_model_type
from advisor.ingest.side_files import llamacpp_offload
from advisor.ingest.values import as_float, as_int

__all__ = ["FLAGS", "PARSERS", "LlamaBatchedBenchParser", "after_table_error", "log_context"]

_COLUMNS = ("PP", "TG", "B", "N_KV", "T_PP s", "S_PP t/s", "T_TG s", "S_TG t/s", "T s", "S t/s")
# Table column → the JSONL record's key.
_KEYS = dict(
    zip(_COLUMNS, ("pp", "tg", "pl", "n_kv", "t_pp", "speed_pp", "t_tg", "speed_tg", "t", "speed"), strict=True)
)
_JSONL_KEYS = frozenset({"pp", "tg", "pl", "t_pp", "t_tg", "speed_tg"})
# "%s: n_kv_max = …" with __func__: "main" until the tools became functions of one binary, then
# "llama_batched_bench" (checked: ggml-org/llama.cpp tools/batched-bench/main.cpp @ aa2ea780 calls
# llama_batched_bench(argc, argv); batched-bench.cpp @ 2fb62f8f still printed from main).
_SETTINGS = re.compile(r"^(?:main|llama_batched_bench): (n_kv_max = .*)$")
_SETTING = re.compile(r"(\w+) = (-?\d+)")
_MODEL_NAME = re.compile(r"general\.name\s+str\s+=\s+(.+?)\s*$")
# A crash after the table: ggml's assertion, a CUDA/HIP error or the shell's signal report.
_CRASH = re.compile(r"GGML_ASSERT\(.*?\) failed|CUDA error|HIP error|Segmentation fault|Aborted \(core dumped\)")
# "print_info: file type   = Q4_K - Medium"; builds before print_info (mid-2025 and ik_llama.cpp) log
# "llm_load_print_meta: model ftype      = Q4_K - Medium".
_FILE_TYPE = re.compile(r"(?:file type|model ftype)\s+=\s+(.+?)\s*$")
# Settings → llama.cpp's own flag names (as the llama-bench parser writes them).
FLAGS = {
    "n_kv_max": "ctx_size",
    "n_batch": "batch_size",
    "n_ubatch": "ubatch_size",
    "n_gpu_layers": "n_gpu_layers",
    "n_threads": "threads",
    "n_threads_batch": "threads_batch",
}


def _cells(line: str) -> list[str] | None:
    stripped = line.strip()
    if not (stripped.startswith("|") and stripped.endswith("|")):
        return None
    return [cell.strip() for cell in stripped[1:-1].split("|")]


def _header_at(lines: Sequence[str]) -> int | None:
    for i, line in enumerate(lines):
        if _cells(line) == list(_COLUMNS):
            return i
    return None


def _is_record(obj: object) -> bool:
    return isinstance(obj, dict) and set(obj) >= _JSONL_KEYS


class LlamaBatchedBenchParser(ParserBase):
    format_id = "llama_batched_bench"
    description = "llama.cpp llama-batched-bench table or --output-format jsonl records"
    tool = "llama-batched-bench"
    priority = 25

    def sniff(self, inp: Input) -> bool:
        text = inp.text
        if text is None:
            return False
        lines = text.splitlines()
        if _header_at(lines[:200]) is not None:
            return True
        records = inp.json_lines
        return bool(records) and _is_record(records[0])  # type: ignore[index]

    def read(self, inp: Input) -> tuple[list[Any], list[str]]:
        text = inp.text
        if text is None:
            raise self.fail("the body is not text", "body")
        lines = text.splitlines()
        context = self._context(lines)
        header = _header_at(lines)
        rows: list[dict[str, Any]] = []
        if header is not None:
            for line in lines[header + 1 :]:
                cells = _cells(line)
                if cells is None or len(cells) != len(_COLUMNS) or set("".join(cells)) <= set("-: "):
                    continue
                rows.append({_KEYS[c]: v for c, v in zip(_COLUMNS, cells, strict=True)} | context)
        else:
            for line in lines:
                stripped = line.strip()
                if stripped.startswith("{"):
                    record = Input(stripped.encode()).json
                    if _is_record(record):
                        rows.append(context | record)
        if not rows:
            raise self.fail("no llama-batched-bench rows (PP | TG | B | N_KV | … table or JSONL)", "body")
        notes: list[str] = []
        if header is not None and (error := after_table_error(lines[header + 1 :])) is not None:
            # A run that died mid-table: its rows are measurements, the cases after them never ran.
            notes.append(f"the log ends in an error after the table's last row ({error!r}): later cases did not run")
        # The loader's lines above the table (a 2>&1 log) say where the model sits.
        offload = llamacpp_offload(text)
        if offload is None:
            return rows, notes
        share, offload_notes = offload
        return [row | {"gpu_resident_share": share} for row in rows], notes + offload_notes

    @staticmethod
    def _context(lines: Sequence[str]) -> dict[str, Any]:
        """Settings and model facts from the log above the table."""
        return log_context(lines)

    def _num(self, row: Mapping[str, Any], key: str, prefix: str) -> float:
        value = as_float(row.get(key), f"{prefix}{key}")
        if value is None:
            raise IngestError(f"missing or non-numeric {key}", field=f"{prefix}{key}")
        if value < 0:
            raise IngestError(f"{key} cannot be negative, got {value:g}", field=f"{prefix}{key}")
        return value

    def parse_record(self, record: Any, prefix: str) -> list[CanonicalRun]:
        pp, tg, pl = (self._num(record, k, prefix) for k in ("pp", "tg", "pl"))
        t_pp, t_tg = self._num(record, "t_pp", prefix), self._num(record, "t_tg", prefix)
        if pl < 1:
            raise IngestError("the batch size B must be at least 1", field=f"{prefix}pl")
        notes: list[str] = []
        metrics = Metrics(gpu_resident_share=as_float(record.get("gpu_resident_share")))
        if pp > 0 and t_pp > 0:
            metrics.prefill_tok_s = as_float(record.get("speed_pp")) or (pl * pp / t_pp)
            metrics.ttft_ms = Percentiles(mean=t_pp * 1000.0)
            notes.append(
                "prefill_tok_s = S_PP, the prompts of the B sequences processed as one batch; ttft_ms = "
                "T_PP, until every sequence has its first token (engine only, no HTTP)"
            )
        if tg > 0 and t_tg > 0:
            metrics.decode_tok_s = tg / t_tg
            metrics.tpot_ms = Percentiles(mean=t_tg / tg * 1000.0)
            metrics.output_throughput_tok_s = as_float(record.get("speed_tg")) or (pl * tg / t_tg)
            notes.append(f"decode_tok_s = TG / T_TG per sequence at batch {pl:g}; output_throughput_tok_s = S_TG")
        total = as_float(record.get("t"))
        if total is not None and total > 0:
            metrics.e2e_ms = Percentiles(mean=total * 1000.0)
            metrics.total_throughput_tok_s = as_float(record.get("speed"))
        args: dict[str, Any] = {}
        for key, flag in FLAGS.items():
            if (value := as_int(record.get(key))) is not None:
                args[flag] = value
        flash = as_int(record.get("flash_attn"))
        if flash is not None:
            args["flash_attn"] = {-1: "auto", 0: "off", 1: "on"}.get(flash, str(flash))
        labels = {"test": f"pp{pp:g}+tg{tg:g} x{pl:g}"}
        shared = as_int(record.get("is_pp_shared"))
        if shared:
            labels["is_pp_shared"] = "1"
            notes.append("the B sequences share one prompt (-pps): S_PP = PP / T_PP")
        file_type = record.get("file_type")
        model = record.get("model_name")
        return [
            CanonicalRun(
                labels=labels,
                setup=Setup(
                    runtime="llamacpp",
                    model=model if isinstance(model, str) else None,
                    quantization=quantization_from_model_type(file_type) if isinstance(file_type, str) else None,
                    engine_args=args,
                ),
                workload=Workload(
                    num_requests=int(pl),
                    concurrency=pl,
                    prompt_tokens_mean=pp,
                    output_tokens_mean=tg,
                    shared_prefix_tokens=pp if shared else None,
                ),
                metrics=metrics,
                source=Source(notes=notes),
            )
        ]


def log_context(lines: Sequence[str], settings: re.Pattern[str] = _SETTINGS) -> dict[str, Any]:
    """Settings (the ``<func>: n_kv_max = …`` line matched by ``settings``), ``general.name`` and the
    ``file type`` from a llama.cpp tool's log; shared with ``llama-sweep-bench``, whose settings line
    has the same shape."""
    found: dict[str, Any] = {}
    for line in lines:
        if (matched := settings.match(line.strip())) is not None:
            found.update({k: int(v) for k, v in _SETTING.findall(matched.group(1))})
        elif (name := _MODEL_NAME.search(line)) is not None:
            found.setdefault("model_name", name.group(1))
        elif (file_type := _FILE_TYPE.search(line)) is not None:
            found.setdefault("file_type", file_type.group(1))
    return found


def after_table_error(lines: Sequence[str]) -> str | None:
    """The first crash message after the table's rows, if the log goes on to one."""
    for line in lines:
        if (crash := _CRASH.search(line)) is not None:
            return crash.group(0)
    return None


PARSERS = [LlamaBatchedBenchParser()]
