"""``make bench`` rewrites only the summary rows of the benchmarks it ran."""

from __future__ import annotations

from bench.run_all import NOT_REMEASURED, _fit_rows, _ingest_rows, _load_rows, _strip_header, rewrite_summary, stamp

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


def test_rows_no_make_bench_measured_are_marked_and_stamped_rows_are_not() -> None:
    doc = _strip_header(DOC).replace(
        "| fit on 100k runs | ≤ 20 s | 8.1 s | met |",
        "| fit on 100k runs | ≤ 20 s | "
        + stamp("8.1 s", "2026-12-01 10:00 UTC", (1.0, 2.5))
        + " | met |\n| a hand-measured bar | — | 7 | met |",
    )
    rows = [("advise, in-process, with expectations", "≤ 2 ms per run", stamp("0.20 ms", "now", (3.0, 2.0)), "met")]
    out = rewrite_summary(doc, rows, "h", mark_unmeasured=True)
    assert (
        "| advise, in-process, with expectations | ≤ 2 ms per run | 0.20 ms [make bench now, load 2.0–3.0] | met |"
        in out
    )
    assert "| a hand-measured bar | — | 7 " + NOT_REMEASURED + " | met |" in out
    assert "8.1 s [make bench 2026-12-01 10:00 UTC, load 1.0–2.5] | met |" in out  # an older run's row keeps its date
    assert rewrite_summary(_strip_header(out), rows, "h", mark_unmeasured=True) == out  # marked once


def test_load_rows_state_every_backend_and_judge_all_goals() -> None:
    out = (
        "sqlite   workers=2   250.3 req/s  p50   10.2 ms  p99   90.0 ms  non-2xx 0  acked 3000  stored 3001  "
        "meets the goal (>= 200 req/s, p99 <= 100 ms, 0 errors, stored >= acked)\n"
        "postgres workers=2   180.0 req/s  p50   20.0 ms  p99  150.5 ms  non-2xx 0  acked 2000  stored 2000  "
        "MISSES the goal (>= 200 req/s, p99 <= 100 ms, 0 errors, stored >= acked)\n"
    )
    ((_, target, measured, status),) = _load_rows(out, {})
    assert target == "≥ 200 req/s, p99 ≤ 100 ms"
    assert measured == (
        "sqlite (2 workers): 250 req/s, p50 10.2 ms, p99 90 ms, 0 non-2xx, 3000 acknowledged / 3001 stored; "
        "postgres (2 workers): 180 req/s, p50 20.0 ms, p99 150 ms, 0 non-2xx, 2000 acknowledged / 2000 stored"
    )
    assert status == "**not met**"
    assert _load_rows(out.splitlines()[0], {})[0][3] == "met"
    assert _load_rows("wrk not found", {}) == []


def test_the_100k_fit_gives_its_time_memory_and_predict_rows() -> None:
    out = (
        "fit: 6.10 s wall (5.91 s CPU) for 100000 runs in 12000 cells (...); peak RSS 305 MB (before the fit: 200 MB)\n"
        "predict 1,000 setups, 5 heads (best of 5): 22.4 ms as arrays (predict_arrays; median 23.0); ...\n"
    )
    fit, memory, predict = _fit_rows("100k")(out, {})
    assert fit[1:] == ("≤ 20 s (issue #17: ≤ 10 s)", "6.1 s wall (5.9 s CPU)", "met")
    assert memory[1:] == ("≤ 500 MB", "305 MB peak RSS (the 100k fit)", "met")
    assert predict[2:] == ("22.4 ms (arrays)", "met")
    assert [row[0] for row in _fit_rows("10k")(out, {})] == ["fit on 10k runs"]
