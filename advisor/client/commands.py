"""The client-side ``advisor`` commands: submit, advise, predict, compare, runs, rules, model,
measure, and the catalog's list/show/add. Each is thin: options → :class:`AdvisorClient` → a
renderer, with the exit codes of :mod:`advisor.client.options`."""

from __future__ import annotations

import base64
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click

from advisor.client.compare import Comparison, compare_runs
from advisor.client.gate import evaluate_gate, results_of
from advisor.client.http import AdvisorClient, Rejected
from advisor.client.options import (
    EXIT_GATE,
    EXIT_UNREACHABLE,
    client_options,
    context_from_options,
    context_options,
    expand_files,
    gate_options,
    handle_errors,
    injected_target,
    make_client,
    output_option,
)
from advisor.client.render import annotation, fmt, name_of, render_json, render_results, table

__all__ = [
    "CLIENT_COMMANDS",
    "advise_command",
    "catalog_add",
    "catalog_list",
    "catalog_show",
    "compare_command",
    "measure_command",
    "model_group",
    "predict_command",
    "rules_group",
    "runs_group",
    "submit_command",
]


def _emit(text: str) -> None:
    if text:
        click.echo(text)


def _write_step_summary(markdown: str) -> None:
    """GitHub shows ``$GITHUB_STEP_SUMMARY`` on the run page: the Markdown report goes there."""
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if path:
        with Path(path).open("a", encoding="utf-8") as fh:
            fh.write(markdown + "\n\n")


def _gate(
    ctx: click.Context, /, results: Sequence[Mapping[str, Any]], fail_on: str | None, verdict: str | None
) -> None:
    gate = evaluate_gate(results, fail_on=fail_on, fail_on_verdict=verdict)
    if gate.failed:
        for reason in gate.reasons:
            click.echo(f"advisor: gate failed: {reason}", err=True)
        ctx.exit(EXIT_GATE)


# ------------------------------------------------------------------------------------------------
# submit / advise


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


