from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from advanced_alchemy.base import IdentityAuditBase
from advanced_alchemy.types import DateTimeUTC, JsonB
from sqlalchemy import BigInteger, Float, ForeignKey, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column, relationship

if TYPE_CHECKING:
    from advisor.db.models._deployment import Deployment
    from advisor.db.models._raw_payload import RawPayload
    from advisor.db.models._recommendation import Recommendation

#: Typed metric columns: (column name, path in the canonical run). Reports and fits query these in SQL;
#: the full canonical document stays in the JSON columns.
METRIC_COLUMNS: tuple[tuple[str, str], ...] = (
    ("ttft_mean_ms", "metrics.ttft_ms.mean"),
    ("ttft_p50_ms", "metrics.ttft_ms.p50"),
    ("ttft_p90_ms", "metrics.ttft_ms.p90"),
    ("ttft_p99_ms", "metrics.ttft_ms.p99"),
    ("itl_mean_ms", "metrics.itl_ms.mean"),
    ("itl_p50_ms", "metrics.itl_ms.p50"),
    ("itl_p90_ms", "metrics.itl_ms.p90"),
    ("itl_p99_ms", "metrics.itl_ms.p99"),
    ("tpot_mean_ms", "metrics.tpot_ms.mean"),
    ("tpot_p50_ms", "metrics.tpot_ms.p50"),
    ("tpot_p99_ms", "metrics.tpot_ms.p99"),
    ("e2e_p50_ms", "metrics.e2e_ms.p50"),
    ("e2e_p99_ms", "metrics.e2e_ms.p99"),
    ("prefill_tok_s", "metrics.prefill_tok_s"),
    ("decode_tok_s", "metrics.decode_tok_s"),
    ("output_throughput_tok_s", "metrics.output_throughput_tok_s"),
    ("request_throughput_rps", "metrics.request_throughput_rps"),
    ("queue_waiting_mean", "metrics.queue_waiting_mean"),
    ("queue_waiting_max", "metrics.queue_waiting_max"),
    ("running_mean", "metrics.running_mean"),
    ("kv_cache_usage_mean", "metrics.kv_cache_usage_mean"),
    ("kv_cache_usage_max", "metrics.kv_cache_usage_max"),
    ("prefix_cache_hit_rate", "metrics.prefix_cache_hit_rate"),
    ("preemptions", "metrics.preemptions"),
    ("load_ms", "metrics.load_ms"),
    ("requests_completed", "metrics.requests_completed"),
    ("requests_failed", "metrics.requests_failed"),
    ("concurrency", "workload.concurrency"),
    ("request_rate", "workload.request_rate"),
    ("num_requests", "workload.num_requests"),
    ("prompt_tokens_mean", "workload.prompt_tokens_mean"),
    ("output_tokens_mean", "workload.output_tokens_mean"),
    ("kv_depth_tokens", "workload.kv_depth_tokens"),
)


