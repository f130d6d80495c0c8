"""Catalog and what-if endpoints on both databases."""

from __future__ import annotations

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
