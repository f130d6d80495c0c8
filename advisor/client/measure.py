"""``advisor measure``: probe a running LLM server the way the seed does, with nothing else installed.

1. Warm-up: two discarded, non-streaming one-token calls, at the short and at the long size. They
   load the model (the cold first call the seed says to throw away), open the keep-alive connection,
   let the server allocate for the longest prompt, and calibrate the prompt builder: the server
   reports how many tokens each text became, so ``≈200`` and ``≈2,000`` are the server's own
   token counts, whatever its tokenizer.
2. A short and a long prompt, ``repeat`` times each, streamed one at a time: TTFT per request (time
   to the first content event, not to the response headers), the gaps between content events (ITL)
   and the decode rate after the first token. Every prompt starts with a unique nonce, so no request
   hits a prefix cache that an earlier one filled: the long probe really prefills 2,000 tokens.
3. Prefill tok/s per sequence from the TTFT difference between the long and the short probe (the
   fixed costs, HTTP and scheduling, cancel out). Ollama reports its own counters
   (``prompt_eval_*``, ``eval_*``, in ns), which are used instead.
4. Optional concurrency levels: ``c`` streams in flight at once, to show the batching trade-off
   (aggregate throughput up, tails up).
5. ``/metrics``, when the server has it (vLLM, SGLang, TGI, llama-server), is scraped before, during
   and after; queue depth, running batch, KV use, prefix hits and pre-emptions are folded into the
   run. The scrape parsing is :mod:`advisor.ingest.prometheus` (pure functions, no server code).

The result is one canonical run describing the long-prompt probe at concurrency 1 (the seed's
expensive case), with every probe kept in :attr:`Measurement.probes`.
"""

from __future__ import annotations

import itertools
import json
import math
import secrets
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import httpx

from advisor import __version__
from advisor.client.clock import SYSTEM_CLOCK, Clock
from advisor.client.http import ApiError, Rejected, ServerError, Unreachable

__all__ = [
    "APIS",
    "MAX_ATTEMPTS",
    "MeasureError",
    "MeasureOptions",
    "Measurement",
    "OllamaBackend",
    "OpenAIBackend",
    "Probe",
    "Sample",
    "build_prompt",
    "fixed_length_fields",
    "iter_levels",
    "measure",
    "percentiles",
]

APIS: tuple[str, ...] = ("openai", "ollama")

# Filler for prompts: plain prose, varied enough that tokenizers do not collapse it into a few
# tokens. Its content is irrelevant to the measurement.
_FILLER = (
    "Prefill reads the whole prompt in one pass and keeps the arithmetic units busy, while decode "
    "produces one token per step and spends most of its time reading weights from memory. A long "
    "system prompt raises the time to the first token on every request but barely changes the "
    "streaming rate that follows. Batching several requests lets one read of the weights serve "
    "every sequence in the batch, so the total rate grows until the key-value cache runs out of "
    "room. Quantized weights halve or quarter the bytes read for each token. Measure both phases "
    "and change one thing at a time, because a setting that helps one runtime may do nothing in "
    "another. "
)
_INSTRUCTION = "\n\nContinue the text above with a long, detailed explanation."
#: Attempts per request: a failed request or one that stopped early is sent again this many times
#: at most, so that a probe measures the output length it asked for.
MAX_ATTEMPTS = 3


def fixed_length_fields(max_tokens: int) -> dict[str, Any]:
    """The request fields that make an OpenAI-compatible server stream exactly ``max_tokens``:
    ``ignore_eos`` (vLLM, SGLang, llama.cpp server) and ``min_tokens`` (vLLM, SGLang)."""
    return {"ignore_eos": True, "min_tokens": max_tokens}


class MeasureError(ApiError):
    """The measured server answered, but not in a way the probe can use."""


@dataclass
class Sample:
    """One request, as the client saw it (times in ms) plus what the server counted."""

    prompt_tokens: float | None
    output_tokens: int
    ttft_ms: float | None
    itl_ms: list[float]
    e2e_ms: float
    decode_tok_s: float | None
    server_prefill_tok_s: float | None = None
    load_ms: float | None = None
    error: str | None = None
    #: Fewer tokens than requested: the model ended the sequence early (the server ignored, or has
    #: no, ``ignore_eos``/``min_tokens``), so the decode figures cover a shorter answer.
    early_stop: bool = False
    #: Attempts this request needed (a failure or an early stop is retried).
    attempts: int = 1


