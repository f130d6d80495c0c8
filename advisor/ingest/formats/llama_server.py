"""llama.cpp ``llama-server`` completion responses and their ``timings`` object (docs/formats.md §4.2).

Native ``POST /completion`` responses and OpenAI-compatible ones (``/v1/chat/completions``,
``/v1/completions``) both carry ``timings``. One response is one sample; a JSON array, JSON-Lines or
saved server-sent events of several are one run per model with distributions. Streamed chunks that
are not the last one of their response are skipped.

``timings`` is in **ms**. Mapping (per response, then aggregated):

* ``prefill_tok_s`` = ``prompt_per_second``, but only for responses that evaluated at least
  :data:`MIN_PROMPT_TOKENS` prompt tokens: a prompt served almost wholly from the cache says nothing
  about prefill speed.
* ``tpot_ms`` = ``predicted_per_token_ms``; ``decode_tok_s`` = 1000 / mean ``tpot_ms``.
* ``ttft_ms`` = ``prompt_ms`` (server-side prefill time: no queue, no HTTP); ``e2e_ms`` =
  ``prompt_ms + predicted_ms``.
* ``cache_n`` is the cached prompt tokens: ``cached_prompt_tokens_mean`` and a prefix-cache hit rate
  ``Σ cache_n / Σ (cache_n + prompt_n)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from advisor.canonical import CanonicalRun, Metrics, Setup, Source, Workload
from advisor.ingest.base import Input, ParserBase
from advisor.ingest.derive import MIN_PREFILL_TOKENS
from advisor.ingest.formats.llama_bench import split_model_filename
from advisor.ingest.records import json_records, runs_per_model
from advisor.ingest.statistics import distribution, mean_of
from advisor.ingest.units import epoch_to_utc
from advisor.ingest.values import as_float, dig

__all__ = ["MIN_PROMPT_TOKENS", "PARSERS", "LlamaServerParser"]

#: Responses that evaluated fewer prompt tokens than this give no prefill speed.
MIN_PROMPT_TOKENS = MIN_PREFILL_TOKENS

_TIMING_FIELDS = (
    "cache_n", "prompt_n", "prompt_ms", "prompt_per_second", "predicted_n", "predicted_ms",
    "predicted_per_token_ms", "predicted_per_second",
)  # fmt: skip


def _is_response(obj: object) -> bool:
    """docs/formats.md §9.4 rule 9: an object with ``timings.predicted_per_second``."""
    return isinstance(obj, dict) and isinstance(obj.get("timings"), dict) and "predicted_per_second" in obj["timings"]


def _is_intermediate_chunk(obj: Mapping[str, Any]) -> bool:
    """A streamed chunk before the last one (``timings_per_token`` puts timings in every chunk)."""
    if obj.get("stop") is False:
        return True
    if obj.get("object") == "chat.completion.chunk" or obj.get("object") == "text_completion":
        choices = obj.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            return choices[0].get("finish_reason") is None
    return False


class LlamaServerParser(ParserBase):
    format_id = "llama_server"
    description = "llama.cpp llama-server completion responses with their timings (native or OpenAI-compatible)"
    tool = "llama-server"
    priority = 90

    def sniff(self, inp: Input) -> bool:
        doc = inp.json
        if isinstance(doc, dict):
            return _is_response(doc)
        if isinstance(doc, list):
            return any(_is_response(r) for r in doc[:50])
        text = inp.text
        if text is None or '"timings"' not in text:
            return False
        records, _ = json_records(inp)
        return any(_is_response(r) for r in records)

    def read(self, inp: Input) -> tuple[list[Any], list[str]]:
        """The last response of each request, as ``(index in the file, response)``."""
        records, skipped_lines = json_records(inp)
        candidates = [(i, r) for i, r in enumerate(records) if _is_response(r)]
        responses = [(i, r) for i, r in candidates if not _is_intermediate_chunk(r)]
        if not responses:
            raise self.fail("no llama-server response with timings.predicted_per_second", field="timings")
        notes: list[str] = []
        if len(candidates) > len(responses):
            notes.append(f"streamed: {len(candidates) - len(responses)} intermediate chunk(s) skipped")
        if skipped_lines:
            notes.append(f"skipped {skipped_lines} non-JSON line(s)")
        return responses, notes

    def parse_records(self, records: list[Any]) -> list[CanonicalRun]:
        return runs_per_model(records, lambda model, items: self._run(model, items, []))

    def _timings(self, index: int, response: Mapping[str, Any]) -> dict[str, float]:
        raw = response["timings"]
        out: dict[str, float] = {}
        for key in _TIMING_FIELDS:
            field = f"[{index}].timings.{key}"
            value = as_float(raw.get(key), field)
            if value is None:
                continue
            if value < 0:
                raise self.fail(f"{key} cannot be negative, got {value:g}", field=field)
            out[key] = value
        return out

    def _run(self, model: str, items: list[tuple[int, dict[str, Any]]], notes: list[str]) -> CanonicalRun:
        tpot: list[float] = []
        prefill_ms_per_token: list[float] = []
        ttft: list[float] = []
        e2e: list[float] = []
        prompt_tokens: list[float] = []
        output_tokens: list[float] = []
        cached: list[float] = []
        evaluated: list[float] = []
        small_prompts = 0
        times = []
        for index, response in items:
            t = self._timings(index, response)
            predicted_n = t.get("predicted_n")
            if (per_token := t.get("predicted_per_token_ms")) is not None and (predicted_n or 0) > 0:
                tpot.append(per_token)
            prompt_n = t.get("prompt_n")
            if prompt_n is not None and prompt_n >= MIN_PROMPT_TOKENS and t.get("prompt_ms"):
                prefill_ms_per_token.append(t["prompt_ms"] / prompt_n)
            elif prompt_n is not None:
                small_prompts += 1
            if (prompt_ms := t.get("prompt_ms")) is not None:
                ttft.append(prompt_ms)
                if (predicted_ms := t.get("predicted_ms")) is not None:
                    e2e.append(prompt_ms + predicted_ms)
            cache_n = t.get("cache_n")
            if cache_n is not None and prompt_n is not None:
                cached.append(cache_n)
                evaluated.append(prompt_n)
            total_prompt = as_float(response.get("tokens_evaluated"), f"[{index}].tokens_evaluated")
            if total_prompt is None:
                total_prompt = as_float(dig(response, "usage", "prompt_tokens"), f"[{index}].usage.prompt_tokens")
            if total_prompt is None and prompt_n is not None:
                total_prompt = prompt_n + (cache_n or 0.0)
            if total_prompt is not None:
                prompt_tokens.append(total_prompt)
            total_output = as_float(response.get("tokens_predicted"), f"[{index}].tokens_predicted")
            if total_output is None:
                total_output = predicted_n
            if total_output is not None:
                output_tokens.append(total_output)
            if (when := epoch_to_utc(response.get("created"), f"[{index}].created")) is not None:
                times.append(when)

        metrics = Metrics(
            ttft_ms=distribution(ttft),
            tpot_ms=distribution(tpot),
            e2e_ms=distribution(e2e),
            requests_completed=len(items),
        )
        if metrics.tpot_ms.mean:
            metrics.decode_tok_s = 1000.0 / metrics.tpot_ms.mean
        mean_prefill = mean_of(prefill_ms_per_token)
        if mean_prefill:
            metrics.prefill_tok_s = 1000.0 / mean_prefill
        if small_prompts:
            notes.append(
                f"{small_prompts} response(s) evaluated fewer than {MIN_PROMPT_TOKENS} prompt tokens "
                "(mostly cached): left out of prefill_tok_s"
            )
        if ttft:
            notes.append(
                "ttft_ms = timings.prompt_ms (server-side prefill: no queue, no HTTP); "
                "e2e_ms = prompt_ms + predicted_ms"
            )
        if cached:
            metrics.cached_prompt_tokens_mean = mean_of(cached)
            total = sum(cached) + sum(evaluated)
            if total > 0:
                metrics.prefix_cache_hit_rate = sum(cached) / total

        workload = Workload(num_requests=len(items))
        if prompt_tokens:
            workload.prompt_tokens_mean = mean_of(prompt_tokens)
        if output_tokens:
            workload.output_tokens_mean = mean_of(output_tokens)
        setup = Setup(runtime="llamacpp")
        if model.lower().endswith(".gguf"):
            # A GGUF path may be private: keep the base name, and its quantization tag apart.
            setup.model, setup.quantization = split_model_filename(model)
        elif model:
            setup.model = model  # an alias or a Hugging Face id, as the server reports it
        kinds = {"openai" if "choices" in r else "native" for _, r in items}
        tool = "llama-server /v1 (OpenAI-compatible)" if kinds == {"openai"} else "llama-server"
        return CanonicalRun(
            measured_at=min(times) if times else None,
            setup=setup,
            workload=workload,
            metrics=metrics,
            source=Source(tool=tool, notes=notes),
        )


PARSERS = [LlamaServerParser()]
