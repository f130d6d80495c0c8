"""``make bench`` rewrites only the summary rows of the benchmarks it ran."""

from __future__ import annotations

from bench.run_all import _ingest_rows, _strip_header, rewrite_summary

DOC = """# Benchmarks

intro

## Summary

| bar | target | measured | status |
|---|---|---|---|
| advise, in-process, with expectations | ≤ 2 ms per run | 0.12 ms | met |
| bulk ingest on SQLite | ≥ 5,000 runs/s | 6,000 runs/s | met |
| fit on 100k runs | ≤ 20 s | 8.1 s | met |

## Ingest

history stays
"""


def test_only_the_rows_run_are_replaced_and_renamed_bars_give_way() -> None:
    rows = [
        ("advise, in-process, with expectations", "≤ 2 ms per run", "0.20 ms", "met"),
        ("bulk ingest (20,000 runs as JSON arrays of 5,000)", "≥ 5,000 runs/s", "sqlite: 4,000 runs/s", "**not met**"),
        ("new bar", "—", "1", "—"),
    ]
    out = rewrite_summary(_strip_header(DOC), rows, "Last `make bench`: now.")
    assert out == DOC.replace(
        "## Summary\n\n| bar",
        "## Summary\n\nLast `make bench`: now.\n\n| bar",
    ).replace(
        "| advise, in-process, with expectations | ≤ 2 ms per run | 0.12 ms | met |",
        "| advise, in-process, with expectations | ≤ 2 ms per run | 0.20 ms | met |",
    ).replace(
        "| bulk ingest on SQLite | ≥ 5,000 runs/s | 6,000 runs/s | met |",
        "| bulk ingest (20,000 runs as JSON arrays of 5,000) | ≥ 5,000 runs/s | sqlite: 4,000 runs/s | **not met** |",
    ).replace(
        "| fit on 100k runs | ≤ 20 s | 8.1 s | met |",
        "| fit on 100k runs | ≤ 20 s | 8.1 s | met |\n| new bar | — | 1 | — |",
    )
    # A second run replaces its own header instead of stacking another one.
    again = rewrite_summary(_strip_header(out), rows, "Last `make bench`: later.")
    assert again == out.replace("Last `make bench`: now.", "Last `make bench`: later.")


def test_ingest_rows_state_each_backend_and_the_verdict() -> None:
    data = {
        "sqlite": {
            "ratio": 0.1,
            "runs_rps": 500.0,
            "echo_rps": 5000.0,
            "runs_p99_ms": 90.0,
            "server_rss_mb": 150.0,
            "bulk": {"runs_per_s": 5200.0},
        },
        "postgres": {
            "ratio": 0.3,
            "runs_rps": 600.0,
            "echo_rps": 2000.0,
            "runs_p99_ms": 80.0,
            "bulk": {"runs_per_s": 4000.0},
        },
    }
    ratio, bulk, rss = _ingest_rows("", data)
    assert ratio[2] == "sqlite: 0.100 (500 vs 5000 req/s, p99 90 ms); postgres: 0.300 (600 vs 2000 req/s, p99 80 ms)"
    assert ratio[3] == "**not met**"
    assert bulk[2] == "sqlite: 5,200 runs/s; postgres: 4,000 runs/s"
    assert bulk[3] == "**not met**"
    assert rss[2] == "sqlite: 150 MB"
