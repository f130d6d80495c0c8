"""Sanity table for issue #17: expected decode / ceiling for common server setups, through the public
predict path (``advisor.domain.predictions.services.predict``) with a model fitted on the shipped
runs (with its cross-validation: the deployed λ and bands).

    .venv/bin/python -m bench.decode_sanity

Prints a markdown table (runtime, model, hardware, TP, batch, ceiling, expected, band, ratio); the
table in docs/model.md ("This round (servers)") comes from it.
"""

from __future__ import annotations

import time

from advisor.canonical import Setup, Workload
from advisor.catalog import Catalog
from advisor.domain.predictions.services import predict
from advisor.ml.dataset import public_dataset
from advisor.ml.train import fit

__all__ = ["main"]

GRID: tuple[tuple[str, str, str, int], ...] = (
    *(
        ("llama-3.1-8b", "bf16", hw, 1)
        for hw in ("nvidia-h100-sxm", "nvidia-a100-80gb-sxm", "nvidia-l40s", "nvidia-a10g")
    ),
    ("llama-3.1-70b", "bf16", "nvidia-h100-sxm", 4),
    ("llama-3.1-70b", "bf16", "nvidia-h100-sxm", 8),
    ("qwen3-30b-a3b", "bf16", "nvidia-h100-sxm", 1),
)


def main() -> None:
    cat = Catalog.default()
    started = time.process_time()
    model = fit(public_dataset(cat)).model
    print(f"# fit {time.process_time() - started:.1f} s CPU; version {model.version}")
    print("| runtime | model | hardware | TP | batch | ceiling | expected | band | expected / ceiling |")
    print("|---|---|---|---|---|---|---|---|---|")
    for runtime in ("vllm", "sglang", "tgi"):
        for name, quant, hardware, tp in GRID:
            setup = Setup(
                runtime=runtime, hardware=hardware, model=name, quantization=quant, gpu_count=tp, tensor_parallel=tp
            )
            for batch in (1, 16):
                workload = Workload(prompt_tokens_mean=512, output_tokens_mean=256, concurrency=batch)
                d = predict(cat, setup, workload, model).decode_tok_s
                if d.ceiling is None or d.expected is None:
                    print(f"| {runtime} | {name} | {hardware} | {tp} | {batch} | – | – | – | – |")
                    continue
                print(
                    f"| {runtime} | {name} | {hardware} | {tp} | {batch} | {d.ceiling:.0f} | {d.expected:.0f} "
                    f"| {d.low or 0:.0f}–{d.high or 0:.0f} | {d.expected / d.ceiling:.2f} |"
                )


if __name__ == "__main__":
    main()
