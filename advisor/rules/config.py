"""Declared rule configuration: four-level thresholds and scalar parameters, loaded from TOML.

Defaults live in ``rules/thresholds.toml`` (in a source checkout) or ``advisor/_rules_data/
thresholds.toml`` (in an installed wheel, where pyproject force-includes ``rules/``). A second
file, the ``rules.thresholds_file`` setting (``ADVISOR_RULES_THRESHOLDS_FILE``), is merged over the
defaults key by key.

A limit several rules share ("a TTFT p50 of 300 ms starts to matter") is written once, in the
``[limits]`` table, and a rule's key refers to it with a string: ``ttft_ms = "@limits.ttft_ms"``.
References are resolved after every merge, so overriding ``[limits] ttft_ms`` changes every rule
that refers to it, while a rule can still set its own value (or another reference).

Both are validated against what the rules *declare* (sqlfluff's ``get_configs_info``, Dr.
Elephant's ``SeverityThresholds.require``): an unknown section or key, a declared key missing from
the defaults, a list that is not four numbers or not monotonic in the declared direction, a
reference to an unknown limit or a shared limit no rule refers to is a :class:`ThresholdsError`
naming the file, the section and the key. A shared limit is checked against every key that refers
to it (its direction is theirs).
"""

from __future__ import annotations

import copy
import importlib.resources
import logging
import math
import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from advisor.errors import InvalidInput
from advisor.rules.severity import Thresholds

__all__ = [
    "COMMON_SECTION",
    "ENV_THRESHOLDS_FILE",
    "LIMITS_SECTION",
    "REFERENCE_PREFIX",
    "ParamSpec",
    "RuleConfig",
    "Spec",
    "ThresholdSpec",
    "ThresholdTable",
    "ThresholdsError",
    "default_thresholds_source",
    "load_table",
    "rules_data_dir",
]

logger = logging.getLogger(__name__)

#: The environment variable of the ``rules.thresholds_file`` setting, named in errors about it.
ENV_THRESHOLDS_FILE = "ADVISOR_RULES_THRESHOLDS_FILE"
#: Section for the damping limits every rule shares (sample size, gain size).
COMMON_SECTION = "common"
#: Section for limits several rules refer to; not a rule, nothing reads it directly.
LIMITS_SECTION = "limits"
#: How a rule's key refers to a shared limit: ``"@limits.<key>"``.
REFERENCE_PREFIX = f"@{LIMITS_SECTION}."


class ThresholdsError(InvalidInput):
    """The thresholds file (or a case's overrides) does not match what the rules declare."""

    title = "Invalid rule thresholds"
    type_slug = "invalid-thresholds"


@dataclass(frozen=True, slots=True)
class ThresholdSpec:
    """A four-level threshold a rule reads: its key, direction, unit and meaning."""

    key: str
    ascending: bool = True
    unit: str = ""
    doc: str = ""


@dataclass(frozen=True, slots=True)
class ParamSpec:
    """A scalar parameter a rule reads (a target, a minimum sample size, ...)."""

    key: str
    unit: str = ""
    doc: str = ""
    minimum: float | None = None
    maximum: float | None = None


Spec = ThresholdSpec | ParamSpec


@dataclass(frozen=True, slots=True)
class RuleConfig:
    """The effective thresholds and parameters of one section (a rule id or ``common``)."""

    section: str
    thresholds: Mapping[str, Thresholds] = field(default_factory=dict)
    params: Mapping[str, float] = field(default_factory=dict)
    #: Key → the ``[limits]`` key it takes its value from (keys set in the section are absent).
    shared: Mapping[str, str] = field(default_factory=dict)

    def t(self, key: str) -> Thresholds:
        try:
            return self.thresholds[key]
        except KeyError:
            raise KeyError(f"{self.section} declares no threshold {key!r}") from None

    def p(self, key: str) -> float:
        try:
            return self.params[key]
        except KeyError:
            raise KeyError(f"{self.section} declares no parameter {key!r}") from None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            k: {"values": list(t.values), "direction": "ascending" if t.ascending else "descending"}
            for k, t in self.thresholds.items()
        }
        out.update(self.params)
        return out


@dataclass(frozen=True, slots=True, eq=False)
class ThresholdTable:
    """Every section's effective configuration plus where it came from.

    Compared and hashed by identity (``eq=False``): tables are built once and cached per table.
    """

    sections: Mapping[str, RuleConfig]
    specs: Mapping[str, tuple[Spec, ...]]
    origins: tuple[str, ...] = ()
    #: The merged files before references are resolved (``[limits]`` included): what
    #: :meth:`with_overrides` merges over, so that an overridden limit reaches its rules.
    raw: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def for_section(self, section: str) -> RuleConfig:
        try:
            return self.sections[section]
        except KeyError:
            raise KeyError(f"no thresholds for {section!r}") from None

    @property
    def common(self) -> RuleConfig:
        return self.for_section(COMMON_SECTION)

    @property
    def limits(self) -> Mapping[str, Any]:
        """The shared limits in force: ``{key: [four values] | number}``."""
        return self.raw.get(LIMITS_SECTION, {})

    def with_overrides(
        self, overrides: Mapping[str, Mapping[str, Any]], *, origin: str = "overrides"
    ) -> ThresholdTable:
        """A new table with ``{section: {key: value}}`` merged over this one (validated);
        ``{"limits": {...}}`` changes every rule that refers to those limits."""
        raw: dict[str, dict[str, Any]] = copy.deepcopy({s: dict(body) for s, body in self.raw.items()})
        _merge(raw, overrides, specs=self.specs, origin=origin, require_all=False)
        return ThresholdTable(_build(raw, self.specs, origin=origin), self.specs, (*self.origins, origin), raw)


