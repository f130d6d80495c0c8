"""MEAS004 names a model the catalog does not know instead of calling it missing (issue 14)."""

from __future__ import annotations

from advisor.canonical import CanonicalRun, Metrics, Setup, Workload
from advisor.rules import build_context, get_rule


def _title(setup: Setup) -> str:
    run = CanonicalRun(
        setup=setup,
        workload=Workload(concurrency=1, prompt_tokens_mean=512, output_tokens_mean=128),
        metrics=Metrics(decode_tok_s=30.0),
    )
    finding = get_rule("MEAS004").evaluate(build_context(run))
    assert finding is not None
    return finding.title


def test_a_named_model_the_catalog_lacks_is_unknown_not_missing() -> None:
    setup = Setup(runtime="llamacpp", hardware="nvidia-rtx-a6000", model="Gemma 3 27b It Qat", quantization="Q4_K_M")
    title = _title(setup)
    assert title.startswith("The model 'Gemma 3 27b It Qat' (setup.model) is unknown to the catalog: ")
    assert "Missing" not in title


def test_an_unknown_model_beside_missing_fields_names_both() -> None:
    title = _title(Setup(runtime="llamacpp", model="Gemma 3 27b It Qat", quantization="Q4_K_M"))
    assert title.startswith(
        "The model 'Gemma 3 27b It Qat' (setup.model) is unknown to the catalog; missing setup.hardware"
    )


def test_no_model_at_all_is_still_missing() -> None:
    title = _title(Setup(runtime="llamacpp", hardware="nvidia-rtx-a6000", quantization="Q4_K_M"))
    assert title.startswith("Missing setup.model: ")
