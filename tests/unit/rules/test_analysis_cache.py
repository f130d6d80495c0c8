"""What the analysis remembers per setup (engine configs, expectations, what-if rooflines) never
changes an answer: many distinct runs of several setups, analysed with every cache cold, then warm,
then hot, give byte-identical analyses (issue #19). And the faster ``__init__`` of the hot frozen
dataclasses builds the same objects as the dataclass one."""

from __future__ import annotations

import dataclasses
import inspect
import json
import random
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from advisor.canonical import CanonicalRun, decode_run
from advisor.catalog import Catalog
from advisor.domain.runs.analysis import RunAnalysis, analyse_run
from advisor.domain.runs.resolution import ResolvedRun, resolve_run
from advisor.ingest.submission import SubmissionContext
from advisor.ml.expectations import Expectations
from advisor.ml.prior import prior_expectations
from advisor.physics import Roofline
from advisor.rules import get_rules
from advisor.rules.base import fast_frozen_init
from advisor.rules.context import BaselinePoint, baseline_point, build_baseline, clear_caches
from advisor.rules.knobs import _engine_config, engine_config

#: Runtimes, devices, dense and MoE models, 16-bit, FP8 and GGUF, TP, and engine args spelled as
#: strings, numbers and booleans (``1``, ``1.0``, ``True`` and ``"1"`` must not share a config).
SETUPS: tuple[dict[str, Any], ...] = (
    {"runtime": "vllm", "hardware": "nvidia-a10g", "model": "llama-3.1-8b", "quantization": "bf16",
     "engine_args": {"enable_prefix_caching": True, "max_num_batched_tokens": 2048}},
    {"runtime": "vllm", "hardware": "nvidia-a10g", "model": "llama-3.1-8b", "quantization": "bf16",
     "engine_args": {"enable_prefix_caching": 1, "max_num_batched_tokens": 2048.0}},
    {"runtime": "vllm", "runtime_version": "0.6.3", "hardware": "nvidia-l40s", "model": "llama-3.1-8b",
     "quantization": "bf16", "engine_args": {"enable_prefix_caching": "1", "--max-num-seqs": "64"}},
    {"runtime": "sglang", "hardware": "nvidia-h100-sxm", "model": "llama-3.1-70b", "quantization": "fp8",
     "gpu_count": 4, "tensor_parallel": 4, "engine_args": {"mem_fraction_static": 0.85, "chunked_prefill_size": 8192}},
    {"runtime": "tgi", "hardware": "nvidia-a100-80gb-sxm", "model": "qwen2.5-7b", "quantization": "bf16",
     "engine_args": {"max_batch_prefill_tokens": 4096, "cuda_memory_fraction": 0.9}},
    {"runtime": "llamacpp", "hardware": "nvidia-rtx-4090", "model": "llama-3.1-8b", "quantization": "gguf-q4_k_m",
     "engine_args": {"n_gpu_layers": 99, "ctx_size": 8192, "np": 4}},
    {"runtime": "trtllm", "hardware": "nvidia-h100-sxm", "model": "mixtral-8x7b", "quantization": "fp8",
     "gpu_count": 2, "tensor_parallel": 2, "engine_args": {"kv_cache_free_gpu_memory_fraction": 0.9}},
    {"runtime": "ollama", "runtime_version": "0.11.4", "hardware": "nvidia-rtx-4090", "model": "qwen2.5-7b",
     "quantization": "gguf-q4_k_m", "engine_args": {"OLLAMA_NUM_PARALLEL": 2}},
)  # fmt: skip

