"""Prometheus ``/metrics`` scrapes of LLM servers: parsing, deltas and the canonical run they give.

Used by the ``prometheus`` file parser and by the live probe (``advisor measure``), so it works on
text and :class:`Scrape` objects, never on files. Its modules:

* ``scrape``: text exposition → samples; ``histograms``: buckets → quantiles;
* ``engines``: each engine's metric names; ``telemetry``: scrapes → engine-neutral deltas;
* ``mapping``: telemetry → canonical run.

Their public names are re-exported here:

* :func:`parse_scrape` reads one exposition with ``prometheus_client``'s own parser (never a
  hand-written one) into a :class:`Scrape`; :func:`parse_scrapes` splits a file holding several
  scrapes (``cat before.prom after.prom``, or blocks headed by ``# scraped_at: <RFC 3339>``).
* :func:`scrape_delta` turns a before/after pair into :class:`Telemetry`: counter and histogram
  deltas, gauges over the scrapes taken during the run. A counter that went down means the server
  restarted: that is an :class:`~advisor.errors.IngestError`, never a silently negative rate.
* :func:`scrape_totals` does the same for one scrape: cumulative since the server started.
* :func:`telemetry_to_run` maps telemetry onto a :class:`~advisor.canonical.CanonicalRun`
  (docs/formats.md §9.3, "Prometheus scrapes").

Histogram percentiles are estimated like Prometheus' ``histogram_quantile``: find the bucket that
holds the rank, then interpolate linearly inside it (:func:`histogram_quantile`). An estimate that
lands in the first bucket (whose lower edge, 0, is an assumption) or in the ``+Inf`` bucket (no upper
edge) is not a measurement, so it is not reported; vLLM's ITL buckets start at 10 ms, so sub-10 ms
ITL percentiles never come from here (docs/formats.md §9.3).
"""

from advisor.ingest.prometheus.engines import ENGINES
from advisor.ingest.prometheus.histograms import Histogram, QuantileEstimate, histogram_quantile
from advisor.ingest.prometheus.mapping import telemetry_to_run
from advisor.ingest.prometheus.scrape import Scrape, parse_scrape, parse_scrapes, split_scrapes
from advisor.ingest.prometheus.telemetry import GaugeStats, Telemetry, scrape_delta, scrape_totals

__all__ = [
    "ENGINES",
    "GaugeStats",
    "Histogram",
    "QuantileEstimate",
    "Scrape",
    "Telemetry",
    "histogram_quantile",
    "parse_scrape",
    "parse_scrapes",
    "scrape_delta",
    "scrape_totals",
    "split_scrapes",
    "telemetry_to_run",
]
