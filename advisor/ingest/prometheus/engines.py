"""What each engine's ``/metrics`` exposes: metric prefixes, the counters, histograms and gauges
advisor reads under engine-neutral keys, and the older names read as newer ones (docs/formats.md §3
and the §9.3 "Prometheus scrapes" table).

vLLM, SGLang, TGI and llama-server are read; TensorRT-LLM's ``trtllm-serve`` is not yet (its metric
names were not verified against a real scrape).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["ENGINES", "MODEL_LABEL", "PREFIXES", "RANK_LABELS", "RENAMES", "SPECS", "TOOL_NAMES", "EngineSpec", "Sel"]

#: Engines recognised by their metric prefix, also the ``setup.runtime`` they map to.
ENGINES: tuple[str, ...] = ("vllm", "sglang", "tgi", "llamacpp")
#: The metric-name prefix that identifies each engine.
PREFIXES: dict[str, str] = {"vllm": "vllm:", "sglang": "sglang:", "tgi": "tgi_", "llamacpp": "llamacpp:"}
#: ``source.tool`` of a run read from each engine's metrics.
TOOL_NAMES: dict[str, str] = {
    "vllm": "vLLM /metrics",
    "sglang": "SGLang /metrics",
    "tgi": "TGI /metrics",
    "llamacpp": "llama-server /metrics",
}

#: Older metric names read as their newer equivalents when the newer one is absent (docs/formats.md §3.1:
#: vLLM deprecated these in 0.9–0.11; SGLang renamed its token-gap histogram the same way).
RENAMES: tuple[tuple[str, str], ...] = (
    ("vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc"),
    ("vllm:time_per_output_token_seconds", "vllm:inter_token_latency_seconds"),
    ("vllm:gpu_prefix_cache_queries", "vllm:prefix_cache_queries"),
    ("vllm:gpu_prefix_cache_hits", "vllm:prefix_cache_hits"),
    ("sglang:time_per_output_token_seconds", "sglang:inter_token_latency_seconds"),
)

#: Labels that split one request stream by tensor/pipeline-parallel rank: the series report the
#: same requests, so they are combined with max, not summed. Every other label (vLLM ``engine``,
#: SGLang ``dp_rank``, ``finished_reason``, …) splits the traffic and is summed.
RANK_LABELS = frozenset({"tp_rank", "pp_rank", "attn_tp_rank", "moe_ep_rank"})
#: The label that names the served model; several values in one scrape give one run each.
MODEL_LABEL = "model_name"


@dataclass(frozen=True)
class Sel:
    """A counter: a sample name, optionally restricted to (or excluding) one label value."""

    name: str
    label: str | None = None
    value: str | None = None
    exclude: bool = False


@dataclass(frozen=True)
class EngineSpec:
    counters: Mapping[str, Sel]
    histograms: Mapping[str, str]
    gauges: Mapping[str, tuple[str, Literal["sum", "mean"]]]
    info: str | None = None
    #: Gauges read for one label value only (vLLM V1 ``num_requests_waiting_by_reason{reason=…}``).
    labelled_gauges: Mapping[str, tuple[Sel, Literal["sum", "mean"]]] = field(default_factory=dict)


SPECS: dict[str, EngineSpec] = {
    "vllm": EngineSpec(
        counters={
            "prompt_tokens": Sel("vllm:prompt_tokens_total"),
            "generation_tokens": Sel("vllm:generation_tokens_total"),
            "prefix_cache_hits": Sel("vllm:prefix_cache_hits_total"),
            "prefix_cache_queries": Sel("vllm:prefix_cache_queries_total"),
            "preemptions": Sel("vllm:num_preemptions_total"),
            "requests_completed": Sel("vllm:request_success_total", "finished_reason", "abort", True),
            "requests_aborted": Sel("vllm:request_success_total", "finished_reason", "abort"),
            # V1 (0.10+): prompt tokens by where their KV came from.
            "computed_prompt_tokens": Sel("vllm:prompt_tokens_by_source_total", "source", "local_compute"),
            "cached_prompt_tokens": Sel("vllm:prompt_tokens_by_source_total", "source", "local_cache_hit"),
            "transferred_prompt_tokens": Sel("vllm:prompt_tokens_by_source_total", "source", "external_kv_transfer"),
        },
        histograms={
            "ttft": "vllm:time_to_first_token_seconds",
            "itl": "vllm:inter_token_latency_seconds",
            "tpot": "vllm:request_time_per_output_token_seconds",
            "e2e": "vllm:e2e_request_latency_seconds",
            "queue": "vllm:request_queue_time_seconds",
            "prefill_time": "vllm:request_prefill_time_seconds",
            "prompt_len": "vllm:request_prompt_tokens",
            "output_len": "vllm:request_generation_tokens",
        },
        gauges={
            "waiting": ("vllm:num_requests_waiting", "sum"),
            "running": ("vllm:num_requests_running", "sum"),
            "kv_usage": ("vllm:kv_cache_usage_perc", "mean"),
            # V0 engines exported the hit rate itself as a gauge.
            "prefix_hit_rate": ("vllm:gpu_prefix_cache_hit_rate", "mean"),
        },
        info="vllm:cache_config_info",
        labelled_gauges={
            # Why requests wait (vLLM V1): "capacity" is the scheduler's capacity (token budget,
            # max_num_seqs or KV blocks); "deferred" a transient hold (LoRA budget, KV transfer).
            "waiting_capacity": (Sel("vllm:num_requests_waiting_by_reason", "reason", "capacity"), "sum"),
            "waiting_deferred": (Sel("vllm:num_requests_waiting_by_reason", "reason", "deferred"), "sum"),
        },
    ),
    "sglang": EngineSpec(
        counters={
            "prompt_tokens": Sel("sglang:prompt_tokens_total"),
            "generation_tokens": Sel("sglang:generation_tokens_total"),
            "cached_prompt_tokens": Sel("sglang:cached_tokens_total"),
            "requests_completed": Sel("sglang:num_requests_total"),
        },
        histograms={
            "ttft": "sglang:time_to_first_token_seconds",
            "itl": "sglang:inter_token_latency_seconds",
            "e2e": "sglang:e2e_request_latency_seconds",
        },
        gauges={
            "waiting": ("sglang:num_queue_reqs", "sum"),
            "running": ("sglang:num_running_reqs", "sum"),
            "kv_usage": ("sglang:token_usage", "mean"),
            "prefix_hit_rate": ("sglang:cache_hit_rate", "mean"),
        },
    ),
    "tgi": EngineSpec(
        counters={
            "requests_completed": Sel("tgi_request_success_total"),
            "requests_aborted": Sel("tgi_request_failure_total"),
        },
        histograms={
            "tpot": "tgi_request_mean_time_per_token_duration",
            "e2e": "tgi_request_duration",
            "queue": "tgi_request_queue_duration",
            "prompt_len": "tgi_request_input_length",
            "output_len": "tgi_request_generated_tokens",
        },
        gauges={
            "waiting": ("tgi_queue_size", "sum"),
            "running": ("tgi_batch_current_size", "sum"),
        },
    ),
    "llamacpp": EngineSpec(
        counters={
            "prompt_tokens": Sel("llamacpp:prompt_tokens_total"),
            "generation_tokens": Sel("llamacpp:tokens_predicted_total"),
            "cached_prompt_tokens": Sel("llamacpp:prompt_tokens_cached_total"),
            "prompt_seconds": Sel("llamacpp:prompt_seconds_total"),
            "predicted_seconds": Sel("llamacpp:tokens_predicted_seconds_total"),
        },
        histograms={},
        gauges={
            "waiting": ("llamacpp:requests_deferred", "sum"),
            "running": ("llamacpp:requests_processing", "sum"),
            # Older builds only (2024 to mid-2025).
            "kv_usage": ("llamacpp:kv_cache_usage_ratio", "mean"),
        },
    ),
}