@dataclass
class Probe:
    name: str
    target_tokens: int
    concurrency: int
    samples: list[Sample] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def ok(self) -> list[Sample]:
        return [s for s in self.samples if s.error is None and s.ttft_ms is not None]

    def prompt_tokens(self) -> float | None:
        values = [s.prompt_tokens for s in self.ok if s.prompt_tokens is not None]
        return sum(values) / len(values) if values else None

    def output_tokens(self) -> float | None:
        values = [s.output_tokens for s in self.ok]
        return sum(values) / len(values) if values else None

    def decode_tok_s(self) -> float | None:
        return _median([s.decode_tok_s for s in self.ok if s.decode_tok_s])

    def ttft(self) -> dict[str, float]:
        return percentiles([s.ttft_ms for s in self.ok if s.ttft_ms is not None])

    def itl(self) -> dict[str, float]:
        return percentiles([gap for s in self.ok for gap in s.itl_ms])

    def tpot(self) -> dict[str, float]:
        return percentiles([1000.0 / s.decode_tok_s for s in self.ok if s.decode_tok_s])

    def e2e(self) -> dict[str, float]:
        return percentiles([s.e2e_ms for s in self.ok])

    def output_throughput_tok_s(self) -> float | None:
        total = sum(s.output_tokens for s in self.ok)
        return total / self.wall_s if self.wall_s > 0 and total else None

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "prompt_tokens": _round(self.prompt_tokens()),
            "concurrency": self.concurrency,
            "requests": len(self.ok),
            "failed": len(self.samples) - len(self.ok),
            "early_stops": sum(1 for s in self.samples if s.early_stop),
            "retries": sum(s.attempts - 1 for s in self.samples),
            "output_tokens": _round(self.output_tokens()),
            "ttft_ms": _pick(self.ttft()),
            "itl_ms": _pick(self.itl()),
            "decode_tok_s": _round(self.decode_tok_s()),
            "output_throughput_tok_s": _round(self.output_throughput_tok_s()),
        }


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def _pick(p: Mapping[str, float]) -> dict[str, float]:
    return {k: round(p[k], 3) for k in ("p50", "p90", "p99") if k in p}


def _median(values: Sequence[float]) -> float | None:
    p = percentiles(values)
    return p.get("p50")


def percentiles(values: Sequence[float]) -> dict[str, float]:
    """mean, p50, p90, p99 (linear interpolation, as numpy's default), min and max; {} when empty.
    Computed by the ingest parsers' own summary, so a probe and a parsed file agree."""
    from advisor.ingest.statistics import summarize

    summary = summarize(values)
    keys = ("mean", "min", "p50", "p90", "p99", "max")
    return {key: value for key in keys if (value := getattr(summary, key)) is not None}


def build_prompt(tokens: int, chars_per_token: float, overhead: float = 0.0, *, nonce: str) -> str:
    """A prompt of about ``tokens`` tokens: a unique nonce first (defeats prefix caches), filler
    prose, then an instruction that asks for a long answer."""
    head = f"[{nonce}] "
    budget = max(1, round((tokens - overhead) * chars_per_token)) - len(head) - len(_INSTRUCTION)
    reps = budget // len(_FILLER) + 1
    body = (_FILLER * reps)[: max(budget, 0)]
    return head + body + _INSTRUCTION


# ------------------------------------------------------------------------------------------------
# Backends


class Backend(Protocol):
    api: str

    def runtime_hint(self) -> str | None: ...
    def default_model(self) -> str: ...
    def setup_hints(self, model: str) -> dict[str, Any]: ...
    def count_prompt(self, model: str, prompt: str) -> float | None: ...
    def stream(self, model: str, prompt: str, max_tokens: int) -> Sample: ...


def _raise_for(response: httpx.Response, what: str) -> None:
    if response.status_code < 400:
        return
    try:
        response.read()
        text = response.text.strip()[:300]
    except httpx.HTTPError:
        text = ""
    message = f"{what}: {response.status_code} {response.reason_phrase}" + (f": {text}" if text else "")
    if response.status_code >= 500:
        raise ServerError(message, status=response.status_code)
    raise Rejected(message, status=response.status_code)


def _call(http: httpx.Client, method: str, url: str, **kwargs: Any) -> httpx.Response:
    try:
        response = http.request(method, url, **kwargs)
    except httpx.TransportError as exc:
        raise Unreachable(f"cannot reach {http.base_url}{url}: {type(exc).__name__}: {exc}") from exc
    _raise_for(response, f"{method} {url}")
    return response


