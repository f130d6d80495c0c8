"""Catalog and what-if endpoints on both databases."""

from __future__ import annotations

import json
from typing import Any

import pytest


def test_catalog_lists_resolves_aliases_and_accepts_user_entries(client: Any) -> None:
    hardware = client.get("/api/v1/catalog/hardware").json()
    ids = {h["id"] for h in hardware}
    assert {"nvidia-h100-sxm", "nvidia-a10g", "nvidia-rtx-4090"} <= ids
    assert all(h["origin"] == "shipped" for h in hardware)

    got = client.get("/api/v1/catalog/hardware/NVIDIA H100 80GB HBM3")
    assert got.status_code == 200
    assert got.json()["id"] == "nvidia-h100-sxm"
    assert client.get("/api/v1/catalog/models/llama3.1:8b").json()["id"] == "llama-3.1-8b"
    assert client.get("/api/v1/catalog/models/meta-llama/Llama-3.1-8B-Instruct").json()["id"] == "llama-3.1-8b"
    assert client.get("/api/v1/catalog/quantizations/Q4_K_M").json()["id"] == "gguf-q4_k_m"

    added = client.post(
        "/api/v1/catalog/hardware",
        json={
            "id": "lab-npu",
            "name": "Lab NPU",
            "mem_bandwidth_gb_s": 500,
            "fp16_tflops": 100,
            "aliases": ["NPU-1"],
        },
    )
    assert added.status_code == 201, added.text
    assert added.json()["origin"] == "user"
    assert client.get("/api/v1/catalog/hardware/NPU-1").json()["id"] == "lab-npu"
    # the new device is usable at once for predictions
    predicted = client.post(
        "/api/v1/predict",
        json={"setup": {"hardware": "lab-npu", "model": "llama-3.1-8b", "quantization": "bf16"}},
    )
    assert predicted.status_code == 200
    assert predicted.json()["decode_tok_s"]["ceiling"] == pytest.approx(500e9 / 16.06e9, rel=0.02)

    duplicate = client.post("/api/v1/catalog/hardware", json={"id": "lab-npu", "mem_bandwidth_gb_s": 1})
    assert duplicate.status_code == 422
    assert duplicate.json()["field"] == "id"


def test_catalog_bad_entries_name_the_field(client: Any) -> None:
    response = client.post("/api/v1/catalog/hardware", json={"id": "x1", "mem_bandwidth_gb_s": -5})
    assert response.status_code == 422
    assert response.json()["field"] == "mem_bandwidth_gb_s"
    response = client.post("/api/v1/catalog/quantizations", json={"id": "q1"})
    assert response.status_code == 422
    assert response.json()["field"] == "bits_per_weight"
    unknown = client.get("/api/v1/catalog/hardware/nvidia-h1000")
    assert unknown.status_code == 422
    assert unknown.json()["matches"]
    assert client.get("/api/v1/catalog/gpus").status_code == 404


def test_model_from_hf_config_json(client: Any) -> None:
    config = {
        "architectures": ["MixtralForCausalLM"],
        "model_type": "mixtral",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_attention_heads": 32,
        "num_hidden_layers": 32,
        "num_key_value_heads": 8,
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
        "vocab_size": 32000,
        "max_position_embeddings": 32768,
    }
    response = client.post("/api/v1/catalog/models", json={"id": "my-mixtral", "config": config})
    assert response.status_code == 201, response.text
    body = response.json()
    assert 44 < body["params_b"] < 48
    assert 12 < body["active_params_b"] < 14  # decode reads the active experts, not all 46.7B


