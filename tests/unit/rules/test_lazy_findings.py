"""A finding the engine drops below its floor may come back bare (no texts), and the fix texts rules
ask for per finding are remembered: neither changes an answer (issue #19, session 6).

The engine's answer with bare findings equals its answer with every finding built in full (the
floor forced to ``none`` inside the rules), suppressed list included; the remembered fix builders
give what the builders give uncached, a new dict each call, with keys that tell ``4`` from ``4.0``.
"""

from __future__ import annotations

import itertools
import json
import math
import random
from contextvars import ContextVar
from typing import Any

import pytest

from advisor.catalog import Catalog
from advisor.ml.prior import prior_expectations
from advisor.rules import fixes, get_rules, helpers
from advisor.rules.base import Gain
from advisor.rules.context import RunContext, TtftBreakdown, TtftPart, build_context
from advisor.rules.damping import dropping_below, floor, gain_cap, ranked_severity, stop_dropping
from advisor.rules.engine import Advice, advise
from advisor.rules.severity import Severity, damp
from bench.analysis import make_inputs

#: Device generations of capabilities.csv, an unknown one, and none (an inline device).
GENERATIONS = ("turing", "ampere", "ada", "hopper", "blackwell", "cdna3", "rdna3", "apple-m4", "volta", None)


@pytest.fixture(scope="module")
def contexts() -> list[RunContext]:
    catalog = Catalog.default()
    out: list[RunContext] = []
    for shape in ("mixed", "ingest"):
        for resolved, slo, baseline in make_inputs(300, seed=6, catalog=catalog, shape=shape):
            out.append(
                build_context(
                    resolved.run,
                    catalog=catalog,
                    slo=slo,
                    baseline_runs=baseline,
                    expectations_fn=prior_expectations,
                    resolved=resolved.specs,
                    sweep=resolved.sweep,
                )
            )
    return out


def _text(advice: Advice) -> str:
    return json.dumps(
        {**advice.to_dict(), "suppressed": [s.to_dict() for s in advice.findings_suppressed]},
        sort_keys=True,
        default=repr,
    )


#: The floor ``helpers.dropped`` reads, held at ``none`` whatever the engine sets (its own variable).
_NEVER_DROPS: ContextVar[Severity] = ContextVar("never_drops", default=Severity.NONE)


def test_bare_findings_give_the_same_advice_as_full_ones(
    contexts: list[RunContext], monkeypatch: pytest.MonkeyPatch
) -> None:
    bare = 0
    real = helpers.ranked_severity  # what helpers.dropped asks, looked up per call

    def counting(rule: Any, severity: Severity, gain: Gain | None) -> Severity:
        nonlocal bare
        ranked = real(rule, severity, gain)
        bare += ranked < floor()
        return ranked

    monkeypatch.setattr(helpers, "ranked_severity", counting)
    lazy = [_text(advise(ctx)) for ctx in contexts]
    assert bare > len(contexts)  # the runs exercise the bare path (several a run)
    with monkeypatch.context() as m:
        m.setattr(helpers, "FLOOR", _NEVER_DROPS)  # every finding built in full
        full = [_text(advise(ctx)) for ctx in contexts]
    assert lazy == full
    # And at another floor: what min_severity drops, and only that, may come back bare.
    for ctx in contexts[:100]:
        lazy_moderate = _text(advise(ctx, min_severity=Severity.MODERATE))
        with monkeypatch.context() as m:
            m.setattr(helpers, "FLOOR", _NEVER_DROPS)
            assert _text(advise(ctx, min_severity=Severity.MODERATE)) == lazy_moderate


def test_rules_build_every_finding_outside_the_engine(contexts: list[RunContext]) -> None:
    assert floor() is Severity.NONE
    for ctx in contexts[:60]:
        for rule in get_rules():
            finding = rule.evaluate(ctx)
            assert finding is None or finding.title  # never bare: nothing is dropped here
    token = dropping_below(Severity.SEVERE)
    assert floor() is Severity.SEVERE
    stop_dropping(token)
    assert floor() is Severity.NONE


def test_the_floor_is_restored_when_a_rule_raises(contexts: list[RunContext]) -> None:
    class Broken(type(get_rules()[0])):  # type: ignore[misc]
        def evaluate(self, ctx: RunContext) -> None:
            assert floor() is Severity.MODERATE
            raise RuntimeError("kaput")

    rule = Broken(get_rules()[0].config, get_rules()[0].common)
    with pytest.raises(RuntimeError):
        advise(contexts[0], rules=[rule], min_severity=Severity.MODERATE, strict=True)
    assert floor() is Severity.NONE


def test_ranked_severity_is_the_engines_damping() -> None:
    rng = random.Random(6)
    for rule in get_rules():
        for severity, ratio in itertools.product(Severity, (0.5, 0.97, 1.0, 1.02, 1.1, 1.5, 3.0, 10.0, math.nan)):
            gain = None if rng.random() < 0.2 else Gain("decode_tok_s", 30.0, 30.0 * ratio)
            expected = damp(severity, gain_cap(rule.common, gain)) if rule.damp_by_gain else severity
            if rule.asks_for_context:
                expected = damp(expected, Severity.MODERATE)
            assert ranked_severity(rule, severity, gain) is expected


