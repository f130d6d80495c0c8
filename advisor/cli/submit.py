"""``advisor submit`` and ``advisor advise``: send result files, print the analysis, gate on it.
The two share everything but the storing (``POST /runs`` against ``POST /advise``)."""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click

from advisor.cli.client import emit, exit_on_gate, handle_errors, make_client, write_step_summary
from advisor.cli.options import (
    client_options,
    context_from_options,
    context_options,
    expand_files,
    gate_options,
    output_option,
)
from advisor.client.gate import results_of
from advisor.client.http import AdvisorClient
from advisor.client.render import render_json, render_results

__all__ = ["WORKLOAD_OPTIONS", "advise_command", "submit_command", "workload_context"]

#: The workload context a file may lack: option → (context field, help). The server reads the same
#: fields as ``?concurrency=``, ``X-Advisor-Concurrency`` or a wrapper's context.
WORKLOAD_OPTIONS: dict[str, tuple[str, str]] = {
    "--concurrency": ("concurrency", "Streams in flight (the benchmark's max concurrency)."),
    "--prompt-tokens": ("prompt_tokens", "Mean prompt length in tokens."),
    "--output-tokens": ("output_tokens", "Mean output length in tokens."),
    "--request-rate": ("request_rate", "Offered requests per second."),
}


def _workload_options(func: Any) -> Any:
    for option, (name, text) in reversed(WORKLOAD_OPTIONS.items()):
        func = click.option(option, name, type=click.FloatRange(min=0.0, min_open=True), default=None, help=text)(func)
    return func


def workload_context(params: Mapping[str, Any]) -> dict[str, Any]:
    """The workload fields given as options (None dropped); whole numbers travel as integers."""
    out: dict[str, Any] = {}
    for name, _ in WORKLOAD_OPTIONS.values():
        value = params.get(name)
        if value is not None:
            out[name] = int(value) if float(value).is_integer() else float(value)
    return out


def _file_entry(path: Path, data: bytes, *, role: str | None = None, format_id: str | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": path.name}
    try:
        entry["content"] = data.decode("utf-8")
    except UnicodeDecodeError:
        # UTF-16 (PowerShell redirects) and anything binary travel as base64; the server sniffs it.
        entry["content"] = base64.b64encode(data).decode("ascii")
        entry["encoding"] = "base64"
    if role:
        entry["role"] = role
    if format_id:
        entry["format"] = format_id
    return entry


def _needs_wrapper(context: Mapping[str, Any], metrics: Sequence[Path], side: Sequence[Path] = ()) -> bool:
    return (
        bool(metrics)
        or bool(side)
        or any(isinstance(context.get(k), dict) for k in ("hardware", "model", "quantization"))
    )


def _content_type(path: Path) -> str:
    suffix = path.suffix.lower()
    return {".json": "application/json", ".jsonl": "application/x-ndjson", ".csv": "text/csv"}.get(
        suffix, "application/octet-stream"
    )


def _send_files(
    client: AdvisorClient,
    files: Sequence[Path],
    context: Mapping[str, Any],
    *,
    metrics: Sequence[Path],
    format_id: str | None,
    store: bool,
    side: Sequence[Path] = (),
) -> list[tuple[str, dict[str, Any]]]:
    if len(metrics) > 2:
        raise click.BadParameter("give one /metrics scrape, or two (before and after)", param_hint="--metrics")
    metric_entries = []
    if len(metrics) == 1:
        metric_entries = [_file_entry(metrics[0], metrics[0].read_bytes(), role="metrics")]
    elif len(metrics) == 2:
        metric_entries = [
            _file_entry(metrics[0], metrics[0].read_bytes(), role="metrics_before"),
            _file_entry(metrics[1], metrics[1].read_bytes(), role="metrics_after"),
        ]
    # Side files travel beside every benchmark file, role "side": the server keeps them with the
    # submission and reads those that say where the model sits (Ollama /api/ps, a llama.cpp log).
    side_entries = [_file_entry(p, p.read_bytes(), role="side") for p in side]
    answers: list[tuple[str, dict[str, Any]]] = []
    for path in files:
        data = path.read_bytes()
        if _needs_wrapper(context, metrics, side):
            wrapper = {
                "context": dict(context),
                "files": [_file_entry(path, data, format_id=format_id), *metric_entries, *side_entries],
            }
            answer = client.submit_wrapper(wrapper, store=store)
        else:
            answer = client.submit(
                data,
                context=context,
                format_id=format_id,
                file_name=path.name,
                content_type=_content_type(path),
                store=store,
            )
        answers.append((str(path), answer))
    return answers


def _show_answers(answers: Sequence[tuple[str, dict[str, Any]]], output: str, base_url: str) -> list[dict[str, Any]]:
    results: list[tuple[str | None, dict[str, Any]]] = [
        (source, item) for source, answer in answers for item in results_of(answer)
    ]
    if output == "json":
        bodies = [answer for _, answer in answers]
        emit(render_json(bodies[0] if len(bodies) == 1 else bodies))
    else:
        emit(render_results(results, output, base_url=base_url))
        if output == "github":
            write_step_summary(render_results(results, "md", base_url=base_url))
    return [r for _, r in results]


_SUBMIT_HELP = """

\b
FILE may be a glob ('results/*.json', quoted). Any supported format is accepted
(vLLM bench, SGLang, guidellm, genai-perf, llmperf, llama-bench, llama-server,
Ollama, Prometheus, canonical JSON); context the file lacks comes from the options.

\b
Examples:
  advisor submit result.json -d chat-prod --hardware nvidia-h100-sxm --fail-on severe
  advisor submit bench.json --metrics before.prom --metrics after.prom -o md
  advisor submit generate.json --side ps.json    # Ollama /api/ps: where the model sits
  advisor submit llama-bench.json --side server.log --side notes.txt
  advisor submit llmperf.json --hardware nvidia-l4 --concurrency 12 --prompt-tokens 512
"""


def _submit_like(store: bool) -> click.Command:
    name = "submit" if store else "advise"
    summary = (
        "Submit benchmark result files: store, analyse and gate them."
        if store
        else "Analyse result files without storing anything."
    )

    @click.command(name, help=summary + _SUBMIT_HELP)
    @click.argument("files", nargs=-1, required=True, metavar="FILE...")
    @click.option("--format", "format_id", default=None, help="Input format id (default: sniffed).")
    @click.option(
        "--metrics",
        "metrics",
        multiple=True,
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        help="A /metrics scrape to combine with each file; give it twice for a before/after pair.",
    )
    @click.option(
        "--side",
        "side",
        multiple=True,
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        help=(
            "A side file to send beside each file (repeatable): kept with the submission, and read when it says "
            "where the model sits (Ollama /api/ps JSON, a llama.cpp server log)."
        ),
    )
    @context_options()
    @_workload_options
    @gate_options
    @output_option()
    @client_options
    @click.pass_context
    @handle_errors
    def command(
        ctx: click.Context,
        /,
        files: tuple[str, ...],
        format_id: str | None,
        metrics: tuple[Path, ...],
        side: tuple[Path, ...],
        **params: Any,
    ) -> None:
        context = {**context_from_options(params), **workload_context(params)}
        paths = expand_files(files)
        with make_client(ctx, params["url"], params["token"], params["timeout"], params["retries"]) as client:
            answers = _send_files(client, paths, context, metrics=metrics, format_id=format_id, store=store, side=side)
            results = _show_answers(answers, params["output"], client.base_url)
        exit_on_gate(ctx, results, params["fail_on"], params["fail_on_verdict"])

    return command


submit_command = _submit_like(store=True)
advise_command = _submit_like(store=False)
