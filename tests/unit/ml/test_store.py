"""skops artifacts: round trip, and every way loading refuses."""

from __future__ import annotations

import zipfile
from dataclasses import dataclass

import numpy as np
import pytest
import skops.io as sio

from advisor.ml import store
from advisor.ml.dataset import Observation
from advisor.ml.store import ArtifactError
from advisor.ml.train import FitResult, build_training_sets


@pytest.fixture(scope="module")
def artifact(public_fit: FitResult) -> bytes:
    return store.dumps(public_fit.model, version="v-test", meta={"data_hash": public_fit.data_hash})


def test_round_trip_predicts_the_same(
    artifact: bytes, public_fit: FitResult, public_observations: list[Observation]
) -> None:
    loaded = store.loads(artifact, expected_sha256=store.sha256(artifact), recorded_versions=store.library_versions())
    assert loaded.version == "v-test"
    assert loaded.meta["data_hash"] == public_fit.data_hash
    assert loaded.meta["library_versions"] == store.library_versions()
    frame = build_training_sets(public_observations)["decode_tok_s"].frame
    for target, head in public_fit.model.heads.items():
        np.testing.assert_allclose(loaded.heads[target].pipeline.predict(frame), head.pipeline.predict(frame))
        assert loaded.heads[target].interval == head.interval  # floats survive the JSON schema exactly
        assert loaded.heads[target].base == head.base  # the physics-shaped base, as plain numbers
        assert loaded.heads[target].compiled is not None  # compiled at load


def test_artifact_is_compressed_skops_not_pickle(artifact: bytes) -> None:
    archive = zipfile.ZipFile(__import__("io").BytesIO(artifact))
    assert "schema.json" in archive.namelist()
    assert all(info.compress_type == zipfile.ZIP_DEFLATED for info in archive.infolist())
    assert set(sio.get_untrusted_types(data=artifact)) <= store.TRUSTED_TYPES
    assert len(artifact) < 1_000_000


def test_a_changed_byte_is_corrupt(artifact: bytes) -> None:
    damaged = artifact[:-10] + bytes(10)
    with pytest.raises(ArtifactError) as err:
        store.loads(damaged, expected_sha256=store.sha256(artifact))
    assert err.value.reason == "corrupt"


def test_garbage_is_corrupt_even_without_a_hash() -> None:
    with pytest.raises(ArtifactError) as err:
        store.loads(b"definitely not a zip file")
    assert err.value.reason == "corrupt"


def test_library_mismatch_is_refused_before_and_after_loading(artifact: bytes, public_fit: FitResult) -> None:
    recorded = {**store.library_versions(), "scikit-learn": "0.24.2"}
    with pytest.raises(ArtifactError) as err:
        store.loads(artifact, recorded_versions=recorded)
    assert err.value.reason == "library-mismatch"
    assert "scikit-learn 0.24.2 (artifact)" in err.value.detail
    # the versions inside the artifact are checked too (an artifact copied without its row)
    document = sio.loads(artifact, trusted=list(store.TRUSTED_TYPES))
    document["meta"]["library_versions"]["numpy"] = "1.0.0"
    with pytest.raises(ArtifactError) as err:
        store.loads(sio.dumps(document))
    assert err.value.reason == "library-mismatch"


@dataclass
class Gadget:
    """A type no allow-list knows."""

    payload: str = "x"


def test_untrusted_types_are_refused(artifact: bytes) -> None:
    document = sio.loads(artifact, trusted=list(store.TRUSTED_TYPES))
    document["meta"]["extra"] = Gadget()
    with pytest.raises(ArtifactError) as err:
        store.loads(sio.dumps(document))
    assert err.value.reason == "untrusted"
    assert "Gadget" in err.value.detail


def test_a_foreign_document_is_refused() -> None:
    with pytest.raises(ArtifactError) as err:
        store.loads(sio.dumps({"format": 99, "heads": {}}))
    assert err.value.reason == "format"
