"""Prometheus ``/metrics`` text from vLLM, SGLang, TGI or llama-server (docs/formats.md §3, §9.3).

A file holds one scrape, or several concatenated: ``cat before.prom after.prom``, or blocks headed
by ``# scraped_at: <RFC 3339>`` lines (which also give the window's duration, hence throughputs).

* One scrape → one run per served model, cumulative since the server started (a source note says so).
* Two or more → the delta between the first and the last; the scrapes in between give the gauges'
  mean and peak. A counter that went down (server restart) is refused.

Several ``model_name`` label values give one run each, never a sum over models.
"""

from __future__ import annotations

from typing import Any

from advisor.canonical import CanonicalRun
from advisor.ingest.base import Input, ParserBase
from advisor.ingest.prometheus import (
    Scrape,
    parse_scrapes,
    scrape_delta,
    scrape_totals,
    telemetry_to_run,
)

__all__ = ["PARSERS", "PrometheusParser"]

_STARTS = ("# HELP", "# TYPE", "# scraped_at")


class PrometheusParser(ParserBase):
    format_id = "prometheus"
    description = (
        "Prometheus /metrics text of vLLM, SGLang, TGI or llama-server: one scrape (cumulative), "
        "or a before/after pair (deltas over the benchmark)"
    )
    tool = "prometheus"
    #: docs/formats.md §9.4 rule 1: checked before every JSON format.
    priority = 10

    def sniff(self, inp: Input) -> bool:
        text = inp.text
        if text is None:
            return False
        head = text.lstrip()[:64]
        return head.startswith(_STARTS) or head.lower().startswith("# scraped_at")

    def read(self, inp: Input) -> tuple[list[Any], list[str]]:
        text = inp.text
        if text is None or not text.strip():
            raise self.fail("the body is not text", field="body")
        scrapes = parse_scrapes(text)
        if not scrapes:
            raise self.fail("the body holds no metrics", field="body")
        return scrapes, []

    def parse_records(self, records: list[Any]) -> list[CanonicalRun]:
        scrapes: list[Scrape] = records
        last = scrapes[-1]
        models: tuple[str | None, ...] = last.models or (None,)
        runs: list[CanonicalRun] = []
        for model in models:
            if len(scrapes) == 1:
                telemetry = scrape_totals(last, model=model)
            else:
                telemetry = scrape_delta(scrapes[0], last, model=model, during=scrapes[1:-1])
            run = telemetry_to_run(telemetry)
            if len(scrapes) > 2:
                run.source.notes.append(
                    f"{len(scrapes)} scrapes: deltas between the first and the last, gauges over the "
                    f"{len(scrapes) - 2} in between"
                )
            if len(models) > 1:
                run.source.notes.append(
                    f"the scrape serves {len(models)} models; this run is model_name={model!r} only"
                )
            runs.append(run)
        return runs


PARSERS = [PrometheusParser()]