def _needs_wrapper(context: Mapping[str, Any], metrics: Sequence[Path]) -> bool:
    return bool(metrics) or any(isinstance(context.get(k), dict) for k in ("hardware", "model", "quantization"))


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
    answers: list[tuple[str, dict[str, Any]]] = []
    for path in files:
        data = path.read_bytes()
        if _needs_wrapper(context, metrics):
            wrapper = {
                "context": dict(context),
                "files": [_file_entry(path, data, format_id=format_id), *metric_entries],
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
        _emit(render_json(bodies[0] if len(bodies) == 1 else bodies))
    else:
        _emit(render_results(results, output, base_url=base_url))
        if output == "github":
            _write_step_summary(render_results(results, "md", base_url=base_url))
    return [r for _, r in results]


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
    @context_options()
    @gate_options
    @output_option()
    @client_options
    @click.pass_context
    @handle_errors
    def command(
        ctx: click.Context, /, files: tuple[str, ...], format_id: str | None, metrics: tuple[Path, ...], **params: Any
    ) -> None:
        context = context_from_options(params)
        paths = expand_files(files)
        with make_client(ctx, params["url"], params["token"], params["timeout"], params["retries"]) as client:
            answers = _send_files(client, paths, context, metrics=metrics, format_id=format_id, store=store)
            results = _show_answers(answers, params["output"], client.base_url)
        _gate(ctx, results, params["fail_on"], params["fail_on_verdict"])

    return command


_SUBMIT_HELP = """

\b
FILE may be a glob ('results/*.json', quoted). Any supported format is accepted
(vLLM bench, SGLang, guidellm, genai-perf, llmperf, llama-bench, llama-server,
Ollama, Prometheus, canonical JSON); context the file lacks comes from the options.

\b
Examples:
  advisor submit result.json -d chat-prod --hardware nvidia-h100-sxm --fail-on severe
  advisor submit bench.json --metrics before.prom --metrics after.prom -o md
"""

submit_command = _submit_like(store=True)
advise_command = _submit_like(store=False)


# ------------------------------------------------------------------------------------------------
# predict


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
    """
    from advisor.client.options import parse_spec

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
            ranking = client.rank_hardware(str(model), **params)
            if p["output"] == "json":
                _emit(render_json(ranking))
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
                ]
                for r in ranking[: p["top"]]
            ]
            headers = ["#", "hardware", "GB/s", "decode tok/s", "ceiling", "prefill tok/s", "TTFT ms", "fits"]
            style = "md" if p["output"] == "md" else "text"
            _emit(f"{model}, {p['prompt_tokens']}-token prompts: devices ranked by predicted decode speed")
            _emit(table(headers, rows, style=style))
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
        _emit(render_json(answer))
        return
    style = "md" if p["output"] == "md" else "text"
    rows = [
        [label, *((answer.get(key) or {}).get(x) for x in ("expected", "low", "high", "ceiling"))]
        for label, key in _BANDS
        if answer.get(key)
    ]
    resolved = answer.get("resolved") or {}
    _emit(" · ".join(str(v) for v in resolved.values() if v) or "prediction")
    _emit(table(["metric", "expected", "low", "high", "ceiling/floor"], rows, style=style))
    facts = [
        ("weights", f"{fmt((answer.get('weight_bytes') or 0) / 1e9)} GB"),
        ("KV per token", f"{fmt(answer.get('kv_bytes_per_token'))} B"),
        ("KV pool", f"{fmt(answer.get('kv_pool_tokens'))} tokens"),
        ("max concurrent sequences", fmt(answer.get("max_concurrent_sequences"))),
        ("bound", ", ".join(f"{k}: {v}" for k, v in (answer.get("bound") or {}).items())),
        ("model", f"{answer.get('model_version')} ({answer.get('expectation_source')})"),
    ]
    _emit("")
    _emit("\n".join(f"{k}: {v}" for k, v in facts))
    for note in answer.get("notes") or []:
        _emit(f"note: {note}")


# ------------------------------------------------------------------------------------------------
# compare


def _comparison_text(comp: Comparison, style: str, show_all: bool) -> str:
    lines = [f"run {comp.run_a} → run {comp.run_b}"]
    changes = [("setup", c) for c in comp.setup_changes] + [("workload", c) for c in comp.workload_changes]
    if changes:
        lines += [
            "",
            "what changed:",
            table(["", "field", "A", "B"], [[k, c.path, fmt(c.a), fmt(c.b)] for k, c in changes], style=style),
        ]
    else:
        lines += ["", "setup and workload are identical"]
    moves = comp.moves if show_all else comp.moved
    lines.append("")
    if moves:
        lines.append("metrics" + ("" if show_all else " that moved beyond noise") + ":")
        rows = [
            [
                m.metric,
                m.a,
                m.b,
                fmt(m.relative, pct=True) if m.relative is not None else "–",
                f"±{m.noise:.0%}",
                m.verdict,
            ]
            for m in moves
        ]
        lines.append(table(["metric", "A", "B", "change", "noise", "verdict"], rows, style=style))
    else:
        lines.append("no metric moved beyond noise")
    lines.extend(f"note: {note}" for note in comp.notes)
    return "\n".join(lines)


@click.command("compare")
@click.argument("run_a", type=int)
@click.argument("run_b", type=int)
@click.option(
    "--noise",
    type=click.FloatRange(min=0),
    default=0.05,
    show_default=True,
    help="Relative noise band for means and p50 (tails get 2–3×).",
)
@click.option("--all", "show_all", is_flag=True, help="Show every shared metric, not only those that moved.")
@click.option("--fail-on-regression", is_flag=True, help="Exit 1 when any metric got worse beyond noise.")
@output_option("text", "md", "json")
@client_options
@click.pass_context
@handle_errors
def compare_command(
    ctx: click.Context, /, run_a: int, run_b: int, noise: float, show_all: bool, fail_on_regression: bool, **p: Any
) -> None:
    """What changed between two runs, and which metrics moved beyond noise.

    "Change one thing at a time": when several setup fields differ, the comparison says the moves
    cannot be credited to one of them.
    """
    with make_client(ctx, p["url"], p["token"], p["timeout"], p["retries"]) as client:
        comp = compare_runs(client.run(run_a), client.run(run_b), noise=noise)
    if p["output"] == "json":
        _emit(render_json(comp.to_dict()))
    else:
        _emit(_comparison_text(comp, "md" if p["output"] == "md" else "text", show_all))
    if fail_on_regression and comp.regressions:
        worse = ", ".join(m.metric for m in comp.regressions)
        click.echo(f"advisor: gate failed: worse beyond noise: {worse}", err=True)
        ctx.exit(EXIT_GATE)


# ------------------------------------------------------------------------------------------------
# runs


@click.group("runs")
def runs_group() -> None:
    """Stored runs: list, show, raw."""


def _p50(metrics: Mapping[str, Any], key: str) -> Any:
    value = metrics.get(key)
    return value.get("p50", value.get("mean")) if isinstance(value, dict) else value


@runs_group.command("list")
@click.option("--deployment", "-d", default=None)
@click.option("--runtime", default=None)
@click.option("--hardware", default=None)
@click.option("--model", default=None)
@click.option("--quantization", default=None)
@click.option("--verdict", type=click.Choice(["pass", "warn", "fail"]), default=None)
@click.option("--since", default=None, metavar="ISO-TIME")
@click.option("--until", default=None, metavar="ISO-TIME")
@click.option("--limit", type=click.IntRange(1, 500), default=20, show_default=True)
@click.option("--all", "all_pages", is_flag=True, help="Follow the cursor to the last page.")
@output_option("text", "md", "json")
@client_options
@click.pass_context
@handle_errors
def runs_list(ctx: click.Context, /, limit: int, all_pages: bool, **p: Any) -> None:
    """Runs, newest first."""
    filters = {
        k: p[k] for k in ("deployment", "runtime", "hardware", "model", "quantization", "verdict", "since", "until")
    }
    with make_client(ctx, p["url"], p["token"], p["timeout"], p["retries"]) as client:
        if all_pages:
            items = list(client.iter_runs(page_size=limit, **filters))
            total = len(items)
        else:
            page = client.runs(limit=limit, **filters)
            items, total = list(page.get("items") or []), int(page.get("total") or 0)
    if p["output"] == "json":
        _emit(render_json({"items": items, "total": total}))
        return
    rows = []
    for run in items:
        setup, metrics = run.get("setup") or {}, run.get("metrics") or {}
        rows.append(
            [
                run.get("id"),
                str(run.get("measured_at", ""))[:16].replace("T", " "),
                run.get("deployment") or "–",
                setup.get("runtime") or "–",
                setup.get("hardware") or "–",
                setup.get("model") or "–",
                setup.get("quantization") or "–",
                run.get("verdict") or "–",
                _p50(metrics, "ttft_ms"),
                _p50(metrics, "itl_ms"),
                metrics.get("decode_tok_s"),
            ]
        )
    headers = [
        "id",
        "measured",
        "deployment",
        "runtime",
        "hardware",
        "model",
        "quant",
        "verdict",
        "TTFT p50",
        "ITL p50",
        "decode tok/s",
    ]
    _emit(table(headers, rows, style="md" if p["output"] == "md" else "text"))
    _emit(f"{len(items)} of {total} run(s)")


@runs_group.command("show")
@click.argument("run_id", type=int)
@output_option()
@client_options
@click.pass_context
@handle_errors
def runs_show(ctx: click.Context, /, run_id: int, **p: Any) -> None:
    """One run with its ranked recommendations."""
    with make_client(ctx, p["url"], p["token"], p["timeout"], p["retries"]) as client:
        run = client.run(run_id)
        recs = client.recommendations(run_id)
        base = client.base_url
    result = {"run": run, "verdict": run.get("verdict"), "recommendations": recs, "expectations": {}}
    if p["output"] == "json":
        _emit(render_json(result))
        return
    _emit(render_results([(None, result)], p["output"], base_url=base))


@runs_group.command("raw")
@click.argument("run_id", type=int)
@client_options
@click.pass_context
@handle_errors
def runs_raw(ctx: click.Context, /, run_id: int, **p: Any) -> None:
    """The original bytes a run was parsed from, to stdout."""
    with make_client(ctx, p["url"], p["token"], p["timeout"], p["retries"]) as client:
        data = client.raw(run_id)
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


# ------------------------------------------------------------------------------------------------
# rules


@click.group("rules")
def rules_group() -> None:
    """The rule catalogue."""


@rules_group.command("list")
@click.option("--group", default=None, help="pre, dec, sch, cap, cfg, reg or meas.")
@click.option("--status", default=None, help="stable, preview or deprecated.")
@output_option("text", "md", "json")
@client_options
@click.pass_context
@handle_errors
def rules_list(ctx: click.Context, /, group: str | None, status: str | None, **p: Any) -> None:
    """Every rule: id, name, phase, action and status."""
    with make_client(ctx, p["url"], p["token"], p["timeout"], p["retries"]) as client:
        rules = client.rules()
    rules = [
        r
        for r in rules
        if (group is None or str(r.get("group", "")).lower() == group.lower())
        and (status is None or r.get("status") == status)
    ]
    if p["output"] == "json":
        _emit(render_json(rules))
        return
    rows = [
        [r.get("rule_id"), r.get("name"), r.get("phase"), r.get("action"), r.get("status"), r.get("summary")]
        for r in rules
    ]
    _emit(
        table(
            ["id", "name", "phase", "action", "status", "summary"], rows, style="md" if p["output"] == "md" else "text"
        )
    )


@rules_group.command("show")
@click.argument("rule_id")
@output_option("text", "md", "json")
@client_options
@click.pass_context
@handle_errors
def rules_show(ctx: click.Context, /, rule_id: str, **p: Any) -> None:
    """One rule: why it matters, the fix, an example and its thresholds (by id, name or alias)."""
    import difflib

    with make_client(ctx, p["url"], p["token"], p["timeout"], p["retries"]) as client:
        rules = client.rules()
    wanted = rule_id.strip().lower()
    rule = next(
        (
            r
            for r in rules
            if wanted in {str(r.get("rule_id", "")).lower(), str(r.get("name", "")).lower()}
            or wanted in {str(a).lower() for a in r.get("aliases") or []}
        ),
        None,
    )
    if rule is None:
        names = [str(r.get("rule_id")) for r in rules] + [str(r.get("name")) for r in rules]
        close = difflib.get_close_matches(rule_id, names, n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise Rejected(f"no rule {rule_id!r}{hint}", status=404)
    if p["output"] == "json":
        _emit(render_json(rule))
        return
    md = p["output"] == "md"
    heading = (
        f"## {rule['rule_id']} {rule['name']}" if md else f"{rule['rule_id']} {rule['name']} ({rule.get('status')})"
    )
    parts = [heading, str(rule.get("summary") or "")]
    for title, key in (("Why is this bad?", "why"), ("Fix", "fix"), ("Example", "example")):
        if rule.get(key):
            parts += ["", f"### {title}" if md else f"{title}", str(rule[key])]
    thresholds = rule.get("thresholds") or []
    if thresholds:
        rows = [
            [
                t.get("key"),
                t.get("direction") or t.get("kind"),
                fmt(t.get("values") or t.get("value")),
                t.get("unit") or "",
                t.get("doc") or "",
            ]
            for t in thresholds
        ]
        parts += [
            "",
            table(["threshold", "direction", "values", "unit", "meaning"], rows, style="md" if md else "text"),
        ]
    if rule.get("docs"):
        parts += ["", f"docs: {rule['docs']}"]
    _emit("\n".join(parts))


# ------------------------------------------------------------------------------------------------
# model


@click.group("model")
def model_group() -> None:
    """The fitted performance model."""


@model_group.command("list")
@output_option("text", "json")
@client_options
@click.pass_context
@handle_errors
def model_list(ctx: click.Context, /, **p: Any) -> None:
    """Fitted-model versions with their cross-validated error."""
    with make_client(ctx, p["url"], p["token"], p["timeout"], p["retries"]) as client:
        body = client.models()
    if p["output"] == "json":
        _emit(render_json(body))
        return
    rows = []
    for m in body if isinstance(body, list) else []:
        # summary: {target: {scheme: {"mdape": {"model": ...}, "coverage": ...}}} (GET /api/v1/models)
        hardware = {
            t: (s.get("hardware") or {}).get("mdape", {}).get("model") for t, s in (m.get("summary") or {}).items()
        }
        rows.append(
            [
                m.get("version"),
                "*" if m.get("is_active") else "",
                m.get("created_at"),
                m.get("n_train"),
                fmt(hardware.get("decode_tok_s")),
                fmt(hardware.get("prefill_tok_s")),
            ]
        )
    if not rows:
        _emit("no fitted versions yet: expectations come from the physics prior (`advisor model fit`)")
        return
    _emit(table(["version", "active", "created", "n", "decode MdAPE", "prefill MdAPE"], rows))


@model_group.command("fit")
@click.option("--activate/--no-activate", default=None, help="Make the new version the active one.")
@output_option("text", "json")
@client_options
@click.pass_context
@handle_errors
def model_fit(ctx: click.Context, /, activate: bool | None, **p: Any) -> None:
    """Fit a new model version on the reference data and the fleet's runs."""
    options = {} if activate is None else {"activate": activate}
    with make_client(ctx, p["url"], p["token"], p["timeout"], p["retries"]) as client:
        job = client.wait_for_job(client.fit_model(options))
    if p["output"] == "json":
        _emit(render_json(job))
    else:
        result = job.get("result") or {}
        _emit(
            f"fit job {job.get('id')}: {job.get('status')}"
            + (f", version {result['version']}" if result.get("version") else "")
            + (f" ({job['error']})" if job.get("error") else "")
        )
    if job.get("status") != "succeeded":
        ctx.exit(EXIT_UNREACHABLE)  # the server could not fit (see the job error), or it timed out


# ------------------------------------------------------------------------------------------------
# catalog list/show/add (registered on the server-side `catalog` group)


_KINDS = click.Choice(["hardware", "models", "quantizations"])


@click.command("list")
@click.argument("kind", type=_KINDS)
@click.option("--origin", type=click.Choice(["shipped", "user"]), default=None)
@output_option("text", "md", "json")
@client_options
@click.pass_context
@handle_errors
def catalog_list(ctx: click.Context, /, kind: str, origin: str | None, **p: Any) -> None:
    """List a catalog from the advisor server."""
    with make_client(ctx, p["url"], p["token"], p["timeout"], p["retries"]) as client:
        entries = client.catalog(kind)
    entries = [e for e in entries if origin is None or e.get("origin") == origin]
    if p["output"] == "json":
        _emit(render_json(entries))
        return
    columns = {
        "hardware": ["id", "name", "mem_bandwidth_gb_s", "memory_gb", "fp16_tflops", "origin"],
        "models": ["id", "name", "params_b", "active_params_b", "num_hidden_layers", "origin"],
        "quantizations": ["id", "name", "bits_per_weight", "origin"],
    }[kind]
    rows = [[e.get(c) if e.get(c) is not None else "–" for c in columns] for e in entries]
    _emit(table(columns, rows, style="md" if p["output"] == "md" else "text"))


@click.command("show")
@click.argument("kind", type=_KINDS)
@click.argument("entry_id")
@output_option("text", "json")
@client_options
@click.pass_context
@handle_errors
def catalog_show(ctx: click.Context, /, kind: str, entry_id: str, **p: Any) -> None:
    """One catalog entry, by id or alias."""
    with make_client(ctx, p["url"], p["token"], p["timeout"], p["retries"]) as client:
        entry = client.catalog_entry(kind, entry_id)
    if p["output"] == "json":
        _emit(render_json(entry))
        return
    _emit("\n".join(f"{k}: {fmt(v)}" for k, v in entry.items()))


@click.command("add")
@click.argument("kind", type=_KINDS)
@click.argument("spec", type=click.File("r", encoding="utf-8"))
@output_option("text", "json")
@client_options
@click.pass_context
@handle_errors
def catalog_add(ctx: click.Context, /, kind: str, spec: Any, **p: Any) -> None:
    """Add a custom entry from a JSON file ('-' for stdin): the inline-spec form with an "id"
    (models may give a Hugging Face config.json body plus "id")."""
    try:
        entry = json.load(spec)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="SPEC") from exc
    if not isinstance(entry, dict):
        raise click.BadParameter("must be a JSON object", param_hint="SPEC")
    with make_client(ctx, p["url"], p["token"], p["timeout"], p["retries"]) as client:
        added = client.add_catalog_entry(kind, entry)
    if p["output"] == "json":
        _emit(render_json(added))
        return
    _emit(f"added {kind} entry {added.get('id')}")


