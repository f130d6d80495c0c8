"""Fitted performance-model versions: fit, list, activate, roll back; and the expectation provider."""

from __future__ import annotations

from advisor.domain.models.provider import expectations_fn_for, model_status

__all__ = ["expectations_fn_for", "model_status"]
