"""Versioned knowledge of the serving runtimes: flag spellings and defaults, each with its source.

The table is ``advisor/rules/data/runtimes.toml``. Rules emit flags through :func:`flag` (which
refuses a flag the table does not list for that runtime) and read defaults through
:func:`default`, so an outdated spelling or default is fixed in one place. When a run does not say
which version it runs, :func:`applies_note` says which versions an entry applies to.
"""

from __future__ import annotations

import functools
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

__all__ = [
    "Default",
    "Flag",
    "RuntimeTable",
    "VersionRange",
    "annotate_fix",
    "applies_note",
    "default",
    "flag",
    "flags_in",
    "is_known_flag",
    "rule_fix_flags",
    "table",
    "versions_of",
]

Version = tuple[int, ...]


def _version(text: Any) -> Version | None:
    """``"0.9.7"`` → ``(0, 9, 7)``, ``"b5606"`` → ``(5606,)`` (the same reading as
    :func:`advisor.rules.knobs.parse_version`, which imports this module)."""
    numbers = re.findall(r"\d+", str(text)) if text is not None else []
    return tuple(int(n) for n in numbers[:3]) if numbers else None


def _in_range(version: Version | None, since: Version | None, until: Version | None) -> bool | None:
    """Whether ``version`` is in [since, until); None when the version is unknown."""
    if version is None:
        return None
    if since is not None and version < since:
        return False
    return not (until is not None and version >= until)


@dataclass(frozen=True, slots=True)
class VersionRange:
    """The versions a table entry holds for: ``[since, until)`` by release, or builds after /
    before a pull request (``since_pr``, ``until_pr``: llama.cpp's numbered builds)."""

    since: str | None = None
    until: str | None = None
    since_pr: str | None = None
    until_pr: str | None = None

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> VersionRange:
        """The range of a ``runtimes.toml`` row."""
        return cls(_opt(row, "since"), _opt(row, "until"), _opt(row, "since_pr"), _opt(row, "until_pr"))

    def holds(self, version: str | None) -> bool | None:
        """Whether ``version`` is in the range (None when the version is unknown)."""
        return _in_range(_version(version), _version(self.since), _version(self.until))

    @property
    def every_version(self) -> bool:
        """No bound at all."""
        return (self.since, self.until, self.since_pr, self.until_pr) == (None, None, None, None)

    @property
    def open_ended(self) -> bool:
        """No upper bound: the entry holds for the newest versions."""
        return self.until is None and self.until_pr is None

    @property
    def text(self) -> str:
        """``"0.8.0 and later"``, ``"all versions"``…"""
        low = self.since or (f"builds after {self.since_pr}" if self.since_pr else None)
        high = self.until or (f"builds before {self.until_pr}" if self.until_pr else None)
        if low and high:
            return f"{low} up to (not including) {high}" if self.until else f"{low}, {high}"
        if low:
            return f"{low} and later" if self.since else low
        if high:
            return f"versions before {high}" if self.until else high
        return "all versions"


@dataclass(frozen=True, slots=True)
class _Entry:
    """What every entry of the table carries: its runtime, the versions it holds for, its source."""

    runtime: str
    span: VersionRange
    source: str

    def holds(self, version: str | None) -> bool | None:
        """Whether the entry holds for this runtime ``version`` (None when the version is unknown)."""
        return self.span.holds(version)

    @property
    def versions(self) -> str:
        """``"0.8.0 and later"``, ``"all versions"``…"""
        return self.span.text


@dataclass(frozen=True, slots=True)
class Flag(_Entry):
    """One flag (or environment variable) of a runtime; :meth:`holds` says whether a version has it."""

    flag: str
    concept: str


@dataclass(frozen=True, slots=True)
class Default(_Entry):
    """A runtime's default for a knob in one version range."""

    knob: str
    value: Any
    note: str | None


@dataclass(frozen=True, slots=True)
class RuntimeTable:
    """Everything the table holds for one runtime."""

    runtime: str
    docs: str
    flags: tuple[Flag, ...]
    defaults: tuple[Default, ...]


def _opt(row: Mapping[str, Any], key: str) -> str | None:
    value = row.get(key)
    return str(value) if value is not None else None


