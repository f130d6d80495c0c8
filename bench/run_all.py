"""``make bench``: run the benchmark suite and rewrite the summary table of docs/benchmarks.md.

Each benchmark runs in its own process, one after the other (they would compete for the 2 cores),
its output is printed as it comes and kept; the figures each bar needs are read from that output
and the bar's row in ``## Summary`` is rewritten with them, stamped with the date and the load
before and after that benchmark (``[make bench …]``). Rows of benchmarks not run (``--only``) keep
their own stamps; a row no ``make bench`` measured (a hand-measured figure) is marked as such, so
that no old figure reads as a new one. A benchmark that fails or prints no figure is named in the
line above the table. The sections below the table (each benchmark's method and history) are the
benchmarks' authors' and are left alone.

    .venv/bin/python -m bench.run_all [--only ingest,advise,...] [--no-write]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench._common import PYTHON, ROOT

__all__ = ["BENCHES", "main", "rewrite_summary"]

DOC = ROOT / "docs" / "benchmarks.md"


@dataclass(frozen=True)
class Bench:
    name: str
    argv: list[str]
    #: ``(bar, target, measured-and-status from the output)``; None when the output lacks the figure.
    rows: Callable[[str, dict[str, Any]], list[tuple[str, str, str, str]]]
    json_out: bool = False  # the benchmark writes its results to --json PATH


def _num(pattern: str, text: str) -> float | None:
    found = re.search(pattern, text)
    return float(found.group(1).replace(",", "")) if found else None


def _status(ok: bool | None) -> str:
    return "—" if ok is None else ("met" if ok else "**not met**")


def _ingest_rows(_: str, data: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    rows = []
    sides = [b for b in ("sqlite", "postgres") if b in data]
    ratio = "; ".join(
        f"{b}: {data[b]['ratio']:.3f} ({data[b]['runs_rps']:.0f} vs {data[b]['echo_rps']:.0f} req/s, "
        f"p99 {data[b]['runs_p99_ms']:.0f} ms)"
        for b in sides
    )
    rows.append(
        (
            "`POST /api/v1/runs` (stored and analysed) vs a bare decode-into-Struct endpoint, wrk -t1 -c16",
            "≥ 0.25×",
            ratio,
            _status(all(data[b]["ratio"] >= 0.25 for b in sides)),
        )
    )
    with_bulk = [b for b in sides if "bulk" in data[b]]
    if with_bulk:
        bulk = "; ".join(f"{b}: {data[b]['bulk']['runs_per_s']:,.0f} runs/s" for b in with_bulk)
        rows.append(
            (
                "bulk ingest (20,000 runs as JSON arrays of 5,000)",
                "≥ 5,000 runs/s",
                bulk,
                _status(all(data[b]["bulk"]["runs_per_s"] >= 5000 for b in with_bulk)),
            )
        )
    rss = [f"{b}: {data[b]['server_rss_mb']:.0f} MB" for b in sides if "server_rss_mb" in data[b]]
    if rss:
        rows.append(("server memory after the single-run load (RSS, one worker)", "—", "; ".join(rss), "—"))
    return rows


def _advise_rows(out: str, _: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    advise = _num(r"advise\(ctx\):\s+median\s+([\d.]+)", out)
    full = _num(r"build_context \+ advise: median\s+([\d.]+)", out)
    if advise is None or full is None:
        return []
    return [
        (
            "advise, in-process, with expectations",
            "≤ 2 ms per run",
            f"{advise / 1000:.2f} ms median; build_context + advise {full / 1000:.2f} ms",
            _status(full <= 2000),
        )
    ]


def _predict_rows(out: str, _: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    service = _num(r"predict service[^:]*:\s+([\d.]+) µs", out)
    handler = _num(r"POST /api/v1/predict in-process \(test client\):\s+([\d.]+) µs", out)
    if service is None:
        return []
    return [
        (
            "physics-only `/predict`, in-process",
            "≤ 1 ms per call",
            f"{service:.0f} µs (service)"
            + (f", {handler / 1000:.2f} ms (whole handler, test client)" if handler else ""),
            _status(service <= 1000),
        )
    ]


def _fit_rows(size: str) -> Callable[[str, dict[str, Any]], list[tuple[str, str, str, str]]]:
    def rows(out: str, _: dict[str, Any]) -> list[tuple[str, str, str, str]]:
        seconds = _num(r"fit: ([\d.]+) s wall", out)
        cpu = _num(r"fit: [\d.]+ s wall \(([\d.]+) s CPU\)", out)
        peak = _num(r"peak RSS (\d+) MB", out)
        predict = _num(r"predict 1,000 setups.*?: ([\d.]+) ms as arrays", out)
        found: list[tuple[str, str, str, str]] = []
        if seconds is not None:
            target = 20.0 if size == "100k" else None  # DESIGN §8 (issue #17 aims at 10 s)
            found.append(
                (
                    f"fit on {size} runs",
                    "≤ 20 s (issue #17: ≤ 10 s)" if target else "—",
                    f"{seconds:.1f} s wall" + (f" ({cpu:.1f} s CPU)" if cpu is not None else ""),
                    _status(seconds <= target if target else None),
                )
            )
        if peak is not None and size == "100k":
            found.append(("fit memory", "≤ 500 MB", f"{peak:.0f} MB peak RSS (the 100k fit)", _status(peak <= 500)))
        if predict is not None and size == "100k":
            found.append(
                ("predict 1,000 setups (5 heads)", "≤ 50 ms", f"{predict:.1f} ms (arrays)", _status(predict <= 50))
            )
        return found

    return rows


def _report_rows(out: str, _: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    best = _num(r"weekly report: best ([\d.]+) s", out)
    median = _num(r"median ([\d.]+) s over", out)
    if best is None:
        return []
    exact = "exact: True" in out
    return [
        (
            "weekly report over 1M runs",
            "≤ 10 s (aim 5)",
            f"{best:.2f} s best, {median:.2f} s median (SQLite); regressions exact: {exact}",
            _status(best <= 10 and exact),
        )
    ]


def _web_rows(out: str, _: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    medians = [float(m) for m in re.findall(r"^\S.*?\s+([\d.]+)\s+[\d.]+$", out, flags=re.MULTILINE)]
    if not medians:
        return []
    worst = max(medians)
    return [
        (
            "web page server time with 10,000 runs",
            "< 100 ms",
            f"slowest page {worst:.1f} ms median (SQLite)",
            _status(worst < 100),
        )
    ]


def _cli_rows(out: str, _: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    ratios = [float(r) for r in re.findall(r": ([\d.]+)x \(target", out)]
    if not ratios:
        return []
    return [
        (
            '`advisor submit --help` vs `python -c "import httpx, click, rich"`',
            "≤ 2.5×",
            " / ".join(f"{r:.2f}×" for r in ratios),
            _status(max(ratios) <= 2.5),
        )
    ]


_LOAD_LINE = re.compile(
    r"^(?P<backend>sqlite|postgres)\s+workers=(?P<workers>\d+)\s+(?P<rps>[\d.]+) req/s\s+p50\s+(?P<p50>[\d.]+) ms\s+"
    r"p99\s+(?P<p99>[\d.]+) ms\s+non-2xx (?P<errors>\d+)\s+acked (?P<acked>\d+)\s+stored (?P<stored>\d+)\s+"
    r"(?P<verdict>meets|MISSES)",
    flags=re.MULTILINE,
)


def _load_rows(out: str, _: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """bench.load prints one line per backend; each is stated, and the bar is met when every one
    meets all four goals (rate, p99, no errors, every acknowledged run stored)."""
    found = list(_LOAD_LINE.finditer(out))
    if not found:
        return []
    measured = "; ".join(
        f"{m['backend']} ({m['workers']} workers): {float(m['rps']):.0f} req/s, p50 {float(m['p50']):.1f} ms, "
        f"p99 {float(m['p99']):.0f} ms, {m['errors']} non-2xx, {m['acked']} acknowledged / {m['stored']} stored"
        for m in found
    )
    return [
        (
            "mixed load (80 % reads, 20 % writes), bench/load.py",
            "≥ 200 req/s, p99 ≤ 100 ms",
            measured,
            _status(all(m["verdict"] == "meets" for m in found)),
        )
    ]


BENCHES: list[Bench] = [
    Bench("ingest", ["-m", "bench.ingest"], _ingest_rows, json_out=True),
    Bench("advise", ["-m", "bench.advise"], _advise_rows),
    Bench("predict", ["bench/predict.py"], _predict_rows),
    Bench("fit-10k", ["-m", "bench.fit", "--runs", "10000"], _fit_rows("10k")),
    Bench("fit-100k", ["-m", "bench.fit", "--runs", "100000"], _fit_rows("100k")),
    Bench("report", ["-m", "bench.report"], _report_rows),
    Bench("web", ["-m", "bench.web"], _web_rows),
    Bench("cli_startup", ["bench/cli_startup.py"], _cli_rows),
    Bench("load", ["-m", "bench.load"], _load_rows),
]

_ROW = re.compile(r"^\| (?P<bar>.+?) \| .*\|$")

#: Bars renamed when their method changed: the old row gives way to the new one.
_REPLACES = {
    "`POST /api/v1/runs` (ingest + analysis) vs a bare decode-only endpoint": (
        "`POST /api/v1/runs` (stored and analysed) vs a bare decode-into-Struct endpoint, wrk -t1 -c16"
    ),
    "bulk ingest on SQLite": "bulk ingest (20,000 runs as JSON arrays of 5,000)",
}


#: How a row written by ``make bench`` says when it was measured (and how other rows are told apart).
_STAMP = re.compile(r"\[make bench \d{4}-\d{2}-\d{2}[^\]]*\]")
#: Appended to a row that no ``make bench`` measured, so that it is never read as a new figure.
NOT_REMEASURED = "[not measured by `make bench`: an earlier figure, dated in its section]"


def stamp(measured: str, when: str, loads: tuple[float, float]) -> str:
    """A measured cell with the run's date and the machine's load (1 min) before and after it."""
    return f"{measured} [make bench {when}, load {min(loads):.1f}–{max(loads):.1f}]"


def rewrite_summary(
    doc: str, rows: list[tuple[str, str, str, str]], header: str, *, mark_unmeasured: bool = False
) -> str:
    """``doc`` with the ``## Summary`` table's rows for these bars replaced (or appended) and the
    line above the table set to ``header``; every other row and section unchanged, except that
    with ``mark_unmeasured`` a row that carries no ``make bench`` date gets :data:`NOT_REMEASURED`."""
    start = doc.index("## Summary\n")
    table_start = doc.index("| bar |", start)
    table_end = doc.find("\n\n", table_start)
    table_end = len(doc) if table_end < 0 else table_end
    lines = doc[table_start:table_end].split("\n")
    head, body = lines[:2], lines[2:]
    new = {bar: f"| {bar} | {target} | {measured} | {status} |" for bar, target, measured, status in rows}
    out_rows = []
    for line in body:
        match = _ROW.match(line)
        bar = match.group("bar") if match else None
        bar = _REPLACES.get(bar, bar) if bar else None
        if bar in new:
            out_rows.append(new.pop(bar))
        elif match is None or match.group("bar") not in _REPLACES:
            if mark_unmeasured and match is not None and not _STAMP.search(line) and NOT_REMEASURED not in line:
                cells = line.rsplit(" | ", 1)  # the measured cell ends before the status cell
                out_rows.append(f"{cells[0]} {NOT_REMEASURED} | {cells[1]}")
            else:
                out_rows.append(line)
    out_rows.extend(new.values())
    intro = f"\n\n{header}\n\n"
    return doc[:start] + "## Summary" + intro + "\n".join(head + out_rows) + doc[table_end:]


def _header(doc: str) -> str:
    """The line an earlier run wrote between ``## Summary`` and the table ("" when none)."""
    start = doc.index("## Summary\n") + len("## Summary\n")
    return doc[start : doc.index("| bar |", start)].strip()