def rules_data_dir() -> Path:
    """The directory holding ``thresholds.toml`` and ``cases/``.

    An installed wheel carries it as ``advisor/_rules_data`` (importlib.resources, so zip-safe
    loaders work too); a source checkout has it at the repository root as ``rules/``.
    """
    packaged = importlib.resources.files("advisor").joinpath("_rules_data")
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[2] / "rules"


def default_thresholds_source() -> tuple[str, str]:
    """``(toml_text, origin)`` of the shipped defaults."""
    packaged = importlib.resources.files("advisor").joinpath("_rules_data", "thresholds.toml")
    if packaged.is_file():
        return packaged.read_text(encoding="utf-8"), str(packaged)
    path = Path(__file__).resolve().parents[2] / "rules" / "thresholds.toml"
    return path.read_text(encoding="utf-8"), str(path)


def load_table(
    specs: Mapping[str, Sequence[Spec]],
    *,
    defaults: tuple[str, str] | None = None,
    override_file: str | os.PathLike[str] | None = None,
) -> ThresholdTable:
    """Load and validate the defaults, then merge ``override_file`` (if any) over them.

    ``specs`` maps each section (rule id or ``common``) to what it declares. The application's
    override file is the ``rules.thresholds_file`` setting
    (:func:`advisor.rules.registry.thresholds_table` passes it); this function reads no
    environment.
    """
    frozen_specs = {s: tuple(v) for s, v in specs.items()}
    text, origin = defaults if defaults is not None else default_thresholds_source()
    raw: dict[str, dict[str, Any]] = {}
    _merge(raw, _parse_toml(text, origin), specs=frozen_specs, origin=origin, require_all=True)
    origins = [origin]
    if override_file is not None:
        path = Path(override_file)
        try:
            override_text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ThresholdsError(f"cannot read {path}: {exc}", field=ENV_THRESHOLDS_FILE) from exc
        _merge(
            raw,
            _parse_toml(override_text, str(path)),
            specs=frozen_specs,
            origin=str(path),
            require_all=False,
        )
        origins.append(str(path))
    table = ThresholdTable(_build(raw, frozen_specs, origin=origins[-1]), frozen_specs, tuple(origins), raw)
    if logger.isEnabledFor(logging.DEBUG):
        # Dr. Elephant logs the effective thresholds at start-up; an operator overriding one
        # can then see which value is in force.
        for section, cfg in sorted(table.sections.items()):
            logger.debug("rule thresholds %s: %s", section, cfg.to_dict())
    return table


