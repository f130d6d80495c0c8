"""Artifacts: a fitted model as skops bytes, with its metadata, and loading them safely.

An artifact is a skops file of a plain dict (never pickle)::

    {"format": 1, "version": "...", "heads": {target: {"pipeline": Pipeline, "interval":
     {kind: [low, high]}, "n_train": int, "base": {...}}}, "meta": {"data_hash",
     "library_versions", "cv_metrics", "created_at", ...}}

``base`` (plain numbers, :meth:`advisor.ml.base.PhysicalBase.to_dict`) is absent in artifacts
fitted before the hybrid model; those heads predict with their Pipeline alone.

Loading checks, in order: the SHA-256 of the bytes (a corrupt or truncated artifact), the library
versions recorded beside it (scikit-learn, skops, numpy: models are only guaranteed to load and
predict the same under the versions that fitted them), that skops finds no types beyond
:data:`TRUSTED_TYPES`, and the format. Any failure raises :class:`ArtifactError`; the caller falls
back to the physics prior.
"""

from __future__ import annotations

import hashlib
import zipfile
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import skops.io as sio

from advisor.ml.base import PhysicalBase
from advisor.ml.model import Fallback, Head, PerformanceModel

__all__ = [
    "ARTIFACT_FORMAT",
    "TRUSTED_TYPES",
    "ArtifactError",
    "dumps",
    "library_versions",
    "loads",
    "sha256",
    "version_mismatch",
]

ARTIFACT_FORMAT = 1

#: Types skops does not trust by default that a gradient-boosting/ridge Pipeline needs: the tree
#: node arrays' container and dtype, and the ColumnTransformer's input validator (a
#: ``functools.partial`` of ``check_array``). Anything else in an artifact is refused.
TRUSTED_TYPES: frozenset[str] = frozenset(
    {
        "functools.partial",
        "numpy.dtype",
        "sklearn.ensemble._hist_gradient_boosting.predictor.TreePredictor",
        "sklearn.utils.validation.check_array",
    }
)

_LIBRARIES = ("scikit-learn", "skops", "numpy")


class ArtifactError(Exception):
    """An artifact that cannot be served; ``reason`` is ``corrupt``, ``library-mismatch``,
    ``untrusted`` or ``format``."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def library_versions() -> dict[str, str]:
    """Installed versions of the libraries an artifact depends on."""
    out: dict[str, str] = {}
    for name in _LIBRARIES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:  # pragma: no cover - all are dependencies
            out[name] = "missing"
    return out


def version_mismatch(recorded: Mapping[str, Any]) -> str | None:
    """``"scikit-learn 1.5.0 (artifact) vs 1.6.1 (installed)"`` for the first difference, or None."""
    installed = library_versions()
    for name in _LIBRARIES:
        if str(recorded.get(name)) != installed[name]:
            return f"{name} {recorded.get(name)} (artifact) vs {installed[name]} (installed)"
    return None


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def dumps(model: PerformanceModel, *, version: str, meta: Mapping[str, Any]) -> bytes:
    """The skops bytes of ``model`` under ``version``; ``meta`` gains the library versions."""
    document = {
        "format": ARTIFACT_FORMAT,
        "version": version,
        "heads": {
            target: {
                "pipeline": head.pipeline,
                "interval": {k: [float(lo), float(hi)] for k, (lo, hi) in head.interval.items()},
                "n_train": int(head.n_train),
                **({"base": head.base.to_dict()} if head.base is not None else {}),
                **({"fallback": head.fallback.to_dict()} if head.fallback is not None else {}),
                **({"shrink": float(head.shrink)} if head.shrink != 1.0 else {}),
            }
            for target, head in model.heads.items()
        },
        "meta": {**meta, "library_versions": library_versions()},
    }
    # The schema is ~1-2 MB of JSON describing the trees: deflate shrinks it ~20x.
    return bytes(sio.dumps(document, compression=zipfile.ZIP_DEFLATED, compresslevel=6))


def loads(
    data: bytes,
    *,
    expected_sha256: str | None = None,
    recorded_versions: Mapping[str, Any] | None = None,
) -> PerformanceModel:
    """Load and compile an artifact, refusing anything unsafe or stale (see the module docstring)."""
    if expected_sha256 is not None and sha256(data) != expected_sha256:
        raise ArtifactError("corrupt", "the artifact's SHA-256 does not match the one recorded at fit time")
    if recorded_versions is not None and (mismatch := version_mismatch(recorded_versions)):
        raise ArtifactError("library-mismatch", mismatch)
    try:
        untrusted = sio.get_untrusted_types(data=data)
    except Exception as exc:  # skops raises zipfile/json/key errors for damaged files
        raise ArtifactError("corrupt", f"not a readable skops file ({type(exc).__name__})") from exc
    refused = sorted(set(untrusted) - TRUSTED_TYPES)
    if refused:
        raise ArtifactError("untrusted", f"types outside the allow-list: {', '.join(refused)}")
    try:
        document = sio.loads(data, trusted=list(untrusted))
    except Exception as exc:
        raise ArtifactError("corrupt", f"skops could not load it ({type(exc).__name__}: {exc})") from exc
    if not isinstance(document, dict) or document.get("format") != ARTIFACT_FORMAT:
        raise ArtifactError("format", f"expected an artifact dict of format {ARTIFACT_FORMAT}")
    meta = document.get("meta") or {}
    if mismatch := version_mismatch(meta.get("library_versions") or {}):
        raise ArtifactError("library-mismatch", mismatch)
    try:
        heads = {
            target: Head(
                target,
                spec["pipeline"],
                {str(k): (float(v[0]), float(v[1])) for k, v in spec["interval"].items()},
                int(spec["n_train"]),
                base=PhysicalBase.from_dict(spec["base"]) if spec.get("base") is not None else None,
                fallback=Fallback.from_dict(spec["fallback"]) if spec.get("fallback") is not None else None,
                shrink=float(spec.get("shrink", 1.0)),
            )
            for target, spec in document["heads"].items()
        }
        model = PerformanceModel(heads, version=str(document["version"]), meta=meta)
        return model.compile()
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ArtifactError("format", f"malformed artifact ({type(exc).__name__}: {exc})") from exc
