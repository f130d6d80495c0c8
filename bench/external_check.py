"""External check for issue #17: advisor's predictions against real benchmark files it never trained on.

    .venv/bin/python -m bench.external_check

The ingest fixtures under ``tests/fixtures/ingest/`` hold real output files of benchmark tools, each
with its golden ``<name>.expected.json`` (the parsed canonical runs). None of them is training data.
``bench/external_setups.csv`` maps the ones whose hardware and model are known from a citation (the
file itself, or its repository at the commit named in ``PROVENANCE.md``) to a setup: catalog
hardware, GPU count, TP, model, quantization, runtime, with the citation of each fact in its
``source`` column. ``bench/external_skipped.csv`` lists the other real files and why each is left
out. Nothing here is fitted on these rows: the model is fitted on the shipped runs only
(``advisor.ml.train.fit(public_dataset(Catalog.default()))``, as ``bench/decode_sanity.py`` does)
and each row goes through the public predict path (``advisor.domain.predictions.services.predict``).

Measured decode tok/s per stream: the golden run's ``decode_tok_s``, else 1000 / mean (then
median) ITL, else 1000 / mean TPOT; rows marked ``aggregate`` (offline, not streamed) use output
throughput / concurrency. Concurrency: the mapping's value, else the run's, else Little's law on
the decode phase (request throughput × (output − 1) × TPOT: the running batch), shown with ``≈``.
TTFT is compared at concurrency 1 only. Prints markdown tables and the median absolute % error and
band coverage, overall and per runtime.
"""

from __future__ import annotations

import csv
import json
import math
import os
import statistics
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from advisor.canonical import Setup, Workload
from advisor.catalog import Catalog
from advisor.domain.predictions.schemas import Band
from advisor.domain.predictions.services import predict
from advisor.ml.dataset import public_dataset
from advisor.ml.train import fit

__all__ = ["FIXTURES", "SETUPS", "SKIPPED", "Mapping", "load_mapping", "load_skipped", "main"]

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "ingest"
SETUPS = Path(__file__).with_name("external_setups.csv")
SKIPPED = Path(__file__).with_name("external_skipped.csv")


@dataclass(frozen=True)
class Mapping:
    """One row of ``external_setups.csv``."""

    label: str
    file: str
    runs: tuple[int, ...] | None  # None: every run of the golden file
    runtime: str
    runtime_version: str | None
    hardware: str
    gpu_count: int
    tensor_parallel: int
    model: str
    quantization: str
    #: Empty: the run's, else Little's law on the decode phase (the running batch; queueing and
    #: prefill excluded), else on the whole request; numbers: one for every run, or one per run;
    #: ``little``: Little's law on the whole request even where the run gives a concurrency;
    #: ``decode/N``: Little's law on the decode phase over N decode servers (disaggregated prefill).
    concurrency: str
    measure: str  # "stream" or "aggregate"
    source: str

    def setup(self) -> Setup:
        return Setup(
            runtime=self.runtime,
            runtime_version=self.runtime_version,
            hardware=self.hardware,
            gpu_count=self.gpu_count,
            tensor_parallel=self.tensor_parallel,
            model=self.model,
            quantization=self.quantization,
        )


def load_mapping(path: Path = SETUPS) -> list[Mapping]:
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    return [
        Mapping(
            label=r["label"],
            file=r["file"],
            runs=None if r["runs"].strip() == "all" else tuple(int(x) for x in r["runs"].split(";")),
            runtime=r["runtime"],
            runtime_version=r["runtime_version"] or None,
            hardware=r["hardware"],
            gpu_count=int(r["gpu_count"]),
            tensor_parallel=int(r["tensor_parallel"]),
            model=r["model"],
            quantization=r["quantization"],
            concurrency=r["concurrency"].strip(),
            measure=r["measure"] or "stream",
            source=r["source"],
        )
        for r in rows
    ]