def _json_body(response: httpx.Response, what: str) -> Any:
    try:
        return response.json()
    except ValueError as exc:
        raise MeasureError(f"{what}: the server answered something that is not JSON") from exc


class OpenAIBackend:
    """``/v1/completions`` (or ``/v1/chat/completions`` with ``chat``), streamed as server-sent events.

    SSE is read line by line here (``data: {...}`` until ``data: [DONE]``) rather than with an SSE
    library: that is the whole of what OpenAI-compatible servers send, and it keeps the probe
    dependency-free.
    """

    api = "openai"

    def __init__(
        self,
        http: httpx.Client,
        *,
        chat: bool = False,
        clock: Clock = SYSTEM_CLOCK,
        extra_body: Mapping[str, Any] | None = None,
    ) -> None:
        self.http = http
        self.chat = chat
        self.clock = clock
        self.extra_body = dict(extra_body or {})
        self._owned_by: str | None = None
        # Servers that reject unknown fields (some TGI versions) refuse stream_options: drop it once.
        self._usage_option = True
        # vLLM, SGLang and llama.cpp's server accept ignore_eos (and vLLM/SGLang min_tokens), so every
        # request streams exactly max_tokens tokens; a server that refuses them gets them no more.
        self.fixed_length = True
        self._lock = threading.Lock()

    @property
    def path(self) -> str:
        return "/v1/chat/completions" if self.chat else "/v1/completions"

    def runtime_hint(self) -> str | None:
        owner = (self._owned_by or "").lower()
        for runtime in ("vllm", "sglang", "llamacpp", "tgi", "mlx"):
            if runtime in owner:
                return runtime
        return None

    def default_model(self) -> str:
        try:
            response = _call(self.http, "GET", "/v1/models")
        except Rejected as exc:
            raise Rejected(
                f"{exc.message}; pass --model (or --api ollama for an Ollama server)", status=exc.status
            ) from exc
        body = _json_body(response, "GET /v1/models")
        models = body.get("data") if isinstance(body, dict) else None
        if not models:
            raise MeasureError("GET /v1/models lists no model; pass --model")
        self._owned_by = str(models[0].get("owned_by") or "")
        return str(models[0]["id"])

    def setup_hints(self, model: str) -> dict[str, Any]:
        return {}

    def _body(self, model: str, prompt: str, max_tokens: int, stream: bool) -> dict[str, Any]:
        body: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "temperature": 0, "stream": stream}
        if self.chat:
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = prompt
        if stream and self._usage_option:
            body["stream_options"] = {"include_usage": True}
        if stream and self.fixed_length:
            body.update(fixed_length_fields(max_tokens))
        body.update(self.extra_body)
        return body

    def count_prompt(self, model: str, prompt: str) -> float | None:
        response = _call(self.http, "POST", self.path, json=self._body(model, prompt, 1, False))
        usage = (_json_body(response, f"POST {self.path}") or {}).get("usage") or {}
        tokens = usage.get("prompt_tokens")
        return float(tokens) if isinstance(tokens, int | float) and tokens > 0 else None

    def stream(self, model: str, prompt: str, max_tokens: int) -> Sample:
        body = self._body(model, prompt, max_tokens, True)
        start = self.clock.monotonic()
        try:
            with self.http.stream("POST", self.path, json=body) as response:
                if response.status_code in (400, 422) and self.fixed_length and "ignore_eos" in body:
                    # Refused fields are dropped one kind at a time: the fixed length first.
                    with self._lock:
                        self.fixed_length = False
                    response.read()
                    return self.stream(model, prompt, max_tokens)
                if response.status_code in (400, 422) and "stream_options" in body:
                    with self._lock:
                        self._usage_option = False
                    response.read()
                    return self.stream(model, prompt, max_tokens)
                _raise_for(response, f"POST {self.path}")
                return self._read(response, start)
        except httpx.TransportError as exc:
            raise Unreachable(f"cannot reach {self.http.base_url}{self.path}: {type(exc).__name__}: {exc}") from exc

    def _read(self, response: httpx.Response, start: float) -> Sample:
        times: list[float] = []
        usage: dict[str, Any] = {}
        events = 0  # token events, empty-text tokens included (counted only without stream usage)
        for line in response.iter_lines():
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            try:
                event = json.loads(data)
            except ValueError:
                continue
            if event.get("usage"):
                usage = event["usage"]
            if _has_content(event):
                times.append(self.clock.monotonic())
            events += _token_events(event)
        end = self.clock.monotonic()
        count = usage.get("completion_tokens") if isinstance(usage.get("completion_tokens"), int) else None
        tokens = count if count is not None else max(events, len(times))
        prompt_tokens = usage.get("prompt_tokens")
        return _sample(start, end, times, tokens, float(prompt_tokens) if prompt_tokens else None)


