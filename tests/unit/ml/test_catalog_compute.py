"""The compute overlay (advisor/catalog/data/hardware_compute.csv) as the catalog loads it."""

from __future__ import annotations

import csv
from importlib import resources

import pytest

from advisor.catalog import Catalog
from advisor.physics import analyse

CATALOG = Catalog.default()


def _overlay() -> list[dict[str, str]]:
    text = resources.files("advisor.catalog").joinpath("data", "hardware_compute.csv").read_text(encoding="utf-8")
    return list(csv.DictReader(text.splitlines()))


def test_every_overlay_row_names_a_catalog_device_with_a_source() -> None:
    rows = _overlay()
    assert len({r["id"] for r in rows}) == len(rows)
    for row in rows:
        hw = CATALOG.resolve_hardware(row["id"])
        assert row["estimated"] in ("yes", "no")
        assert row["source"].startswith("https://") and row["how"]
        assert hw.compute_tflops("fp16") == (float(row["fp16_dense_tflops"] or row["bf16_dense_tflops"]), False)
        compute = CATALOG.extra("hardware", row["id"])["compute"]
        assert compute == {"estimated": row["estimated"] == "yes", "how": row["how"], "source": row["source"]}


def test_no_catalog_device_is_left_without_a_16_bit_figure() -> None:
    missing = [hw.id for hw in CATALOG.list_hardware() if hw.dense_tflops("fp16") is None]
    assert missing == []


@pytest.mark.parametrize(
    ("hw_id", "fp16", "bf16"),
    [
        ("apple-m2-ultra", 27.2, None),  # Apple's figure; Apple GPUs have no BF16 units
        ("nvidia-rtx-6000-ada", 364.2, 364.2),  # only FP8 (728.5) was in hardware.csv
        ("amd-ryzen-ai-max-plus-395", 59.4, 59.4),
        ("amd-radeon-rx-7900-xtx", 122.8, 122.8),  # fp16 from hardware.csv kept, bf16 filled
        ("cpu-intel-xeon-spr-8ch-ddr5-4800", 7.2, None),
    ],
)
def test_overlay_fills_only_empty_fields(hw_id: str, fp16: float, bf16: float | None) -> None:
    hw = CATALOG.resolve_hardware(hw_id)
    assert (hw.fp16_tflops, hw.bf16_tflops) == (fp16, bf16)


def test_rtx_6000_ada_prefill_ceiling_uses_the_published_16_bit_rate() -> None:
    hw = CATALOG.resolve_hardware("nvidia-rtx-6000-ada")
    model, _ = CATALOG.resolve_model("llama-3.1-8b")
    roof = analyse(hw, model, CATALOG.resolve_quantization("bf16"), prompt_tokens=4096)
    assert roof.prefill_tflops == 364.2 and roof.prefill_tflops_estimated is False
