"""Catalog lookups: hardware, model architectures and quantizations (DESIGN §3, §4).

Pure lookups over shipped package data (``advisor/catalog/data``) plus entries the caller adds.
Names resolve through curated aliases (nvidia-smi, llama-bench, Hugging Face repo ids, Ollama tags)
and inline spec objects; unknown names raise :class:`advisor.errors.UnknownName` with the closest
matches.
"""

from __future__ import annotations

from advisor.catalog.inline import (
    HARDWARE_KINDS,
    hardware_from_dict,
    is_hf_config,
    model_from_dict,
    model_from_hf_config,
    quant_from_dict,
)
from advisor.catalog.lookup import KV_CACHE_DTYPE_ALIASES, Catalog, OllamaFamily, ResolvedSetup, catalog_records

__all__ = [
    "HARDWARE_KINDS",
    "KV_CACHE_DTYPE_ALIASES",
    "Catalog",
    "OllamaFamily",
    "ResolvedSetup",
    "catalog_records",
    "hardware_from_dict",
    "is_hf_config",
    "model_from_dict",
    "model_from_hf_config",
    "quant_from_dict",
]