def test_predict_matches_the_seed_and_names_bounds(client: Any) -> None:
    response = client.post(
        "/api/v1/predict",
        json={
            "setup": {
                "hardware": "NVIDIA A10G",
                "model": {"params_b": 8.0, "active_params_b": 8.0},
                "quantization": "bf16",
                "runtime": "vllm",
            },
            "workload": {"prompt_tokens_mean": 2000, "output_tokens_mean": 128},
        },
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["decode_tok_s"]["ceiling"] == pytest.approx(37.5, abs=0.05)
    assert body["bound"] == {"prefill": "compute", "decode": "bandwidth"}
    band = body["decode_tok_s"]
    assert band["low"] <= band["expected"] <= band["high"] <= band["ceiling"]
    assert body["ttft_ms"]["ceiling"] <= body["ttft_ms"]["expected"]
    assert body["model_version"]


def test_predict_hardware_ranks_and_marks_fit(client: Any) -> None:
    response = client.get("/api/v1/predict/hardware", params={"model": "llama-3.1-70b", "quantization": "bf16"})
    assert response.status_code == 200, response.text
    rows = response.json()
    assert [r["rank"] for r in rows] == list(range(1, len(rows) + 1))
    fitting = [r for r in rows if r["fits_in_memory"] is not False]
    not_fitting = [r for r in rows if r["fits_in_memory"] is False]
    assert rows[: len(fitting)] == fitting  # devices where 141 GB of weights fit come first
    assert "nvidia-rtx-4090" in {r["hardware"] for r in not_fitting}
    decode = [r["decode_tok_s"]["expected"] for r in fitting]
    assert decode == sorted(decode, reverse=True)


def test_predict_bad_input(client: Any) -> None:
    response = client.post("/api/v1/predict", json={"setup": {"hardware": "h100x", "model": "llama-3.1-8b"}})
    assert response.status_code == 422
    assert response.json()["field"] == "setup.hardware"
    assert "nvidia-h100-sxm" in response.json()["matches"]
    response = client.post("/api/v1/predict", json={"setup": {"model": "llama-3.1-8b"}})
    assert response.status_code == 422
    assert response.json()["field"] == "setup.hardware"
    response = client.post(
        "/api/v1/predict",
        json={"setup": {"hardware": "nvidia-a10g", "model": "llama-3.1-8b", "runtime": "excel"}},
    )
    assert response.status_code == 422
    assert response.json()["field"] == "setup.runtime"
    response = client.get("/api/v1/predict/hardware", params={"model": "llama-3.1-8b", "prompt_tokens": 0})
    assert response.status_code == 400


def test_predict_hardware_honours_the_gpu_count_and_names_the_fewest_that_fit(client: Any) -> None:
    params = {"model": "llama-3.1-70b", "quantization": "bf16"}
    single = {r["hardware"]: r for r in client.get("/api/v1/predict/hardware", params=params).json()}
    response = client.get("/api/v1/predict/hardware", params={**params, "gpu_count": 8})
    assert response.status_code == 200, response.text
    eight = {r["hardware"]: r for r in response.json()}
    h100 = eight["nvidia-h100-sxm"]
    # 141 GB of bf16 weights: one 80 GB H100 cannot hold them, a TP group of 8 can; 2 is the fewest.
    assert single["nvidia-h100-sxm"]["fits_in_memory"] is False
    assert (h100["gpu_count"], h100["tensor_parallel"], h100["fits_in_memory"]) == (8, 8, True)
    assert h100["min_gpus_to_fit"] == single["nvidia-h100-sxm"]["min_gpus_to_fit"] == 2
    assert h100["decode_tok_s"]["ceiling"] == pytest.approx(8 * single["nvidia-h100-sxm"]["decode_tok_s"]["ceiling"])
    # Macs do not scale out: still one device, and the 192 GB M2 Ultra holds the model alone.
    mac = eight["apple-m2-ultra"]
    assert (mac["gpu_count"], mac["tensor_parallel"], mac["min_gpus_to_fit"]) == (1, 1, 1)
    for row in eight.values():
        band = row["decode_tok_s"]
        assert band["low"] <= band["expected"] <= band["high"] <= band["ceiling"]
        assert row["carried_by"] == "prior"


def test_predict_hardware_can_rank_by_speed_alone(client: Any) -> None:
    params = {"model": "llama-3.1-70b", "quantization": "bf16", "fits_first": "false"}
    rows = client.get("/api/v1/predict/hardware", params=params).json()
    decode = [r["decode_tok_s"]["expected"] for r in rows]
    assert decode == sorted(decode, reverse=True)
    assert {r["fits_in_memory"] for r in rows[:10]} == {True, False}  # fast devices of both kinds on top


def test_predict_multi_gpu_pays_for_its_all_reduces(client: Any) -> None:
    setup = {"hardware": "nvidia-h100-sxm", "model": "llama-3.1-70b", "quantization": "bf16", "runtime": "vllm"}
    workload = {"prompt_tokens_mean": 1000, "output_tokens_mean": 128}
    four = client.post("/api/v1/predict", json={"setup": {**setup, "gpu_count": 4}, "workload": workload}).json()
    assert (four["gpu_count"], four["tensor_parallel"], four["fits_in_memory"], four["min_gpus_to_fit"]) == (
        4,
        4,
        True,
        2,
    )
    assert any(note.startswith("TP 4 over NVLink") for note in four["notes"])
    band = four["decode_tok_s"]
    assert band["low"] <= band["expected"] <= band["high"] <= band["ceiling"]
    assert four["carried_by"] == "prior"
    one = client.post("/api/v1/predict", json={"setup": setup, "workload": workload}).json()
    assert one["fits_in_memory"] is False and one["min_gpus_to_fit"] == 2
    assert not any(note.startswith("TP ") for note in one["notes"])


def test_cli_predict_exits_1_when_the_model_does_not_fit(client: Any) -> None:
    from click.testing import CliRunner

    from advisor.cli import cli
    from advisor.client import Injected

    def run(*args: str) -> Any:
        return CliRunner().invoke(cli, list(args), obj=Injected(advisor=client), catch_exceptions=False)

    base = ["predict", "--model", "llama-3.1-70b", "--hardware", "nvidia-rtx-4090", "--quantization", "bf16"]
    refused = run(*base)
    assert refused.exit_code == 1, refused.output
    assert "does not fit in memory on 1 device(s); 8 of these devices would" in refused.stderr
    assert run(*base, "--allow-no-fit").exit_code == 0
    assert run(*base, "-o", "json").exit_code == 1
    fits = run("predict", "--model", "llama-3.1-70b", "--hardware", "nvidia-h100-sxm", "--gpu-count", "2")
    assert fits.exit_code == 0, fits.output
    ranked = run("predict", "--model", "llama-3.1-70b", "--quantization", "bf16", "--gpu-count", "4", "-o", "json")
    assert ranked.exit_code == 0, ranked.output
    assert {r["gpu_count"] for r in json.loads(ranked.stdout) if r["kind"] == "gpu"} == {4}


def test_predict_sizes_the_kv_pool_the_way_the_runtime_does(client: Any) -> None:
    """/predict passes the runtime to the KV-pool physics: SGLang keeps no activation reserve inside
    its fraction, TensorRT-LLM's fraction is of what the weights leave, and each runtime's own
    spelling of the fraction is read (not only vLLM's ``gpu_memory_utilization``)."""
    from advisor.physics import kv_pool_bytes

    workload = {"prompt_tokens_mean": 1000, "output_tokens_mean": 128}

    def pool(runtime: str, **engine_args: float) -> int:
        setup = {"hardware": "nvidia-h100-sxm", "model": "llama-3.1-8b", "quantization": "bf16", "runtime": runtime}
        response = client.post(
            "/api/v1/predict", json={"setup": {**setup, "engine_args": engine_args}, "workload": workload}
        )
        assert response.status_code == 200, response.text
        return int(response.json()["kv_pool_tokens"])

    vllm = pool("vllm", gpu_memory_utilization=0.9)
    sglang = pool("sglang", mem_fraction_static=0.9)
    trtllm = pool("trtllm", kv_cache_free_gpu_memory_fraction=0.9)
    half = pool("sglang", mem_fraction_static=0.45)
    # The same 0.9 means three different pools; the runtime's own spelling of the fraction counts.
    assert len({vllm, sglang, trtllm}) == 3
    assert half < sglang / 2
    # The ratios follow kv_pool_bytes for each runtime (the per-token cost cancels out).
    memory, weights = 80 * 1024**3, 8.03e9 * 2

    def physics(runtime: str, fraction: float) -> float:
        return kv_pool_bytes(
            memory_bytes=memory, gpu_memory_utilization=fraction, weight_bytes_resident=weights, runtime=runtime
        )

    assert sglang / vllm == pytest.approx(physics("sglang", 0.9) / physics("vllm", 0.9), rel=0.02)
    assert trtllm / vllm == pytest.approx(physics("trtllm", 0.9) / physics("vllm", 0.9), rel=0.02)


def test_a_what_if_without_quantization_assumes_the_checkpoints_own_format(client: Any) -> None:
    """gpt-oss publishes MXFP4 experts and DeepSeek-V3 block FP8: with no quantization given, a
    what-if predicts those weights (not 16-bit ones, 3.8x the bytes) and says so; a model whose
    checkpoint is 16-bit still assumes bf16."""
    setup = {"hardware": "nvidia-h100-sxm", "model": "gpt-oss-120b", "runtime": "vllm"}
    assumed = client.post("/api/v1/predict", json={"setup": setup}).json()
    named = client.post("/api/v1/predict", json={"setup": {**setup, "quantization": "mxfp4"}}).json()
    sixteen = client.post("/api/v1/predict", json={"setup": {**setup, "quantization": "bf16"}}).json()
    assert assumed["resolved"]["quantization"] == "mxfp4"
    assert assumed["decode_tok_s"] == named["decode_tok_s"]
    assert assumed["weight_bytes"] < sixteen["weight_bytes"] / 3
    assert any("mxfp4, the format of gpt-oss-120b's own checkpoint" in n for n in assumed["notes"])

    dense = client.post("/api/v1/predict", json={"setup": {**setup, "model": "llama-3.1-8b"}}).json()
    assert dense["resolved"]["quantization"] == "f16-bf16"
    assert any("assumed 16-bit weights (bf16)" in n for n in dense["notes"])

    ranked = client.get("/api/v1/predict/hardware", params={"model": "deepseek-v3", "gpu_count": 8}).json()
    assert {r["quantization"] for r in ranked} == {"fp8-e4m3"}
    explicit = client.get("/api/v1/predict/hardware", params={"model": "deepseek-v3", "quantization": "bf16"}).json()
    assert {r["quantization"] for r in explicit} == {"f16-bf16"}