def _parse_toml(text: str, origin: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ThresholdsError(f"{origin}: not valid TOML: {exc}", field=origin) from exc


def _merge(
    raw: dict[str, dict[str, Any]],
    incoming: Mapping[str, Any],
    *,
    specs: Mapping[str, tuple[Spec, ...]],
    origin: str,
    require_all: bool,
) -> None:
    """Merge ``incoming`` over ``raw`` and validate the result. ``require_all``: ``incoming`` is the
    defaults, which must set every declared key and may introduce shared limits."""
    if LIMITS_SECTION in incoming:
        _merge_limits(raw, incoming[LIMITS_SECTION], origin=origin, defaults=require_all)
    for section, body in incoming.items():
        if section == LIMITS_SECTION:
            continue
        if section not in specs:
            known = ", ".join(sorted({*specs, LIMITS_SECTION}))
            raise ThresholdsError(f"{origin}: unknown section [{section}]; known sections: {known}", field=section)
        if not isinstance(body, Mapping):
            raise ThresholdsError(f"{origin}: [{section}] must be a table", field=section)
        declared = {s.key: s for s in specs[section]}
        target = raw.setdefault(section, {})
        for key, value in body.items():
            if key not in declared:
                known = ", ".join(sorted(declared)) or "none"
                raise ThresholdsError(
                    f"{origin}: [{section}] has unknown key {key!r}; declared keys: {known}",
                    field=f"{section}.{key}",
                )
            if not isinstance(value, str):  # a reference is checked once every limit is merged
                _check_value(declared[key], value, f"{section}.{key}", origin)
            target[key] = value
    if require_all:
        for section, declared_specs in specs.items():
            for spec in declared_specs:
                if spec.key not in raw.get(section, {}):
                    raise ThresholdsError(
                        f"{origin}: [{section}] is missing declared key {spec.key!r}",
                        field=f"{section}.{spec.key}",
                    )
    _check_references(raw, specs, origin=origin, defaults=require_all)


def _merge_limits(raw: dict[str, dict[str, Any]], body: Any, *, origin: str, defaults: bool) -> None:
    if not isinstance(body, Mapping):
        raise ThresholdsError(f"{origin}: [{LIMITS_SECTION}] must be a table", field=LIMITS_SECTION)
    target = raw.setdefault(LIMITS_SECTION, {})
    for key, value in body.items():
        where = f"{LIMITS_SECTION}.{key}"
        if not defaults and key not in target:
            known = ", ".join(sorted(target)) or "none"
            raise ThresholdsError(
                f"{origin}: [{LIMITS_SECTION}] has unknown key {key!r}; shared limits: {known}", field=where
            )
        if not (_is_number(value) or (isinstance(value, list) and all(_is_number(v) for v in value))):
            raise ThresholdsError(
                f"{origin}: {where} must be a number or a list of 4 numbers, got {value!r}", field=where
            )
        target[key] = value


def _limit_name(value: str, where: str, origin: str) -> str:
    if not value.startswith(REFERENCE_PREFIX) or not value[len(REFERENCE_PREFIX) :]:
        raise ThresholdsError(
            f"{origin}: {where} must be a number, a list of 4 numbers or a reference "
            f'"{REFERENCE_PREFIX}<key>", got {value!r}',
            field=where,
        )
    return value[len(REFERENCE_PREFIX) :]


def _check_references(
    raw: Mapping[str, Mapping[str, Any]], specs: Mapping[str, tuple[Spec, ...]], *, origin: str, defaults: bool
) -> None:
    """Every reference names a limit whose value suits the referring key; in the defaults, every
    limit is referred to (a limit nobody reads is a typo or a leftover)."""
    limits = raw.get(LIMITS_SECTION, {})
    used: set[str] = set()
    for section, declared_specs in specs.items():
        body = raw.get(section, {})
        for spec in declared_specs:
            value = body.get(spec.key)
            if not isinstance(value, str):
                continue
            where = f"{section}.{spec.key}"
            name = _limit_name(value, where, origin)
            if name not in limits:
                known = ", ".join(sorted(limits)) or "none"
                raise ThresholdsError(
                    f"{origin}: {where} refers to unknown {value!r}; shared limits: {known}", field=where
                )
            ref = f"{LIMITS_SECTION}.{name}"
            _check_value(spec, limits[name], f"{ref} (referred to by {where})", origin, error_field=ref)
            used.add(name)
    if defaults:
        for name in sorted(set(limits) - used):
            raise ThresholdsError(
                f"{origin}: [{LIMITS_SECTION}] {name!r} is referred to by no rule", field=f"{LIMITS_SECTION}.{name}"
            )


def _check_value(spec: Spec, value: Any, where: str, origin: str, error_field: str | None = None) -> None:
    """``where`` is the key as the message names it; ``error_field`` (default: ``where``) the error's field."""
    field = error_field or where
    if isinstance(spec, ThresholdSpec):
        if not isinstance(value, list) or not all(_is_number(v) for v in value):
            raise ThresholdsError(f"{origin}: {where} must be a list of 4 numbers, got {value!r}", field=field)
        try:
            Thresholds.of(value, ascending=spec.ascending)
        except ValueError as exc:
            raise ThresholdsError(f"{origin}: {where}: {exc}", field=field) from exc
        return
    if not _is_number(value):
        raise ThresholdsError(f"{origin}: {where} must be a number, got {value!r}", field=field)
    if spec.minimum is not None and value < spec.minimum:
        raise ThresholdsError(f"{origin}: {where} must be >= {spec.minimum:g}, got {value}", field=field)
    if spec.maximum is not None and value > spec.maximum:
        raise ThresholdsError(f"{origin}: {where} must be <= {spec.maximum:g}, got {value}", field=field)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _build(
    raw: Mapping[str, Mapping[str, Any]], specs: Mapping[str, tuple[Spec, ...]], *, origin: str
) -> dict[str, RuleConfig]:
    limits = raw.get(LIMITS_SECTION, {})
    out: dict[str, RuleConfig] = {}
    for section, declared in specs.items():
        body = raw.get(section, {})
        thresholds: dict[str, Thresholds] = {}
        params: dict[str, float] = {}
        shared: dict[str, str] = {}
        for spec in declared:
            if spec.key not in body:
                raise ThresholdsError(f"{origin}: [{section}] is missing {spec.key!r}", field=f"{section}.{spec.key}")
            value = body[spec.key]
            if isinstance(value, str):  # validated by _check_references
                shared[spec.key] = value[len(REFERENCE_PREFIX) :]
                value = limits[shared[spec.key]]
            if isinstance(spec, ThresholdSpec):
                thresholds[spec.key] = Thresholds.of(value, ascending=spec.ascending)
            else:
                params[spec.key] = float(value)
        out[section] = RuleConfig(section, thresholds, params, shared)
    return out
