"""`advisor measure` against real llama.cpp servers serving random-weight Llamas (tiny_llama.py).

llama.cpp's own ``llama-server`` (built from the llama-cpp-python sdist's vendored llama.cpp by
scripts/build-llama-server.sh; ``make llama-server``) serves :data:`~tests.e2e.tiny_llama.MEASURE`, a
randomly initialised model, and the test repeats the seed's one-minute experiment with the
defaults of ``advisor measure``: a ~200-token and a ~2,000-token prompt, 8 streamed requests each,
after a discarded warm-up. On the medians:

- TTFT at 2,000 prompt tokens is at least 3x TTFT at 200: prefill does ~2 FLOP per weight per prompt
  token, so ten times the prompt is close to ten times the work (the fixed HTTP and scheduling cost
  only lowers the ratio).
- decode is within ±50 % between the two: each decoded token reads every weight once (25 MB here),
  and the KV cache it also reads is 0.1 MB at 200 tokens and 1 MB at 2,000. The shape is chosen for
  this: an 8B model's 16 GB of weights dwarf its 256 MB of KV cache at 2,000 tokens in the same
  way; a model whose KV cache rivals its weights (5 MB of weights, 4 MB of cache at 2,000 tokens)
  decoded 15x slower at the long prompt on the same server, and the seed's claim does not hold for it.
- every request streamed exactly the tokens it asked for: the probe sends ``ignore_eos`` and
  ``min_tokens``, and a random model's ``</s>`` does not end an answer.

A second model ends every answer at once (``eos_first``): the probes still stream the requested
tokens, on llama-server (``ignore_eos``) and on llama-cpp-python's OpenAI-compatible server
(``min_tokens``; it has no ``ignore_eos``).

The server is run with one thread: on a busy two-core runner, two llama.cpp threads spin-wait on
each other at every barrier and the timings scatter by an order of magnitude.

Needs ``llama-server`` (ADVISOR_LLAMA_SERVER, else .cache/llama-server, else on PATH) and the ``e2e``
extra (``gguf``, ``llama-cpp-python[server]``). Without them the tests skip, unless
ADVISOR_REQUIRE_E2E=1 (set by .ci/run), when they fail.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from advisor.canonical import decode_run
from advisor.cli import cli
from advisor.client import AdvisorClient, Injected

pytestmark = pytest.mark.e2e

REQUIRE = os.environ.get("ADVISOR_REQUIRE_E2E") == "1"
ROOT = Path(__file__).resolve().parents[2]
MODEL = "tiny-llama"
MAX_TOKENS = 64
CPU_SPEC = {"name": "ci-runner-cpu", "mem_bandwidth_gb_s": 20, "fp16_tflops": 0.2, "memory_gb": 8}


def _skip_or_fail(reason: str) -> None:
    if REQUIRE:
        pytest.fail(f"ADVISOR_REQUIRE_E2E=1 but {reason}")
    pytest.skip(reason)


def _missing(modules: Sequence[str]) -> str | None:
    for module in modules:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return f"{module} is not installed: install the e2e extra (uv sync --extra dev --extra e2e)"
    return None


def _llama_server_binary() -> Path | None:
    env = os.environ.get("ADVISOR_LLAMA_SERVER")
    if env:
        return Path(env)
    local = ROOT / ".cache" / "llama-server"
    if local.is_file():
        return local
    found = shutil.which("llama-server")
    return Path(found) if found else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def _serve(command: list[str], port: int, log_path: Path, ready: str) -> Iterator[str]:
    """Start a server, wait until GET ``ready`` answers 200, yield its URL, stop it."""
    url = f"http://127.0.0.1:{port}"
    name = Path(command[0]).name if command[0] != sys.executable else command[2]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 180
            while True:
                if proc.poll() is not None:
                    pytest.fail(f"{name} exited {proc.returncode}:\n{log_path.read_text(errors='replace')[-3000:]}")
                try:
                    if httpx.get(f"{url}{ready}", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    pytest.fail(f"{name} did not answer in 180 s:\n{log_path.read_text(errors='replace')[-3000:]}")
                time.sleep(0.25)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=15)


def _llama_server(folder: Path, model: Path) -> Any:
    binary = _llama_server_binary()
    if binary is None or not os.access(binary, os.X_OK):
        _skip_or_fail(
            "no llama-server binary: run `make llama-server` (scripts/build-llama-server.sh builds it into "
            ".cache/llama-server) or set ADVISOR_LLAMA_SERVER"
        )
    assert binary is not None
    port = _free_port()
    command = [
        str(binary), "--model", str(model), "--alias", MODEL,
        "--ctx-size", "4096", "--parallel", "1", "--threads", "1", "--threads-batch", "1",
        "--host", "127.0.0.1", "--port", str(port), "--metrics", "--no-webui",
    ]  # fmt: skip
    return _serve(command, port, folder / "llama-server.log", "/health")


@pytest.fixture(scope="module")
def random_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    reason = _missing(["gguf"])
    if reason:
        _skip_or_fail(reason)
    from tests.e2e.tiny_llama import MEASURE, write_tiny_llama

    return write_tiny_llama(tmp_path_factory.mktemp("gguf") / "random-llama.gguf", MEASURE)


@pytest.fixture(scope="module")
def eos_first_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    reason = _missing(["gguf"])
    if reason:
        _skip_or_fail(reason)
    from tests.e2e.tiny_llama import TINY, write_tiny_llama

    return write_tiny_llama(tmp_path_factory.mktemp("gguf") / "eos-first.gguf", TINY, eos_first=True)


@pytest.fixture(scope="module")
def llama_server(random_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with _llama_server(tmp_path_factory.mktemp("llama-server"), random_model) as url:
        yield url


@pytest.fixture(scope="module")
def eos_llama_server(eos_first_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with _llama_server(tmp_path_factory.mktemp("llama-server-eos"), eos_first_model) as url:
        yield url


@pytest.fixture(scope="module")
def eos_llama_cpp_python(eos_first_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    reason = _missing(["llama_cpp", "fastapi", "sse_starlette", "uvicorn"])
    if reason:
        _skip_or_fail(reason)
    port = _free_port()
    command = [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(eos_first_model), "--model_alias", MODEL,
        "--n_ctx", "4096", "--n_threads", "1", "--n_threads_batch", "1",
        "--host", "127.0.0.1", "--port", str(port), "--verbose", "False",
    ]  # fmt: skip
    log = tmp_path_factory.mktemp("llama-cpp-python") / "server.log"
    with _serve(command, port, log, "/v1/models") as url:
        yield url


def _measure(url: str, *args: str, injected: Injected | None = None) -> tuple[int, dict[str, Any], str]:
    result = CliRunner().invoke(
        cli,
        ["measure", url, "--runtime", "llamacpp", "-o", "json", *args],
        obj=injected or Injected(),
        catch_exceptions=False,
    )
    doc = json.loads(result.stdout) if result.stdout.strip().startswith("{") else {}
    return result.exit_code, doc, result.output


def _assert_full_length(doc: dict[str, Any], requests: int) -> None:
    """Every probe got ``requests`` answers of exactly MAX_TOKENS tokens, none retried."""
    for probe in doc["probes"]:
        assert probe["requests"] == requests, probe
        assert probe["failed"] == 0, probe
        assert probe["early_stops"] == 0, probe
        assert probe["retries"] == 0, probe
        assert probe["output_tokens"] == MAX_TOKENS, probe
    notes = doc["run"]["source"]["notes"]
    assert not any("refused ignore_eos" in note or "stopped before" in note for note in notes), notes


def _load() -> str:
    try:
        return Path("/proc/loadavg").read_text().strip()
    except OSError:
        return "?"


def test_the_seed_experiment_on_llama_server(llama_server: str) -> None:
    # The two claims are about medians of 8 requests, but the short and the long probe run one after
    # the other on a shared runner: a burst of load during one and not the other can shift a median.
    # So the experiment is repeated, up to three times, until both hold; a physical failure (a model
    # whose KV cache rivals its weights decodes several times slower at 2,000 tokens) fails every time.
    attempts: list[str] = []
    for _ in range(3):
        code, doc, output = _measure(llama_server, "--dry-run")
        assert code == 0, output
        short, long = doc["probes"]
        assert (short["name"], long["name"]) == ("short", "long")
        _assert_full_length(doc, requests=8)  # the default: 8 requests per probe
        # The warm-up calibrated the prompts to the server's own token counts.
        assert 180 <= short["prompt_tokens"] <= 220
        assert 1900 <= long["prompt_tokens"] <= 2100

        ttft_ratio = long["ttft_ms"]["p50"] / short["ttft_ms"]["p50"]
        decode_ratio = long["decode_tok_s"] / short["decode_tok_s"]
        attempts.append(
            f"TTFT p50 {short['ttft_ms']['p50']:.0f} -> {long['ttft_ms']['p50']:.0f} ms (x{ttft_ratio:.2f}), "
            f"decode {short['decode_tok_s']:.1f} -> {long['decode_tok_s']:.1f} tok/s (x{decode_ratio:.2f}), "
            f"load {_load()}"
        )
        if ttft_ratio >= 3 and 0.5 <= decode_ratio <= 1.5:
            break
    else:
        pytest.fail("the seed's experiment did not hold in 3 runs:\n" + "\n".join(attempts))
    print("the seed's experiment on llama-server:", *attempts, sep="\n  ")  # in the log with -rA

    run = doc["run"]
    canonical = decode_run(run)  # a valid canonical run: percentiles ordered, fields known
    assert canonical.setup.runtime == "llamacpp"
    assert canonical.setup.model == MODEL
    assert canonical.workload.output_tokens_mean == MAX_TOKENS
    metrics = canonical.metrics
    assert metrics.ttft_ms.p50 == pytest.approx(long["ttft_ms"]["p50"], rel=1e-3)
    # prefill from the TTFT difference, as the run's note says
    expected_prefill = (long["prompt_tokens"] - short["prompt_tokens"]) / (
        (long["ttft_ms"]["p50"] - short["ttft_ms"]["p50"]) / 1000
    )
    assert metrics.prefill_tok_s == pytest.approx(expected_prefill, rel=0.01)
    # a per-token gap and the decode rate describe the same stream
    assert metrics.itl_ms.p50 is not None and metrics.decode_tok_s is not None
    assert 0.3 < (1000 / metrics.itl_ms.p50) / metrics.decode_tok_s < 3
    # llama-server --metrics was scraped and folded in
    assert any("from llamacpp /metrics" in note for note in canonical.source.notes), canonical.source.notes


def _completion(url: str, *, max_tokens: int, **fields: Any) -> dict[str, Any]:
    body = {"model": MODEL, "prompt": "Once upon a time", "max_tokens": max_tokens, "temperature": 0, **fields}
    response = httpx.post(f"{url}/v1/completions", json=body, timeout=60)
    response.raise_for_status()
    answer: dict[str, Any] = response.json()
    return answer


@pytest.mark.parametrize("server", ["eos_llama_server", "eos_llama_cpp_python"])
def test_probes_stream_the_requested_tokens_from_a_model_that_ends_at_once(
    server: str, request: pytest.FixtureRequest
) -> None:
    url: str = request.getfixturevalue(server)
    # The model does end every answer at once when nothing holds it to a length...
    plain = _completion(url, max_tokens=MAX_TOKENS)
    assert plain["usage"]["completion_tokens"] <= 1, plain
    assert plain["choices"][0]["finish_reason"] == "stop", plain

    # ...and every probe still streams the tokens it asked for.
    code, doc, output = _measure(url, "--dry-run", "--short-tokens", "50", "--long-tokens", "400")
    assert code == 0, output
    _assert_full_length(doc, requests=8)
    assert decode_run(doc["run"]).workload.output_tokens_mean == MAX_TOKENS


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_measure_and_submit_to_the_advisor(llama_server: str, client: Any) -> None:
    from tests.e2e.tiny_llama import MEASURE

    model_spec = {  # what the random model is, for the advisor: inline specs (it is in no catalog)
        "params_b": MEASURE.params / 1e9,
        "active_params_b": MEASURE.params / 1e9,
        "num_hidden_layers": MEASURE.layers,
        "num_key_value_heads": MEASURE.kv_heads,
        "head_dim": MEASURE.head_dim,
    }
    code, doc, output = _measure(
        llama_server,
        "-n",
        "2",
        "-d",
        "e2e-tiny",
        "--setup-model",
        json.dumps(model_spec),
        "--hardware",
        json.dumps(CPU_SPEC),
        "--quantization",
        '{"bits_per_weight": 16}',
        injected=Injected(advisor=client),
    )
    assert code == 0, output
    answer = doc["result"]
    assert answer["verdict"] in ("pass", "warn", "fail")
    stored = AdvisorClient(client).run(answer["run"]["id"])
    assert stored["deployment"] == "e2e-tiny"
    assert stored["setup"]["runtime"] == "llamacpp"
    assert stored["metrics"]["prefill_tok_s"] == pytest.approx(doc["run"]["metrics"]["prefill_tok_s"])
    assert stored["workload"]["prompt_tokens_mean"] == pytest.approx(doc["probes"][1]["prompt_tokens"], rel=0.01)
    assert stored["workload"]["output_tokens_mean"] == MAX_TOKENS
    assert isinstance(answer["recommendations"], list)
