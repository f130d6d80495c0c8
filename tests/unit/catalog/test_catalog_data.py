"""The shipped data agrees with itself: CSV figures, extras, aliases and the physics."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from advisor.catalog import Catalog, catalog_records
from advisor.physics import ModelSpec, kv_bytes_per_token


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog.default()


def test_row_counts(catalog: Catalog) -> None:
    # 63 reference rows + 5 hand-added (hardware_added.csv: Strix Halo, the two CPUs the published
    # runs name, the RTX PRO 6000 Blackwell Workstation and Server editions); 54 models + 15
    # (models_added.csv: Llama 3 8B/70B, Qwen2-7B, Nemotron-3-Nano-30B-A3B, Llama 2 7B/70B, OPT-125M,
    # Qwen3-4B-Thinking-2507, Mistral-7B-Instruct-v0.2, MiniMax-M2.5, Qwen3.6-35B-A3B, Qwen3.6-27B,
    # Qwen3.8-27B, Qwen3.5-4B, Qwen2.5-Coder-7B-Instruct); 16 formats + MLX 4/8-bit + llama.cpp's MXFP4_MOE (session 8).
    assert len(catalog.list_hardware()) == 68
    assert len(catalog.list_models()) == 69
    assert len(catalog.list_quantizations()) == 19


def test_kv_bytes_match_the_csv_column(catalog: Catalog) -> None:
    """Physics on the catalog specs reproduces models.csv's kv_bytes_per_token_fp16 for all rows."""
    records = {r["id"]: r for r in catalog.records() if r["entry_kind"] == "model"}
    for model in catalog.list_models():
        assert kv_bytes_per_token(model) == records[model.id]["fields"]["kv_bytes_per_token_fp16"], model.id


def _global_only(model: ModelSpec) -> float:
    assert model.num_hidden_layers and model.num_key_value_heads and model.head_dim
    layers = model.num_hidden_layers - model.sliding_layers
    return 2.0 * layers * model.num_key_value_heads * model.head_dim * 2


def test_sliding_extras_match_the_notes(catalog: Catalog) -> None:
    """model_extras.toml's local-layer counts give the global-layer B/token the notes quote."""
    notes = {r["id"]: r["fields"]["notes"] for r in catalog.records() if r["entry_kind"] == "model"}
    checked = 0
    for model in catalog.list_models():
        if not model.sliding_window:
            continue
        quoted = re.search(r"(\d+) B/token", notes[model.id])
        assert quoted is not None, model.id
        assert _global_only(model) == float(quoted.group(1)), model.id
        checked += 1
    assert checked == 11  # Gemma 2 (3), Gemma 3 (4), gpt-oss (2), Llama 4 (2)


def test_moe_rows_have_expert_counts(catalog: Catalog) -> None:
    for model in catalog.list_models():
        if model.is_moe:
            assert model.num_experts and model.num_experts_per_tok, model.id
            assert model.num_experts > model.num_experts_per_tok


def test_seed_cross_checks(catalog: Catalog) -> None:
    bandwidth = {h.id: h.mem_bandwidth_gb_s for h in catalog.list_hardware()}
    assert bandwidth["nvidia-a10g"] == 600
    assert bandwidth["nvidia-l40s"] == 864
    assert bandwidth["nvidia-rtx-4090"] == 1008
    assert bandwidth["nvidia-a100-80gb-sxm"] == 2039
    assert bandwidth["nvidia-h100-sxm"] == 3350


def test_alias_tables_point_at_real_entries(catalog: Catalog) -> None:
    hardware = {h.id for h in catalog.list_hardware()}
    models = {m.id for m in catalog.list_models()}
    quants = {q.id for q in catalog.list_quantizations()}
    import tomllib

    data = tomllib.loads(resources.files("advisor.catalog").joinpath("data", "aliases.toml").read_text())
    for kind, ids in (("hardware", hardware), ("models", models), ("quantizations", quants)):
        for entry_id, names in data[kind].items():
            assert entry_id in ids, (kind, entry_id)
            assert isinstance(names, list) and all(isinstance(n, str) for n in names), (kind, entry_id)
    for name, model_id in data["llama_bench"].items():
        assert model_id in models, name
    for name, family in data["ollama"].items():
        assert family.get("quant") is None or family["quant"] in quants, name
        assert all(v in models for v in family["sizes"].values()), name
        assert family.get("default") is None or family["default"] in family["sizes"], name


def test_every_entry_resolves_by_its_id_and_name(catalog: Catalog) -> None:
    for hw in catalog.list_hardware():
        assert catalog.resolve_hardware(hw.id) == hw
        assert catalog.resolve_hardware(hw.name).id == hw.id
    for model in catalog.list_models():
        assert catalog.resolve_model(model.id)[0] == model
        assert model.hf_repo is not None
        assert catalog.resolve_model(model.hf_repo)[0].id == model.id
    for quant in catalog.list_quantizations():
        assert catalog.resolve_quantization(quant.id) == quant
        assert catalog.resolve_quantization(quant.name).id == quant.id


def test_records_shape() -> None:
    records = catalog_records()
    kinds = {r["entry_kind"] for r in records}
    assert kinds == {"hardware", "model", "quantization"}
    h100 = next(r for r in records if r["id"] == "nvidia-h100-sxm")
    assert h100["fields"]["mem_bandwidth_gb_s"] == 3350
    assert h100["fields"]["source"].startswith("https://www.nvidia.com/")
    assert "NVIDIA H100 80GB HBM3" in h100["aliases"]
    assert h100["builtin"] is True
    assert all(set(r) == {"entry_kind", "id", "fields", "aliases", "builtin"} for r in records)


def test_readme_copy_carries_provenance() -> None:
    text = resources.files("advisor.catalog").joinpath("data", "README.md").read_text()
    assert text.lstrip().startswith("<!--\nPROVENANCE")
    assert "/work/shared/data/" in text


def test_mlx_checkpoint_names_resolve(catalog: Catalog) -> None:
    """mlx-community's "-4bit"/"-8bit" and mlx_lm.convert -q's group-64 formats (issue 13)."""
    four, eight = catalog.resolve_quantization("4bit"), catalog.resolve_quantization("8bit")
    assert (four.id, four.bits_per_weight) == ("mlx-q4-g64", 4.5)
    assert (eight.id, eight.bits_per_weight) == ("mlx-q8-g64", 8.5)
    assert catalog.resolve_quantization("int4").id == "awq-int4-g128"  # a bare int4 stays AWQ/GPTQ


def test_checkpoint_quantizations_name_catalog_formats_and_match_the_notes() -> None:
    """Every model_extras.toml ``checkpoint_quantization`` is a catalog format, and the model's
    cited notes say its checkpoint is stored that way (MXFP4 experts, FP8 weights)."""
    cat = Catalog.default()
    found = {m.id: cat.checkpoint_quantization(m) for m in cat.list_models()}
    assigned = {mid: q.id for mid, q in found.items() if q is not None}
    assert assigned == {
        "gpt-oss-20b": "mxfp4",
        "gpt-oss-120b": "mxfp4",
        "deepseek-v3": "fp8-e4m3",
        "deepseek-r1": "fp8-e4m3",
    }
    for mid, qid in assigned.items():
        notes = cat.extra("models", mid)["notes"]
        assert ("MXFP4" if qid == "mxfp4" else "FP8") in notes
