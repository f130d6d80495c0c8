"""The click options the client commands share, and the parsing of their values.

Every client command takes ``--url/--token/--timeout/--retries`` (:func:`client_options`) and
``--output`` (:func:`output_option`); those that submit runs take the context options
(:func:`context_options`) and the gate (:func:`gate_options`).
"""

from __future__ import annotations

import glob
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from advisor.client.gate import SEVERITIES, VERDICTS
from advisor.client.render import OUTPUTS

__all__ = [
    "client_options",
    "context_from_options",
    "context_options",
    "expand_files",
    "gate_options",
    "output_option",
    "parse_pairs",
    "parse_spec",
]

F = TypeVar("F", bound=Callable[..., Any])


def client_options(func: F) -> F:
    """--url, --token, --timeout, --retries."""
    for decorator in reversed(
        [
            click.option(
                "--url",
                envvar="ADVISOR_URL",
                default=None,
                metavar="URL",
                help="advisor server (ADVISOR_URL; default http://127.0.0.1:8000).",
            ),
            click.option(
                "--token", envvar="ADVISOR_TOKEN", default=None, help="Bearer token (ADVISOR_TOKEN).", show_envvar=False
            ),
            click.option(
                "--timeout",
                type=click.FloatRange(min=0.1),
                default=30.0,
                show_default=True,
                help="Seconds per request.",
            ),
            click.option(
                "--retries",
                type=click.IntRange(min=0),
                default=3,
                show_default=True,
                help="Retries, with backoff, on connection errors and 502/503/504.",
            ),
        ]
    ):
        func = decorator(func)
    return func


def output_option(*choices: str, default: str = "text") -> Callable[[F], F]:
    values = choices or OUTPUTS
    return click.option(
        "--output",
        "-o",
        type=click.Choice(values),
        default=default,
        show_default=True,
        help="Output style: " + ", ".join(values) + ".",
    )


def gate_options(func: F) -> F:
    func = click.option(
        "--fail-on-verdict",
        type=click.Choice(VERDICTS[1:]),
        default=None,
        help="Exit 1 when a verdict is this or worse (warn also fails on fail).",
    )(func)
    return click.option(
        "--fail-on",
        type=click.Choice(SEVERITIES[1:]),
        default=None,
        help="Exit 1 when any recommendation is at least this severe.",
    )(func)


def context_options(*, model_option: str = "--model", model_help: str | None = None) -> Callable[[F], F]:
    """Context the file lacks (the same fields POST /runs takes as query parameters)."""
    spec_help = "catalog id, alias, inline JSON spec or @spec.json"
    options = [
        click.option("--deployment", "-d", default=None, help="Deployment the run belongs to (its SLOs, baseline)."),
        click.option("--hardware", default=None, help=f"Hardware: {spec_help}."),
        click.option(
            model_option, "model_spec", default=None, help=model_help or f"Model: {spec_help} (e.g. @config.json)."
        ),
        click.option("--quantization", default=None, help=f"Quantization: {spec_help}."),
        click.option("--runtime", default=None, help="vllm, sglang, tgi, trtllm, ollama, llamacpp, mlx or other."),
        click.option("--runtime-version", default=None, help="Engine version."),
        click.option("--gpu-count", type=click.IntRange(min=1), default=None, help="GPUs serving the model."),
        click.option("--tensor-parallel", type=click.IntRange(min=1), default=None, help="Tensor-parallel size."),
        click.option("--kv-cache-dtype", default=None, help="KV-cache dtype (auto, fp8, q8_0, ...)."),
        click.option("--max-model-len", type=click.IntRange(min=1), default=None, help="Configured context length."),
        click.option("--engine-arg", "engine_args", multiple=True, metavar="K=V", help="Engine argument (repeatable)."),
        click.option(
            "--label", "labels", multiple=True, metavar="K=V", help="Label (repeatable): git_sha=..., ci_job=..."
        ),
        click.option(
            "--slo", "slos", multiple=True, metavar="K=V", help="Deployment SLO (repeatable): ttft_p99_ms=800, ..."
        ),
    ]

    def apply(func: F) -> F:
        for decorator in reversed(options):
            func = decorator(func)
        return func

    return apply


def parse_pairs(values: Sequence[str], option: str, *, typed: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in values:
        if "=" not in item:
            raise click.BadParameter(f"expected K=V, got {item!r}", param_hint=option)
        key, value = item.split("=", 1)
        key = key.strip()
        if not key:
            raise click.BadParameter(f"empty key in {item!r}", param_hint=option)
        out[key.replace("-", "_") if typed else key] = _typed(value.strip()) if typed else value.strip()
    return out


def _typed(value: str) -> Any:
    # The server's own reading of K=V values; imported here, not at the top, because
    # advisor.canonical builds every msgspec schema, which `--help` does not need.
    from advisor.canonical import typed_scalar

    return typed_scalar(value)


def parse_spec(value: str | None, option: str) -> str | dict[str, Any] | None:
    """A catalog name, an inline JSON object, or ``@file.json`` (e.g. a Hugging Face config.json)."""
    if value is None:
        return None
    text = value.strip()
    if text.startswith("@"):
        path = Path(text[1:])
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise click.BadParameter(f"cannot read {path}: {exc.strerror}", param_hint=option) from exc
    elif not text.startswith("{"):
        return value
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise click.BadParameter(f"not a JSON object: {exc}", param_hint=option) from exc
    if not isinstance(doc, dict):
        raise click.BadParameter("an inline spec must be a JSON object", param_hint=option)
    return doc


def context_from_options(params: dict[str, Any], *, model_option: str = "--model") -> dict[str, Any]:
    """The submission context from :func:`context_options` values (None and empty dropped)."""
    context: dict[str, Any] = {
        "deployment": params.get("deployment"),
        "hardware": parse_spec(params.get("hardware"), "--hardware"),
        "model": parse_spec(params.get("model_spec"), model_option),
        "quantization": parse_spec(params.get("quantization"), "--quantization"),
        "runtime": params.get("runtime"),
        "runtime_version": params.get("runtime_version"),
        "gpu_count": params.get("gpu_count"),
        "tensor_parallel": params.get("tensor_parallel"),
        "kv_cache_dtype": params.get("kv_cache_dtype"),
        "max_model_len": params.get("max_model_len"),
        "engine_args": parse_pairs(params.get("engine_args") or (), "--engine-arg", typed=True),
        "labels": parse_pairs(params.get("labels") or (), "--label", typed=False),
        "slo": parse_pairs(params.get("slos") or (), "--slo", typed=True),
    }
    return {k: v for k, v in context.items() if v not in (None, {}, "")}


def expand_files(patterns: Sequence[str]) -> list[Path]:
    """Paths and glob patterns (quoted in CI so the shell leaves them alone), in order, deduplicated."""
    out: list[Path] = []
    for pattern in patterns:
        if Path(pattern).is_file():
            matches = [pattern]
        elif glob.has_magic(pattern):
            # glob.glob, not Path.glob: it takes absolute patterns and ones that start with ``**``.
            expanded = str(Path(pattern).expanduser())
            matches = sorted(m for m in glob.glob(expanded, recursive=True) if Path(m).is_file())  # noqa: PTH207
            if not matches:
                raise click.BadParameter(f"{pattern!r} matches no file", param_hint="FILE")
        else:
            raise click.BadParameter(f"{pattern!r}: no such file", param_hint="FILE")
        for match in matches:
            path = Path(match)
            if path not in out:
                out.append(path)
    return out
