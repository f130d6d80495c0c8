"""The console summary of ``vllm bench serve`` (and legacy ``benchmark_serving.py``) and of SGLang's
``bench_serving``: the ``============ Serving Benchmark Result ============`` block, pasted from a
terminal or a CI log (docs/formats.md §1.4).

A text file may hold several blocks; each is one run. Lines are matched by their label wherever it
stands on the line, so log prefixes (``# ``, timestamps, ``INFO … |``) do not matter. The settings
vLLM prints before the progress bar ("Traffic request rate", "Maximum request concurrency") belong
to the block that follows them, and so does the benchmark command when it was pasted above the
block (``python benchmarks/benchmark_serving.py --model X …``, ``vllm bench serve …``, with backslash
continuation lines): its ``--model`` names the model, and with ``--dataset-name random`` its
``--random-output-len`` is the output length each request asked for.

Labels (``vllm/benchmarks/serve.py``, ``python/sglang/bench_serving.py``): ``Mean|Median|Std|P<p>
<TTFT|TPOT|ITL|E2EL> (ms)``, SGLang's ``… E2E Latency (ms)``; TPOT is "excl. 1st token" in both,
ITL the pooled gaps between chunks. Token counts are totals over the successful requests, so the
means are totals ÷ successful requests.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from typing import Any

from advisor.canonical import CanonicalRun, Metrics, Percentiles, Setup, Source, Workload
from advisor.errors import IngestError
from advisor.ingest.base import Input, ParserBase
from advisor.ingest.derive import decode_from_tpot, drop_unstreamed_timings, not_streamed, prefill_from_ttft
from advisor.ingest.runtimes import runtime_from_backend

__all__ = ["PARSERS", "BenchConsoleParser", "console_blocks"]

_HEADER = "Serving Benchmark Result"
_NUMBER = r"(-?[0-9][0-9,]*(?:\.[0-9]+)?|inf)"
#: Scalar labels → a key of the block's values.
_SCALARS = {
    "Successful requests": "completed",
    "Failed requests": "failed",
    "Maximum request concurrency": "max_concurrency",
    "Max request concurrency": "max_concurrency",
    # SGLang's bench_serving printed the label misspelt in older releases (real outputs in the code
    # index carry it; python/sglang/bench_serving.py @ 0033168f prints it right).
    "Max reqeuest concurrency": "max_concurrency",
    # SGLang: sum of the requests' end-to-end latencies ÷ duration, the observed mean in flight.
    "Concurrency": "observed_concurrency",
    "Request rate configured (RPS)": "request_rate",
    "Traffic request rate": "request_rate",
    "Benchmark duration (s)": "duration",
    "Total input tokens": "total_input",
    "Total generated tokens": "total_output",
    "Request throughput (req/s)": "request_throughput",
    "Request goodput (req/s)": "request_goodput",
    "Input token throughput (tok/s)": "input_throughput",
    "Output token throughput (tok/s)": "output_throughput",
    "Peak output token throughput (tok/s)": "peak_output_throughput",
    "Peak concurrent requests": "peak_concurrency",
    "Total Token throughput (tok/s)": "total_throughput",
    "Total token throughput (tok/s)": "total_throughput",
    "Total throughput (tok/s)": "total_throughput",
}
_SCALAR_LINE = re.compile(
    r"(?P<label>" + "|".join(re.escape(k) for k in sorted(_SCALARS, key=len, reverse=True)) + r"):\s*" + _NUMBER
)
_STAT_LINE = re.compile(
    r"(?P<stat>Mean|Median|Std|P\d+(?:\.\d+)?|Max)\s+(?P<metric>TTFT|TPOT|ITL|E2EL|E2E Latency)\s+\(ms\):\s*" + _NUMBER
)
# A labelled line whose value is a placeholder ("xxx.xx", "X.XX", "XX", "...", "[result]"): recipes
# and docs print the summary as a template. SGLang's "Max request concurrency: not set" is a value.
_PLACEHOLDER_LINE = re.compile(
    r"(?P<label>"
    + "|".join(re.escape(k) for k in sorted(_SCALARS, key=len, reverse=True))
    + r"|(?:Mean|Median|Std|P\d+(?:\.\d+)?|Max)\s+(?:TTFT|TPOT|ITL|E2EL|E2E Latency)\s+\(ms\)):\s*"
    + r"(?P<value>[xX?.\u2026]+|\[[^\]\s]*\]|<[^>\s]*>)\s*$"
)
_BACKEND = re.compile(r"Backend:\s*(\S+)")
_NAMESPACE_MODEL = re.compile(r"Namespace\(.*?\bmodel='([^']+)'")
_NAMESPACE_DATASET = re.compile(r"Namespace\(.*?\bdataset_name='([^']+)'")
_NAMESPACE_OUTPUT_LEN = re.compile(r"Namespace\(.*?\brandom_output_len=(\d+)\b")
_NAMESPACE_NUM_PROMPTS = re.compile(r"Namespace\(.*?\bnum_prompts=(\d+)")
# A benchmark command pasted above its summary (vllm/benchmarks/serve.py, benchmarks/benchmark_serving.py,
# python/sglang/bench_serving.py); a server command ("vllm serve X") is not one.
_COMMAND = re.compile(r"(?:benchmark_serving\.py|\bbench serve\b|sglang\.bench_serving|bench_serving\.py)(?:\s|$)")
# The closing rule, after any log prefix: "==================================================".
_END = re.compile(r"(?:^|[\s#|>])={40,}\s*$")
_METRICS = {"TTFT": "ttft_ms", "TPOT": "tpot_ms", "ITL": "itl_ms", "E2EL": "e2e_ms", "E2E Latency": "e2e_ms"}
_STATS = {"Mean": "mean", "Median": "p50", "Std": "std", "Max": "max"}


def _number(text: str) -> float:
    return float("inf") if text == "inf" else float(text.replace(",", ""))


def _logical_lines(text: str) -> Iterator[str]:
    """The lines of ``text``, a shell command's ``\\`` continuation lines joined into one."""
    joined: list[str] = []
    for line in text.splitlines():
        if line.rstrip().endswith("\\") and (joined or _COMMAND.search(line)):
            joined.append(line.rstrip()[:-1])
            continue
        if joined:
            yield " ".join([*joined, line])
            joined = []
        else:
            yield line
    if joined:
        yield " ".join(joined)


