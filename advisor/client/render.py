"""Output styles shared by every client command: ``text`` (a readable summary), ``md`` (for PR
comments), ``json`` (the server's answer as is) and ``github`` (workflow annotations plus the Markdown
summary in ``$GITHUB_STEP_SUMMARY``).

Tables are laid out here rather than with rich: CI logs are not terminals, and rich wraps a
non-terminal at 80 columns, which breaks tables that CI readers copy into issues.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "OUTPUTS",
    "annotation",
    "fmt",
    "md_escape",
    "name_of",
    "reason_text",
    "render_json",
    "render_results",
    "table",
]

OUTPUTS: tuple[str, ...] = ("text", "md", "json", "github")

_SEVERITY_ICON = {"critical": "🛑", "severe": "🔴", "moderate": "🟠", "low": "🟡", "none": "⚪"}
_VERDICT_ICON = {"pass": "✅", "warn": "⚠️", "fail": "❌"}
_ANNOTATION_LEVEL = {"critical": "error", "severe": "error", "moderate": "warning", "low": "notice"}

#: (label, expectation key, measured metric path, which statistic, ceiling is a floor)
_EXPECTATION_ROWS: tuple[tuple[str, str, str, bool], ...] = (
    ("decode tok/s", "decode_tok_s", "decode_tok_s", False),
    ("prefill tok/s", "prefill_tok_s", "prefill_tok_s", False),
    ("TTFT p50 ms", "ttft_ms", "ttft_ms", True),
    ("ITL p50 ms", "itl_ms", "itl_ms", True),
)


def fmt(value: Any, *, pct: bool = False) -> str:
    """Numbers for people: thousands separators, 3 significant figures below 100, '–' for missing."""
    if value is None or value == "":
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        number = float(value)
        if math.isnan(number):
            return "–"
        if pct:
            return f"{number * 100:+.1f}%"
        if number == 0:
            return "0"
        if abs(number) >= 100 or (number.is_integer() and abs(number) >= 1):
            return f"{number:,.0f}"
        if abs(number) >= 10:
            return f"{number:.1f}"
        return f"{number:.3g}"
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return str(value)


def md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, style: str = "text") -> str:
    """A table as aligned text (numbers right-aligned) or as a Markdown table."""
    cells = [[c if isinstance(c, str) else fmt(c) for c in row] for row in rows]
    if style == "md":
        lines = ["| " + " | ".join(md_escape(h) for h in headers) + " |"]
        lines.append("|" + "|".join("---" for _ in headers) + "|")
        lines.extend("| " + " | ".join(md_escape(c) for c in row) + " |" for row in cells)
        return "\n".join(lines)
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=False)]
    numeric = [all(_looks_numeric(row[i]) for row in cells if i < len(row)) for i in range(len(headers))]

    def line(values: Sequence[str]) -> str:
        parts = [v.rjust(w) if numeric[i] else v.ljust(w) for i, (v, w) in enumerate(zip(values, widths, strict=False))]
        return "  ".join(parts).rstrip()

    out = [line(headers), line(["-" * w for w in widths])]
    out.extend(line(row) for row in cells)
    return "\n".join(out)


def _looks_numeric(text: str) -> bool:
    stripped = text.replace(",", "").replace("%", "").replace("+", "").replace("-", "").replace(".", "")
    return text == "–" or stripped.isdigit()


def render_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


# ------------------------------------------------------------------------------------------------
# Submission results


def _measured(run: Mapping[str, Any], metric: str) -> Any:
    value = (run.get("metrics") or {}).get(metric)
    if isinstance(value, dict):
        return value.get("p50", value.get("mean"))
    return value


def _headline(result: Mapping[str, Any], base_url: str | None) -> str:
    run = result.get("run") or {}
    setup = run.get("setup") or {}
    parts = [f"run {run['id']}" if run.get("id") is not None else "run (not stored)"]
    if run.get("deployment"):
        parts.append(str(run["deployment"]))
    runtime, hardware = setup.get("runtime"), name_of(setup.get("hardware"))
    what = f"{runtime} on {hardware}" if runtime and hardware else (runtime or hardware or "")
    if what:
        parts.append(what)
    model = " ".join(x for x in (name_of(setup.get("model")), name_of(setup.get("quantization"))) if x)
    if model:
        parts.append(model)
    link = (run.get("links") or {}).get("self")
    if link and base_url:
        parts.append(base_url.rstrip("/") + link)
    return " · ".join(parts)


def name_of(value: Any) -> str | None:
    """A setup field for people: catalog ids as they are, inline specs by what they say."""
    if value is None:
        return None
    if isinstance(value, dict):
        if value.get("name") or value.get("id"):
            return str(value.get("name") or value.get("id"))
        if value.get("params_b") is not None:
            return f"{fmt(value['params_b'])}B-parameter model"
        if value.get("bits_per_weight") is not None:
            return f"{fmt(value['bits_per_weight'])} bits/weight"
        return "inline spec"
    return str(value)


def _expectation_rows(result: Mapping[str, Any]) -> list[list[Any]]:
    run = result.get("run") or {}
    expectations = result.get("expectations") or {}
    rows: list[list[Any]] = []
    for label, key, metric, is_floor in _EXPECTATION_ROWS:
        band = expectations.get(key) or {}
        measured = _measured(run, metric)
        if measured is None and not band:
            continue
        expected = band.get("expected")
        low, high = band.get("low"), band.get("high")
        rng = f"{fmt(low)}–{fmt(high)}" if low is not None and high is not None else "–"
        ceiling = band.get("ceiling")
        rows.append(
            [
                label,
                fmt(measured),
                fmt(expected),
                rng,
                (fmt(ceiling) + (" floor" if is_floor else "")) if ceiling else "–",
            ]
        )
    return rows


def _expectation_table(result: Mapping[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """Measured against expected; a stored run shown later has no expectations: measured only."""
    rows = _expectation_rows(result)
    if result.get("expectations"):
        return ["metric", "measured", "expected", "range", "ceiling"], rows
    return ["metric", "measured"], [row[:2] for row in rows]


def _evidence(rec: Mapping[str, Any]) -> str:
    items = []
    for ev in rec.get("evidence") or []:
        items.append(f"{ev.get('metric')} found {fmt(ev.get('found'))}, expected {ev.get('expected')}")
    return "; ".join(items)


def _gain(rec: Mapping[str, Any]) -> str:
    gain = rec.get("expected_gain") or {}
    if not gain:
        return ""
    rel = gain.get("relative")
    text = f"{gain.get('metric')} {fmt(gain.get('from'))} → {fmt(gain.get('to'))}"
    return text + (f" ({fmt(rel, pct=True)})" if isinstance(rel, int | float) else "")


def _fix(rec: Mapping[str, Any], runtime: str | None) -> tuple[str, str]:
    """The fix for the run's runtime (the server names it), else the generic one."""
    fixes = rec.get("fix") or {}
    if rec.get("fix_for_runtime"):
        return str(rec.get("runtime") or runtime or "other"), str(rec["fix_for_runtime"])
    for key in (runtime, "other"):
        if key and fixes.get(key):
            return key, str(fixes[key])
    if fixes:
        key = next(iter(fixes))
        return key, str(fixes[key])
    return "", ""


