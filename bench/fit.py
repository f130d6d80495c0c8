"""The fitted model's bars (DESIGN §8, issues 6 and 17): fit on 100,000 runs ≤ 10 s, peak memory
during the fit ≤ 500 MB, predicting 1,000 setups ≤ 50 ms, one setup ≤ 1 ms.

1. Writes 100,000 synthetic fleet runs into a fresh SQLite database (or ``--database-url``): 200
   deployments, each a fixed setup (catalog hardware, model, quantization, runtime, TP) running a
   benchmark suite of 60 workloads about 8 times, with metrics from the physics and a known
   efficiency law plus noise. ``--distinct`` makes every run its own setup and workload instead
   (100,000 cells: the worst case for the fit).
2. Fits exactly as ``advisor model fit --db`` does (SQL aggregate, physics per cell, grouped CV of
   every head on at most 4,000 observations each, final fits on everything, skops artifact
   stored) in a child process, and reports its wall and CPU time (with scikit-learn already
   imported, as in a server worker; the import time is printed beside it) and peak RSS
   (``ru_maxrss``).
3. Loads the stored artifact and predicts 1,000 distinct setups: the model alone (features +
   every head + bands) and with the physics (``analyse``) in front; best of 5.

    .venv/bin/python -m bench.fit [--runs 100000] [--distinct] [--database-url URL]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import math
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench._common import PYTHON, ROOT

HARDWARE = (
    "nvidia-a10g", "nvidia-l4", "nvidia-l40s", "nvidia-a100-80gb-sxm", "nvidia-a100-40gb-pcie",
    "nvidia-h100-sxm", "nvidia-h100-pcie", "nvidia-h200-sxm", "nvidia-rtx-4090", "nvidia-rtx-3090",
    "nvidia-rtx-5090", "nvidia-t4", "amd-mi300x", "amd-mi210", "amd-radeon-rx-7900-xtx",
    "apple-m2-ultra", "apple-m4-max", "apple-m3-pro", "cpu-amd-epyc-genoa-12ch-ddr5-4800",
    "nvidia-dgx-spark-gb10",
)  # fmt: skip
MODELS = (
    "llama-3.1-8b", "llama-3.1-70b", "qwen2.5-7b", "qwen2.5-32b", "mistral-7b-v0.3", "qwen3-30b-a3b",
    "gemma-3-12b", "phi-4", "llama-3.2-3b", "mixtral-8x7b",
)  # fmt: skip
SERVER_QUANTS = ("bf16", "fp8", "awq")
GGUF_QUANTS = ("Q4_K_M", "Q8_0", "Q6_K")
RUNTIMES = {"vllm": 0.82, "sglang": 0.85, "tgi": 0.72, "trtllm": 0.88, "llamacpp": 0.78, "ollama": 0.74, "mlx": 0.8}
PER_TOKEN_OVERHEAD_S = {"vllm": 0.0008, "sglang": 0.0007, "tgi": 0.0012, "trtllm": 0.0005, "llamacpp": 0.003,
                        "ollama": 0.004, "mlx": 0.002}  # fmt: skip
PREFILL_BASE = {"vllm": 0.55, "sglang": 0.6, "tgi": 0.45, "trtllm": 0.65, "llamacpp": 0.35, "ollama": 0.3, "mlx": 0.5}
PROMPTS = (128, 512, 1024, 2048, 4096, 8192)
CONCURRENCY = (1, 4, 8, 16, 32)
OUTPUTS = (128, 512)


def _runtimes_for(kind: str, vendor: str) -> tuple[str, ...]:
    if kind == "apple_soc":
        return ("mlx", "llamacpp", "ollama")
    if kind == "cpu":
        return ("llamacpp", "ollama")
    if vendor.lower() == "nvidia":
        return ("vllm", "sglang", "tgi", "trtllm", "llamacpp", "ollama")
    return ("vllm", "sglang", "tgi", "llamacpp")


def _setups(catalog: Any, rng: random.Random, count: int) -> list[dict[str, Any]]:
    """``count`` deployable setups: the model fits (TP up to 8 for servers, 1 otherwise)."""
    from advisor.physics import analyse

    setups: list[dict[str, Any]] = []
    while len(setups) < count:
        hw = catalog.resolve_hardware(rng.choice(HARDWARE))
        model, _ = catalog.resolve_model(rng.choice(MODELS))
        runtime = rng.choice(_runtimes_for(hw.kind, hw.vendor))
        server = runtime in ("vllm", "sglang", "tgi", "trtllm")
        quant = catalog.resolve_quantization(rng.choice(SERVER_QUANTS if server else GGUF_QUANTS))
        for tp in (1, 2, 4, 8) if server and hw.kind == "gpu" else (1,):
            if analyse(hw, model, quant, prompt_tokens=1024, output_tokens=256, tensor_parallel=tp).fits_in_memory:
                setups.append({"hw": hw, "model": model, "quant": quant, "runtime": runtime, "tp": tp})
                break
    return setups


def _metrics(setup: dict[str, Any], prompt: int, output: int, concurrency: int, rng: random.Random) -> dict[str, Any]:
    """The ground truth the fit should recover: an efficiency law per runtime plus noise."""
    from advisor.physics import analyse

    runtime = setup["runtime"]
    roof = analyse(
        setup["hw"], setup["model"], setup["quant"], prompt_tokens=prompt, output_tokens=output,
        concurrency=concurrency, tensor_parallel=setup["tp"],
    )  # fmt: skip
    ceiling = roof.decode_ceiling_batch_tok_s
    eff = RUNTIMES[runtime] / (1.0 + PER_TOKEN_OVERHEAD_S[runtime] * ceiling)
    eff *= 1.0 - 0.04 * math.log2(concurrency) - (0.05 * (setup["tp"] - 1) ** 0.5)
    decode = ceiling * eff * math.exp(rng.gauss(0, 0.06))
    prefill_eff = PREFILL_BASE[runtime] * prompt / (prompt + 256) * (0.8 if roof.prefill_tflops_estimated else 1.0)
    prefill = (roof.prefill_ceiling_tok_s or 1.0) * prefill_eff * math.exp(rng.gauss(0, 0.1))
    queue_ms = 4.0 * math.log2(concurrency) * prompt / 1024
    ttft = prompt / prefill * 1000.0 + 8.0 + queue_ms
    return {
        "decode_tok_s": decode,
        "prefill_tok_s": prefill,
        "ttft_p50_ms": ttft * math.exp(rng.gauss(0, 0.05)),
        "ttft_p99_ms": ttft * (1.6 + 0.15 * math.log2(concurrency)) * math.exp(rng.gauss(0, 0.08)),
        "itl_p99_ms": 1000.0 / decode * (1.3 + 0.08 * math.log2(concurrency)) * math.exp(rng.gauss(0, 0.05)),
    }


async def _populate(url: str, runs: int, distinct: bool, seed: int) -> dict[str, int]:
    from sqlalchemy import insert

    from advisor.catalog import Catalog
    from advisor.db.config import create_engine
    from advisor.db.models import Deployment, Run
    from advisor.settings import DatabaseSettings

    rng = random.Random(seed)
    catalog = Catalog.default()
    n_deployments = runs if distinct else 200
    setups = _setups(catalog, rng, min(n_deployments, 2_000))
    engine = create_engine(DatabaseSettings(url=url), pool=False)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    rows: list[dict[str, Any]] = []
    deployments = [{"name": f"bench-{i}", "slo": {}} for i in range(min(n_deployments, 2_000))]
    async with engine.begin() as conn:
        await conn.execute(insert(Deployment), deployments)
    async with engine.begin() as conn:
        for i in range(runs):
            d = i % len(setups)
            setup = setups[d]
            if distinct:  # every run its own workload
                prompt, output, concurrency = rng.randint(64, 16_000), rng.randint(32, 1024), rng.randint(1, 64)
            else:
                w = (i // len(setups)) % (len(PROMPTS) * len(CONCURRENCY) * len(OUTPUTS))
                prompt = PROMPTS[w % len(PROMPTS)]
                concurrency = CONCURRENCY[(w // len(PROMPTS)) % len(CONCURRENCY)]
                output = OUTPUTS[w // (len(PROMPTS) * len(CONCURRENCY))]
            rows.append(
                {
                    "deployment_id": d + 1,
                    "content_hash": hashlib.sha256(f"bench-{seed}-{i}".encode()).hexdigest(),
                    "measured_at": start + timedelta(minutes=i),
                    "runtime": setup["runtime"],
                    "hardware_id": setup["hw"].id,
                    "model_id": setup["model"].id,
                    "quantization_id": setup["quant"].id,
                    "tensor_parallel": setup["tp"],
                    "gpu_count": setup["tp"],
                    "prompt_tokens_mean": float(prompt),
                    "output_tokens_mean": float(output),
                    "concurrency": float(concurrency),
                    "num_requests": 200,
                    "setup": {},
                    "workload": {},
                    "metrics": {},
                    "labels": {},
                    "source": {},
                    "analysis": {},
                    **_metrics(setup, prompt, output, concurrency, rng),
                }
            )
            if len(rows) == 5_000:
                await conn.execute(insert(Run), rows)
                rows = []
        if rows:
            await conn.execute(insert(Run), rows)
    await engine.dispose()
    return {"runs": runs, "deployments": len(deployments)}


def _child_fit(url: str) -> None:
    """Run in a child process so its peak RSS is the fit's own."""
    from sqlalchemy.ext.asyncio import async_sessionmaker

    from advisor.db.config import create_engine
    from advisor.domain.models.schemas import FitIn
    from advisor.domain.models.services import run_fit_job, start_fit
    from advisor.settings import DatabaseSettings

    async def run() -> Any:
        engine = create_engine(DatabaseSettings(url=url), pool=False)
        maker = async_sessionmaker(engine, expire_on_commit=False)
        async with maker() as session:
            job = await start_fit(session, FitIn(activate=True), trigger="bench")
        started = time.perf_counter()
        job = await run_fit_job(maker, job.id)
        seconds = time.perf_counter() - started
        await engine.dispose()
        return job, seconds

    # A server worker has these imported already; a cold `advisor model fit --db` pays them once.
    started = time.perf_counter()
    import advisor.ml.store
    import advisor.ml.train  # noqa: F401

    imports = time.perf_counter() - started
    before = resource.getrusage(resource.RUSAGE_SELF)
    rss_before = before.ru_maxrss
    job, seconds = asyncio.run(run())
    after = resource.getrusage(resource.RUSAGE_SELF)
    peak = after.ru_maxrss
    # CPU time next to the wall time: on a shared host the wall time is mostly other processes'.
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if job.status != "succeeded":
        print(f"FIT FAILED: {job.error}")
        sys.exit(1)
    result = job.result or {}
    print(
        f"fit: {seconds:.2f} s wall ({cpu:.2f} s CPU) for {result.get('fleet_runs')} runs in "
        f"{result.get('fleet_cells')} cells "
        f"({result.get('n_train')} observations incl. published), SQL to stored artifact; scikit-learn "
        f"imported beforehand ({imports:.1f} s, as in a running server); peak RSS {peak / 1024:.0f} MB "
        f"(before the fit: {rss_before / 1024:.0f} MB); version {result.get('version')}"
    )
    for target, schemes in (result.get("summary") or {}).items():
        hw = schemes.get("hardware") or {}
        md = hw.get("mdape") or {}
        print(
            f"  {target}: MdAPE model {md.get('model', math.nan):.3f} · linear {md.get('linear', math.nan):.3f} · "
            f"roofline {md.get('roofline', math.nan):.3f} · constant {md.get('constant', math.nan):.3f}; "
            f"coverage {hw.get('coverage')}"
        )


