"""``advisor measure URL``: probe a running LLM server the way the seed does (the probes are
:mod:`advisor.client.measure`), print what it found and submit the run.

The probe's clock is injected (``Injected.clock``, default the real one), so tests run on fake time.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import click

from advisor.cli.client import (
    emit,
    exit_on_gate,
    handle_errors,
    injected_clock,
    injected_target,
    make_client,
    write_step_summary,
)
from advisor.cli.options import client_options, context_from_options, context_options, gate_options, output_option
from advisor.client.gate import results_of
from advisor.client.render import annotation, fmt, name_of, render_json, render_results, table

if TYPE_CHECKING:
    from advisor.client.measure import Measurement

__all__ = ["measure_command"]


def _probe_rows(summaries: Sequence[Mapping[str, Any]]) -> list[list[Any]]:
    rows = []
    for s in summaries:
        ttft, itl = s.get("ttft_ms") or {}, s.get("itl_ms") or {}
        rows.append(
            [
                s.get("name"),
                s.get("prompt_tokens"),
                s.get("concurrency"),
                s.get("requests"),
                s.get("early_stops"),
                ttft.get("p50"),
                ttft.get("p90"),
                ttft.get("p99"),
                itl.get("p50"),
                itl.get("p99"),
                s.get("decode_tok_s"),
                s.get("output_throughput_tok_s"),
            ]
        )
    return rows


_PROBE_HEADERS = [
    "probe",
    "prompt tok",
    "conc",
    "req",
    "early",
    "TTFT p50",
    "TTFT p90",
    "TTFT p99",
    "ITL p50",
    "ITL p99",
    "decode tok/s",
    "total tok/s",
]


@click.command("measure")
@click.argument("server_url", metavar="URL")
@click.option("--api", type=click.Choice(["openai", "ollama"]), default="openai", show_default=True)
@click.option("--chat", is_flag=True, help="openai: use /v1/chat/completions instead of /v1/completions.")
@click.option("--model", "served_model", default=None, help="Model to request (default: the server's first).")
@click.option(
    "--requests",
    "-n",
    "repeat",
    type=click.IntRange(1, 1000),
    default=8,
    show_default=True,
    help="Requests per prompt length (a failed or early-stopped request is retried).",
)
@click.option("--short-tokens", type=click.IntRange(min=8), default=200, show_default=True)
@click.option("--long-tokens", type=click.IntRange(min=16), default=2000, show_default=True)
@click.option(
    "--max-tokens", type=click.IntRange(min=2), default=64, show_default=True, help="Tokens to generate per request."
)
@click.option(
    "--concurrency",
    default="1",
    show_default=True,
    metavar="N,N,...",
    help="Extra levels with N streams in flight: 1,4,16.",
)
@click.option(
    "--metrics/--no-metrics", "scrape", default=True, help="Scrape the server's /metrics before, during and after."
)
@click.option(
    "--api-key",
    envvar="ADVISOR_MEASURE_API_KEY",
    default=None,
    help="Bearer key for the measured server (ADVISOR_MEASURE_API_KEY).",
)
@click.option(
    "--request-timeout",
    type=click.FloatRange(min=1),
    default=300.0,
    show_default=True,
    help="Seconds per request to the measured server.",
)
@click.option(
    "--extra-body", default=None, metavar="JSON", help="openai: extra request fields, e.g. '{\"ignore_eos\": true}'."
)
@click.option("--dry-run", is_flag=True, help="Print the canonical run instead of submitting it.")
@context_options(
    model_option="--setup-model",
    model_help=(
        "What to record as setup.model (catalog id, alias, inline JSON or @config.json); "
        "default: the served model's name."
    ),
)
@gate_options
@output_option()
@client_options
@click.pass_context
@handle_errors
def measure_command(ctx: click.Context, /, server_url: str, **p: Any) -> None:
    """Measure a running LLM server the way the seed does, then submit the run.

    \b
    A discarded warm-up, then a short (~200-token) and a long (~2,000-token) prompt,
    N times each, streamed: TTFT, the gaps between tokens and decode tok/s; prefill
    tok/s from the TTFT difference. --concurrency 1,4,16 adds batched levels.
    /metrics (vLLM, SGLang, TGI, llama-server) adds queue depth, KV use and prefix hits.

    \b
    Examples:
      advisor measure http://localhost:8000 -d chat-prod --hardware nvidia-a10g
      advisor measure http://localhost:11434 --api ollama --dry-run -o json
    """
    import httpx

    from advisor.client.measure import MeasureOptions, OllamaBackend, OpenAIBackend, iter_levels, measure

    try:
        levels = tuple(iter_levels(p["concurrency"]))
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--concurrency") from exc
    if p["short_tokens"] >= p["long_tokens"]:
        raise click.BadParameter("must be larger than --short-tokens", param_hint="--long-tokens")
    extra_body: dict[str, Any] = {}
    if p["extra_body"]:
        try:
            extra_body = json.loads(p["extra_body"])
        except ValueError as exc:
            raise click.BadParameter(f"not JSON: {exc}", param_hint="--extra-body") from exc
        if not isinstance(extra_body, dict):
            raise click.BadParameter("must be a JSON object", param_hint="--extra-body")
    context = context_from_options(p, model_option="--setup-model")
    output = p["output"]

    clock = injected_clock(ctx)
    target = injected_target(ctx)
    own_target = target is None
    if target is None:
        base = server_url.rstrip("/")
        base = base[: -len("/v1")] if base.endswith("/v1") else base
        headers = {"User-Agent": "advisor-measure"}
        if p["api_key"]:
            headers["Authorization"] = f"Bearer {p['api_key']}"
        target = httpx.Client(
            base_url=base,
            headers=headers,
            timeout=httpx.Timeout(p["request_timeout"], connect=10.0),
            limits=httpx.Limits(max_connections=max(levels) + 2, max_keepalive_connections=max(levels) + 2),
        )
    backend = (
        OllamaBackend(target, clock=clock)
        if p["api"] == "ollama"
        else OpenAIBackend(target, chat=p["chat"], clock=clock, extra_body=extra_body)
    )
    opts = MeasureOptions(
        short_tokens=p["short_tokens"],
        long_tokens=p["long_tokens"],
        max_tokens=p["max_tokens"],
        repeat=p["repeat"],
        concurrency=levels,
        scrape_metrics=p["scrape"],
    )
    total = 2 + 2 * p["repeat"] + sum(max(p["repeat"], 2 * c) for c in levels if c > 1)
    try:
        measurement = _run_with_progress(
            functools.partial(measure, backend, model=p["served_model"], options=opts, scrape_http=target, clock=clock),
            total,
        )
    finally:
        if own_target:
            target.close()

    doc = measurement.to_dict(context)
    if p["dry_run"]:
        if output == "json":
            emit(render_json(doc))
        else:
            emit(_measure_summary(doc, measurement.prefill_tok_s, output))
            emit("")
            emit("dry run: the canonical run that would be submitted" + (":" if output != "md" else ""))
            emit(
                ("```json\n" if output == "md" else "") + render_json(doc["run"]) + ("\n```" if output == "md" else "")
            )
        return

    with make_client(ctx, p["url"], p["token"], p["timeout"], p["retries"]) as client:
        answer = client.submit_run(doc["run"])
        base_url = client.base_url
    results = results_of(answer)
    if output == "json":
        emit(render_json({**doc, "result": answer}))
    else:
        emit(_measure_summary(doc, measurement.prefill_tok_s, output))
        emit("")
        emit(render_results([(None, r) for r in results], output, base_url=base_url))
        if output == "github":
            write_step_summary(
                _measure_summary(doc, measurement.prefill_tok_s, "md")
                + "\n\n"
                + render_results([(None, r) for r in results], "md", base_url=base_url)
            )
    exit_on_gate(ctx, results, p["fail_on"], p["fail_on_verdict"])


def _measure_summary(doc: Mapping[str, Any], prefill: float | None, output: str) -> str:
    run = doc["run"]
    style = "md" if output == "md" else "text"
    if output == "github":
        probes = doc["probes"]
        lines = [
            annotation(
                "notice",
                f"{p['name']}: {fmt(p.get('prompt_tokens'))} prompt tokens, "
                f"TTFT p50 {fmt((p.get('ttft_ms') or {}).get('p50'))} ms, decode {fmt(p.get('decode_tok_s'))} tok/s",
                title="advisor measure",
            )
            for p in probes
        ]
        return "\n".join(lines)
    setup = run.get("setup") or {}
    head = f"{setup.get('runtime') or 'unknown runtime'} · {name_of(setup.get('model'))}"
    lines = [
        ("### " if style == "md" else "") + f"advisor measure: {head}",
        "",
        table(_PROBE_HEADERS, _probe_rows(doc["probes"]), style=style),
    ]
    metrics = run.get("metrics") or {}
    lines += [
        "",
        f"prefill: {fmt(prefill)} tok/s per sequence · "
        f"decode: {fmt(metrics.get('decode_tok_s'))} tok/s per sequence (long probe)",
    ]
    extra = [
        (k, metrics.get(k))
        for k in ("queue_waiting_max", "kv_cache_usage_max", "prefix_cache_hit_rate")
        if metrics.get(k) is not None
    ]
    if extra:
        lines.append("server /metrics: " + ", ".join(f"{k} {fmt(v)}" for k, v in extra))
    if (share := metrics.get("gpu_resident_share")) is not None:
        lines.append(
            f"model in GPU memory: {share:.0%}" + ("" if share >= 1 else " (the rest is read from system RAM)")
        )
    lines += [f"note: {n}" for n in (run.get("source") or {}).get("notes", [])]
    return "\n".join(lines)


def _run_with_progress(run: Callable[..., Measurement], total: int) -> Measurement:
    """``run(on_request=...)`` with a progress bar on stderr (a terminal), or one line per probe (CI logs)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    if not console.is_terminal:
        seen: set[str] = set()

        def log(name: str) -> None:
            if name not in seen:
                seen.add(name)
                click.echo(f"advisor measure: {name} ...", err=True)

        return run(on_request=log)
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as progress:
        task = progress.add_task("warm-up", total=total)

        def advance(name: str) -> None:
            progress.update(task, advance=1, description=name)

        return run(on_request=advance)
