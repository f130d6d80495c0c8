"""Prometheus scrapes: the histogram quantile, scrape deltas and resets, model handling, renames.

The golden files under tests/fixtures/ingest/prometheus/ pin the parser's whole output; these tests
cover the properties and error paths that data files express badly."""

from __future__ import annotations

import itertools
import math
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.errors import IngestError, MalformedInput
from advisor.ingest.base import Input
from advisor.ingest.prometheus import (
    Histogram,
    histogram_quantile,
    parse_scrape,
    parse_scrapes,
    scrape_delta,
    scrape_totals,
    split_scrapes,
    telemetry_to_run,
)
from advisor.ingest.registry import detect, parse

MODEL = "m/one"
ITL_BOUNDS = (0.01, 0.025, 0.05, 0.1)


def vllm_text(
    *,
    prompt: float = 1000.0,
    generation: float = 200.0,
    ok: float = 10.0,
    abort: float = 0.0,
    hits: float = 250.0,
    queries: float = 1000.0,
    preemptions: float = 0.0,
    waiting: float = 0.0,
    running: float = 0.0,
    kv: float = 0.1,
    itl: tuple[float, ...] = (0.0, 150.0, 180.0, 190.0, 190.0),
    itl_sum: float = 4.2,
    model: str = MODEL,
    created: float | None = None,
    old_names: bool = False,
) -> str:
    """A small vLLM exposition; ``itl`` are the cumulative counts of the ITL buckets and +Inf."""
    lb = f'engine="0",model_name="{model}"'
    kv_name = "vllm:gpu_cache_usage_perc" if old_names else "vllm:kv_cache_usage_perc"
    itl_name = "vllm:time_per_output_token_seconds" if old_names else "vllm:inter_token_latency_seconds"
    lines = [
        "# TYPE vllm:num_requests_waiting gauge",
        f"vllm:num_requests_waiting{{{lb}}} {waiting}",
        "# TYPE vllm:num_requests_running gauge",
        f"vllm:num_requests_running{{{lb}}} {running}",
        f"# TYPE {kv_name} gauge",
        f"{kv_name}{{{lb}}} {kv}",
        "# TYPE vllm:prompt_tokens_total counter",
        f"vllm:prompt_tokens_total{{{lb}}} {prompt}",
        "# TYPE vllm:generation_tokens_total counter",
        f"vllm:generation_tokens_total{{{lb}}} {generation}",
        "# TYPE vllm:prefix_cache_hits_total counter",
        f"vllm:prefix_cache_hits_total{{{lb}}} {hits}",
        "# TYPE vllm:prefix_cache_queries_total counter",
        f"vllm:prefix_cache_queries_total{{{lb}}} {queries}",
        "# TYPE vllm:num_preemptions_total counter",
        f"vllm:num_preemptions_total{{{lb}}} {preemptions}",
        "# TYPE vllm:request_success_total counter",
        f'vllm:request_success_total{{{lb},finished_reason="stop"}} {ok}',
        f'vllm:request_success_total{{{lb},finished_reason="abort"}} {abort}',
        f"# TYPE {itl_name} histogram",
    ]
    if created is not None:
        lines.insert(
            lines.index("# TYPE vllm:generation_tokens_total counter"),
            f"vllm:prompt_tokens_created{{{lb}}} {created}",
        )
    for bound, count in zip((*ITL_BOUNDS, "+Inf"), itl, strict=True):
        lines.append(f'{itl_name}_bucket{{{lb},le="{bound}"}} {count}')
    lines += [f"{itl_name}_count{{{lb}}} {itl[-1]}", f"{itl_name}_sum{{{lb}}} {itl_sum}"]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------------
# histogram_quantile


