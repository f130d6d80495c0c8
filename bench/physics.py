"""Time the physics-only prediction path in-process: ``analyse`` + ``prior_expectations``.

Usage: ``python bench/physics.py [calls]`` (default 20,000). Prints one line, e.g.
``physics: analyse+prior_expectations 21.3 µs/call (20000 calls, best of 5)``.
The target for a whole physics-only /predict is ≤ 1 ms per call (DESIGN §8).
"""

from __future__ import annotations

import sys
import time

from advisor.catalog import Catalog
from advisor.ml import prior_expectations
from advisor.physics import analyse


def main(calls: int = 20_000, repeats: int = 5) -> float:
    catalog = Catalog.default()
    hw = catalog.resolve_hardware("NVIDIA H100 80GB HBM3")
    model, _ = catalog.resolve_model("meta-llama/Llama-3.1-8B-Instruct")
    quant = catalog.resolve_quantization("bf16")
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for i in range(calls):
            roof = analyse(
                hw,
                model,
                quant,
                prompt_tokens=2000 + (i & 7),  # vary the input so nothing is constant-folded
                output_tokens=128,
                concurrency=16,
                kv_cache_dtype="auto",
            )
            prior_expectations(roof, runtime="vllm", hardware_kind=hw.kind)
        best = min(best, (time.perf_counter() - start) / calls)
    print(f"physics: analyse+prior_expectations {best * 1e6:.1f} µs/call ({calls} calls, best of {repeats})")
    return best


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20_000)