_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def _run(i: int, rng: random.Random) -> dict[str, Any]:
    setup = SETUPS[i % len(SETUPS)]
    decode = rng.uniform(10, 120)
    ttft = rng.uniform(60, 3000)
    itl = 1000 / decode
    concurrency = rng.choice([1, 4, 16, 64])
    metrics: dict[str, Any] = {
        "ttft_ms": {"mean": ttft, "p50": ttft * 0.9, "p99": ttft * rng.uniform(1.2, 5.0)},
        "itl_ms": {"mean": itl, "p50": itl, "p99": itl * rng.uniform(1.1, 4.0)},
        "output_throughput_tok_s": decode * concurrency * rng.uniform(0.4, 0.95),
        "requests_completed": rng.choice([20, 200]),
    }
    optional: dict[str, Callable[[], Any]] = {
        "decode_tok_s": lambda: decode,
        "queue_waiting_mean": lambda: rng.choice([0.0, 1.5, 12.0]),
        "kv_cache_usage_mean": lambda: rng.uniform(0.05, 0.99),
        "prefix_cache_hit_rate": lambda: rng.uniform(0.0, 0.9),
        "preemptions": lambda: rng.choice([0.0, 40.0]),
        "request_throughput_rps": lambda: concurrency / ((ttft + itl * 256) / 1000.0),
    }
    for name, value in optional.items():
        if rng.random() < 0.5:
            metrics[name] = value()
    workload: dict[str, Any] = {
        "num_requests": 200,
        "concurrency": concurrency,
        "prompt_tokens_mean": rng.choice([256, 1024, 8000]),
        "output_tokens_mean": rng.choice([128, 1024]),
    }
    run: dict[str, Any] = {
        "deployment": f"d{i % 3}",
        "measured_at": (_EPOCH + timedelta(minutes=i)).isoformat(),
        "labels": {"i": str(i)},
        "setup": json.loads(json.dumps(setup)),
        "workload": workload,
        "metrics": metrics,
    }
    if rng.random() < 0.2:
        run["slo"] = {"ttft_p99_ms": 1500.0, "decode_tok_s_min": 30.0}
    return run


Item = tuple[ResolvedRun, list[BaselinePoint]]


@pytest.fixture(scope="module")
def items() -> list[Item]:
    catalog = Catalog.default()
    rng = random.Random(19)
    cells: dict[tuple[Any, ...], list[BaselinePoint]] = defaultdict(list)
    out: list[Item] = []
    for i in range(400):
        resolved = resolve_run(decode_run(_run(i, rng)), SubmissionContext(), catalog, from_file=False)
        point = baseline_point(resolved.run)
        out.append((resolved, list(reversed(cells[point.setup_key][-20:]))))
        cells[point.setup_key].append(point)
    return out


def _analyse(item: Item, fn: Callable[..., Expectations] = prior_expectations) -> RunAnalysis:
    resolved, baseline = item
    return analyse_run(resolved, slo=None, baseline=baseline, catalog=Catalog.default(), expectations_fn=fn)


def _text(analysis: RunAnalysis) -> str:
    return json.dumps(
        {"verdict": analysis.verdict, "recs": [r.to_dict() for r in analysis.recommendations], **analysis.stored()},
        sort_keys=True,
        default=repr,
    )


def test_cold_warm_and_hot_caches_give_identical_analyses(items: list[Item]) -> None:
    get_rules()
    cold = []
    for item in items:
        clear_caches()  # every run analysed from nothing
        cold.append(_text(_analyse(item)))
    clear_caches()
    warm = [_text(_analyse(item)) for item in items]  # each setup's first run fills what the rest reuse
    hot = [_text(_analyse(item)) for item in items]
    assert warm == cold
    assert hot == cold
    # The set exercises the rules: findings fire, and all three verdicts occur.
    verdicts = {json.loads(t)["verdict"] for t in cold}
    assert verdicts == {"pass", "warn", "fail"}
    assert sum(len(json.loads(t)["recs"]) for t in cold) > len(items)


def test_the_expectation_function_is_asked_once_per_roofline_and_specs(items: list[Item]) -> None:
    calls: list[Roofline] = []

    def counting(roofline: Roofline, **kwargs: Any) -> Expectations:
        calls.append(roofline)
        return prior_expectations(roofline, **kwargs)

    clear_caches()
    first = [_text(_analyse(item, counting)) for item in items]
    asked = len(calls)
    again = [_text(_analyse(item, counting)) for item in items]
    assert again == first
    assert len(calls) == asked  # everything the second pass needed was remembered
    assert 0 < asked < len(items)  # a few setups and workload shapes, not one call per run
    clear_caches()
    assert [_text(_analyse(item)) for item in items] == first  # the same answers as the prior itself