def _has_content(event: Mapping[str, Any]) -> bool:
    for choice in event.get("choices") or []:
        if choice.get("text"):
            return True
        delta = choice.get("delta") or {}
        if delta.get("content") or delta.get("reasoning_content"):
            return True
    return False


def _token_events(event: Mapping[str, Any]) -> int:
    """Chunks that carry one generated token each, visible or not.

    A server without stream usage (llama-cpp-python) still sends one chunk per token, and a token
    whose text is empty (``<s>``, ``<unk>``) is a chunk with ``"text": ""``: counting only visible
    text would call the reply short. The chat stream's opening chunk (``delta`` with ``role``) and
    the closing one (``finish_reason`` set, nothing generated) carry no token.
    """
    n = 0
    for choice in event.get("choices") or []:
        if choice.get("finish_reason") and not (choice.get("text") or (choice.get("delta") or {}).get("content")):
            continue
        if "text" in choice:
            n += 1
            continue
        delta = choice.get("delta") or {}
        if "role" in delta and not delta.get("content"):
            continue
        if "content" in delta or "reasoning_content" in delta:
            n += 1
    return n


def _sample(start: float, end: float, times: Sequence[float], tokens: int, prompt_tokens: float | None) -> Sample:
    if not times:
        return Sample(prompt_tokens, 0, None, [], (end - start) * 1000, None, error="no tokens streamed")
    gaps = [(b - a) * 1000 for a, b in itertools.pairwise(times)]
    decode = None
    if tokens >= 2 and times[-1] > times[0]:
        decode = (tokens - 1) / (times[-1] - times[0])
    return Sample(
        prompt_tokens=prompt_tokens,
        output_tokens=tokens,
        ttft_ms=(times[0] - start) * 1000,
        itl_ms=gaps,
        e2e_ms=(end - start) * 1000,
        decode_tok_s=decode,
    )