@pytest.mark.parametrize(
    ("q", "bounds", "counts", "value", "first", "reliable"),
    [
        # Prometheus' own doc example shape: 10 in (0, 0.1], 10 in (0.1, 0.2].
        (0.5, (0.1, 0.2, math.inf), (10, 20, 20), 0.1, True, False),
        (0.75, (0.1, 0.2, math.inf), (10, 20, 20), 0.15, False, True),
        (1.0, (0.1, 0.2, math.inf), (10, 20, 20), 0.2, False, True),
        # Rank in the +Inf bucket: the largest finite edge, flagged unreliable.
        (0.99, (0.1, 0.2, math.inf), (10, 20, 30), 0.2, False, False),
        # Empty leading buckets are skipped even for q = 0.
        (0.0, (0.1, 0.2, 0.4, math.inf), (0, 0, 8, 8), 0.2, False, True),
        # Non-monotonic counts (a non-atomic scrape) are made monotonic first, as Prometheus does.
        # (10, 8, 20) reads as (10, 10, 20): the median is the top of the first bucket.
        (0.5, (0.1, 0.2, math.inf), (10, 8, 20), 0.1, True, False),
    ],
)
def test_histogram_quantile_known_values(
    q: float,
    bounds: tuple[float, ...],
    counts: tuple[float, ...],
    value: float,
    *,
    first: bool,
    reliable: bool,
) -> None:
    est = histogram_quantile(q, bounds, counts)
    assert est is not None
    assert est.value == pytest.approx(value)
    assert est.first_bucket is first
    assert est.reliable is reliable


def test_histogram_quantile_empty_and_invalid() -> None:
    assert histogram_quantile(0.5, (0.1, math.inf), (0, 0)) is None
    for q in (-0.1, 1.1, math.nan):
        with pytest.raises(ValueError, match="quantile"):
            histogram_quantile(q, (0.1, math.inf), (1, 1))
    with pytest.raises(ValueError, match="ascending"):
        histogram_quantile(0.5, (0.2, 0.1, math.inf), (1, 2, 2))
    with pytest.raises(ValueError, match="same length"):
        histogram_quantile(0.5, (0.1, math.inf), (1,))


@st.composite
def histograms(draw: st.DrawFn) -> tuple[tuple[float, ...], tuple[float, ...]]:
    edges = draw(st.lists(st.floats(0.001, 1000.0), min_size=1, max_size=12, unique=True))
    bounds = (*sorted(edges), math.inf)
    per_bucket = draw(st.lists(st.integers(0, 50), min_size=len(bounds), max_size=len(bounds)))
    counts: list[float] = []
    running = 0.0
    for n in per_bucket:
        running += n
        counts.append(running)
    return bounds, tuple(counts)


@settings(max_examples=150, deadline=None)
@given(hist=histograms(), qs=st.lists(st.floats(0.0, 1.0), min_size=2, max_size=6))
def test_histogram_quantile_is_monotone_in_q(
    hist: tuple[tuple[float, ...], tuple[float, ...]], qs: list[float]
) -> None:
    bounds, counts = hist
    estimates = [histogram_quantile(q, bounds, counts) for q in sorted(qs)]
    if counts[-1] == 0:
        assert all(e is None for e in estimates)
        return
    values = [e.value for e in estimates if e is not None]
    assert len(values) == len(qs)
    assert all(a <= b + 1e-9 for a, b in itertools.pairwise(values))


@settings(max_examples=150, deadline=None)
@given(hist=histograms(), q=st.floats(0.0, 1.0))
def test_histogram_quantile_stays_inside_the_bucket_holding_the_rank(
    hist: tuple[tuple[float, ...], tuple[float, ...]], q: float
) -> None:
    bounds, counts = hist
    est = histogram_quantile(q, bounds, counts)
    if counts[-1] == 0:
        assert est is None
        return
    assert est is not None
    assert est.lower <= est.value <= est.upper
    # The interval is one bucket: its edges are consecutive bounds (0 below the first).
    edges = (0.0, *bounds)
    i = edges.index(est.upper)
    assert edges[i - 1] == est.lower
    # ... and that bucket holds the rank: fewer observations below it, enough up to its top.
    rank = q * counts[-1]
    below = counts[i - 2] if i >= 2 else 0.0
    assert below <= rank <= counts[i - 1] + 1e-9
    assert counts[i - 1] > below


# --------------------------------------------------------------------------------------------------
# deltas


