"""Model names the real benchmark files carry resolve to the catalog rows added for them (issue 14).

Each name is verbatim from a fixture under tests/fixtures/ingest (PROVENANCE.md): before these rows
the files got a MEAS004 "unknown to the catalog" request instead of a roofline.
"""

from __future__ import annotations

import pytest

from advisor.catalog import Catalog
from advisor.errors import UnknownName
from advisor.ml.dataset import MODEL_SHAPES


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog.default()


@pytest.mark.parametrize(
    ("name", "model", "quant"),
    [
        ("llama-2-7b", "llama-2-7b", None),  # llama_bench/1337hero-…, llama_server/danbev-…
        ("llama2-7b-chat", "llama-2-7b", None),  # llmperf/hongxuan-…
        ("meta-llama/Llama-2-7b-chat-hf", "llama-2-7b", None),  # llmperf/triton-llm-…
        ("TheBloke/Llama-2-7B-Chat-GGUF", "llama-2-7b", None),
        ("llama-2-7b.Q4_K_M.gguf", "llama-2-7b", "gguf-q4_k_m"),
        ("meta.llama2-70b-chat-v1", "llama-2-70b", None),  # llmperf/leaderboard-bedrock-… (Bedrock id)
        ("llama2-70b-4096", "llama-2-70b", None),  # llmperf/leaderboard-groq-… (Groq id)
        ("meta-llama/Llama-2-70b-chat-hf", "llama-2-70b", None),
        ("facebook/opt-125m", "opt-125m", None),  # vllm_bench/vllm-0.25.1-…-opt125m
        ("Qwen/Qwen3-4B-Thinking-2507", "qwen3-4b-thinking-2507", None),  # guidellm/danielkorat-…
        ("llama-3-2-3b", "llama-3.2-3b", None),  # guidellm/jhurlocker-… (--served-model-name)
        # Unchanged by the new rows: the neighbours they could have captured.
        ("Qwen/Qwen3-4B", "qwen3-4b", None),
        ("Qwen3-4B-Instruct-2507", "qwen3-4b", None),  # model-name dates are dropped (normalise.py)
        ("Meta-Llama-3-8B-Instruct", "llama-3-8b", None),
        ("meta-llama/Meta-Llama-3-70B-Instruct", "llama-3-70b", None),
    ],
)
def test_real_file_model_names(catalog: Catalog, name: str, model: str, quant: str | None) -> None:
    spec, implied = catalog.resolve_model(name)
    assert spec.id == model
    assert (implied.id if implied else None) == quant


def test_llama_bench_llama_7b_stays_unknown(catalog: Catalog) -> None:
    """llama.cpp labels Llama 2 7B and Mistral 7B both "llama 7B": the new row must not claim it."""
    with pytest.raises(UnknownName):
        catalog.resolve_model("llama 7B Q4_0", field_prefix="setup.model")


def test_llama_2_7b_has_the_shapes_the_fitted_model_uses(catalog: Catalog) -> None:
    """The published Llama 2 7B runs train with advisor/ml/dataset.py's MODEL_SHAPES; the catalog row
    must describe the same architecture, or advice and training would disagree on one model."""
    row = catalog.get_model("llama-2-7b")
    shapes = MODEL_SHAPES["Llama 2 7B"]
    fields = ("params_b", "active_params_b", "num_hidden_layers", "hidden_size", "num_attention_heads")
    assert [getattr(row, f) for f in fields] == [getattr(shapes, f) for f in fields]
    assert (row.num_key_value_heads, row.effective_head_dim, row.attention) == (32, 128, "mha")


@pytest.mark.parametrize(
    ("model", "layers", "kv_heads", "context"),
    [
        ("llama-2-7b", 32, 32, 4096),
        ("llama-2-70b", 80, 8, 4096),  # the 70B is GQA, the 7B MHA
        ("opt-125m", 12, 12, 2048),
        ("qwen3-4b-thinking-2507", 36, 8, 262144),
        ("qwen3-4b", 36, 8, 40960),  # the April release keeps its 40k context
    ],
)
def test_added_rows_shapes(catalog: Catalog, model: str, layers: int, kv_heads: int, context: int) -> None:
    spec = catalog.get_model(model)
    assert (spec.num_hidden_layers, spec.num_key_value_heads, spec.max_position_embeddings) == (
        layers,
        kv_heads,
        context,
    )


@pytest.mark.parametrize(
    ("name", "model", "quant"),
    [
        # llm-compressor / AutoRound checkpoint names, as llama_benchy/gabe298-… serves them
        # ("Qwen3.8-27B-int4a16-autoround", "Qwen3.8-27B-NVFP4a16-AWQ"): the weight format is not part
        # of the architecture, so a catalogued model behind such a name still resolves.
        ("Qwen3-32B-int4a16-autoround", "qwen3-32b", None),
        ("Qwen/Qwen3-32B-NVFP4a16-AWQ", "qwen3-32b", None),
        ("Qwen3-32B-nvfp4a4-autoround", "qwen3-32b", None),
        ("Qwen3-32B-INT4A16-AWQ", "qwen3-32b", None),
        ("Qwen3-32B-5.5bit", "qwen3-32b", None),
        ("Qwen3-32B-MXFP4A16", "qwen3-32b", None),
        # A known marker alone still names the quantization.
        ("Qwen3-32B-AWQ", "qwen3-32b", "awq-int4-g128"),
        ("Qwen3-32B-NVFP4", "qwen3-32b", "nvfp4"),
    ],
)
def test_weight_format_suffixes_never_hide_the_model(
    catalog: Catalog, name: str, model: str, quant: str | None
) -> None:
    spec, implied = catalog.resolve_model(name)
    assert spec.id == model
    assert (implied.id if implied else None) == quant


def test_a_fine_tune_name_is_not_a_weight_format(catalog: Catalog) -> None:
    """Only weight-format tokens are dropped: a fine-tune's own name ("heretic-PrismaAura") is a
    different model, which stays unknown rather than becoming its base."""
    with pytest.raises(UnknownName):
        catalog.resolve_model("Qwen3-32B-heretic-PrismaAura-5.5bit", field_prefix="setup.model")
