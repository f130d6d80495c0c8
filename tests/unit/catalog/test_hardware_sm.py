"""The SM counts and boost clocks of NVIDIA GPUs (advisor/catalog/data/hardware_sm.csv)."""

from __future__ import annotations

import csv
from importlib import resources

from advisor.catalog import Catalog

CATALOG = Catalog.default()


def _rows() -> list[dict[str, str]]:
    text = resources.files("advisor.catalog").joinpath("data", "hardware_sm.csv").read_text(encoding="utf-8")
    return list(csv.DictReader(text.splitlines()))


def test_every_row_names_a_catalogued_nvidia_gpu_with_a_source() -> None:
    rows = _rows()
    assert len({r["id"] for r in rows}) == len(rows)
    for row in rows:
        hw = CATALOG.resolve_hardware(row["id"])
        assert hw.vendor == "NVIDIA" and hw.kind == "gpu"
        assert hw.sm_count == int(row["sm_count"]) and hw.boost_clock_mhz == float(row["boost_clock_mhz"])
        assert all(s.strip().startswith("https://") for s in row["source"].split(" ; "))
        assert CATALOG.extra("hardware", row["id"])["sm_source"] == row["source"]