def test_another_expectation_function_is_never_served_from_the_first_ones_answers(items: list[Item]) -> None:
    def other_version(roofline: Roofline, **kwargs: Any) -> Expectations:
        exp = prior_expectations(roofline, **kwargs)
        return Expectations(exp.decode_tok_s, exp.prefill_tok_s, exp.ttft_ms, exp.itl_ms, "other-1", "a test model")

    clear_caches()
    item = next(i for i in items if i[0].specs.hardware is not None)
    prior = _analyse(item)
    other = _analyse(item, other_version)
    assert prior.expectations["model_version"] != "other-1"
    assert other.expectations["model_version"] == "other-1"


def test_a_remembered_engine_config_is_the_one_computed_afresh(items: list[Item]) -> None:
    clear_caches()
    seen: dict[str, object] = {}
    for resolved, _ in items:
        run, hw = resolved.run, resolved.specs.hardware
        config = engine_config(run, hw)
        assert config == _engine_config(run, hw)
        assert engine_config(run, hw) is config  # remembered
        seen.setdefault(repr(run.setup.engine_args), config)
    # Engine args equal as values but not as JSON types (True, 1 and "1") are told apart.
    assert len(seen) == len({repr(s["engine_args"]) for s in SETUPS})


def test_the_disaggregation_label_is_part_of_the_setup() -> None:
    clear_caches()
    plain = decode_run({"setup": {"runtime": "vllm"}})
    labelled = decode_run({"setup": {"runtime": "vllm"}, "labels": {"disaggregated": "true"}})
    assert engine_config(plain).disaggregated.value is None
    assert engine_config(labelled).disaggregated.value is True


def test_the_baseline_of_the_same_traffic_matches_the_tolerance_test() -> None:
    """build_baseline's shortcut for an equal workload agrees with _same_traffic, NaN included."""

    def run(i: int, prompt: float, decode: float) -> CanonicalRun:
        return decode_run(
            {
                "deployment": "d",
                "measured_at": (_EPOCH + timedelta(minutes=i)).isoformat(),
                "setup": {"runtime": "vllm", "hardware": "nvidia-a10g"},
                "workload": {"prompt_tokens_mean": prompt, "concurrency": 4},
                "metrics": {"decode_tok_s": decode},
            }
        )

    earlier = [run(i, 1000.0 if i % 2 else 1200.0, 30.0 + i) for i in range(10)]
    current = run(20, 1000.0, 31.0)
    base = build_baseline(earlier, current=current)
    assert base is not None and base.n == 10  # 1200 is within 25 % of 1000
    far = run(21, 2000.0, 31.0)
    assert build_baseline(earlier, current=far) is None
    nan = run(22, 1000.0, 31.0)
    nan.workload.prompt_tokens_mean = float("nan")  # unvalidated library input: matches nothing
    same_nan = [run(i, 1000.0, 30.0) for i in range(5)]
    for r in same_nan:
        r.workload.prompt_tokens_mean = nan.workload.prompt_tokens_mean  # the very same NaN object
    assert build_baseline(same_nan, current=nan) is None


def _pair() -> tuple[type[Any], type[Any]]:
    """The same frozen dataclass twice: as dataclasses builds it, and with fast_frozen_init."""
    made: list[type[Any]] = []
    for fast in (False, True):

        @dataclasses.dataclass(frozen=True, slots=True)
        class Row:
            name: str
            value: float = 1.0
            tags: dict[str, str] = dataclasses.field(default_factory=dict)
            note: str = dataclasses.field(default="", kw_only=True)

            def __post_init__(self) -> None:
                if self.value < 0:
                    raise ValueError("negative")

        made.append(fast_frozen_init(Row) if fast else Row)
    return made[0], made[1]