def _run(argv: list[str]) -> tuple[int, str, str]:
    """Run one benchmark, its output printed as it comes and kept; (exit status, stdout, stderr)."""
    with tempfile.TemporaryFile(mode="w+") as err:
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=err, text=True, bufsize=1)
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            lines.append(line)
        returncode = proc.wait()
        err.seek(0)
        return returncode, "".join(lines), err.read()


def _strip_header(doc: str) -> str:
    """Drop a header line an earlier run wrote between ``## Summary`` and the table."""
    start = doc.index("## Summary\n") + len("## Summary\n")
    table = doc.index("| bar |", start)
    return doc[: start - 1] + "\n\n" + doc[table:]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--only", default=None, help="comma-separated names: " + ",".join(b.name for b in BENCHES))
    parser.add_argument("--no-write", action="store_true", help="print the rows, leave docs/benchmarks.md alone")
    args = parser.parse_args()
    chosen = [b for b in BENCHES if args.only is None or b.name in args.only.split(",")]
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    loads: list[float] = []
    rows: list[tuple[str, str, str, str]] = []
    failed: list[str] = []
    ran: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for bench in chosen:
            script = ROOT / "bench" / f"{bench.argv[1].removeprefix('bench.')}.py" if bench.argv[0] == "-m" else None
            if script is not None and not script.exists():
                print(f"== {bench.name}: {script.relative_to(ROOT)} does not exist yet, skipped")
                continue
            json_path = Path(tmp) / f"{bench.name}.json"
            argv = [PYTHON, *bench.argv, *(["--json", str(json_path)] if bench.json_out else [])]
            print(f"== {bench.name}: {' '.join(argv[1:])}", flush=True)
            when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
            before = os.getloadavg()[0]
            started_at = time.perf_counter()
            returncode, out, err = _run(argv)
            after = os.getloadavg()[0]
            loads.extend((before, after))
            sys.stderr.write(err[-3000:] if returncode else "")
            print(f"== {bench.name}: {time.perf_counter() - started_at:.0f} s, load {before:.1f} → {after:.1f}")
            if returncode != 0 and "BELOW TARGET" not in out:
                failed.append(bench.name)
            data = json.loads(json_path.read_text()) if json_path.exists() else {}
            found = bench.rows(out, data)
            if found:
                ran.append(bench.name)
            elif bench.name not in failed:
                failed.append(f"{bench.name} (no figures in its output)")
            rows.extend(
                (bar, target, stamp(measured, when, (before, after)), status) for bar, target, measured, status in found
            )
    loads.append(os.getloadavg()[0])
    failures = f"Failed to run: {', '.join(failed)} (their rows are older figures). " if failed else ""
    if args.only is None:
        header = (
            f"Last `make bench`: {started}, {os.cpu_count()} cores shared with other work, load "
            f"{min(loads):.1f}–{max(loads):.1f} (1 min) while it ran; the benchmarks run one at a time, and each "
            f"row says when it was measured and at what load. Measured: {', '.join(ran) or 'none'}. {failures}"
            "Rows marked as not measured by `make bench` are earlier figures, dated in their sections."
        )
    else:  # a part run again: the last whole run's header stays, and says so
        header = (
            f"{_header(DOC.read_text())} Then `make bench BENCH={args.only}`: {started}, load "
            f"{min(loads):.1f}–{max(loads):.1f}; measured: {', '.join(ran) or 'none'}. {failures}"
        ).strip()
    for row in rows:
        print(" | ".join(row))
    if not args.no_write and rows:
        doc = rewrite_summary(_strip_header(DOC.read_text()), rows, header.strip(), mark_unmeasured=True)
        DOC.write_text(doc)
        print(f"rewrote the summary table of {DOC.relative_to(ROOT)}")
    if failed:
        raise SystemExit(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
