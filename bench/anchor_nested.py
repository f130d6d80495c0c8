"""Nested choice of the server overhead anchor's strength (``advisor.ml.base.ANCHOR_PENALTY``, issue #17).

For each held-out source, the strength is chosen by the grouped CV (mean of the by-device and
by-source decode MdAPE of the model) of fits on the other sources only; the held-out source is then
predicted by a fit on the other sources with that strength. Prints each source's inner scores and
the pooled held-out decode MdAPE, nested and at every fixed strength (docs/model.md, "This round
(servers)"). About 40 s of CPU.

    .venv/bin/python -m bench.anchor_nested
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence

from advisor.catalog import Catalog
from advisor.ml import base
from advisor.ml.dataset import Observation, public_dataset
from advisor.ml.model import PerformanceModel
from advisor.ml.train import fit

__all__ = ["main"]

GRID = (0.0, 0.03, 0.1, 0.3, 1.0, 3.0)


def decode_errors(model: PerformanceModel, rows: Sequence[Observation]) -> list[float]:
    out = []
    for o in rows:
        exp = model(
            o.roofline,
            runtime=o.runtime,
            hardware_kind=o.hardware.kind,
            hardware=o.hardware,
            model=o.model,
            quant=o.quant,
        )
        band = exp.decode_tok_s
        if band is not None and band.expected is not None:
            out.append(abs(band.expected / o.measured - 1))
    return out


def main() -> None:
    started = time.process_time()
    shipped = base.ANCHOR_PENALTY
    obs = public_dataset(Catalog.default())
    sources = sorted({o.source for o in obs if o.target == "decode_tok_s"})
    pooled: dict[str, list[float]] = {"nested": [], **{str(g): [] for g in GRID}}
    try:
        for s in sources:
            train = [o for o in obs if o.source != s]
            test = [o for o in obs if o.source == s and o.target == "decode_tok_s"]
            scores: dict[float, float] = {}
            per: dict[float, list[float]] = {}
            for g in GRID:
                base.ANCHOR_PENALTY = g
                result = fit(train, schemes=("hardware", "source"))
                cv = result.cv_metrics["targets"]["decode_tok_s"]["schemes"]
                scores[g] = (cv["hardware"]["mdape"]["model"] + cv["source"]["mdape"]["model"]) / 2
                per[g] = decode_errors(result.model, test)
                pooled[str(g)].extend(per[g])
            chosen = min(GRID, key=lambda g: (scores[g], g))
            pooled["nested"].extend(per[chosen])
            inner = ", ".join(f"{g}: {v:.4f}" for g, v in scores.items())
            held = ", ".join(f"{g}: {statistics.median(per[g]):.3f}" for g in GRID)
            print(
                f"{s}: n={len(test)} inner scores {{{inner}}} chosen {chosen}; "
                f"held-out MdAPE nested {statistics.median(per[chosen]):.3f}, {held}",
                flush=True,
            )
    finally:
        base.ANCHOR_PENALTY = shipped
    print("pooled held-out decode MdAPE:", {k: round(statistics.median(v), 4) for k, v in pooled.items()})
    print(f"cpu {time.process_time() - started:.0f} s")


if __name__ == "__main__":
    main()