async def _load_active(url: str) -> Any:
    from sqlalchemy import select

    from advisor.db.config import create_engine
    from advisor.db.models import FittedModel
    from advisor.ml.store import loads
    from advisor.settings import DatabaseSettings

    engine = create_engine(DatabaseSettings(url=url), pool=False)
    async with engine.connect() as conn:
        row = (
            await conn.execute(
                select(FittedModel.artifact, FittedModel.artifact_sha256).where(FittedModel.is_active.is_(True))
            )
        ).one()
    await engine.dispose()
    started = time.perf_counter()
    model = loads(row.artifact, expected_sha256=row.artifact_sha256)
    return model, time.perf_counter() - started, len(row.artifact)


def _predict(url: str, repeats: int = 15) -> None:
    from advisor.catalog import Catalog
    from advisor.ml.features import FeatureInput
    from advisor.physics import analyse

    model, load_seconds, size = asyncio.run(_load_active(url))
    print(f"artifact: {size / 1024:.0f} KiB, {len(model.heads)} heads, loaded and compiled in {load_seconds:.2f} s")
    catalog = Catalog.default()
    rng = random.Random(1)
    setups = _setups(catalog, rng, 1_000)
    workloads = [(rng.choice(PROMPTS), rng.choice(OUTPUTS), rng.choice(CONCURRENCY)) for _ in setups]

    def physics() -> list[FeatureInput]:
        items = []
        for s, (prompt, output, concurrency) in zip(setups, workloads, strict=True):
            roof = analyse(
                s["hw"], s["model"], s["quant"], prompt_tokens=prompt, output_tokens=output,
                concurrency=concurrency, tensor_parallel=s["tp"],
            )  # fmt: skip
            items.append(FeatureInput(roof, s["runtime"], s["hw"].kind, s["hw"], s["model"], s["quant"]))
        return items

    items = physics()
    best = {"arrays": math.inf, "expectations": math.inf, "with physics": math.inf, "single": math.inf}
    samples: list[float] = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        arrays = model.predict_arrays(items)
        t1 = time.perf_counter()
        samples.append(t1 - t0)
        expectations = model.expectations_many(items)
        t2 = time.perf_counter()
        model.expectations_many(physics())
        t3 = time.perf_counter()
        for item in items[:200]:
            model.expectations_many([item])
        t4 = time.perf_counter()
        for key, seconds in (
            ("arrays", t1 - t0),
            ("expectations", t2 - t1),
            ("with physics", t3 - t2),
            ("single", (t4 - t3) / 200),
        ):
            best[key] = min(best[key], seconds)
    assert len(expectations) == 1_000 and all(e.decode_tok_s is not None for e in expectations)
    assert arrays["decode_tok_s"].shape == (3, 1_000)
    print(
        f"predict 1,000 setups, {len(model.heads)} heads (best of {repeats}): "
        f"{best['arrays'] * 1000:.1f} ms as arrays (predict_arrays; median {statistics.median(samples) * 1000:.1f}); "
        f"{best['expectations'] * 1000:.1f} ms as Expectations objects (expectations_many); "
        f"{best['with physics'] * 1000:.1f} ms with analyse() in front; "
        f"one setup at a time {best['single'] * 1e6:.0f} µs"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--distinct", action="store_true", help="every run its own setup and workload")
    parser.add_argument("--database-url", default=None, help="an empty, migrated database (default: a temp SQLite)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--child-fit", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_fit:
        _child_fit(args.child_fit)
        return

    with tempfile.TemporaryDirectory() as tmp:
        url = args.database_url or f"sqlite+aiosqlite:///{Path(tmp) / 'bench-fit.db'}"
        if args.database_url is None:
            from advisor.db import migrate
            from advisor.settings import DatabaseSettings

            migrate.upgrade(DatabaseSettings(url=url))
        load = Path("/proc/loadavg").read_text().split()[0] if Path("/proc/loadavg").exists() else "?"
        print(f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, load {load}, {os.cpu_count()} cores")
        started = time.perf_counter()
        counts = asyncio.run(_populate(url, args.runs, args.distinct, args.seed))
        seconds = time.perf_counter() - started
        print(f"populated {counts['runs']} runs / {counts['deployments']} deployments in {seconds:.1f} s")
        subprocess.run([PYTHON, "-m", "bench.fit", "--child-fit", url], cwd=ROOT, check=True)
        _predict(url)


if __name__ == "__main__":
    main()
