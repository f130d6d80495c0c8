"""Ollama ``/api/generate`` and ``/api/chat`` responses (docs/formats.md §2, §9.3).

One response is one sample; a file of several (a JSON array, JSON-Lines, or responses appended back
to back) is one run per model with distributions over the responses. Streamed responses carry their
counters only in the final ``done: true`` chunk; the other chunks are skipped.

Every duration is in **nanoseconds**. Mapping (per response, then aggregated):

* ``tpot_ms = eval_duration / eval_count`` (TPOT-like: decode time per generated token);
  ``decode_tok_s = 1000 / mean tpot_ms``.
* ``prefill_tok_s`` from ``prompt_eval_count / prompt_eval_duration``, over responses that evaluated
  at least 32 prompt tokens (below that, fixed overhead dominates). Newer Ollama counts cached prompt
  tokens in ``prompt_eval_count`` but not in the duration; when ``prompt_eval_cached_count`` is given
  those tokens are taken out (and give the prefix-cache hit rate), otherwise a note warns that the
  speed may be overstated.
* ``ttft_ms = load_duration + prompt_eval_duration``: Ollama's own server-side time to the first
  token, cold model load included (what the first caller waits), HTTP and client excluded. The load
  is also kept apart as ``load_ms`` (the largest in the file), so a cold start is visible as such.
  A response without ``load_duration`` gets a TTFT of its prompt evaluation only, and a note.
* ``e2e_ms = total_duration``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from advisor.canonical import CanonicalRun, Metrics, Setup, Source, Workload
from advisor.ingest.base import Input, ParserBase
from advisor.ingest.derive import MIN_PREFILL_TOKENS
from advisor.ingest.records import json_records, runs_per_model
from advisor.ingest.statistics import distribution, mean_of
from advisor.ingest.units import iso_to_utc
from advisor.ingest.values import as_float

__all__ = ["PARSERS", "OllamaParser"]

_NS_FIELDS = ("total_duration", "load_duration", "prompt_eval_duration", "eval_duration")
_COUNT_FIELDS = ("prompt_eval_count", "prompt_eval_cached_count", "eval_count")


def _is_response(obj: object) -> bool:
    """docs/formats.md §9.4 rule 8: ``eval_count``, ``eval_duration`` and ``done``."""
    return isinstance(obj, dict) and "eval_count" in obj and "eval_duration" in obj and "done" in obj


def _is_chunk(obj: object) -> bool:
    return isinstance(obj, dict) and obj.get("done") is False and "model" in obj and "created_at" in obj


class OllamaParser(ParserBase):
    format_id = "ollama"
    description = "Ollama /api/generate or /api/chat responses (one, or many as a JSON array / JSON-Lines)"
    tool = "ollama"
    priority = 80

    def sniff(self, inp: Input) -> bool:
        doc = inp.json
        if isinstance(doc, dict):
            wrapped = doc.get("value")
            return _is_response(doc) or (isinstance(wrapped, list) and any(_is_response(r) for r in wrapped[:50]))
        if isinstance(doc, list):
            return any(_is_response(r) for r in doc[:50])
        records = inp.json_lines
        if records is not None:
            return any(_is_response(r) for r in records)
        text = inp.text
        if text is None or not text.lstrip().startswith(("{", "[")):
            return False
        records, _ = json_records(inp)
        return any(_is_response(r) for r in records)

    def read(self, inp: Input) -> tuple[list[Any], list[str]]:
        """The final response of each request, as ``(index in the file, response)``."""
        records, skipped_lines = json_records(inp)
        if not records:
            raise self.fail("no JSON responses in the body", field="body")
        finals = [(i, r) for i, r in enumerate(records) if isinstance(r, dict) and r.get("done") is True]
        responses = [(i, r) for i, r in finals if "eval_count" in r]
        chunks = sum(1 for r in records if _is_chunk(r))
        if not responses:
            if finals:
                raise self.fail(
                    "the responses hold no generation (eval_count missing: model load/unload replies?)",
                    field="eval_count",
                )
            raise self.fail("no final (done: true) Ollama response in the body", field="done")
        notes: list[str] = []
        if chunks:
            notes.append(f"streamed response: {chunks} intermediate chunk(s) skipped, counters from the final one")
        if skipped_lines:
            notes.append(f"skipped {skipped_lines} non-JSON line(s)")
        skipped_other = len(finals) - len(responses)
        if skipped_other:
            notes.append(f"skipped {skipped_other} response(s) without a generation (load/unload replies)")
        return responses, notes

    def parse_records(self, records: list[Any]) -> list[CanonicalRun]:
        return runs_per_model(records, lambda model, items: self._run(model, items, []))

    # ---------------------------------------------------------------------------------------------

    def _values(self, index: int, response: Mapping[str, Any]) -> dict[str, float]:
        out: dict[str, float] = {}
        for key in (*_NS_FIELDS, *_COUNT_FIELDS):
            value = as_float(response.get(key), f"[{index}].{key}")
            if value is None:
                continue
            if value < 0:
                raise self.fail(f"{key} cannot be negative, got {value:g}", field=f"[{index}].{key}")
            out[key] = value
        return out

    def _run(self, model: str, items: list[tuple[int, dict[str, Any]]], notes: list[str]) -> CanonicalRun:
        tpot: list[float] = []
        prefill_ms_per_token: list[float] = []
        ttft: list[float] = []
        e2e: list[float] = []
        loads: list[float] = []
        prompt_counts: list[float] = []
        cached_counts: list[float] = []
        output_counts: list[float] = []
        missing_load = 0
        small_prompts = 0
        # Prompts too short to time the prefill (evaluated tokens, ms per token): used only when no
        # response in the file evaluated enough, and then marked.
        short_prefills: list[tuple[float, float]] = []
        any_prompt_count = False
        times = []
        for index, response in items:
            v = self._values(index, response)
            eval_count, eval_ns = v.get("eval_count"), v.get("eval_duration")
            if eval_count and eval_ns:
                tpot.append(eval_ns / eval_count / 1e6)
            if eval_count is not None:
                output_counts.append(eval_count)
            # omitempty: a missing prompt_eval_count means 0 (docs/formats.md §2).
            prompt = v.get("prompt_eval_count", 0.0)
            any_prompt_count = any_prompt_count or "prompt_eval_count" in v
            prompt_counts.append(prompt)
            cached = v.get("prompt_eval_cached_count")
            if cached is not None:
                cached_counts.append(cached)
            evaluated = prompt - cached if cached is not None else prompt
            prompt_ns = v.get("prompt_eval_duration")
            if prompt_ns and evaluated >= MIN_PREFILL_TOKENS:
                prefill_ms_per_token.append(prompt_ns / evaluated / 1e6)
            elif prompt_ns is not None:
                small_prompts += 1
                if prompt_ns > 0 and evaluated > 0:
                    short_prefills.append((evaluated, prompt_ns / evaluated / 1e6))
            load_ns = v.get("load_duration")
            if load_ns is not None:
                loads.append(load_ns / 1e6)
            if prompt_ns is not None:
                if load_ns is None:
                    missing_load += 1
                ttft.append(((load_ns or 0.0) + prompt_ns) / 1e6)
            if (total := v.get("total_duration")) is not None:
                e2e.append(total / 1e6)
            if (when := iso_to_utc(response.get("created_at"), f"[{index}].created_at", notes)) is not None:
                times.append(when)

        metrics = Metrics(
            ttft_ms=distribution(ttft),
            tpot_ms=distribution(tpot),
            e2e_ms=distribution(e2e),
            requests_completed=len(items),
        )
        if metrics.tpot_ms.mean:
            metrics.decode_tok_s = 1000.0 / metrics.tpot_ms.mean
        if prefill_ms_per_token:
            mean_prefill = mean_of(prefill_ms_per_token)
            if mean_prefill:
                metrics.prefill_tok_s = 1000.0 / mean_prefill
            if len(cached_counts) < len(items):
                notes.append(
                    "prefill_tok_s = prompt_eval_count / prompt_eval_duration; newer Ollama counts cached "
                    "prompt tokens in prompt_eval_count but not in the duration, so on a prefix-cache hit "
                    "this overstates the prefill speed"
                )
        quality: dict[str, str] = {}
        if small_prompts and prefill_ms_per_token:
            notes.append(
                f"{small_prompts} response(s) evaluated fewer than {MIN_PREFILL_TOKENS} prompt tokens: "
                "left out of prefill_tok_s (fixed overhead dominates so small a prompt)"
            )
        elif short_prefills:
            # No response evaluated enough: the seed's formula is still stored, marked so that the fit
            # and the rules ignore it (fixed per-request overhead dominates so short a prompt).
            mean_short = mean_of([ms for _, ms in short_prefills])
            tokens = mean_of([n for n, _ in short_prefills]) or 0.0
            if mean_short:
                metrics.prefill_tok_s = 1000.0 / mean_short
                quality["prefill_tok_s"] = f"overhead-dominated: {tokens:.0f} prompt tokens"
                notes.append(
                    f"prefill_tok_s = prompt_eval_count / prompt_eval_duration over prompts of {tokens:.0f} "
                    f"evaluated tokens (fewer than {MIN_PREFILL_TOKENS}): fixed overhead dominates, so it is "
                    "marked in source.quality and not a prefill speed to compare"
                )
        if loads:
            metrics.load_ms = max(loads)
        if missing_load:
            notes.append(
                f"{missing_load} response(s) without load_duration: their ttft_ms is prompt evaluation "
                "only (model load unknown)"
            )
        if ttft:
            notes.append(
                "ttft_ms = load_duration + prompt_eval_duration (Ollama server-side, cold load included; "
                "no HTTP or client time); load_ms is the largest load_duration"
            )
        if cached_counts and len(cached_counts) == len(items):
            total_prompt = sum(prompt_counts)
            metrics.cached_prompt_tokens_mean = mean_of(cached_counts)
            if total_prompt > 0:
                metrics.prefix_cache_hit_rate = min(sum(cached_counts) / total_prompt, 1.0)

        workload = Workload(num_requests=len(items))
        if any_prompt_count:
            workload.prompt_tokens_mean = mean_of(prompt_counts)
        if output_counts:
            workload.output_tokens_mean = mean_of(output_counts)

        kinds = {"chat" if "message" in r else "generate" for _, r in items}
        tool = (
            "ollama /api/chat" if kinds == {"chat"} else "ollama /api/generate" if kinds == {"generate"} else "ollama"
        )
        return CanonicalRun(
            measured_at=min(times) if times else None,
            setup=Setup(runtime="ollama", model=model or None),
            workload=workload,
            metrics=metrics,
            source=Source(tool=tool, notes=notes, quality=quality),
        )


PARSERS = [OllamaParser()]
