from __future__ import annotations

from typing import Any

from advanced_alchemy.base import DefaultBase
from advanced_alchemy.mixins import AuditColumns
from advanced_alchemy.types import JsonB
from sqlalchemy import Float, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column


class _CatalogEntry(AuditColumns):
    """Shared columns: a slug id, where it came from (shipped data or a user), its source."""

    id: Mapped[str] = mapped_column(String(100), primary_key=True)
    origin: Mapped[str] = mapped_column(String(16), default="shipped")
    source: Mapped[str | None] = mapped_column(Text, default=None)
    notes: Mapped[str | None] = mapped_column(Text, default=None)
    #: The entry as submitted (inline-spec form, with ``aliases``); user entries are rebuilt from it.
    spec: Mapped[dict[str, Any]] = mapped_column(JsonB, default=dict)


class HardwareEntry(_CatalogEntry, DefaultBase):
    __tablename__ = "catalog_hardware"

    vendor: Mapped[str | None] = mapped_column(String(100), default=None)
    name: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(32))
    memory_gb: Mapped[float | None] = mapped_column(Float, default=None)
    mem_bandwidth_gb_s: Mapped[float] = mapped_column(Float)
    fp16_dense_tflops: Mapped[float | None] = mapped_column(Float, default=None)
    bf16_dense_tflops: Mapped[float | None] = mapped_column(Float, default=None)
    fp8_dense_tflops: Mapped[float | None] = mapped_column(Float, default=None)
    int8_dense_tops: Mapped[float | None] = mapped_column(Float, default=None)
    tdp_w: Mapped[float | None] = mapped_column(Float, default=None)
    interconnect: Mapped[str | None] = mapped_column(Text, default=None)


class ModelEntry(_CatalogEntry, DefaultBase):
    __tablename__ = "catalog_model"

    family: Mapped[str | None] = mapped_column(String(100), default=None)
    hf_repo: Mapped[str | None] = mapped_column(String(300), default=None)
    params_b: Mapped[float] = mapped_column(Float)
    active_params_b: Mapped[float] = mapped_column(Float)
    num_hidden_layers: Mapped[int | None] = mapped_column(Integer, default=None)
    hidden_size: Mapped[int | None] = mapped_column(Integer, default=None)
    num_attention_heads: Mapped[int | None] = mapped_column(Integer, default=None)
    num_key_value_heads: Mapped[int | None] = mapped_column(Integer, default=None)
    head_dim: Mapped[int | None] = mapped_column(Integer, default=None)
    attention: Mapped[str | None] = mapped_column(String(32), default=None)
    max_position_embeddings: Mapped[int | None] = mapped_column(Integer, default=None)
    vocab_size: Mapped[int | None] = mapped_column(Integer, default=None)
    kv_bytes_per_token_fp16: Mapped[float | None] = mapped_column(Float, default=None)
    #: Shape details the flat columns lack (MLA ranks, sliding windows, experts).
    extra: Mapped[dict[str, Any]] = mapped_column(JsonB, default=dict)


class QuantizationEntry(_CatalogEntry, DefaultBase):
    __tablename__ = "catalog_quantization"

    name: Mapped[str] = mapped_column(String(200))
    bits_per_weight: Mapped[float] = mapped_column(Float)
    family: Mapped[str | None] = mapped_column(String(32), default=None)


class CatalogAlias(DefaultBase):
    """A name real inputs use (``NVIDIA H100 80GB HBM3``, ``Q4_K_M``) for a catalog entry."""

    __tablename__ = "catalog_alias"
    __table_args__ = (
        UniqueConstraint("kind", "alias", name="uq_catalog_alias_kind_alias"),
        Index("ix_catalog_alias_target", "kind", "target_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(16))
    alias: Mapped[str] = mapped_column(String(300))
    target_id: Mapped[str] = mapped_column(String(100))
    origin: Mapped[str] = mapped_column(String(16), default="shipped")