@st.composite
def before_and_increment(
    draw: st.DrawFn,
) -> tuple[dict[str, float], dict[str, float], tuple[float, ...], tuple[float, ...]]:
    keys = ("prompt", "generation", "ok", "hits", "preemptions")
    before = {k: float(draw(st.integers(0, 10**9))) for k in keys}
    inc = {k: float(draw(st.integers(0, 10**6))) for k in keys}
    itl_before = tuple(float(c) for c in _cumulative(draw(st.lists(st.integers(0, 1000), min_size=5, max_size=5))))
    itl_inc = tuple(float(c) for c in _cumulative(draw(st.lists(st.integers(0, 1000), min_size=5, max_size=5))))
    return before, inc, itl_before, itl_inc


def _cumulative(values: list[int]) -> list[int]:
    out, total = [], 0
    for v in values:
        total += v
        out.append(total)
    return out


def _text(values: dict[str, float], queries: float, itl: tuple[float, ...]) -> str:
    return vllm_text(
        prompt=values["prompt"],
        generation=values["generation"],
        ok=values["ok"],
        hits=values["hits"],
        preemptions=values["preemptions"],
        queries=queries,
        itl=itl,
        itl_sum=itl[-1] * 0.02,
    )


@settings(max_examples=100, deadline=None)
@given(case=before_and_increment())
def test_delta_is_after_minus_before(
    case: tuple[dict[str, float], dict[str, float], tuple[float, ...], tuple[float, ...]],
) -> None:
    before, inc, itl_before, itl_inc = case
    after = {k: before[k] + inc[k] for k in before}
    itl_after = tuple(a + b for a, b in zip(itl_before, itl_inc, strict=True))
    queries_b, queries_inc = before["hits"] * 2 + 1, inc["hits"] * 2
    first = parse_scrape(_text(before, queries_b, itl_before))
    last = parse_scrape(_text(after, queries_b + queries_inc, itl_after))
    t = scrape_delta(first, last)
    assert not t.cumulative
    assert t.counters["prompt_tokens"] == inc["prompt"]
    assert t.counters["generation_tokens"] == inc["generation"]
    assert t.counters["requests_completed"] == inc["ok"]
    assert t.counters["requests_aborted"] == 0
    assert t.counters["preemptions"] == inc["preemptions"]
    assert t.counters["prefix_cache_hits"] == inc["hits"]
    assert t.histograms["itl"].counts == itl_inc
    assert t.histograms["itl"].sum == pytest.approx(itl_inc[-1] * 0.02, abs=1e-6)
    run = telemetry_to_run(t)
    expected_rate = inc["hits"] / queries_inc if queries_inc else None
    assert run.metrics.prefix_cache_hit_rate == (pytest.approx(expected_rate) if expected_rate is not None else None)
    assert run.metrics.preemptions == inc["preemptions"]


@pytest.mark.parametrize(
    ("before", "after", "field"),
    [
        ({"prompt": 5000.0}, {"prompt": 4000.0}, "vllm:prompt_tokens_total"),
        ({"ok": 30.0}, {"ok": 2.0}, "vllm:request_success_total"),
        (
            {"itl": (0.0, 150.0, 180.0, 190.0, 190.0)},
            {"itl": (0.0, 10.0, 20.0, 30.0, 30.0)},
            "vllm:inter_token_latency_seconds",
        ),
    ],
)
def test_a_counter_that_went_down_is_a_reset(before: dict[str, object], after: dict[str, object], field: str) -> None:
    first = parse_scrape(vllm_text(**before))  # type: ignore[arg-type]
    last = parse_scrape(vllm_text(**after))  # type: ignore[arg-type]
    with pytest.raises(IngestError, match="restarted") as info:
        scrape_delta(first, last)
    assert info.value.field == field


def test_a_changed_created_timestamp_is_a_reset_even_when_counters_grew() -> None:
    first = parse_scrape(vllm_text(prompt=10.0, created=1000.0))
    last = parse_scrape(vllm_text(prompt=5000.0, created=2000.0))
    with pytest.raises(IngestError, match="restarted"):
        scrape_delta(first, last)