def reason_text(reason: Any) -> str:
    """One verdict reason as a line: ``SLO ttft_p99_ms: found 261.7, limit 200`` or ``PRE001 is
    severe (limit moderate)``; a server's own ``text`` wins, a pre-structured string is kept."""
    if not isinstance(reason, Mapping):
        return str(reason)
    if reason.get("text"):
        return str(reason["text"])
    kind, name = reason.get("kind"), reason.get("name")
    if kind == "slo":
        return f"SLO {name}: found {fmt(reason.get('found'))}, limit {fmt(reason.get('limit'))}"
    return f"{name} is {reason.get('found')} (limit {reason.get('limit')})"


def _reasons(result: Mapping[str, Any]) -> list[str]:
    return [reason_text(r) for r in result.get("verdict_reasons") or []]


def _text_result(result: Mapping[str, Any], *, base_url: str | None, source: str | None) -> str:
    run = result.get("run") or {}
    runtime = (run.get("setup") or {}).get("runtime")
    lines = []
    if source:
        lines.append(f"== {source}")
    lines.append(_headline(result, base_url))
    lines.append(f"verdict: {str(result.get('verdict', '?')).upper()}")
    lines.extend(f"  because {text}" for text in _reasons(result))
    headers, rows = _expectation_table(result)
    if rows:
        lines.append("")
        lines.append(table(headers, rows))
    recs = result.get("recommendations") or []
    lines.append("")
    if not recs:
        lines.append("no recommendations: nothing to change")
    else:
        lines.append(f"recommendations ({len(recs)}):")
        for index, rec in enumerate(recs, 1):
            lines.append(f"{index:>2}. [{rec.get('severity')}] {rec.get('rule_id')} {rec.get('title')}")
            evidence = _evidence(rec)
            if evidence:
                lines.append(f"    evidence: {evidence}")
            key, fix = _fix(rec, runtime)
            if fix:
                lines.append(f"    fix ({key}): {fix}")
            gain = _gain(rec)
            if gain:
                lines.append(f"    expected: {gain}")
    return "\n".join(lines)