@functools.cache
def table() -> dict[str, RuntimeTable]:
    """The whole table, by runtime."""
    text = resources.files("advisor.rules").joinpath("data", "runtimes.toml").read_text(encoding="utf-8")
    raw = tomllib.loads(text)
    out: dict[str, RuntimeTable] = {}
    for runtime, body in raw.items():
        docs = str(body.get("docs", ""))
        flags = tuple(
            Flag(
                runtime=runtime,
                flag=str(row["flag"]),
                concept=str(row["concept"]),
                span=VersionRange.of(row),
                source=str(row.get("source", docs)),
            )
            for row in body.get("flags", [])
        )
        defaults = tuple(
            Default(
                runtime=runtime,
                knob=str(row["knob"]),
                value=row["value"],
                note=_opt(row, "note"),
                span=VersionRange.of(row),
                source=str(row.get("source", docs)),
            )
            for row in body.get("defaults", [])
        )
        out[runtime] = RuntimeTable(runtime, docs, flags, defaults)
    return out


@functools.cache  # the table is loaded once (table()); fixes ask for their runtime's flags per finding
def _flags(runtime: str) -> dict[str, Flag]:
    rt = table().get(runtime)
    return {f.flag: f for f in rt.flags} if rt is not None else {}


def flag(runtime: str, name: str) -> str:
    """``name`` as it is spelled for ``runtime``; raises ``KeyError`` when the table does not list
    it, so a rule cannot emit a flag nobody checked."""
    if name not in _flags(runtime):
        raise KeyError(f"{runtime} has no flag {name!r} in advisor/rules/data/runtimes.toml")
    return name


def is_known_flag(runtime: str, name: str) -> bool:
    """Whether the table lists ``name`` for ``runtime``."""
    return name in _flags(runtime)


def default(runtime: str | None, knob: str, version: str | None) -> Default | None:
    """The default of ``knob`` in ``runtime`` at ``version``.

    With a known version, the entry whose range holds it (None if none does). With an unknown
    version, the newest entry (the one without ``until``), whose ``versions`` the caller should
    quote."""
    rt = table().get(runtime or "")
    if rt is None:
        return None
    rows = [d for d in rt.defaults if d.knob == knob]
    if not rows:
        return None
    if _version(version) is None:
        open_ended = [d for d in rows if d.span.open_ended]
        return open_ended[-1] if open_ended else rows[-1]
    for row in rows:
        if row.holds(version):
            return row
    return None


def applies_note(runtime: str, name: str, version: str | None) -> str:
    """`` (vLLM 0.8.0 and later)`` when the run's version is unknown and the flag is not in every
    version; empty otherwise."""
    entry = _flags(runtime).get(name)
    if entry is None or _version(version) is not None:
        return ""
    if entry.span.every_version:
        return ""
    return f" ({runtime} {entry.versions})"


# A flag starts after whitespace, a quote, a backtick or a parenthesis: ``-ub 512``, ``(--foo)``;
# hyphens inside words ("per-token", "8-bit") are not flags. Environment variables are upper-case
# names followed by ``=``, or Ollama's own OLLAMA_* names.
_FLAG_RE = re.compile(r"(?:(?<=^)|(?<=[\s`'\"(]))(--?[A-Za-z][A-Za-z0-9_-]*)")
_ENV_RE = re.compile(r"\b(OLLAMA_[A-Z_]+|[A-Z][A-Z0-9_]{3,}(?==))")


def flags_in(text: str, extra: Iterable[str] = ()) -> set[str]:
    """Every flag and environment variable named in a fix text (plus ``extra``)."""
    return set(_named_in(text)) | set(extra)


@functools.lru_cache(maxsize=4096)  # fix texts repeat from run to run; the regexes are the cost
def _named_in(text: str) -> frozenset[str]:
    found = {m.rstrip("-") for m in _FLAG_RE.findall(text)}
    found |= set(_ENV_RE.findall(text))
    return frozenset(found)


