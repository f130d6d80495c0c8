"""The threshold declarations and SLO objectives several rules share, each defined once.

A rule lists what it reads in ``thresholds``; when several rules read the same quantity with the
same meaning ("a TTFT p50 that makes it matter"), they reference the spec here instead of copying
its key, direction, unit and doc. The *values* stay per rule in ``rules/thresholds.toml``, where most
of these keys point at one ``[limits]`` entry (``ttft_ms = "@limits.ttft_ms"``): a rule may still
set its own value, or another limit (PRE002 and PRE003 read ``@limits.prefix_ttft_ms``).

The objectives are the SLO keys (:class:`advisor.canonical.SLO`) a finding's metric is judged by
in :func:`advisor.rules.helpers.matter_cap`.
"""

from __future__ import annotations

from advisor.rules.config import ParamSpec, ThresholdSpec

__all__ = [
    "DECODE_EFFICIENCY",
    "DECODE_OBJECTIVES",
    "DECODE_TOK_S",
    "FRACTION_TARGET",
    "MAX_EFFICIENCY",
    "PREFIX_TOKENS",
    "TAIL_OBJECTIVES",
    "TAIL_RATIO",
    "TTFT_MS",
    "TTFT_OBJECTIVES",
]

#: SLO keys a decode-speed finding is judged by.
DECODE_OBJECTIVES: tuple[str, ...] = ("decode_tok_s_min", "itl_p50_ms", "tpot_p99_ms")
#: SLO keys a time-to-first-token finding is judged by.
TTFT_OBJECTIVES: tuple[str, ...] = ("ttft_p50_ms", "ttft_p99_ms")
#: SLO keys an inter-token tail (stall) finding is judged by.
TAIL_OBJECTIVES: tuple[str, ...] = ("itl_p99_ms", "tpot_p99_ms")

#: The TTFT at which a prefill finding starts to matter when no TTFT SLO is set.
TTFT_MS = ThresholdSpec("ttft_ms", ascending=True, unit="ms", doc="TTFT p50 that makes it matter (no TTFT SLO)")
#: The per-stream decode speed at which a decode finding starts to matter when no decode SLO is set.
DECODE_TOK_S = ThresholdSpec(
    "decode_tok_s", ascending=False, unit="tok/s", doc="per-stream decode slow enough to matter (no decode SLO)"
)
#: How close decode runs to the bandwidth ceiling (closer is the finding's case).
DECODE_EFFICIENCY = ThresholdSpec(
    "efficiency", ascending=True, unit="ratio", doc="measured ÷ per-stream decode ceiling"
)
#: Above this efficiency the roofline is wrong (MEAS006's finding), not the setup.
MAX_EFFICIENCY = ParamSpec("max_efficiency", unit="ratio", doc="above this the physics is wrong (MEAS006)", minimum=1)
#: A shared prompt prefix long enough to be worth caching.
PREFIX_TOKENS = ThresholdSpec(
    "prefix_tokens", ascending=True, unit="tokens", doc="shared prefix length; short prefixes are not worth it"
)
#: The inter-token tail ratio that counts as stalls.
TAIL_RATIO = ThresholdSpec("tail_ratio", ascending=True, unit="ratio", doc="ITL (or TPOT) p99 ÷ p50")
#: The GPU memory fraction a capacity fix proposes.
FRACTION_TARGET = ParamSpec(
    "fraction_target", unit="ratio", doc="memory fraction the fix proposes", minimum=0.1, maximum=1
)
