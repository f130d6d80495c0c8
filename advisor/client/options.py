"""Options, injection and error handling shared by every client command.

Every command gets the same ``--url/--token/--timeout/--retries`` and ``--output`` options, and the
same exit codes: API errors become :class:`CommandFailed` with exit code 3 (unreachable or 5xx) or 4
(rejected, 4xx); click's own usage errors exit 2; a failed gate exits 1.

Tests (and embedding programs) inject HTTP clients through the click context object
(:class:`Injected`): ``CliRunner().invoke(cli, args, obj=Injected(advisor=test_client))``.
"""

from __future__ import annotations

import functools
import glob
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

import click
import httpx

from advisor.canonical import typed_scalar
from advisor.client.gate import SEVERITIES, VERDICTS
from advisor.client.http import AdvisorClient, ApiError, Rejected
from advisor.client.render import OUTPUTS

__all__ = [
    "EXIT_GATE",
    "EXIT_REJECTED",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "CommandFailed",
    "Injected",
    "InputRejected",
    "client_options",
    "context_from_options",
    "context_options",
    "expand_files",
    "gate_options",
    "handle_errors",
    "make_client",
    "output_option",
    "parse_pairs",
    "parse_spec",
]

# The exit-code contract (also in advisor.cli and docs/cli.md); kept here so the client package
# does not import the CLI package that registers it.
EXIT_GATE = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_REJECTED = 4

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class Injected:
    """HTTP clients to use instead of building them from ``--url`` (tests, embedding)."""

    advisor: httpx.Client | None = None
    target: httpx.Client | None = None
    sleep: Callable[[float], None] | None = None


class CommandFailed(click.ClickException):
    """The server could not be reached or failed (exit 3); printed as ``advisor: <message>``."""

    exit_code = EXIT_UNREACHABLE

    def show(self, file: Any = None) -> None:
        click.echo(f"advisor: {self.format_message()}", err=True)


class InputRejected(CommandFailed):
    """The server rejected the input with a 4xx (exit 4)."""

    exit_code = EXIT_REJECTED


def handle_errors(func: F) -> F:
    """Map client exceptions onto the exit-code contract."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except Rejected as exc:
            raise InputRejected(_describe(exc)) from exc
        except ApiError as exc:
            raise CommandFailed(_describe(exc)) from exc

    return cast(F, wrapper)


def _describe(exc: ApiError) -> str:
    text = exc.message
    problem = exc.problem
    if problem.get("field") and str(problem["field"]) not in text:
        text += f" (field: {problem['field']})"
    matches = problem.get("matches")
    if matches and "did you mean" not in text:
        text += f"; did you mean {', '.join(map(str, matches))}?"
    return text


def _injected(ctx: click.Context) -> Injected:
    obj = ctx.find_object(Injected)
    return obj if obj is not None else Injected()


def make_client(ctx: click.Context, url: str | None, token: str | None, timeout: float, retries: int) -> AdvisorClient:
    injected = _injected(ctx)
    if injected.advisor is not None:
        client = AdvisorClient(injected.advisor, retries=retries)
        if injected.sleep is not None:
            client.sleep = injected.sleep
        return client
    return AdvisorClient.connect(url, token, timeout=timeout, retries=retries)


def injected_target(ctx: click.Context) -> httpx.Client | None:
    return _injected(ctx).target


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
        out[key.replace("-", "_") if typed else key] = typed_scalar(value.strip()) if typed else value.strip()
    return out


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