def _fix_samples() -> dict[str, dict[str, str]]:
    """Each helper of :mod:`advisor.rules.fixes` with sample arguments: the flags it can emit."""
    from advisor.rules import fixes  # fixes imports this module

    samples: dict[str, dict[str, str]] = {
        "prefix_caching": fixes.prefix_caching(),
        "batched_tokens": fixes.batched_tokens(2048),
        "chunked_prefill_on": fixes.chunked_prefill_on(2048),
        "memory_fraction": fixes.memory_fraction(0.95),
        "max_seqs": fixes.max_seqs(16),
        "speculative_decoding": fixes.speculative_decoding(),
    }
    quant: dict[str, str] = {}
    kv: dict[str, str] = {}
    for generation in (None, "turing", "ampere", "ada", "hopper", "apple-m2"):
        for bits in (8.0, 4.0):
            for runtime, text in fixes.weight_quant(bits, generation).items():
                quant[runtime] = f"{quant.get(runtime, '')} {text}"
        for runtime, text in fixes.kv_cache_quant(generation).items():
            kv[runtime] = f"{kv.get(runtime, '')} {text}"
    samples["weight_quant"] = quant
    samples["kv_cache_quant"] = kv
    return samples


def rule_fix_flags(rule: type) -> dict[str, set[str]]:
    """The tabled flags each runtime's fix of ``rule`` can name, read from its source: literal fix
    dicts keyed by runtime, ``runtimes.flag(runtime, name)`` calls, and the :mod:`fixes` helpers it
    calls (with sample arguments). Feeds docs/rules.md's "Fix applies to" table."""
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(inspect.getmodule(rule) or rule))
    samples = _fix_samples()
    out: dict[str, set[str]] = {}

    def text_of(node: ast.AST) -> str:
        return " ".join(n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str))

    def add(runtime: str, flags: Iterable[str]) -> None:
        known = {f for f in flags if is_known_flag(runtime, f)}
        if known:
            out.setdefault(runtime, set()).update(known)

    # Per-runtime parts a rule builds with ``parts.append(...)`` and keys in a loop over
    # ``(("vllm", parts), ...)`` (DEC002), and ``fix["tgi"] = ...`` assignments.
    appended: dict[str, list[str]] = {}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("append", "extend")
            and isinstance(node.func.value, ast.Name)
        ):
            appended.setdefault(node.func.value.id, []).extend(text_of(a) for a in node.args)
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and isinstance(key.value, str) and key.value in table():
                    add(key.value, flags_in(text_of(value)))
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if (
                    isinstance(target, ast.Subscript)
                    and isinstance(target.slice, ast.Constant)
                    and target.slice.value in table()
                ):
                    add(str(target.slice.value), flags_in(text_of(node.value)))
        elif isinstance(node, ast.Tuple) and len(node.elts) == 2:
            key, parts = node.elts
            if isinstance(key, ast.Constant) and key.value in table() and isinstance(parts, ast.Name):
                add(str(key.value), flags_in(" ".join(appended.get(parts.id, []))))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            if (
                isinstance(owner, ast.Name)
                and owner.id == "runtimes"
                and node.func.attr == "flag"
                and len(node.args) == 2
            ):
                rt, name = node.args
                if isinstance(rt, ast.Constant) and isinstance(name, ast.Constant):
                    add(str(rt.value), {str(name.value)})
            if isinstance(owner, ast.Name) and owner.id == "fixes" and node.func.attr in samples:
                for runtime, text in samples[node.func.attr].items():
                    if runtime in table():
                        add(runtime, flags_in(text))
    return out


def versions_of(runtime: str, name: str) -> str:
    """The version range of one tabled flag, for the docs (``"all versions"`` when unbounded)."""
    entry = _flags(runtime).get(name)
    return entry.versions if entry is not None else "not in the table"


def annotate_fix(fix: dict[str, str], runtime: str | None, version: str | None) -> dict[str, str]:
    """``fix`` with the versions of every version-bounded flag spelled out where the run cannot
    vouch for them: in other runtimes' texts always, in the run's own runtime when its version is
    unknown (``"--speculative-config … (--speculative-config: 0.8.2 and later)"``). A flag the
    run's known version lacks is noted too."""
    out: dict[str, str] = {}
    for key, text in fix.items():
        notes: list[str] = []
        for name in sorted(flags_in(text)):
            entry = _flags(key).get(name)
            if entry is None or entry.span.every_version:
                continue
            if key == runtime and _version(version) is not None:
                if entry.holds(version) is False:
                    notes.append(f"{name}: {entry.versions}, not {version}")
                continue
            if entry.versions not in text:
                notes.append(f"{name}: {entry.versions}")
        out[key] = f"{text} ({'; '.join(notes)})" if notes else text
    return out
