"""The SVG chart functions: valid XML, escaped labels, values inside the axes, the marks drawn."""

from __future__ import annotations

import itertools
import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta

import pytest

from advisor.charts import Bar, Mark, RooflinePoint, Series, SloLine, bars_svg, roofline_svg, trend_svg
from advisor.charts._svg import nice_ticks

NS = "{http://www.w3.org/2000/svg}"
T0 = datetime(2026, 11, 1, tzinfo=UTC)
EVIL = '<script>alert("x")</script>'


def _parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)  # raises on anything that is not well-formed XML


@pytest.mark.parametrize(("low", "high"), [(0, 126), (0, 54), (0, 1), (3, 3), (-5, 17), (0, 0.004), (10, 1e6)])
def test_ticks_cover_the_range(low: float, high: float) -> None:
    ticks = nice_ticks(low, high)
    assert ticks[0] <= low and ticks[-1] >= high
    assert 2 <= len(ticks) <= 12
    steps = {round(b - a, 9) for a, b in itertools.pairwise(ticks)}
    assert len(steps) == 1


def test_trend_draws_points_slo_lines_and_marks() -> None:
    points = [(T0 + timedelta(days=i), v) for i, v in enumerate([120.0, 130.0, 410.0])]
    svg = trend_svg(
        [Series("TTFT p99", points)],
        slo_lines=[SloLine("ttft_p99_ms", 800)],
        marks=[Mark(points[2][0], "regression: TTFT p99 +215%")],
        title="TTFT p99",
        unit="ms",
    )
    root = _parse(svg)
    assert root.get("data-chart") == "trend"
    assert len(root.findall(f".//{NS}circle")) == 3
    slo = root.find(f".//{NS}g[@data-slo='ttft_p99_ms']/{NS}line")
    assert slo is not None
    # The SLO line (800) is above every point, inside the plot: the axis grew to hold it.
    ys = [float(c.get("cy", "0")) for c in root.findall(f".//{NS}circle")]
    assert 0 < float(slo.get("y1", "0")) < min(ys)
    assert root.find(f".//{NS}g[@data-mark='regression']") is not None


def test_trend_without_points_says_so() -> None:
    root = _parse(trend_svg([Series("x", [])], title="Decode", unit="tok/s"))
    assert "no data" in "".join(root.itertext())


def test_labels_are_escaped_everywhere() -> None:
    trend = trend_svg([Series(EVIL, [(T0, 1.0)])], marks=[Mark(T0, EVIL)], title=EVIL, unit=EVIL)
    bars = bars_svg([Bar(EVIL, 0.5, note=EVIL)], title=EVIL, unit="%", reference=1.0, reference_label=EVIL)
    roof = roofline_svg(
        [RooflinePoint(EVIL, 2.0, 1.6e10, 100.0, measured_tok_s=60.0)],
        bandwidth_gb_s=864,
        peak_tflops=362,
        title=EVIL,
        device=EVIL,
    )
    for svg in (trend, bars, roof):
        assert "<script" not in svg
        assert EVIL in "".join(_parse(svg).itertext())  # shown as text


def test_bars_keep_order_and_draw_the_reference() -> None:
    rows = [Bar("nvidia-h100-sxm", 0.62, low=0.5, high=0.8), Bar("nvidia-a10g", 0.91), Bar("cpu", 0.2)]
    root = _parse(bars_svg(rows, title="Decode efficiency", unit="ratio", reference=1.0, reference_label="ceiling"))
    assert root.get("data-chart") == "bars"
    assert [g.get("data-bar") for g in root.findall(f".//{NS}g[@data-bar]")] == [r.label for r in rows]
    widths = [float(r.get("width", "0")) for r in root.findall(f".//{NS}g[@data-bar]/{NS}rect")]
    assert widths[1] > widths[0] > widths[2]
    assert root.find(f".//{NS}g[@data-reference='ceiling']") is not None
    assert len(root.findall(f".//{NS}line[@class='whisker']")) == 1


def test_roofline_puts_the_ceiling_on_the_roof_and_the_measurement_below() -> None:
    # Llama-3.1-8B bf16 on an L40S, one stream: 16 GB per token at 864 GB/s gives 54 tok/s.
    flops = 2 * 8.03e9
    decode = RooflinePoint(
        "decode", flops / 16.06e9, flops, 53.8, measured_tok_s=40.0, expected_low_tok_s=30.0, expected_high_tok_s=50.0
    )
    prefill = RooflinePoint("prefill", flops * 2000 / 16.06e9, flops, 362e12 / flops, measured_tok_s=9000.0)
    root = _parse(roofline_svg([decode, prefill], bandwidth_gb_s=864, peak_tflops=362, device="NVIDIA L40S"))
    assert root.get("data-chart") == "roofline"
    assert root.find(f".//{NS}g[@data-roof='bandwidth']") is not None
    assert root.find(f".//{NS}g[@data-roof='compute']") is not None
    for phase in ("decode", "prefill"):
        group = root.find(f".//{NS}g[@data-phase='{phase}']")
        assert group is not None
        ceiling = group.find(f"{NS}circle[@class='ceiling']")
        measured = group.find(f"{NS}circle[@class='measured']")
        assert ceiling is not None and measured is not None
        assert float(measured.get("cy", "0")) > float(ceiling.get("cy", "0"))  # below (SVG y grows down)
    # The decode ceiling lies on the bandwidth slope: compare with the roof line's own equation.
    line = root.find(f".//{NS}g[@data-roof='bandwidth']/{NS}line")
    assert line is not None
    x1, y1, x2, y2 = (float(line.get(k, "0")) for k in ("x1", "y1", "x2", "y2"))
    cx = float(root.find(f".//{NS}g[@data-phase='decode']/{NS}circle[@class='ceiling']").get("cx", "0"))  # type: ignore[union-attr]
    cy = float(root.find(f".//{NS}g[@data-phase='decode']/{NS}circle[@class='ceiling']").get("cy", "0"))  # type: ignore[union-attr]
    assert cy == pytest.approx(y1 + (y2 - y1) * (cx - x1) / (x2 - x1), abs=1.5)
    assert re.search(r"864 GB/s", "".join(root.itertext()))