def test_gauges_come_from_the_scrapes_during_the_run() -> None:
    first = parse_scrape(vllm_text(waiting=0, kv=0.0))
    during = [parse_scrape(vllm_text(waiting=w, kv=k, running=r)) for w, k, r in ((4, 0.5, 32), (10, 0.9, 64))]
    last = parse_scrape(vllm_text(waiting=0, kv=0.05))
    t = scrape_delta(first, last, during=during)
    assert (t.gauges["waiting"].mean, t.gauges["waiting"].max, t.gauges["waiting"].samples) == (7, 10, 2)
    assert t.gauges["kv_usage"].max == pytest.approx(0.9)
    run = telemetry_to_run(t)
    assert run.metrics.queue_waiting_max == 10
    assert run.metrics.running_mean == 48
    # Without scrapes in between, the after-scrape's instant is all there is, and a note says so.
    alone = scrape_delta(first, last)
    assert alone.gauges["waiting"].max == 0
    assert any("one instant" in n for n in alone.notes)


def test_throughput_needs_the_scrape_times() -> None:
    first = parse_scrape(vllm_text(prompt=0, generation=0, ok=0), taken_at=datetime(2026, 1, 1, tzinfo=UTC))
    last = parse_scrape(vllm_text(prompt=6000, generation=1200, ok=30), taken_at=datetime(2026, 1, 1, 0, 1, tzinfo=UTC))
    run = telemetry_to_run(scrape_delta(first, last))
    assert run.metrics.duration_s == 60
    assert run.metrics.input_throughput_tok_s == pytest.approx(100)
    assert run.metrics.output_throughput_tok_s == pytest.approx(20)
    assert run.metrics.request_throughput_rps == pytest.approx(0.5)
    untimed = telemetry_to_run(scrape_delta(parse_scrape(vllm_text(prompt=0)), parse_scrape(vllm_text(prompt=6000))))
    assert untimed.metrics.output_throughput_tok_s is None
    assert untimed.metrics.duration_s is None


def test_the_after_scrape_must_not_be_older() -> None:
    first = parse_scrape(vllm_text(), taken_at=datetime(2026, 1, 1, 0, 1, tzinfo=UTC))
    last = parse_scrape(vllm_text(), taken_at=datetime(2026, 1, 1, tzinfo=UTC))
    with pytest.raises(IngestError, match="older"):
        scrape_delta(first, last)


# --------------------------------------------------------------------------------------------------
# models, engines, names


def test_several_models_need_a_choice() -> None:
    both = parse_scrape(vllm_text(model="a/x") + vllm_text(model="b/y").replace("# TYPE", "# XTYPE"))
    assert both.models == ("a/x", "b/y")
    with pytest.raises(IngestError, match="several models") as info:
        scrape_totals(both)
    assert info.value.extra["models"] == ["a/x", "b/y"]
    only_b = scrape_totals(both, model="b/y")
    assert only_b.model == "b/y"
    assert only_b.counters["prompt_tokens"] == 1000.0  # not the sum over both models
    with pytest.raises(IngestError, match="not in the scrape"):
        scrape_totals(both, model="c/z")


def test_the_before_scrape_must_serve_the_same_model_and_engine() -> None:
    with pytest.raises(IngestError, match="different servers"):
        scrape_delta(parse_scrape(vllm_text(model="a/x")), parse_scrape(vllm_text(model="b/y")))
    llama = parse_scrape("# TYPE llamacpp:prompt_tokens_total counter\nllamacpp:prompt_tokens_total 5\n")
    with pytest.raises(IngestError, match="same server"):
        scrape_delta(llama, parse_scrape(vllm_text()))


def test_older_vllm_names_are_read_as_the_new_ones() -> None:
    old = parse_scrape(vllm_text(old_names=True, kv=0.42))
    assert "vllm:kv_cache_usage_perc" in old.samples
    assert "vllm:inter_token_latency_seconds_bucket" in old.samples
    t = scrape_totals(old)
    assert t.gauges["kv_usage"].mean == pytest.approx(0.42)
    assert "itl" in t.histograms
    assert any("older metric names" in n for n in t.notes)
    # When both names are exposed (0.10/0.11 with hidden metrics shown), the new one wins.
    both = parse_scrape(vllm_text(kv=0.3) + "# TYPE vllm:gpu_cache_usage_perc gauge\nvllm:gpu_cache_usage_perc 0.9\n")
    assert both.renamed == ()
    assert scrape_totals(both).gauges["kv_usage"].mean == pytest.approx(0.3)