def _command_settings(line: str) -> dict[str, Any]:
    """``--model`` and, for the random dataset, ``--random-output-len`` of a benchmark command."""
    command = line[_COMMAND.search(line).start() :]  # type: ignore[union-attr]
    try:
        words = shlex.split(command)
    except ValueError:  # an unbalanced quote: read the words as they stand
        words = command.split()
    options: dict[str, str] = {}
    for i, word in enumerate(words):
        if word.startswith("--") and "=" in word:
            name, value = word.split("=", 1)
            options.setdefault(name, value)
        elif word.startswith("--") and i + 1 < len(words) and not words[i + 1].startswith("--"):
            options.setdefault(word, words[i + 1])
    settings: dict[str, Any] = {}
    if options.get("--model"):
        settings["model"] = options["--model"]
    output_len = options.get("--random-output-len")
    if options.get("--dataset-name") == "random" and output_len is not None and output_len.isdigit():
        settings["output_tokens_requested"] = float(output_len)
    if (prompts := options.get("--num-prompts", "")).isdigit():
        settings["num_prompts"] = int(prompts)
    if settings:
        settings["from_command"] = True
    return settings


def console_blocks(text: str) -> list[dict[str, Any]]:
    """The values of every result block, with the settings printed before it."""
    blocks: list[dict[str, Any]] = []
    pending: dict[str, Any] = {}
    current: dict[str, Any] | None = None
    for line in _logical_lines(text):
        if _HEADER in line:
            current = {"scalars": dict(pending), "stats": {}}
            blocks.append(current)
            pending = {}
            continue
        target = current["scalars"] if current is not None else pending
        if (scalar := _SCALAR_LINE.search(line)) is not None:
            key = _SCALARS[scalar.group("label")]
            value = _number(scalar.group(2))
            if current is not None and key in current["scalars"] and key not in ("max_concurrency", "request_rate"):
                # The same label twice in a block: a new run's settings before its header.
                current = None
                pending = {key: value}
                continue
            target[key] = value
        elif current is not None and (placeholder := _PLACEHOLDER_LINE.search(line)) is not None:
            raise IngestError(
                f"is {placeholder.group('value')!r}, not a number: a template's placeholder, not a measurement",
                field=f"[{len(blocks) - 1}].{placeholder.group('label')}",
            )
        elif current is not None and (stat := _STAT_LINE.search(line)) is not None:
            current["stats"].setdefault(_METRICS[stat.group("metric")], {})[stat.group("stat")] = _number(stat.group(3))
        elif (backend := _BACKEND.search(line)) is not None:
            target["backend"] = backend.group(1)
        elif (namespace := _NAMESPACE_MODEL.search(line)) is not None:
            # The argument dump vLLM and SGLang print at start-up names the model, and for the
            # random dataset the output length each request asked for.
            target["model"] = namespace.group(1)
            dataset = _NAMESPACE_DATASET.search(line)
            output_len = _NAMESPACE_OUTPUT_LEN.search(line)
            if dataset is not None and dataset.group(1) == "random" and output_len is not None:
                target["output_tokens_requested"] = float(output_len.group(1))
                target["from_namespace"] = True
            if (prompts := _NAMESPACE_NUM_PROMPTS.search(line)) is not None:
                # Every prompt is sent: with no "Failed requests" line, the ones that did not
                # succeed failed (as for --num-prompts in a pasted command).
                target["num_prompts"] = int(prompts.group(1))
        elif current is None and _COMMAND.search(line):
            pending.update(_command_settings(line))
        elif current is not None and _END.search(line) and current["scalars"]:
            current = None
    return [b for b in blocks if "completed" in b["scalars"]]


def _percentiles(stats: dict[str, float], field: str) -> Percentiles:
    out = Percentiles()
    for stat, value in stats.items():
        if value < 0:
            raise IngestError(f"cannot be negative, got {value:g}", field=f"{field}.{stat}")
        key = _STATS.get(stat) or "p" + stat[1:].replace(".", "_")
        if key in Percentiles.__struct_fields__:
            setattr(out, key, value)
    return out


