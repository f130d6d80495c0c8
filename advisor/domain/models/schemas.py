"""Fitted-model versions, fit requests and jobs as the API shows them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec

__all__ = ["ActiveModelOut", "FitIn", "JobOut", "ModelStatus", "ModelVersionOut"]


class FitIn(msgspec.Struct, forbid_unknown_fields=True):
    """A fit request. ``include_public``: train on the shipped published runs as well as the fleet
    (without them the fleet alone must have 30 decode and 30 prefill observations); ``cv``: run the
    grouped cross-validation (without it the intervals are in-sample and the version says so);
    ``force``: activate even a version that loses to the better baseline on a CV grouping."""

    activate: bool = False
    force: bool = False
    notes: str | None = msgspec.field(default=None)
    include_public: bool = True
    cv: bool = True


class JobOut(msgspec.Struct):
    """A background job. ``status``: queued, running, succeeded or failed. ``result`` holds the
    progress while running and, for a fit, the new version and its summary when done."""

    id: int
    kind: str
    status: str
    params: dict[str, Any]
    result: dict[str, Any] | None
    error: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class ModelVersionOut(msgspec.Struct):
    """A fitted-model version with what it was trained on and its cross-validated error.

    ``summary`` is ``{target: {scheme: {"mdape": {model, linear, roofline, constant}, "coverage",
    "beats_baselines"}}}``; ``cv_metrics`` (on ``GET /models/{version}``) has everything,
    per hardware kind too. ``loadable`` is False when the installed libraries differ from the
    ones that fitted it (it would fall back to physics if activated).
    """

    version: str
    is_active: bool
    created_at: datetime
    n_train: int
    data_hash: str
    artifact_sha256: str
    artifact_bytes: int
    library_versions: dict[str, Any]
    loadable: bool
    summary: dict[str, Any]
    notes: str | None
    cv_metrics: dict[str, Any] | None = None


class ActiveModelOut(msgspec.Struct):
    """What is in force after an activation or a rollback (``active`` None: the physics prior)."""

    active: str | None
    previous: str | None


class ModelStatus(msgspec.Struct):
    """The expectation model a worker serves (for /health).

    ``source`` is ``fitted`` or ``physics-prior``; ``active`` the version marked active in the
    database, ``serving`` the model_version predictions carry; ``error`` why an active version is
    not served (a library mismatch, a corrupt artifact).
    """

    source: str
    active: str | None
    serving: str
    loaded: bool
    error: str | None = None