class OllamaBackend:
    """``/api/generate``, streamed as NDJSON; the final object carries Ollama's own counters."""

    api = "ollama"

    def __init__(self, http: httpx.Client, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.http = http
        self.clock = clock

    def runtime_hint(self) -> str | None:
        return "ollama"

    def default_model(self) -> str:
        # A loaded model first (it is what the operator is serving), else the first pulled one.
        for path in ("/api/ps", "/api/tags"):
            try:
                body = _json_body(_call(self.http, "GET", path), f"GET {path}")
            except Rejected:
                continue
            models = body.get("models") if isinstance(body, dict) else None
            if models:
                return str(models[0].get("name") or models[0].get("model"))
        raise MeasureError("Ollama lists no model (ollama pull one, or pass --model)")

    def setup_hints(self, model: str) -> dict[str, Any]:
        try:
            body = _json_body(_call(self.http, "POST", "/api/show", json={"model": model}), "POST /api/show")
        except ApiError:
            return {}
        level = (body.get("details") or {}).get("quantization_level") if isinstance(body, dict) else None
        return {"quantization": level} if level else {}

    def resident_share(self, model: str) -> tuple[float | None, str]:
        """Where the model sits once the probes ran: ``/api/ps`` ``size_vram / size`` of its entry
        (``size_vram`` is omitted when 0: all on the CPU), with a note saying what was read."""
        try:
            body = _json_body(_call(self.http, "GET", "/api/ps"), "GET /api/ps")
        except ApiError as exc:
            return None, f"GET /api/ps failed ({exc.message}): gpu_resident_share unknown"
        models = body.get("models") if isinstance(body, dict) else None
        names = {model, f"{model}:latest", model.removesuffix(":latest")}
        entry = next(
            (m for m in models or [] if isinstance(m, dict) and ({m.get("name"), m.get("model")} & names)),
            None,
        )
        if entry is None:
            return None, f"/api/ps does not list {model} after the probes (unloaded?): gpu_resident_share unknown"
        size, vram = _num(entry.get("size")), _num(entry.get("size_vram", 0))
        if not size or vram is None or not 0 <= vram <= size:
            return None, f"/api/ps gives no usable size / size_vram for {model}: gpu_resident_share unknown"
        share = vram / size
        return share, (
            f"gpu_resident_share = {share:.2f} from /api/ps after the probes (size_vram {vram / 2**30:.2f} GiB of "
            f"size {size / 2**30:.2f} GiB: weights, KV cache and graph)"
        )

    def _options(self, max_tokens: int) -> dict[str, Any]:
        # num_predict caps the answer; Ollama has no ignore_eos, so an early end of sequence is
        # caught (Sample.early_stop) and the request retried.
        return {"num_predict": max_tokens, "temperature": 0}

    def count_prompt(self, model: str, prompt: str) -> float | None:
        body = {"model": model, "prompt": prompt, "stream": False, "options": self._options(1)}
        result = _json_body(_call(self.http, "POST", "/api/generate", json=body), "POST /api/generate")
        count = result.get("prompt_eval_count") if isinstance(result, dict) else None
        return float(count) if isinstance(count, int | float) and count > 0 else None

    def stream(self, model: str, prompt: str, max_tokens: int) -> Sample:
        body = {"model": model, "prompt": prompt, "stream": True, "options": self._options(max_tokens)}
        start = self.clock.monotonic()
        times: list[float] = []
        final: dict[str, Any] = {}
        try:
            with self.http.stream("POST", "/api/generate", json=body) as response:
                _raise_for(response, "POST /api/generate")
                for line in response.iter_lines():
                    if not line.strip():
                        continue
                    try:
                        event = json.loads(line)
                    except ValueError:
                        continue
                    if event.get("error"):
                        raise MeasureError(f"Ollama: {event['error']}")
                    if event.get("response"):
                        times.append(self.clock.monotonic())
                    if event.get("done"):
                        final = event
                        break
        except httpx.TransportError as exc:
            raise Unreachable(f"cannot reach {self.http.base_url}/api/generate: {exc}") from exc
        end = self.clock.monotonic()
        tokens = int(final.get("eval_count") or len(times))
        sample = _sample(start, end, times, tokens, _num(final.get("prompt_eval_count")))
        # The seed's method: Ollama's own counters, in nanoseconds.
        eval_count, eval_ns = _num(final.get("eval_count")), _num(final.get("eval_duration"))
        if eval_count and eval_ns:
            sample.decode_tok_s = eval_count / eval_ns * 1e9
        prompt_count, prompt_ns = _num(final.get("prompt_eval_count")), _num(final.get("prompt_eval_duration"))
        if prompt_count and prompt_ns:
            sample.server_prefill_tok_s = prompt_count / prompt_ns * 1e9
        load_ns = _num(final.get("load_duration"))
        if load_ns is not None:
            sample.load_ms = load_ns / 1e6
        return sample


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


# ------------------------------------------------------------------------------------------------
# The probe


@dataclass
class MeasureOptions:
    short_tokens: int = 200
    long_tokens: int = 2000
    max_tokens: int = 64
    #: Requests per probe: at least 8, so that a median and a spread mean something.
    repeat: int = 8
    concurrency: tuple[int, ...] = (1,)
    scrape_metrics: bool = True
    scrape_interval_s: float = 0.5


@dataclass
class Measurement:
    api: str
    model: str
    runtime: str | None
    probes: list[Probe]
    prefill_tok_s: float | None
    notes: list[str]
    telemetry: dict[str, Any] | None
    setup_hints: dict[str, Any]
    warmup_ttft_ms: float | None
    started_at: datetime
    ended_at: datetime
    #: Share of the model in GPU memory as the server reported it after the probes (Ollama
    #: ``/api/ps``); None when the server does not say.
    gpu_resident_share: float | None = None

    def probe(self, name: str) -> Probe | None:
        return next((p for p in self.probes if p.name == name), None)

    def to_run(self, context: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The canonical run: the long probe at concurrency 1, plus /metrics telemetry.

        ``context`` gives deployment, labels, slo and setup fields (hardware, model, …); what it
        gives wins over what the probe detected.
        """
        context = dict(context or {})
        long = self.probe("long") or self.probes[0]
        metrics: dict[str, Any] = {
            "ttft_ms": long.ttft(),
            "itl_ms": long.itl(),
            "tpot_ms": long.tpot(),
            "e2e_ms": long.e2e(),
            "decode_tok_s": long.decode_tok_s(),
            "prefill_tok_s": self.prefill_tok_s,
            "output_throughput_tok_s": long.output_throughput_tok_s(),
            "request_throughput_rps": len(long.ok) / long.wall_s if long.wall_s > 0 else None,
            "requests_completed": len(long.ok),
            "requests_failed": len(long.samples) - len(long.ok),
            "duration_s": long.wall_s or None,
        }
        loads = [s.load_ms for s in long.ok if s.load_ms is not None]
        if loads:
            metrics["load_ms"] = sum(loads) / len(loads)
        metrics.update((self.telemetry or {}).get("metrics", {}))
        if self.gpu_resident_share is not None:
            metrics["gpu_resident_share"] = self.gpu_resident_share
        setup: dict[str, Any] = {"runtime": self.runtime, "model": self.model}
        setup.update({k: v for k, v in self.setup_hints.items() if v is not None})
        setup.update((self.telemetry or {}).get("setup", {}))
        engine_args = dict(setup.pop("engine_args", {}) or {})
        for key in ("hardware", "model", "quantization", "runtime", "runtime_version", "gpu_count",
                    "tensor_parallel", "kv_cache_dtype", "max_model_len"):  # fmt: skip
            if context.get(key) is not None:
                setup[key] = context[key]
        engine_args.update(context.get("engine_args") or {})
        if engine_args:
            setup["engine_args"] = engine_args
        workload = {
            "num_requests": len(long.samples),
            "concurrency": 1,
            "prompt_tokens_mean": long.prompt_tokens(),
            "output_tokens_mean": long.output_tokens(),
            "shared_prefix_tokens": 0,
            "streaming": True,
            "dataset": "advisor measure: synthetic prose, a unique nonce first in every prompt",
        }
        run: dict[str, Any] = {
            "measured_at": self.ended_at.isoformat().replace("+00:00", "Z"),
            "labels": {"probe": "advisor-measure", **dict(context.get("labels") or {})},
            "setup": _clean(setup),
            "workload": _clean(workload),
            "metrics": _clean(metrics),
            "source": {"tool": "advisor measure", "tool_version": __version__, "notes": list(self.notes)},
        }
        if context.get("deployment"):
            run["deployment"] = context["deployment"]
        if context.get("slo"):
            run["slo"] = dict(context["slo"])
        return run

    def to_dict(self, context: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return {"probes": [p.summary() for p in self.probes], "run": self.to_run(context)}


def _clean(doc: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in doc.items():
        if value is None or value == {} or (isinstance(value, float) and math.isnan(value)):
            continue
        out[key] = value
    return out


class _Scraper:
    """GET /metrics before, every ``interval`` seconds during, and after the probes."""

    def __init__(self, http: httpx.Client, interval: float, clock: Clock) -> None:
        self.http = http
        self.interval = interval
        self.clock = clock
        self.during: list[tuple[str, datetime]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def scrape(self) -> tuple[str, datetime] | None:
        try:
            response = self.http.get("/metrics")
        except httpx.HTTPError:
            return None
        if response.status_code != 200 or not response.text.strip():
            return None
        return response.text, self.clock.now()

    def start(self) -> None:
        def loop() -> None:
            while not self._stop.wait(self.interval):
                got = self.scrape()
                if got is not None:
                    self.during.append(got)

        self._thread = threading.Thread(target=loop, name="advisor-measure-scraper", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


def _telemetry(
    before: tuple[str, datetime], after: tuple[str, datetime], during: Sequence[tuple[str, datetime]], model: str
) -> tuple[dict[str, Any] | None, list[str]]:
    """Fold the scrapes into run fields: only what a client cannot see (queue, batch, KV, prefix
    cache, pre-emptions) and setup hints; the latencies stay the client's own measurements."""
    from advisor.errors import AdvisorError
    from advisor.ingest.prometheus import parse_scrape, scrape_delta, telemetry_to_run

    try:
        first = parse_scrape(before[0], taken_at=before[1])
        if first.engine is None:
            return None, ["/metrics has no vLLM, SGLang, TGI or llama-server metrics: nothing folded in"]
        last = parse_scrape(after[0], taken_at=after[1])
        middle = [parse_scrape(text, taken_at=at) for text, at in during]
        chosen = model if model in last.models else None
        delta = scrape_delta(first, last, model=chosen, during=[s for s in middle if s.engine == last.engine])
        run = telemetry_to_run(delta)
    except AdvisorError as exc:
        return None, [f"/metrics not folded in: {exc}"]
    m = run.metrics
    metrics = {
        name: getattr(m, name)
        for name in (
            "queue_waiting_mean",
            "queue_waiting_max",
            "running_mean",
            "running_max",
            "kv_cache_usage_mean",
            "kv_cache_usage_max",
            "prefix_cache_hit_rate",
            "preemptions",
        )
        if getattr(m, name) is not None
    }
    setup: dict[str, Any] = {}
    if run.setup.kv_cache_dtype:
        setup["kv_cache_dtype"] = run.setup.kv_cache_dtype
    if run.setup.engine_args:
        setup["engine_args"] = dict(run.setup.engine_args)
    notes = [
        f"queue, batch, KV-cache and prefix-cache figures from {delta.engine} /metrics "
        f"(before/after scrapes and {len(middle)} during the probes)"
    ]
    return {"engine": delta.engine, "metrics": metrics, "setup": setup}, notes


def measure(
    backend: Backend,
    *,
    model: str | None = None,
    options: MeasureOptions | None = None,
    scrape_http: httpx.Client | None = None,
    on_request: Callable[[str], None] | None = None,
    clock: Clock = SYSTEM_CLOCK,
) -> Measurement:
    """Run the probes against ``backend``. ``on_request(probe_name)`` is called after each request
    (a progress bar); ``scrape_http`` is the client /metrics is fetched with (None: no scraping);
    ``clock`` times the warm-up and the probes' wall time and stamps the run."""
    opts = options or MeasureOptions()
    started_at = clock.now()
    notes: list[str] = []
    model = model or backend.default_model()
    hints = backend.setup_hints(model)

    # Warm-up and calibration (discarded): the cold first call may include loading the model.
    # The first call guesses 4 characters a token at the short size; the second, sized with what the
    # first measured, is at the long size, so the server has also allocated for the longest prompt.
    calibration: list[tuple[int, float]] = []
    warm_start = clock.monotonic()
    cpt, overhead = 4.0, 0.0
    for tokens in (opts.short_tokens, opts.long_tokens):
        text = build_prompt(tokens, cpt, overhead, nonce=secrets.token_hex(4))
        counted = backend.count_prompt(model, text)
        if counted:
            calibration.append((len(text), counted))
            cpt, overhead = _calibrate(calibration)
        if on_request:
            on_request("warm-up")
    warmup_ms = (clock.monotonic() - warm_start) * 1000
    if not calibration:
        notes.append("the server reports no prompt token counts: prompt lengths assume 4 characters per token")

    scraper = (
        _Scraper(scrape_http, opts.scrape_interval_s, clock)
        if scrape_http is not None and opts.scrape_metrics
        else None
    )
    before = scraper.scrape() if scraper else None
    if scraper and before:
        scraper.start()

    def attempt(tokens: int) -> tuple[Sample, str]:
        prompt = build_prompt(tokens, cpt, overhead, nonce=secrets.token_hex(4))
        try:
            sample = backend.stream(model, prompt, opts.max_tokens)
        except (ServerError, MeasureError) as exc:
            sample = Sample(None, 0, None, [], 0.0, None, error=str(exc))
        sample.early_stop = sample.error is None and sample.output_tokens < opts.max_tokens
        return sample, prompt

    def one(probe: Probe, tokens: int) -> Sample:
        # A failed request, or one that stopped before max_tokens, is sent again (a new nonce, so no
        # cache hit): the probe must measure the output length it asked for.
        sample, prompt = attempt(tokens)
        attempts = 1
        while (sample.error is not None or sample.early_stop) and attempts < MAX_ATTEMPTS:
            sample, prompt = attempt(tokens)
            attempts += 1
        sample.attempts = attempts
        if sample.prompt_tokens is None and calibration:
            sample.prompt_tokens = round((len(prompt) / cpt) + overhead)
        if on_request:
            on_request(probe.name)
        return sample

    probes: list[Probe] = []
    try:
        for name, tokens in (("short", opts.short_tokens), ("long", opts.long_tokens)):
            probe = Probe(name, tokens, 1)
            t0 = clock.monotonic()
            for _ in range(opts.repeat):
                probe.samples.append(one(probe, tokens))
            probe.wall_s = clock.monotonic() - t0
            probes.append(probe)
        for level in opts.concurrency:
            if level <= 1:
                continue
            probe = Probe(f"c{level}", opts.short_tokens, level)
            count = max(opts.repeat, 2 * level)
            t0 = clock.monotonic()
            with ThreadPoolExecutor(max_workers=level) as pool:
                futures = [pool.submit(one, probe, opts.short_tokens) for _ in range(count)]
                probe.samples.extend(f.result() for f in futures)
            probe.wall_s = clock.monotonic() - t0
            probes.append(probe)
    finally:
        if scraper:
            scraper.stop()
    after = scraper.scrape() if scraper and before else None

    failures = [s.error for p in probes for s in p.samples if s.error]
    if all(not p.ok for p in probes):
        raise MeasureError(f"every request failed: {failures[0] if failures else 'no tokens streamed'}")
    if failures:
        notes.append(f"{len(failures)} request(s) failed after {MAX_ATTEMPTS} attempts, e.g. {failures[0]}")
    retried = sum(s.attempts - 1 for p in probes for s in p.samples)
    early = [s for p in probes for s in p.samples if s.early_stop]
    if early:
        shortest = min(s.output_tokens for s in early)
        notes.append(
            f"{len(early)} request(s) stopped before {opts.max_tokens} tokens even after {MAX_ATTEMPTS} attempts "
            f"(the shortest after {shortest}): the model ended its answer and the server did not hold it to "
            "the requested length, so decode figures cover shorter answers"
        )
    if retried:
        notes.append(f"{retried} retr{'y' if retried == 1 else 'ies'} for failed or early-stopped requests")
    if getattr(backend, "fixed_length", None) is False:
        notes.append("the server refused ignore_eos/min_tokens: the output length was not fixed")

    runtime = backend.runtime_hint()
    telemetry = None
    if scraper is not None:
        if before is None or after is None:
            notes.append("no /metrics endpoint: queue depth, KV use and prefix hits are not in the run")
        else:
            assert scraper is not None
            telemetry, more = _telemetry(before, after, scraper.during, model)
            notes.extend(more)
            if telemetry and not runtime:
                runtime = telemetry["engine"]

    resident: float | None = None
    where = getattr(backend, "resident_share", None)
    if callable(where):
        # Asked after the probes: the model is loaded, with the context the probes made it allocate.
        resident, note = where(model)
        notes.append(note)

    prefill = _prefill(probes, backend.api, notes)
    notes.append(
        f"client-side probe: warm-up discarded ({warmup_ms:.0f} ms for two calls); TTFT to the first "
        "streamed content event, over a kept-alive connection; ITL = gaps between content events"
    )
    return Measurement(
        api=backend.api,
        model=model,
        runtime=runtime,
        probes=probes,
        prefill_tok_s=prefill,
        notes=notes,
        telemetry=telemetry,
        setup_hints=hints,
        warmup_ttft_ms=warmup_ms,
        started_at=started_at,
        ended_at=clock.now(),
        gpu_resident_share=resident,
    )


def _calibrate(points: Sequence[tuple[int, float]]) -> tuple[float, float]:
    """Characters per token and the fixed token overhead (BOS, chat template) from two points."""
    if not points:
        return 4.0, 0.0
    if len(points) >= 2 and points[-1][1] > points[0][1]:
        (c1, t1), (c2, t2) = points[0], points[-1]
        cpt = (c2 - c1) / (t2 - t1)
        overhead = max(0.0, t1 - c1 / cpt)
        if cpt > 0:
            return cpt, overhead
    chars, tokens = points[0]
    return chars / tokens, 0.0


def _prefill(probes: Sequence[Probe], api: str, notes: list[str]) -> float | None:
    long = next((p for p in probes if p.name == "long"), None)
    short = next((p for p in probes if p.name == "short"), None)
    if long is None:
        return None
    if api == "ollama":
        server = _median([s.server_prefill_tok_s for s in long.ok if s.server_prefill_tok_s])
        if server:
            notes.append("prefill_tok_s and decode_tok_s from Ollama's own counters (prompt_eval_*, eval_*)")
            return server
    if short is None:
        return None
    lt, st = long.prompt_tokens(), short.prompt_tokens()
    l50, s50 = long.ttft().get("p50"), short.ttft().get("p50")
    if None in (lt, st, l50, s50):
        return None
    assert lt is not None and st is not None and l50 is not None and s50 is not None
    if l50 <= s50 or lt <= st:
        notes.append(
            f"TTFT did not grow with the prompt ({s50:.1f} ms at {st:.0f} tokens, {l50:.1f} ms at {lt:.0f}): "
            "prefill_tok_s not derived (a prefix cache, or a server that answers before prefilling?)"
        )
        return None
    notes.append(
        f"prefill_tok_s = ({lt:.0f} − {st:.0f}) tokens / ({l50:.1f} − {s50:.1f}) ms, the TTFT p50 "
        "difference between the long and the short probe"
    )
    return (lt - st) / ((l50 - s50) / 1000)


def iter_levels(text: str) -> Iterator[int]:
    """``"1,4,16"`` → 1, 4, 16."""
    for raw in text.split(","):
        part = raw.strip()
        if part:
            value = int(part)
            if value < 1:
                raise ValueError(f"concurrency must be at least 1, got {value}")
            yield value