def parse_block(block: dict[str, Any], index: int) -> CanonicalRun:
    values: dict[str, Any] = block["scalars"]
    notes: list[str] = ["read from the console summary, whose values are rounded to two decimals"]
    for key, value in values.items():
        if isinstance(value, float) and value < 0:
            raise IngestError(f"cannot be negative, got {value:g}", field=f"[{index}].{key}")
    completed = int(values["completed"])
    failed = int(values["failed"]) if "failed" in values else None
    prompts = values.get("num_prompts")
    if failed is None and isinstance(prompts, int) and prompts > completed:
        # Summaries before "Failed requests:" was printed: the script sends exactly --num-prompts
        # requests, so the ones that did not succeed failed.
        failed = prompts - completed
        notes.append(
            f"{failed} failed = --num-prompts {prompts} - {completed} successful (this summary prints no "
            "'Failed requests' line)"
        )
    total_in, total_out = values.get("total_input"), values.get("total_output")
    rate = values.get("request_rate")
    if rate is not None and rate == float("inf"):
        notes.append("request rate inf: every request was sent at once (closed loop up to the concurrency)")
        rate = None
    workload = Workload(
        num_requests=completed + (failed or 0),
        concurrency=values.get("max_concurrency"),
        request_rate=rate,
        prompt_tokens_mean=total_in / completed if total_in is not None and completed else None,
        output_tokens_mean=total_out / completed if total_out is not None and completed else None,
        output_tokens_requested=values.get("output_tokens_requested"),
    )
    if values.get("from_namespace"):
        notes.append("output_tokens_requested from the argument dump's random_output_len (dataset_name='random')")
    read = [
        name
        for name, key in (("--model", "model"), ("--random-output-len", "output_tokens_requested"))
        if values.get("from_command") and key in values
    ]
    if read:
        notes.append(f"{' and '.join(read)} read from the benchmark command above the summary")
    peak_in_flight = values.get("peak_concurrency")
    observed = values.get("observed_concurrency")
    if workload.concurrency is None and observed is not None and observed > 0:
        # As the SGLang JSONL parser reads the same figure (sglang_bench).
        workload.concurrency = observed
        notes.append(
            "workload.concurrency is the observed mean (SGLang's Concurrency; no --max-concurrency cap was set)"
        )
    if workload.concurrency is None and peak_in_flight is not None and peak_in_flight > 0:
        workload.concurrency = peak_in_flight
        notes.append(
            f"concurrency {peak_in_flight:g} derived from 'Peak concurrent requests' (the most requests in "
            "flight at once; no maximum request concurrency was set)"
        )
    metrics = Metrics(
        requests_completed=completed,
        requests_failed=failed,
        duration_s=values.get("duration"),
        request_throughput_rps=values.get("request_throughput"),
        input_throughput_tok_s=values.get("input_throughput"),
        output_throughput_tok_s=values.get("output_throughput"),
        total_throughput_tok_s=values.get("total_throughput"),
    )
    if completed == 0:
        notes.append("no request completed: latency and throughput statistics are absent")
    else:
        for field, stats in block["stats"].items():
            setattr(metrics, field, _percentiles(stats, f"[{index}].{field}"))
        if not_streamed(metrics.itl_ms, workload.output_tokens_mean):
            drop_unstreamed_timings(metrics, notes)
        decode_from_tpot(metrics)
        prefill_from_ttft(metrics, workload, notes)
    labels: dict[str, str] = {}
    if (peak := values.get("peak_concurrency")) is not None:
        labels["peak_concurrent_requests"] = f"{peak:g}"
    backend = values.get("backend")
    tool = "vllm bench serve"
    runtime = None
    if isinstance(backend, str):
        labels["backend"] = backend
        tool = "sglang.bench_serving"
        runtime = runtime_from_backend(backend)
    return CanonicalRun(
        labels=labels,
        setup=Setup(runtime=runtime, model=values.get("model")),
        workload=workload,
        metrics=metrics,
        source=Source(tool=tool, notes=notes),
    )


class BenchConsoleParser(ParserBase):
    format_id = "bench_console"
    description = "the console summary of vllm bench serve / SGLang bench_serving (Serving Benchmark Result)"
    tool = "vllm bench serve"
    priority = 30

    def sniff(self, inp: Input) -> bool:
        text = inp.text
        if text is None or inp.json is not None:
            return False
        return _HEADER in text and "Successful requests:" in text

    def read(self, inp: Input) -> tuple[list[Any], list[str]]:
        text = inp.text
        if text is None:
            raise self.fail("the body is not text", "body")
        blocks = console_blocks(text)
        if not blocks:
            raise self.fail("no 'Serving Benchmark Result' block with 'Successful requests:'", "body")
        return blocks, []

    def parse_records(self, records: list[Any]) -> list[CanonicalRun]:
        return [parse_block(block, index) for index, block in enumerate(records)]


PARSERS = [BenchConsoleParser()]
