"""The parser protocol and the decoded input every parser sniffs.

A parser turns the bytes of one file into one or more canonical runs. Sniffing is cheap and works on
an :class:`Input` decoded once (JSON document, JSON-Lines records or text), so that twelve parsers do
not each re-decode a 10 MB body.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar, Protocol, runtime_checkable

import msgspec
import yaml

from advisor.canonical import CanonicalRun
from advisor.errors import IngestError, MalformedInput

__all__ = ["Input", "Parser", "ParserBase"]


def _lenient_json(text: str) -> Any:
    # msgspec first (several times faster); the stdlib decoder only when msgspec refuses, because it
    # accepts the bare ``Infinity``/``NaN`` tokens that SGLang and some Python tools write.
    try:
        return msgspec.json.decode(text)
    except msgspec.DecodeError:
        return json.loads(text)


@dataclass(frozen=True)
class Input:
    """One submitted file, decoded lazily and at most once."""

    data: bytes
    file_name: str | None = None
    hints: dict[str, Any] = field(default_factory=dict)

    @cached_property
    def text(self) -> str | None:
        """The body as text (UTF-8, or UTF-16 with a BOM as PowerShell writes it; a BOM is dropped),
        or None for binary data."""
        if self.data[:2] in (b"\xff\xfe", b"\xfe\xff"):
            # Checked before the NUL test: UTF-16 text is full of NUL bytes.
            try:
                return self.data.decode("utf-16")
            except UnicodeDecodeError:
                return None
        if b"\x00" in self.data[:4096]:
            return None
        try:
            return self.data.decode("utf-8-sig")
        except UnicodeDecodeError:
            return None

    @cached_property
    def json(self) -> Any:
        """The whole body as one JSON document, or None when it is not one."""
        text = self.text
        if text is None or not text.strip():
            return None
        stripped = text.lstrip()
        if not stripped or stripped[0] not in "[{":
            return None
        try:
            return _lenient_json(text)
        except ValueError:
            return None

    @cached_property
    def json_lines(self) -> list[Any] | None:
        """The body as JSON-Lines (one document per non-empty line), or None."""
        text = self.text
        if text is None:
            return None
        records: list[Any] = []
        for line in text.splitlines():
            if not line.strip():
                continue
            try:
                records.append(_lenient_json(line))
            except ValueError:
                return None
        return records or None

    @cached_property
    def yaml(self) -> Any:
        """The body as one YAML document when it is not JSON (guidellm and llm-d write YAML reports),
        or None. Only mappings and sequences count: any plain text is a valid YAML scalar."""
        if self.json is not None:
            return None
        text = self.text
        if text is None or not text.strip():
            return None
        try:
            # CSafeLoader when libyaml is present: several times faster on the 1 MB reports, and
            # "safe" builds no arbitrary Python objects.
            loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
            doc = yaml.load(text, Loader=loader)
        except (yaml.YAMLError, ValueError, RecursionError):
            return None
        return doc if isinstance(doc, dict | list) else None

    @property
    def document(self) -> Any:
        """The body as one structured document: JSON first, then YAML; None when it is neither."""
        doc = self.json
        return doc if doc is not None else self.yaml

    def require_json(self) -> Any:
        """The JSON document, or a clear 400 for an unreadable body."""
        if not self.data.strip():
            raise MalformedInput("the body is empty", field="body")
        doc = self.json
        if doc is None:
            raise MalformedInput("the body is not valid JSON (truncated or corrupt?)", field="body")
        return doc


@runtime_checkable
class Parser(Protocol):
    """What the registry needs of a parser. Register third-party parsers under the
    ``advisor.ingest`` entry-point group."""

    format_id: str
    description: str

    def sniff(self, inp: Input) -> bool:
        """True when this file is in this parser's format. Must never raise."""
        ...

    def parse(self, inp: Input) -> list[CanonicalRun]:
        """The canonical runs in the file. Raises only :class:`advisor.errors.IngestError`
        (or its subclasses / :class:`MalformedInput`)."""
        ...


class ParserBase:
    """Convenience base: subclasses set the class attributes and implement the two methods."""

    format_id: ClassVar[str]
    description: ClassVar[str]
    #: Tool name recorded in ``source.tool``.
    tool: ClassVar[str]

    def sniff(self, inp: Input) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    def parse(self, inp: Input) -> list[CanonicalRun]:  # pragma: no cover - abstract
        raise NotImplementedError

    def fail(self, detail: str, field: str | None = None) -> IngestError:
        return IngestError(f"{self.format_id}: {detail}", field=field, format=self.format_id)
