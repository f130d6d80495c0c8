"""The parser protocol and the decoded input every parser sniffs.

A parser turns the bytes of one file into one or more canonical runs. Sniffing is cheap and works on
an :class:`Input` decoded once (JSON document, JSON-Lines records or text), so that twelve parsers do
not each re-decode a 10 MB body. :class:`ParserBase` holds what every built-in parser shares: its
sniffing priority and the ``parse`` template, so that a parser writes only its own hooks.
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

__all__ = ["DEFAULT_PRIORITY", "Input", "Parser", "ParserBase", "is_warmup"]

#: Sniffing priority of a parser that declares none.
DEFAULT_PRIORITY = 100


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

    @property
    def records(self) -> list[Any] | None:
        """The body as records: one JSON object, the items of a JSON array, or JSON-Lines; None
        when it is none of these."""
        doc = self.json
        if isinstance(doc, dict):
            return [doc]
        if isinstance(doc, list):
            return doc
        return self.json_lines

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


#: Record keys by which benchmark tools mark a warm-up record, and the values that do.
_WARMUP_KEYS = ("type", "phase", "benchmark_phase", "stage_type")


def is_warmup(record: object) -> bool:
    """True for a record a tool marked as warm-up (``"type": "warmup"``, ``"phase": "warmup"``,
    ``"is_warmup": true``): it measures a cold or discarded pass, never the run."""
    if not isinstance(record, dict):
        return False
    if record.get("is_warmup") is True or record.get("warmup") is True:
        return True
    return any(isinstance(record.get(k), str) and record[k].strip().lower() in ("warmup", "warm-up", "warm_up")
               for k in _WARMUP_KEYS)  # fmt: skip


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
    """Base of the built-in parsers: it owns the ``parse`` template, so a parser sets its class
    attributes and writes only its own hooks.

    ``parse`` reads the file's records (:meth:`read`, or just :meth:`records` for JSON formats),
    turns them into runs (:meth:`parse_records`, by default :meth:`parse_record` per record), puts the
    notes about the file itself first in every run and stamps each run's source with the format and
    the tool. :meth:`sniff` is the parser's own, and must never raise.
    """

    format_id: ClassVar[str]
    description: ClassVar[str]
    #: Tool name recorded in ``source.tool`` when a run does not name a more precise one; None when
    #: the runs name their own (a canonical run's source is the submitter's).
    tool: ClassVar[str | None]
    #: Sniffing order, lower first (docs/formats.md §9.4): a format whose files another parser could
    #: also claim is asked first.
    priority: ClassVar[int] = DEFAULT_PRIORITY
    #: True when the runs already went through ``validate_run``, sparing the registry a second pass.
    validates_output: ClassVar[bool] = False

    def sniff(self, inp: Input) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    def parse(self, inp: Input) -> list[CanonicalRun]:
        records, notes = self.read(inp)
        kept = [r for r in records if not is_warmup(r)]
        if len(kept) < len(records):
            # A warm-up is no measurement of the run: tools that log it beside the results mark it.
            notes = [*notes, f"{len(records) - len(kept)} warm-up record(s) left out"]
            records = kept
        runs = self.parse_records(records)
        for run in runs:
            if notes:
                run.source.notes[:0] = notes
            run.source.format = run.source.format or self.format_id
            if run.source.tool is None:
                run.source.tool = self.tool
        return runs

    def read(self, inp: Input) -> tuple[list[Any], list[str]]:
        """The records in the file, and notes about the file itself (lines skipped, …) that every
        run carries first. By default the :meth:`records` of a structured document; an empty or
        unreadable body is a :class:`MalformedInput` (400), whatever the format."""
        records = self.records(inp)
        if records is None:
            inp.require_json()
            raise self.fail(f"the body is not {self.description}", "body")
        return records, []

    def records(self, inp: Input) -> list[Any] | None:
        """The structured records in the body, or None when it holds none. By default the body's
        one JSON document."""
        doc = inp.json
        return None if doc is None else [doc]

    def parse_records(self, records: list[Any]) -> list[CanonicalRun]:
        """The runs of the file's records: by default each record on its own, its fields located by
        a ``[index].`` prefix when the file holds several."""
        many = len(records) > 1
        runs: list[CanonicalRun] = []
        for index, record in enumerate(records):
            runs.extend(self.parse_record(record, f"[{index}]." if many else ""))
        return runs

    def parse_record(self, record: Any, prefix: str) -> list[CanonicalRun]:  # pragma: no cover - abstract
        """The runs of one record; ``prefix`` (``"[2]."`` or ``""``) locates it in error fields."""
        raise NotImplementedError

    def fail(self, detail: str, field: str | None = None) -> IngestError:
        return IngestError(f"{self.format_id}: {detail}", field=field, format=self.format_id)

    @staticmethod
    def record_field(prefix: str) -> str:
        """The error field naming a whole record: ``[2]`` in a multi-record file, else ``body``."""
        return prefix.rstrip(".") or "body"