def _uncached(builder: Any, *args: Any) -> dict[str, str]:
    return dict(builder.__wrapped__(*args))


def test_remembered_fix_texts_equal_the_uncached_ones_cold_and_warm() -> None:
    cases: list[tuple[Any, Any, tuple[Any, ...]]] = []
    for generation in GENERATIONS:
        cases.append((fixes.kv_cache_quant, fixes._kv_cache_quant, (generation,)))
        for bits in (8.0, 4.0, 8, 4, 6.5):
            cases.append((fixes.weight_quant, fixes._weight_quant, (bits, generation)))
    for n, build in itertools.product((1, 2, 4, 32, 4.0), ("b4000", "b6000", "0.9.2", None)):
        cases.append((fixes.max_seqs, fixes._max_seqs, (n, build)))
    for cache in (fixes._kv_cache_quant, fixes._weight_quant, fixes._max_seqs):
        cache.cache_clear()
    for public, private, args in cases:
        cold = public(*args)
        warm = public(*args)
        assert cold == warm == _uncached(private, *args), (public.__name__, args)
        assert list(cold) == list(_uncached(private, *args))  # the same key order
        cold["vllm"] = "changed"  # the caller's own dict
        assert public(*args) == warm
    # Keys tell an int from the float of the same value: the texts print them differently.
    assert fixes.max_seqs(4)["vllm"] == "--max-num-seqs 4"
    assert fixes.max_seqs(4.0)["vllm"] == "--max-num-seqs 4.0"  # type: ignore[arg-type]
    assert fixes.max_seqs(4)["vllm"] == "--max-num-seqs 4"


def _old_dominant(b: TtftBreakdown) -> str:
    net_prefill = (b.prefill.ms or 0.0) + (b.cache.ms or 0.0)
    parts = {"queueing": b.queueing.ms or 0.0, "prefill": net_prefill, "remainder": b.remainder.ms or 0.0}
    return max(parts, key=lambda k: (parts[k], k == "prefill"))


def test_the_dominant_ttft_part_is_max_by_ms_with_ties_to_prefill() -> None:
    values = (None, 0.0, -5.0, 10.0, 25.0, 40.0, math.nan, math.inf)
    for q, p, c, r in itertools.product(values, values, (None, 0.0, -15.0, math.nan), values):
        b = TtftBreakdown(
            100.0,
            "test",
            TtftPart(q, "run", 1.0),
            TtftPart(p, "physics", 0.5),
            TtftPart(c, "physics", 0.5),
            TtftPart(r, "run", 0.5),
        )
        assert b.dominant == _old_dominant(b), (q, p, c, r)


def _old_same_traffic(a: tuple[float | None, ...], b: tuple[float | None, ...], tolerance: float) -> bool:
    for x, y in zip(a, b, strict=True):
        if x is None or y is None:
            if x is not None or y is not None:
                return False
        elif x != y and not abs(x - y) <= tolerance * max(abs(x), abs(y)):
            return False
    return True


def test_same_traffic_unrolled_is_the_loop_it_replaces() -> None:
    from advisor.rules.context import _same_traffic

    rng = random.Random(19)
    values = (None, 0.0, 1.0, 4.0, 5.0, 256.0, 300.0, 1024.0, -4.0, math.nan, math.inf, -math.inf)
    for _ in range(20_000):
        a = tuple(rng.choice(values) for _ in range(4))
        b = tuple(
            rng.choice((*values, *(v * rng.uniform(0.6, 1.4) for v in values if v is not None))) for _ in range(4)
        )
        for tolerance in (0.0, 0.25, 1.0):
            assert _same_traffic(a, b, tolerance) is _old_same_traffic(a, b, tolerance), (a, b, tolerance)  # type: ignore[arg-type]


def test_remembered_fmt_equals_the_formatting_cold_and_warm() -> None:
    rng = random.Random(19)
    values: list[Any] = [0, 0.0, -0.0, 1, 1.0, True, False, -1, 999.5, 1000, 1e20, 10**20, 0.004, -0.005, 12.35]
    values += [rng.uniform(-5, 5) * 10 ** rng.randint(-3, 6) for _ in range(3000)]
    units = ("", "tok/s", "ms", " ms ")
    helpers._fmt_remembered.cache_clear()
    for value in values:
        for unit in units:
            cold = helpers.fmt(value, unit)
            assert helpers.fmt(value, unit) == cold == helpers._fmt(value, unit), (value, unit)
    # The zeros print differently though they are one key; an int and a float of one value too.
    assert (helpers.fmt(0.0), helpers.fmt(-0.0)) == ("0", "-0")
    assert helpers.fmt(-0.0) == "-0" and helpers.fmt(0.0) == "0"
    assert helpers.fmt(math.nan) == helpers.fmt(None) == helpers.fmt(math.inf) == "unknown"
