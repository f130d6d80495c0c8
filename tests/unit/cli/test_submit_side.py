"""``advisor submit FILE --side X --side Y``: the side files travel in the JSON wrapper beside each
file (role "side"), and the server reads those that say where the model sits."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from advisor.client.exit_codes import ExitCode
from tests.unit.client.fakes import FakeAdvisor, advisor_http, invoke

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
GENERATE = FIXTURES / "ingest" / "ollama" / "cokacho-gemma4-generate-nonstream-prettyprinted-2026-04.json"
PS = FIXTURES / "side_files" / "ollama-docs-api-ps-gemma4.json"
LOG = FIXTURES / "side_files" / "edge-llama-server-log-partial-offload-24-of-33.log"


def _wrappers(fake: FakeAdvisor) -> list[dict[str, Any]]:
    return [json.loads(r.content) for r in fake.requests if r.url.path in ("/api/v1/runs", "/api/v1/advise")]


@pytest.mark.parametrize("command", ["submit", "advise"])
def test_side_files_go_in_the_wrapper_beside_every_file(command: str, tmp_path: Path) -> None:
    second = tmp_path / "second.json"
    second.write_bytes(GENERATE.read_bytes())
    fake = FakeAdvisor()
    args = [command, str(GENERATE), str(second), "--side", str(PS), "--side", str(LOG), "--hardware", "nvidia-l4"]
    result = invoke(args, advisor=advisor_http(fake.handler))
    assert result.exit_code == ExitCode.OK, result.output
    wrappers = _wrappers(fake)
    assert len(wrappers) == 2
    for wrapper, name in zip(wrappers, [GENERATE.name, "second.json"], strict=True):
        files = wrapper["files"]
        assert [(f["name"], f.get("role")) for f in files] == [(name, None), (PS.name, "side"), (LOG.name, "side")]
        assert files[1]["content"] == PS.read_text()
        assert files[2]["content"] == LOG.read_text()
        assert wrapper["context"]["hardware"] == "nvidia-l4"


def test_side_files_sit_beside_the_metrics_scrapes(tmp_path: Path) -> None:
    scrape = tmp_path / "metrics.prom"
    scrape.write_text("vllm:num_requests_waiting 0\n")
    fake = FakeAdvisor()
    result = invoke(
        ["submit", str(GENERATE), "--metrics", str(scrape), "--side", str(PS)], advisor=advisor_http(fake.handler)
    )
    assert result.exit_code == ExitCode.OK, result.output
    [wrapper] = _wrappers(fake)
    assert [f.get("role") for f in wrapper["files"]] == [None, "metrics", "side"]


def test_without_side_files_a_plain_file_is_sent_as_is() -> None:
    fake = FakeAdvisor()
    assert invoke(["submit", str(GENERATE)], advisor=advisor_http(fake.handler)).exit_code == ExitCode.OK
    [request] = [r for r in fake.requests if r.url.path == "/api/v1/runs"]
    assert request.content == GENERATE.read_bytes()


def test_a_missing_side_file_is_a_usage_error(tmp_path: Path) -> None:
    fake = FakeAdvisor()
    result = invoke(
        ["submit", str(GENERATE), "--side", str(tmp_path / "nope.json")], advisor=advisor_http(fake.handler)
    )
    assert result.exit_code == ExitCode.USAGE
    assert not fake.requests


def test_the_server_reads_api_ps_sent_with_side(client: Any) -> None:
    """End to end on the real app: the stored run has the share /api/ps gives."""
    from click.testing import CliRunner

    from advisor.cli import cli
    from advisor.client import Injected

    injected = Injected(advisor=client, target=None, sleep=lambda _s: None, clock=None)
    result = CliRunner().invoke(
        cli, ["submit", str(GENERATE), "--side", str(PS), "-o", "json"], obj=injected, catch_exceptions=False
    )
    assert result.exit_code == ExitCode.OK, result.output
    run = json.loads(result.stdout)["run"]
    assert run["metrics"]["gpu_resident_share"] == pytest.approx(5333539264 / 6591830464)
    assert any("ollama-docs-api-ps-gemma4.json" in n for n in run["source"]["notes"])