def _md_result(result: Mapping[str, Any], *, base_url: str | None, source: str | None) -> str:
    run = result.get("run") or {}
    runtime = (run.get("setup") or {}).get("runtime")
    verdict = str(result.get("verdict", "?"))
    title = f"### {_VERDICT_ICON.get(verdict, '')} advisor: **{verdict}**"
    if source:
        title += f" — `{md_escape(source)}`"
    lines = [title, "", md_escape(_headline(result, base_url)), ""]
    reasons = _reasons(result)
    if reasons:
        lines += ["Verdict reasons:", "", *(f"- {md_escape(text)}" for text in reasons), ""]
    headers, rows = _expectation_table(result)
    if rows:
        lines += [table(headers, rows, style="md"), ""]
    recs = result.get("recommendations") or []
    if not recs:
        lines.append("No recommendations: nothing to change.")
    else:
        md_rows = []
        for index, rec in enumerate(recs, 1):
            sev = str(rec.get("severity"))
            _, fix = _fix(rec, runtime)
            md_rows.append(
                [
                    str(index),
                    f"{_SEVERITY_ICON.get(sev, '')} {sev}",
                    f"`{rec.get('rule_id')}`",
                    str(rec.get("title") or ""),
                    f"`{fix}`" if fix and "`" not in fix else fix,
                    _gain(rec),
                ]
            )
        lines.append(
            table(
                ["#", "severity", "rule", "finding", f"fix ({runtime or 'generic'})", "expected"], md_rows, style="md"
            )
        )
        details = []
        for rec in recs:
            evidence = _evidence(rec)
            if evidence:
                details.append(f"- `{rec.get('rule_id')}`: {md_escape(evidence)}")
        if details:
            lines += ["", "<details><summary>Evidence</summary>", "", *details, "", "</details>"]
    return "\n".join(lines)


def annotation(level: str, message: str, *, title: str | None = None, file: str | None = None) -> str:
    """A GitHub Actions workflow command (``::warning file=…,title=…::message``), escaped as the
    runner expects (``%``, CR and LF in the message; also ``:`` and ``,`` in properties)."""

    def data(text: str) -> str:
        return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")

    def prop(text: str) -> str:
        return data(text).replace(":", "%3A").replace(",", "%2C")

    props = ",".join(f"{k}={prop(v)}" for k, v in (("file", file), ("title", title)) if v)
    return f"::{level}{' ' + props if props else ''}::{data(message)}"


def _github_result(result: Mapping[str, Any], *, base_url: str | None, source: str | None) -> str:
    run = result.get("run") or {}
    runtime = (run.get("setup") or {}).get("runtime")
    lines = []
    for rec in result.get("recommendations") or []:
        level = _ANNOTATION_LEVEL.get(str(rec.get("severity")))
        if level is None:
            continue
        key, fix = _fix(rec, runtime)
        message = str(rec.get("title") or rec.get("name"))
        if fix:
            message += f"\nfix ({key}): {fix}"
        gain = _gain(rec)
        if gain:
            message += f"\nexpected: {gain}"
        lines.append(
            annotation(level, message, title=f"advisor {rec.get('rule_id')} ({rec.get('severity')})", file=source)
        )
    verdict = str(result.get("verdict", "?"))
    level = {"fail": "error", "warn": "warning"}.get(verdict, "notice")
    message = "\n".join([_headline(result, base_url), *(f"because {text}" for text in _reasons(result))])
    lines.append(annotation(level, message, title=f"advisor verdict: {verdict}", file=source))
    return "\n".join(lines)


def render_results(
    results: Sequence[tuple[str | None, Mapping[str, Any]]], style: str, *, base_url: str | None = None
) -> str:
    """Render ``(source file, result)`` pairs. For ``json`` the caller prints the answers instead."""
    if style == "json":
        items = [dict(r) for _, r in results]
        return render_json(items[0] if len(items) == 1 else items)
    renderer = {"text": _text_result, "md": _md_result, "github": _github_result}[style]
    sep = "\n\n" if style != "github" else "\n"
    return sep.join(renderer(result, base_url=base_url, source=source) for source, result in results)