def load_skipped(path: Path = SKIPPED) -> list[tuple[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return [(r["file"], r["reason"]) for r in csv.DictReader(fh)]


def _golden(file: str) -> list[dict[str, Any]]:
    data = json.loads((FIXTURES / f"{file}.expected.json").read_text(encoding="utf-8"))
    runs: list[dict[str, Any]] = data.get("runs") or []
    return runs


def _stat(block: dict[str, Any] | None, *keys: str) -> float | None:
    for key in keys:
        value = (block or {}).get(key)
        if isinstance(value, int | float) and value > 0:
            return float(value)
    return None


def _little(run: dict[str, Any]) -> float | None:
    """Requests in flight by Little's law: request throughput × mean end-to-end latency."""
    w, met = run.get("workload", {}), run.get("metrics", {})
    rps = met.get("request_throughput_rps")
    e2e = _stat(met.get("e2e_ms"), "mean", "p50")
    if e2e is None:
        ttft = _stat(met.get("ttft_ms"), "mean", "p50")
        step = _stat(met.get("tpot_ms"), "mean", "p50") or _stat(met.get("itl_ms"), "mean", "p50")
        out = w.get("output_tokens_mean")
        if ttft is not None and step is not None and out:
            e2e = ttft + (out - 1) * step
    return rps * e2e / 1000.0 if rps and e2e else None


def _decode_little(run: dict[str, Any]) -> float | None:
    """Requests in their decode phase by Little's law: request throughput × (output − 1) × TPOT."""
    w, met = run.get("workload", {}), run.get("metrics", {})
    rps = met.get("request_throughput_rps")
    step = _stat(met.get("tpot_ms"), "mean", "p50") or _stat(met.get("itl_ms"), "mean", "p50")
    out = w.get("output_tokens_mean")
    return rps * (out - 1) * step / 1000.0 if rps and step and out else None


def _concurrency(m: Mapping, i: int, run: dict[str, Any]) -> tuple[float | None, str]:
    """The requests in flight, and how it was found ("" given, "≈" by Little's law)."""
    spec = m.concurrency
    if spec == "little":
        return _little(run), "≈"
    if spec.startswith("decode"):
        servers = float(spec.partition("/")[2] or 1)
        found = _decode_little(run)
        return (found / servers if found is not None else None), "≈"
    if spec:
        values = [float(x) for x in spec.split(";")]
        return (values[0] if len(values) == 1 else values[i]), ""
    given = run.get("workload", {}).get("concurrency")
    if given:
        return float(given), ""
    return _decode_little(run) or _little(run), "≈"


def _measured_decode(m: Mapping, run: dict[str, Any], concurrency: float | None) -> float | None:
    met = run.get("metrics", {})
    if m.measure == "aggregate":
        out = met.get("output_throughput_tok_s")
        return out / concurrency if out and concurrency else None
    if met.get("decode_tok_s"):
        return float(met["decode_tok_s"])
    step = _stat(met.get("itl_ms"), "mean", "p50") or _stat(met.get("tpot_ms"), "mean", "p50")
    return 1000.0 / step if step else None


@dataclass
class Row:
    label: str
    runtime: str
    hardware: str
    model: str
    quant: str
    concurrency: str
    kind: str  # "decode" or "ttft"
    measured: float
    band: Band
    carried_by: str | None

    @property
    def expected(self) -> float | None:
        return self.band.expected

    @property
    def low(self) -> float | None:
        return self.band.low

    @property
    def high(self) -> float | None:
        return self.band.high

    @property
    def ceiling(self) -> float | None:
        return self.band.ceiling

    @property
    def ape(self) -> float | None:
        if self.expected is None:
            return None
        return abs(self.expected - self.measured) / self.measured * 100.0

    @property
    def inside(self) -> bool | None:
        if self.low is None or self.high is None:
            return None
        return self.low <= self.measured <= self.high


def _fmt(x: float | None, digits: int = 1) -> str:
    if x is None or not math.isfinite(x):
        return "–"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.{digits}f}"


def evaluate(catalog: Catalog, model: Any) -> list[Row]:
    rows: list[Row] = []
    for m in load_mapping():
        runs = _golden(m.file)
        picked = list(enumerate(runs)) if m.runs is None else [(i, runs[i]) for i in m.runs]
        for k, (_, run) in enumerate(picked):
            c, how = _concurrency(m, k, run)
            w = run.get("workload", {})
            workload = Workload(
                prompt_tokens_mean=w.get("prompt_tokens_mean"),
                output_tokens_mean=w.get("output_tokens_mean") or None,
                kv_depth_tokens=w.get("kv_depth_tokens") or None,
                concurrency=max(1.0, round(c, 2)) if c is not None else 1.0,
            )
            out = predict(catalog, m.setup(), workload, model)
            hw = f"{m.hardware}×{m.gpu_count}" + (f" TP{m.tensor_parallel}" if m.tensor_parallel > 1 else "")
            shown = f"{how}{_fmt(c)}" if c is not None else "?"
            base = dict(
                label=m.label, runtime=m.runtime, hardware=hw, model=m.model, quant=m.quantization, concurrency=shown
            )
            decode = _measured_decode(m, run, c)
            if decode is not None and c is not None:
                rows.append(
                    Row(**base, kind="decode", measured=decode, band=out.decode_tok_s, carried_by=out.carried_by)
                )
            ttft = _stat(run.get("metrics", {}).get("ttft_ms"), "mean", "p50")
            if ttft is not None and c is not None and how == "" and c == 1:
                rows.append(Row(**base, kind="ttft", measured=ttft, band=out.ttft_ms, carried_by=out.carried_by))
    return rows


def _table(rows: list[Row], kind: str) -> None:
    unit = "decode tok/s per stream" if kind == "decode" else "TTFT ms"
    bound = "ceiling" if kind == "decode" else "floor"
    print(
        f"| file | runtime | hardware×n | model | quant | conc. | measured {unit} | predicted [low–high] "
        f"| {bound} | abs % err | in band | via |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r.kind != kind:
            continue
        inside = {True: "yes", False: "no", None: "–"}[r.inside]
        print(
            f"| {r.label} | {r.runtime} | {r.hardware} | {r.model} | {r.quant} | {r.concurrency} | {_fmt(r.measured)} "
            f"| {_fmt(r.expected)} [{_fmt(r.low)}–{_fmt(r.high)}] | {_fmt(r.ceiling)} | {_fmt(r.ape, 0)} | {inside} "
            f"| {r.carried_by or '–'} |"
        )


def _summary(rows: list[Row], kind: str) -> None:
    chosen = [r for r in rows if r.kind == kind and r.ape is not None]
    groups: dict[str, list[Row]] = {"all": chosen}
    for r in chosen:
        groups.setdefault(r.runtime, []).append(r)
    print(f"| {kind}: group | rows | files | MdAPE % | band coverage | median predicted / measured |")
    print("|---|---|---|---|---|---|")
    for name, group in groups.items():
        apes = [r.ape for r in group if r.ape is not None]
        banded = [r.inside for r in group if r.inside is not None]
        ratios = [r.expected / r.measured for r in group if r.expected is not None]
        cover = f"{sum(banded)}/{len(banded)} ({100 * sum(banded) / len(banded):.0f} %)" if banded else "–"
        print(
            f"| {name} | {len(group)} | {len({r.label for r in group})} | {statistics.median(apes):.0f} | {cover} "
            f"| {statistics.median(ratios):.2f} |"
        )


def main() -> None:
    catalog = Catalog.default()
    started = time.process_time()
    model = fit(public_dataset(catalog)).model
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"# {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; load {load}; fit {time.process_time() - started:.1f} s CPU; "
        f"model {model.version}; nothing fitted on these rows"
    )
    rows = evaluate(catalog, model)
    print("\n## Decode\n")
    _table(rows, "decode")
    print()
    _summary(rows, "decode")
    print("\n## TTFT (concurrency 1)\n")
    _table(rows, "ttft")
    print()
    _summary(rows, "ttft")
    print("\n## Skipped\n")
    skipped = load_skipped()
    print("| file | reason |")
    print("|---|---|")
    for file, reason in skipped:
        print(f"| {file} | {reason} |")
    edges = sum(1 for p in FIXTURES.glob("*/edge-*") if not p.name.endswith(".expected.json"))
    print(f"\n{len(skipped)} real or sample files skipped; {edges} `edge-` files (hand-written) not considered.")


if __name__ == "__main__":
    main()