def test_no_llm_engine_metrics_is_a_clear_error() -> None:
    node = parse_scrape("# TYPE node_load1 gauge\nnode_load1 0.5\n")
    assert node.engine is None
    with pytest.raises(IngestError, match="no vLLM"):
        scrape_totals(node)


def test_garbage_is_malformed_input() -> None:
    with pytest.raises(MalformedInput):
        parse_scrape("vllm:x{a= 1 2 3 {{{")


def test_a_kv_usage_above_one_is_refused() -> None:
    with pytest.raises(IngestError, match="fraction"):
        telemetry_to_run(scrape_totals(parse_scrape(vllm_text(kv=42.0))))


def test_sub_10ms_itl_percentiles_are_not_reported() -> None:
    # 150 of 190 gaps are ≤ 10 ms: p50 lands in the first bucket (0-10 ms) and is dropped; p90
    # (rank 171) lands in (25, 50] ms and is interpolated there.
    text = vllm_text(itl=(150.0, 170.0, 180.0, 189.0, 190.0), itl_sum=1.9)
    run = telemetry_to_run(scrape_totals(parse_scrape(text)))
    itl = run.metrics.itl_ms
    assert itl.p50 is None
    assert itl.p90 == pytest.approx(27.5)
    assert itl.mean == pytest.approx(10.0)  # the mean is exact (_sum/_count), sub-10 ms or not
    assert any("itl_ms p50 fall in the first histogram bucket (≤ 10 ms)" in n for n in run.source.notes)


def test_single_scrape_says_it_is_cumulative() -> None:
    run = telemetry_to_run(scrape_totals(parse_scrape(vllm_text())))
    assert run.setup.runtime == "vllm"
    assert run.setup.model == MODEL
    assert any("cumulative since the server started" in n for n in run.source.notes)


# --------------------------------------------------------------------------------------------------
# several scrapes in one file


def test_split_on_repeated_directives_and_scraped_at_lines() -> None:
    text = vllm_text(prompt=1) + vllm_text(prompt=2)
    assert [s.samples["vllm:prompt_tokens_total"] for s in parse_scrapes(text)] == [
        {(("engine", "0"), ("model_name", MODEL)): 1.0},
        {(("engine", "0"), ("model_name", MODEL)): 2.0},
    ]
    stamped = f"# scraped_at: 1767225600\n{vllm_text()}# scraped_at: 2026-01-01T00:00:30Z\n{vllm_text()}"
    chunks = split_scrapes(stamped)
    assert [when for _, when in chunks] == [
        datetime(2026, 1, 1, tzinfo=UTC),
        datetime(2026, 1, 1, 0, 0, 30, tzinfo=UTC),
    ]
    with pytest.raises(IngestError, match="scraped_at"):
        split_scrapes("# scraped_at: yesterday\n" + vllm_text())


def test_sample_timestamps_give_the_scrape_time() -> None:
    scrape = parse_scrape("# TYPE llamacpp:requests_deferred gauge\nllamacpp:requests_deferred 2 1767225600000\n")
    assert scrape.taken_at == datetime(2026, 1, 1, tzinfo=UTC)


def test_histogram_minus_refuses_changed_buckets() -> None:
    a = Histogram((0.1, math.inf), (1.0, 2.0), 0.1)
    b = Histogram((0.2, math.inf), (1.0, 2.0), 0.1)
    with pytest.raises(IngestError, match="buckets"):
        a.minus(b, "x")


def test_a_utf16_scrape_is_read() -> None:
    # Windows PowerShell: `Invoke-WebRequest .../metrics | Out-File metrics.prom` writes UTF-16.
    inp = Input(vllm_text(prompt=77.0).encode("utf-16"))
    assert inp.text is not None and inp.text.startswith("# TYPE")
    assert detect(inp).format_id == "prometheus"
    run = parse(inp)[1][0]
    assert run.setup.model == MODEL
