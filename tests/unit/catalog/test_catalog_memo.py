"""Resolution is memoised inside the Catalog, and a run resolved once is never resolved again."""

from __future__ import annotations

from typing import Any

import pytest

from advisor.canonical import decode_run
from advisor.catalog import Catalog
from advisor.errors import UnknownName
from advisor.rules.context import build_context


class CountingCatalog(Catalog):
    """The shipped catalog, counting the uncached lookups it does."""

    def __init__(self) -> None:
        base = Catalog.default()
        super().__init__(
            hardware=base.list_hardware(),
            models=base.list_models(),
            quantizations=base.list_quantizations(),
            aliases=base._aliases,
        )
        self.calls = 0

    def _resolve_hardware(self, value: Any, field_prefix: str) -> Any:
        self.calls += 1
        return super()._resolve_hardware(value, field_prefix)


def test_a_name_resolves_once_and_an_unknown_name_keeps_the_callers_field() -> None:
    catalog = CountingCatalog()
    first = catalog.resolve_hardware("NVIDIA A10G")
    assert catalog.resolve_hardware("NVIDIA A10G") is first
    assert catalog.calls == 1
    for prefix in ("setup.hardware", "query.hardware"):
        with pytest.raises(UnknownName) as exc:
            catalog.resolve_hardware("nvidia-h1000", field_prefix=prefix)
        assert exc.value.field == prefix and exc.value.matches
    assert catalog.calls == 2  # the unknown name was looked up once, its matches remembered


def test_resolve_setup_reports_what_does_not_resolve() -> None:
    run = decode_run({"setup": {"runtime": "vllm", "hardware": "my-lab-box", "model": "Qwen/Qwen2.5-7B-Instruct-AWQ"}})
    specs = Catalog.default().resolve_setup(run.setup)
    assert specs.hardware is None and "my-lab-box" in specs.unresolved["hardware"]
    assert specs.model is not None and specs.quantization is not None
    assert specs.quantization is specs.implied_quantization  # the name says AWQ
    assert "quantization" not in specs.unresolved


class RefusingCatalog(CountingCatalog):
    def resolve_setup(self, setup: Any) -> Any:
        raise AssertionError("a resolved run must not be resolved again")


def test_build_context_takes_the_resolved_specs() -> None:
    run = decode_run(
        {
            "setup": {"runtime": "vllm", "hardware": "nvidia-a10g", "model": "llama-3.1-8b", "quantization": "bf16"},
            "metrics": {"decode_tok_s": 30},
        }
    )
    specs = Catalog.default().resolve_setup(run.setup)
    ctx = build_context(run, catalog=RefusingCatalog(), resolved=specs)
    assert ctx.hardware is specs.hardware and ctx.roofline is not None
    with pytest.raises(AssertionError):
        build_context(run, catalog=RefusingCatalog())
