"""The noise test: a stable noisy deployment never flags; an injected change beyond the spread does."""

from __future__ import annotations

import numpy as np
import pytest

from advisor.reports.noise import NoiseTest, compare


def _noisy(rng: np.random.Generator, center: float, cv: float, n: int, *, tail: bool = False) -> list[float]:
    noise = rng.standard_t(3, n) if tail else rng.standard_normal(n)
    return list(center * (1 + cv * noise))


@pytest.mark.parametrize("cv", [0.02, 0.1, 0.25])
@pytest.mark.parametrize("n", [12, 30, 60])
@pytest.mark.parametrize("tail", [False, True])
def test_a_stable_noisy_deployment_never_flags(cv: float, n: int, tail: bool) -> None:
    rng = np.random.default_rng(int(cv * 1000) + n + tail)
    for _ in range(300):
        before, after = _noisy(rng, 200, cv, n, tail=tail), _noisy(rng, 200, cv, n, tail=tail)
        assert compare(before, after, higher_is_better=False).verdict == "same"
        assert compare(before, after, higher_is_better=True).verdict == "same"


@pytest.mark.parametrize("n", [12, 30])
def test_an_injected_regression_beyond_the_spread_always_flags(n: int) -> None:
    rng = np.random.default_rng(n)
    for _ in range(200):
        latency_before, latency_after = _noisy(rng, 200, 0.05, n), _noisy(rng, 260, 0.05, n)  # +30%
        result = compare(latency_before, latency_after, higher_is_better=False)
        assert result.verdict == "worse"
        assert result.change == pytest.approx(0.3, abs=0.12)
        assert result.p_value is not None and result.p_value < 0.001
        # The same numbers read as a throughput went up: that is better, not worse.
        assert compare(latency_before, latency_after, higher_is_better=True).verdict == "better"
        tps_before, tps_after = _noisy(rng, 40, 0.05, n), _noisy(rng, 30, 0.05, n)  # -25%
        assert compare(tps_before, tps_after, higher_is_better=True).verdict == "worse"


def test_a_shift_inside_the_run_to_run_spread_is_not_a_regression() -> None:
    # 60 runs a side make a +20% shift highly significant, but with a 30% run-to-run spread it is
    # noise the fleet lives with, not a regression.
    rng = np.random.default_rng(7)
    result = compare(_noisy(rng, 100, 0.3, 60), _noisy(rng, 120, 0.3, 60), higher_is_better=False)
    assert result.verdict == "same"
    assert result.spread is not None and result.spread > 0.2


def test_a_tiny_but_consistent_shift_stays_below_the_minimum_change() -> None:
    before = [100.0 + 0.01 * i for i in range(40)]
    after = [103.0 + 0.01 * i for i in range(40)]  # +3%, perfectly separated, p ≈ 0
    assert compare(before, after, higher_is_better=False).verdict == "same"
    assert compare(before, after, higher_is_better=False, test=NoiseTest(min_change=0.02)).verdict == "worse"


def test_too_few_runs_is_said_not_guessed() -> None:
    result = compare([100.0] * 3, [300.0] * 20, higher_is_better=False)
    assert result.verdict == "too-few-runs"
    assert (result.n_before, result.n_after) == (3, 20)
    assert result.change == pytest.approx(2.0)
