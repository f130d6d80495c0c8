"""OpenAPI for the raw-body endpoints. Their handlers read the body themselves (any benchmark
file, in any format), so Litestar cannot infer a request body; these operations declare it."""

from __future__ import annotations

from dataclasses import dataclass

from litestar.openapi.spec import OpenAPIFormat, OpenAPIMediaType, OpenAPIType, Operation, RequestBody, Schema

__all__ = ["BulkOperation", "SubmissionOperation"]

_SUBMISSION = (
    "The file your benchmark tool wrote, unchanged (vLLM bench serve, SGLang, guidellm, genai-perf, aiperf, "
    "llmperf, llm-d, inference-perf, llama-bench json/jsonl/csv, llama-server, Ollama, a Prometheus /metrics "
    'scrape), a canonical run, or a JSON wrapper {"context": {...}, "files": [{"name", "content", '
    '"role"?}]} that combines a benchmark file with /metrics scrapes.'
)


@dataclass
class SubmissionOperation(Operation):
    def __post_init__(self) -> None:
        self.request_body = RequestBody(
            required=True,
            description=_SUBMISSION,
            content={
                "application/json": OpenAPIMediaType(
                    schema=Schema(type=OpenAPIType.OBJECT, description="canonical run, wrapper or a JSON tool output")
                ),
                "application/x-ndjson": OpenAPIMediaType(schema=Schema(type=OpenAPIType.STRING)),
                "text/plain": OpenAPIMediaType(schema=Schema(type=OpenAPIType.STRING)),
                "text/csv": OpenAPIMediaType(schema=Schema(type=OpenAPIType.STRING)),
                "application/octet-stream": OpenAPIMediaType(
                    schema=Schema(type=OpenAPIType.STRING, format=OpenAPIFormat.BINARY)
                ),
            },
        )


@dataclass
class BulkOperation(Operation):
    def __post_init__(self) -> None:
        self.request_body = RequestBody(
            required=True,
            description="Canonical runs (or wrappers): NDJSON, one per line, or a JSON array. All or nothing.",
            content={
                "application/x-ndjson": OpenAPIMediaType(schema=Schema(type=OpenAPIType.STRING)),
                "application/json": OpenAPIMediaType(
                    schema=Schema(type=OpenAPIType.ARRAY, items=Schema(type=OpenAPIType.OBJECT))
                ),
            },
        )