class Run(IdentityAuditBase):
    """One measured run in canonical form, with typed columns for what reports and fits query."""

    __tablename__ = "run"
    __table_args__ = (
        Index("ix_run_deployment_measured", "deployment_id", "measured_at"),
        Index("ix_run_hardware_model_quant", "hardware_id", "model_id", "quantization_id"),
        Index("ix_run_model", "model_id"),
        Index("ix_run_measured_at", "measured_at"),
        Index("ix_run_runtime", "runtime"),
    )

    deployment_id: Mapped[int | None] = mapped_column(ForeignKey("deployment.id", ondelete="SET NULL"), default=None)
    raw_payload_id: Mapped[int | None] = mapped_column(
        ForeignKey("raw_payload.id", ondelete="SET NULL"), default=None, index=True
    )
    content_hash: Mapped[str] = mapped_column(String(64), unique=True)
    idempotency_key: Mapped[str | None] = mapped_column(String(200), unique=True, default=None)
    measured_at: Mapped[datetime] = mapped_column(DateTimeUTC(timezone=True))
    submitted_by: Mapped[str | None] = mapped_column(String(200), default=None)
    source_format: Mapped[str | None] = mapped_column(String(64), default=None)
    source_index: Mapped[int] = mapped_column(Integer, default=0)
    verdict: Mapped[str | None] = mapped_column(String(8), default=None)

    # setup, resolved
    runtime: Mapped[str | None] = mapped_column(String(32), default=None)
    runtime_version: Mapped[str | None] = mapped_column(String(64), default=None)
    hardware_id: Mapped[str | None] = mapped_column(String(100), default=None)
    model_id: Mapped[str | None] = mapped_column(String(200), default=None)
    quantization_id: Mapped[str | None] = mapped_column(String(100), default=None)
    gpu_count: Mapped[int | None] = mapped_column(Integer, default=None)
    tensor_parallel: Mapped[int | None] = mapped_column(Integer, default=None)
    kv_cache_dtype: Mapped[str | None] = mapped_column(String(32), default=None)
    max_model_len: Mapped[int | None] = mapped_column(BigInteger, default=None)

    # metrics (see METRIC_COLUMNS)
    ttft_mean_ms: Mapped[float | None] = mapped_column(Float, default=None)
    ttft_p50_ms: Mapped[float | None] = mapped_column(Float, default=None)
    ttft_p90_ms: Mapped[float | None] = mapped_column(Float, default=None)
    ttft_p99_ms: Mapped[float | None] = mapped_column(Float, default=None)
    itl_mean_ms: Mapped[float | None] = mapped_column(Float, default=None)
    itl_p50_ms: Mapped[float | None] = mapped_column(Float, default=None)
    itl_p90_ms: Mapped[float | None] = mapped_column(Float, default=None)
    itl_p99_ms: Mapped[float | None] = mapped_column(Float, default=None)
    tpot_mean_ms: Mapped[float | None] = mapped_column(Float, default=None)
    tpot_p50_ms: Mapped[float | None] = mapped_column(Float, default=None)
    tpot_p99_ms: Mapped[float | None] = mapped_column(Float, default=None)
    e2e_p50_ms: Mapped[float | None] = mapped_column(Float, default=None)
    e2e_p99_ms: Mapped[float | None] = mapped_column(Float, default=None)
    prefill_tok_s: Mapped[float | None] = mapped_column(Float, default=None)
    decode_tok_s: Mapped[float | None] = mapped_column(Float, default=None)
    output_throughput_tok_s: Mapped[float | None] = mapped_column(Float, default=None)
    request_throughput_rps: Mapped[float | None] = mapped_column(Float, default=None)
    queue_waiting_mean: Mapped[float | None] = mapped_column(Float, default=None)
    queue_waiting_max: Mapped[float | None] = mapped_column(Float, default=None)
    running_mean: Mapped[float | None] = mapped_column(Float, default=None)
    kv_cache_usage_mean: Mapped[float | None] = mapped_column(Float, default=None)
    kv_cache_usage_max: Mapped[float | None] = mapped_column(Float, default=None)
    prefix_cache_hit_rate: Mapped[float | None] = mapped_column(Float, default=None)
    preemptions: Mapped[float | None] = mapped_column(Float, default=None)
    load_ms: Mapped[float | None] = mapped_column(Float, default=None)
    requests_completed: Mapped[int | None] = mapped_column(Integer, default=None)
    requests_failed: Mapped[int | None] = mapped_column(Integer, default=None)

    # workload
    concurrency: Mapped[float | None] = mapped_column(Float, default=None)
    request_rate: Mapped[float | None] = mapped_column(Float, default=None)
    num_requests: Mapped[int | None] = mapped_column(Integer, default=None)
    prompt_tokens_mean: Mapped[float | None] = mapped_column(Float, default=None)
    output_tokens_mean: Mapped[float | None] = mapped_column(Float, default=None)
    kv_depth_tokens: Mapped[float | None] = mapped_column(Float, default=None)

    # derived by the analysis
    decode_efficiency: Mapped[float | None] = mapped_column(Float, default=None)
    prefill_efficiency: Mapped[float | None] = mapped_column(Float, default=None)

    # the canonical document
    setup: Mapped[dict[str, Any]] = mapped_column(JsonB, default=dict)
    workload: Mapped[dict[str, Any]] = mapped_column(JsonB, default=dict)
    metrics: Mapped[dict[str, Any]] = mapped_column(JsonB, default=dict)
    labels: Mapped[dict[str, Any]] = mapped_column(JsonB, default=dict)
    source: Mapped[dict[str, Any]] = mapped_column(JsonB, default=dict)
    analysis: Mapped[dict[str, Any]] = mapped_column(JsonB, default=dict)
    #: The context given with the submission (query, headers, wrapper), so ``advisor runs reparse`` can
    #: re-derive the run from the raw payload exactly as it was submitted.
    context: Mapped[dict[str, Any]] = mapped_column(JsonB, default=dict)

    deployment: Mapped[Deployment | None] = relationship(back_populates="runs", lazy="joined")
    raw_payload: Mapped[RawPayload | None] = relationship(lazy="noload")
    recommendations: Mapped[list[Recommendation]] = relationship(
        back_populates="run", lazy="noload", cascade="all, delete-orphan", passive_deletes=True
    )