# ------------------------------------------------------------------------------------------------
# measure


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
    default=5,
    show_default=True,
    help="Requests per prompt length.",
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
        OllamaBackend(target) if p["api"] == "ollama" else OpenAIBackend(target, chat=p["chat"], extra_body=extra_body)
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
        measurement = _run_with_progress(measure, backend, p["served_model"], opts, target, total)
    finally:
        if own_target:
            target.close()

    doc = measurement.to_dict(context)
    if p["dry_run"]:
        if output == "json":
            _emit(render_json(doc))
        else:
            _emit(_measure_summary(doc, measurement.prefill_tok_s, output))
            _emit("")
            _emit("dry run: the canonical run that would be submitted" + (":" if output != "md" else ""))
            _emit(
                ("```json\n" if output == "md" else "") + render_json(doc["run"]) + ("\n```" if output == "md" else "")
            )
        return

    with make_client(ctx, p["url"], p["token"], p["timeout"], p["retries"]) as client:
        answer = client.submit_run(doc["run"])
        base_url = client.base_url
    results = results_of(answer)
    if output == "json":
        _emit(render_json({**doc, "result": answer}))
    else:
        _emit(_measure_summary(doc, measurement.prefill_tok_s, output))
        _emit("")
        _emit(render_results([(None, r) for r in results], output, base_url=base_url))
        if output == "github":
            _write_step_summary(
                _measure_summary(doc, measurement.prefill_tok_s, "md")
                + "\n\n"
                + render_results([(None, r) for r in results], "md", base_url=base_url)
            )
    _gate(ctx, results, p["fail_on"], p["fail_on_verdict"])


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
    lines += [f"note: {n}" for n in (run.get("source") or {}).get("notes", [])]
    return "\n".join(lines)


def _run_with_progress(measure: Any, backend: Any, model: str | None, opts: Any, target: Any, total: int) -> Any:
    """Run the probe with a progress bar on stderr (a terminal), or one line per probe (CI logs)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    if not console.is_terminal:
        seen: set[str] = set()

        def log(name: str) -> None:
            if name not in seen:
                seen.add(name)
                click.echo(f"advisor measure: {name} ...", err=True)

        return measure(backend, model=model, options=opts, scrape_http=target, on_request=log)
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

        return measure(backend, model=model, options=opts, scrape_http=target, on_request=advance)


#: Every top-level client command, registered on the ``advisor`` group by advisor.cli.
CLIENT_COMMANDS: tuple[click.Command, ...] = (
    submit_command,
    advise_command,
    predict_command,
    compare_command,
    runs_group,
    rules_group,
    model_group,
    measure_command,
)
