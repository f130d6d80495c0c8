"""The external check's mapping (bench/external_setups.csv) names real fixtures and catalog entries.

No fit here: only that every mapped file and its golden exist, every setup resolves in the catalog,
every selected run exists, and each row cites its sources.
"""

from __future__ import annotations

import json

from advisor.canonical import RUNTIMES
from advisor.catalog import Catalog
from bench.external_check import FIXTURES, load_mapping, load_skipped


def test_every_mapped_setup_resolves_and_its_file_exists() -> None:
    catalog = Catalog.default()
    rows = load_mapping()
    assert rows
    for m in rows:
        assert (FIXTURES / m.file).is_file(), m.file
        golden = FIXTURES / f"{m.file}.expected.json"
        runs = json.loads(golden.read_text(encoding="utf-8"))["runs"]
        picked = range(len(runs)) if m.runs is None else m.runs
        assert all(0 <= i < len(runs) for i in picked), m.label
        assert catalog.resolve_hardware(m.hardware).id == m.hardware
        assert catalog.resolve_model(m.model)[0].id == m.model
        assert catalog.resolve_quantization(m.quantization).id == m.quantization
        assert m.runtime in RUNTIMES
        assert 1 <= m.tensor_parallel <= m.gpu_count
        assert m.measure in {"stream", "aggregate"}
        assert m.source.strip(), m.label
        if m.concurrency and m.concurrency[0].isdigit():
            values = m.concurrency.split(";")
            assert len(values) in {1, len(list(picked))}, m.label


def test_skipped_files_exist_and_are_not_also_mapped() -> None:
    mapped = {m.file for m in load_mapping()}
    skipped = load_skipped()
    for file, reason in skipped:
        assert (FIXTURES / file).is_file(), file
        assert reason.strip(), file
        assert file not in mapped, file
    assert len({f for f, _ in skipped}) == len(skipped)
