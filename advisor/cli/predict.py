"""``advisor predict``: what-if ceilings and expected speed of a setup (``POST /predict``), or every
catalog device ranked for a model (``GET /predict/hardware``)."""

from __future__ import annotations

from typing import Any

import click

from advisor.cli.client import emit, handle_errors, make_client
from advisor.cli.options import client_options, output_option, parse_spec
from advisor.client.exit_codes import ExitCode
from advisor.client.render import fmt, render_json, table

__all__ = ["predict_command"]

_BANDS = (
    ("decode tok/s", "decode_tok_s"),
    ("prefill tok/s", "prefill_tok_s"),
    ("TTFT ms", "ttft_ms"),
    ("ITL ms", "itl_ms"),
    ("output tok/s", "output_throughput_tok_s"),
)


@click.command("predict")
@click.option("--model", "model", required=True, help="Catalog id, alias, HF repo id, inline JSON or @config.json.")
@click.option("--hardware", default=None, help="Hardware to predict for; omit to rank every catalog device.")
@click.option("--quantization", default=None, help="Quantization (bf16, fp8, Q4_K_M, ...).")
@click.option("--runtime", default=None, help="Runtime (vllm, ollama, ...).")
@click.option("--gpu-count", type=click.IntRange(min=1), default=None)
@click.option("--tensor-parallel", type=click.IntRange(min=1), default=None)
@click.option("--kv-cache-dtype", default=None)
@click.option("--max-model-len", type=click.IntRange(min=1), default=None)
@click.option("--prompt-tokens", type=click.IntRange(min=1), default=512, show_default=True)
@click.option("--output-tokens", type=click.IntRange(min=1), default=128, show_default=True)
@click.option("--concurrency", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--top", type=click.IntRange(min=1), default=15, show_default=True, help="Devices shown when ranking.")
@click.option(
    "--allow-no-fit", is_flag=True, help="Exit 0 even when the model does not fit the setup's memory (else exit 1)."
)
@output_option("text", "md", "json")
@client_options
@click.pass_context
@handle_errors
def predict_command(ctx: click.Context, /, **p: Any) -> None:
    """What-if: ceilings and expected speed of a setup, or every device ranked for a model.

    \b
    Examples:
      advisor predict --model llama-3.1-8b --hardware nvidia-a10g --quantization bf16
      advisor predict --model llama-3.1-8b --quantization Q4_K_M --prompt-tokens 2000
      advisor predict --model llama-3.1-70b --hardware nvidia-h100-sxm --gpu-count 4

    A setup whose model does not fit in memory is reported and exits 1 (--allow-no-fit: 0).
    """
    model = parse_spec(p["model"], "--model")
    with make_client(ctx, p["url"], p["token"], p["timeout"], p["retries"]) as client:
        if p["hardware"] is None:
            if isinstance(model, dict):
                raise click.BadParameter("ranking hardware needs a catalog model name", param_hint="--model")
            params = {
                "quantization": p["quantization"],
                "runtime": p["runtime"],
                "prompt_tokens": p["prompt_tokens"],
                "output_tokens": p["output_tokens"],
                "concurrency": p["concurrency"],
            }
            for name in ("gpu_count", "tensor_parallel"):
                if p[name] is not None:
                    params[name] = p[name]
            ranking = client.rank_hardware(str(model), **params)
            if p["output"] == "json":
                emit(render_json(ranking))
                return
            rows = [
                [
                    r.get("rank"),
                    r.get("hardware"),
                    r.get("mem_bandwidth_gb_s"),
                    (r.get("decode_tok_s") or {}).get("expected"),
                    (r.get("decode_tok_s") or {}).get("ceiling"),
                    (r.get("prefill_tok_s") or {}).get("expected"),
                    (r.get("ttft_ms") or {}).get("expected"),
                    fmt(r.get("fits_in_memory")),
                    fmt(r.get("min_gpus_to_fit")),
                ]
                for r in ranking[: p["top"]]
            ]
            headers = [
                "#",
                "hardware",
                "GB/s",
                "decode tok/s",
                "ceiling",
                "prefill tok/s",
                "TTFT ms",
                "fits",
                "min GPUs",
            ]
            style = "md" if p["output"] == "md" else "text"
            quant = next((r.get("quantization") for r in ranking if r.get("quantization")), None)
            at = f" at {quant}" if quant else ""
            emit(f"{model}{at}, {p['prompt_tokens']}-token prompts: devices ranked by predicted decode speed")
            emit(table(headers, rows, style=style))
            return
        setup: dict[str, Any] = {
            "model": model,
            "hardware": parse_spec(p["hardware"], "--hardware"),
            "quantization": parse_spec(p["quantization"], "--quantization"),
            "runtime": p["runtime"],
            "gpu_count": p["gpu_count"],
            "tensor_parallel": p["tensor_parallel"],
            "kv_cache_dtype": p["kv_cache_dtype"],
            "max_model_len": p["max_model_len"],
        }
        workload = {
            "prompt_tokens_mean": p["prompt_tokens"],
            "output_tokens_mean": p["output_tokens"],
            "concurrency": p["concurrency"],
        }
        answer = client.predict({k: v for k, v in setup.items() if v is not None}, workload)
    if p["output"] == "json":
        emit(render_json(answer))
        _exit_unless_fits(ctx, answer, allow=p["allow_no_fit"])
        return
    style = "md" if p["output"] == "md" else "text"
    rows = [
        [label, *((answer.get(key) or {}).get(x) for x in ("expected", "low", "high", "ceiling"))]
        for label, key in _BANDS
        if answer.get(key)
    ]
    resolved = answer.get("resolved") or {}
    emit(" · ".join(str(v) for v in resolved.values() if v) or "prediction")
    emit(table(["metric", "expected", "low", "high", "ceiling/floor"], rows, style=style))
    facts = [
        ("weights", f"{fmt((answer.get('weight_bytes') or 0) / 1e9)} GB"),
        ("KV per token", f"{fmt(answer.get('kv_bytes_per_token'))} B"),
        ("KV pool", f"{fmt(answer.get('kv_pool_tokens'))} tokens"),
        ("max concurrent sequences", fmt(answer.get("max_concurrent_sequences"))),
        ("bound", ", ".join(f"{k}: {v}" for k, v in (answer.get("bound") or {}).items())),
        ("model", f"{answer.get('model_version')} ({answer.get('expectation_source')})"),
        ("carried by", fmt(answer.get("carried_by"))),
        (
            "fits in memory",
            f"{fmt(answer.get('fits_in_memory'))} (fewest GPUs that fit: {fmt(answer.get('min_gpus_to_fit'))})",
        ),
    ]
    emit("")
    emit("\n".join(f"{k}: {v}" for k, v in facts))
    for note in answer.get("notes") or []:
        emit(f"note: {note}")
    _exit_unless_fits(ctx, answer, allow=p["allow_no_fit"])


def _exit_unless_fits(ctx: click.Context, answer: dict[str, Any], *, allow: bool) -> None:
    """Say so and exit 1 when the model does not fit the setup (a speed for it is fiction)."""
    if answer.get("fits_in_memory") is not False:
        return
    fewest = answer.get("min_gpus_to_fit")
    hint = f"; {fewest} of these devices would" if fewest else "; no group of up to 8 of these devices would"
    click.echo(
        f"advisor: the model does not fit in memory on {answer.get('gpu_count') or 1} device(s){hint}",
        err=True,
    )
    if not allow:
        ctx.exit(ExitCode.GATE)