def test_fast_frozen_init_builds_the_same_objects_as_the_dataclass() -> None:
    plain, fast = _pair()
    cases: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        (("a",), {}),
        (("a", 2.0), {}),
        (("a",), {"tags": {"k": "v"}, "note": "n"}),
        ((), {"name": "b"}),
    ]
    for args, kwargs in cases:
        a, b = plain(*args, **kwargs), fast(*args, **kwargs)
        assert repr(a).replace("plain", "") == repr(b).replace("fast", "")
        assert dataclasses.astuple(a) == dataclasses.astuple(b)
        assert dataclasses.replace(b) == b and b == fast(*args, **kwargs)
    assert fast("a").tags is not fast("a").tags  # a fresh dict per object, as the factory gives
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast("a").name = "b"
    with pytest.raises(ValueError, match="negative"):
        fast("a", -1.0)  # __post_init__ still runs
    with pytest.raises(TypeError):
        fast("a", 1.0, {}, "positional note")  # kw_only stays keyword-only
    with pytest.raises(TypeError):
        fast()  # a required field stays required
    assert [p.name for p in inspect.signature(fast).parameters.values()] == ["name", "value", "tags", "note"]


def test_fast_frozen_init_refuses_a_class_it_cannot_speed_up() -> None:
    @dataclasses.dataclass(slots=True)
    class Mutable:
        x: int

    with pytest.raises(TypeError):
        fast_frozen_init(Mutable)


class _Reads:
    """Wraps an object and records which attributes are read of it."""

    def __init__(self, inner: Any, seen: set[str]) -> None:
        self._inner, self._seen = inner, seen

    def __getattr__(self, name: str) -> Any:
        self._seen.add(name)
        return getattr(self._inner, name)


class _Labels(dict[str, str]):
    """Run labels that record which keys are asked for."""

    def __init__(self, inner: dict[str, str], seen: set[str]) -> None:
        super().__init__(inner)
        self._seen = seen

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        self._seen.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> str:
        self._seen.add(key)
        return super().__getitem__(key)


def test_the_engine_config_reads_nothing_its_cache_key_leaves_out(items: list[Item]) -> None:
    """The remembered config is keyed by knobs._setup_key: a field the computation reads but the
    key leaves out would serve one setup's config to another. Every runtime's branch is run."""
    run_fields: set[str] = set()
    setup_fields: set[str] = set()
    label_keys: set[str] = set()
    for resolved, _ in items:
        run = resolved.run
        parts = type("Run", (), {"setup": _Reads(run.setup, setup_fields), "labels": _Labels(run.labels, label_keys)})
        proxy = _Reads(parts(), run_fields)
        assert _engine_config(proxy, resolved.specs.hardware) == _engine_config(run, resolved.specs.hardware)  # type: ignore[arg-type]
    assert {s["runtime"] for s in SETUPS} <= {r.run.setup.runtime for r, _ in items}
    assert run_fields <= {"setup", "labels"}
    assert setup_fields <= {"runtime", "runtime_version", "kv_cache_dtype", "max_model_len", "gpu_count", "engine_args"}
    assert label_keys <= {"disaggregated", "pd_disaggregation"}


def test_fast_frozen_init_sets_fields_outside_init_as_the_dataclass_does() -> None:
    made: list[type[Any]] = []
    for fast in (False, True):

        @dataclasses.dataclass(frozen=True, slots=True)
        class Row:
            name: str
            memo: dict[str, int] = dataclasses.field(default_factory=dict, init=False, compare=False)
            tag: str | None = dataclasses.field(default=None, init=False)
            derived: int = dataclasses.field(init=False)

            def __post_init__(self) -> None:
                object.__setattr__(self, "derived", len(self.name))

        made.append(fast_frozen_init(Row) if fast else Row)
    plain, fast_row = made
    a, b = plain("abc"), fast_row("abc")
    assert dataclasses.astuple(a) == dataclasses.astuple(b) == ("abc", {}, None, 3)
    assert fast_row("x").memo is not fast_row("x").memo  # a fresh dict per object
    assert dataclasses.replace(b).memo == {} and dataclasses.replace(b) == b
    with pytest.raises(TypeError):
        fast_row("abc", {})  # not a parameter
