"""Start-up of a client command (issue #11): ``advisor submit --help`` against the imports every
client needs anyway, ``python -c "import httpx, click, rich"``. Target: at most 2.5x.

Both commands are timed in the same run: with hyperfine when it is installed (``apt-get install -y
hyperfine``; in short rounds, the medians over the rounds), and always with repeated subprocess
runs, alternating the two commands, and their medians (the cross-check, and the method on machines
without hyperfine).

    .venv/bin/python bench/cli_startup.py [runs]
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET = 2.5
BASELINE = [sys.executable, "-c", "import httpx, click, rich"]
_SCRIPT = Path(sys.executable).with_name("advisor")
#: The installed console script, as a user runs it; ``python -m advisor.cli`` from a bare tree.
ADVISOR = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "advisor.cli"]
SUBMIT_HELP = [*ADVISOR, "submit", "--help"]


def subprocess_medians(runs: int) -> tuple[float, float]:
    """Median wall time (s) of each command, run alternately so load spikes hit both alike."""
    samples: dict[str, list[float]] = {"baseline": [], "submit": []}
    for _ in range(3):  # warm the page cache and the bytecode caches
        subprocess.run(BASELINE, check=True, capture_output=True)
        subprocess.run(SUBMIT_HELP, check=True, capture_output=True)
    for _ in range(runs):
        for name, command in (("baseline", BASELINE), ("submit", SUBMIT_HELP)):
            start = time.perf_counter()
            subprocess.run(command, check=True, capture_output=True)
            samples[name].append(time.perf_counter() - start)
    return statistics.median(samples["baseline"]), statistics.median(samples["submit"])


def hyperfine_medians(runs: int, rounds: int = 5) -> tuple[float, float] | None:
    """hyperfine's median wall time (s) of each command, or None without hyperfine. hyperfine
    times one command's runs, then the other's: on a shared machine a load swing between the two
    blocks skews the ratio, so it runs in ``rounds`` short rounds and the medians of the rounds count."""
    binary = shutil.which("hyperfine")
    if binary is None:
        return None
    medians: list[tuple[float, float]] = []
    per_round = max(3, runs // rounds)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "hyperfine.json"
        options = ["--shell=none", "--warmup", "2", "--runs", str(per_round), "--export-json", str(out)]
        for _ in range(rounds):
            subprocess.run(
                [binary, *options, "--style", "none", shlex.join(BASELINE), shlex.join(SUBMIT_HELP)],
                check=True,
                capture_output=True,
            )
            results = json.loads(out.read_text())["results"]
            medians.append((float(results[0]["median"]), float(results[1]["median"])))
    return statistics.median(m[0] for m in medians), statistics.median(m[1] for m in medians)


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    print(f"load average (1, 5, 15 min): {' '.join(f'{x:.2f}' for x in os.getloadavg())}, {os.cpu_count()} cores")
    print(f"baseline: {shlex.join(BASELINE)}")
    print(f"command:  {shlex.join(SUBMIT_HELP)}")
    measured = {"hyperfine": hyperfine_medians(runs), "subprocess": subprocess_medians(runs)}
    for method, medians in measured.items():
        if medians is None:
            print(f"{method}: not installed")
            continue
        base, submit = medians
        ratio = submit / base
        verdict = "met" if ratio <= TARGET else "NOT met"
        print(
            f"{method} ({runs} runs each): baseline {base * 1000:.0f} ms, advisor submit --help "
            f"{submit * 1000:.0f} ms: {ratio:.2f}x (target <= {TARGET}x: {verdict})"
        )


if __name__ == "__main__":
    main()
