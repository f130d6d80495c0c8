"""The catalog's ``memory`` column (capabilities.csv): which devices read one memory pool shared
with the CPU, so that "weights offloaded to system memory" cannot be inferred there (DEC006)."""

from __future__ import annotations

import csv
from importlib import resources

import pytest

from advisor.catalog.capabilities import capabilities, capability


@pytest.mark.parametrize(
    "hardware",
    [
        "amd-ryzen-ai-max-plus-395",  # Strix Halo: the Radeon 8060S reads the 256 GB/s LPDDR5X
        "nvidia-dgx-spark-gb10",  # 128 GB unified LPDDR5x
        "nvidia-jetson-agx-orin-64gb",
        "apple-m2-max",
        "apple-m4-max",
    ],
)
def test_unified_memory_devices(hardware: str) -> None:
    cap = capability(hardware)
    assert cap is not None and cap.memory == "unified" and cap.unified_memory


@pytest.mark.parametrize(
    ("hardware", "memory"),
    [
        ("nvidia-rtx-4090", "dedicated"),
        ("amd-radeon-rx-7900-xtx", "dedicated"),
        ("nvidia-gh200-96gb", "dedicated"),  # its own HBM3; the Grace LPDDR5X behind NVLink-C2C is other memory
        ("amd-mi300x", "dedicated"),
        ("cpu-desktop-2ch-ddr5-5600", "host"),
    ],
)
def test_devices_with_their_own_memory(hardware: str, memory: str) -> None:
    cap = capability(hardware)
    assert cap is not None and cap.memory == memory and not cap.unified_memory


def test_every_row_says_which_memory_and_agrees_with_the_reference_text() -> None:
    """Every row has a value, and every device the hardware tables describe as "unified" (name or
    interconnect text) is unified."""
    assert {c.memory for c in capabilities().values()} <= {"unified", "dedicated", "host"}
    data = resources.files("advisor.catalog").joinpath("data")
    described = []
    for name in ("hardware.csv", "hardware_added.csv"):
        for row in csv.DictReader(data.joinpath(name).read_text(encoding="utf-8").splitlines()):
            if row["kind"] != "cpu" and "unified" in f"{row['name']} {row['interconnect']}".lower():
                described.append(row["id"])
    assert len(described) >= 18  # Apple M1-M4, Strix Halo, DGX Spark
    for hardware in described:
        cap = capability(hardware)
        assert cap is not None and cap.unified_memory, hardware
