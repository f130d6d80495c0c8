"""The rule contract: metadata, the :class:`Finding` a rule returns, and the fixed vocabularies.

One rule per file, ``advisor/rules/<group>/<ID>.py``, one :class:`Rule` subclass in it whose ``id``
is the file name. Its docstring is a summary line followed by ``## Why is this bad?``, ``## Fix``
and ``## Example`` (a meta-test enforces them; ``python -m advisor.rules.docs`` renders them).
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

from advisor.rules.config import RuleConfig, Spec
from advisor.rules.severity import Severity, Thresholds

if TYPE_CHECKING:
    from advisor.rules.context import RunContext

__all__ = [
    "ACTIONS",
    "DOC_SECTIONS",
    "EVIDENCE_SOURCES",
    "FIX_KEYS",
    "GROUPS",
    "Evidence",
    "EvidenceSource",
    "Finding",
    "Gain",
    "Phase",
    "Rule",
    "RuleDocs",
    "Status",
    "fast_frozen_init",
]

#: ``isinstance(x, _NUMBER)``: a tuple, since ``int | float`` builds a Union on every call (hot paths).
_NUMBER = (int, float)


class Status(StrEnum):
    """Lifecycle (ruff's preview/stable): preview rules may still change or be tuned."""

    PREVIEW = "preview"
    STABLE = "stable"
    DEPRECATED = "deprecated"


class Phase(StrEnum):
    PREFILL = "prefill"
    DECODE = "decode"
    SCHEDULING = "scheduling"
    CAPACITY = "capacity"
    CONFIG = "config"
    MEASUREMENT = "measurement"
    REGRESSION = "regression"


#: DESIGN §4: the fixed action vocabulary, so that clients can count and filter.
ACTIONS: tuple[str, ...] = (
    "shorten-prompt",
    "enable-prefix-caching",
    "reorder-prompt-prefix",
    "raise-batched-tokens",
    "lower-batched-tokens",
    "enable-chunked-prefill",
    "quantize-weights",
    "quantize-kv-cache",
    "add-capacity",
    "raise-gpu-memory-utilization",
    "reduce-max-num-seqs",
    "reduce-context",
    "upgrade-bandwidth",
    "upgrade-compute",
    "fix-serving-stack",
    "warm-up-model",
    "tune-runtime-parallelism",
    "disaggregate-prefill-decode",
    "avoid-disaggregation",
    "smaller-model",
    "speculative-decoding",
    "improve-measurement",
    "investigate-regression",
)

#: Group folder → (ID prefix, phase). IDs are ``<PREFIX><3 digits>`` and never recycled.
GROUPS: dict[str, tuple[str, Phase]] = {
    "pre": ("PRE", Phase.PREFILL),
    "dec": ("DEC", Phase.DECODE),
    "sch": ("SCH", Phase.SCHEDULING),
    "cap": ("CAP", Phase.CAPACITY),
    "cfg": ("CFG", Phase.CONFIG),
    "reg": ("REG", Phase.REGRESSION),
    "meas": ("MEAS", Phase.MEASUREMENT),
}

#: Keys of a finding's ``fix``: the runtimes of the canonical run, ``other`` is runtime-agnostic.
FIX_KEYS: tuple[str, ...] = ("vllm", "sglang", "tgi", "trtllm", "ollama", "llamacpp", "mlx", "other")

EvidenceSource = Literal["run", "physics", "model", "baseline", "slo"]
EVIDENCE_SOURCES: tuple[str, ...] = ("run", "physics", "model", "baseline", "slo")

DOC_SECTIONS: tuple[str, ...] = ("Why is this bad?", "Fix", "Example")


_T = TypeVar("_T")


class _Factory:
    """Stands for "not given" where a field's default comes from a factory (as in dataclasses)."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


def fast_frozen_init(cls: type[_T]) -> type[_T]:
    """Give a frozen, slotted dataclass an ``__init__`` that sets each slot through its own
    descriptor, bound once, instead of ``object.__setattr__(self, name, value)`` per field.

    The same signature (order, defaults, factories, keyword-only fields) and the same object: the
    class stays frozen (its ``__setattr__`` still raises), and equality, hashing and ``repr`` are
    the dataclass's. A third to a half faster: the engine builds some 55 of these per analysed run
    (evidence rows, findings, TTFT parts, baseline metrics). Apply it above ``@dataclass``.
    """
    params = dataclasses.fields(cls)  # type: ignore[arg-type]
    if not getattr(cls, "__dataclass_params__").frozen or "__slots__" not in vars(cls):  # noqa: B009
        raise TypeError(f"{cls.__name__} is not a frozen, slotted dataclass")
    namespace: dict[str, Any] = {"_FACTORY": _FACTORY}
    positional: list[str] = []
    keyword: list[str] = []
    body: list[str] = []
    for f in params:
        name = f.name
        namespace[f"_set_{name}"] = vars(cls)[name].__set__
        if not f.init:
            # Not a parameter: set from its default or factory, as the dataclass's own __init__ does.
            if f.default is not dataclasses.MISSING:
                namespace[f"_default_{name}"] = f.default
                body.append(f"    _set_{name}(self, _default_{name})")
            elif f.default_factory is not dataclasses.MISSING:
                namespace[f"_factory_{name}"] = f.default_factory
                body.append(f"    _set_{name}(self, _factory_{name}())")
            continue
        if f.default is not dataclasses.MISSING:
            namespace[f"_default_{name}"] = f.default
            param = f"{name}=_default_{name}"
        elif f.default_factory is not dataclasses.MISSING:
            namespace[f"_factory_{name}"] = f.default_factory
            param = f"{name}=_FACTORY"
            body.append(f"    if {name} is _FACTORY:\n        {name} = _factory_{name}()")
        else:
            param = name
        (keyword if f.kw_only else positional).append(param)
        body.append(f"    _set_{name}(self, {name})")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    signature = ", ".join(["self", *positional, *(["*", *keyword] if keyword else [])])
    exec(f"def __init__({signature}) -> None:\n" + "\n".join(body or ["    pass"]), namespace)
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__doc__ = cls.__init__.__doc__
    cls.__init__ = init  # type: ignore[method-assign]
    return cls


def _round(value: float) -> float:
    """Evidence numbers rounded to 3 significant digits: precision the inputs do not have is noise."""
    if value == 0 or not math.isfinite(value):
        return value
    digits = 3 - math.floor(math.log10(abs(value))) - 1
    return round(value, max(digits, 0)) if digits > 0 else float(round(value, digits))


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class Evidence:
    """ "Expected x, found y" (Dr. Elephant's detail rows). ``expected`` is a readable range
    (``"< 250"``, ``"41–52"``), ``source`` says where the expectation comes from."""

    metric: str
    found: float | str | bool | None
    expected: str
    source: EvidenceSource

    def to_dict(self) -> dict[str, Any]:
        found = (
            _round(float(self.found))
            if isinstance(self.found, _NUMBER) and not isinstance(self.found, bool)
            else self.found
        )
        return {"metric": self.metric, "found": found, "expected": self.expected, "source": self.source}


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class Gain:
    """What the fix should do to one metric: measured ``from`` → predicted ``to``."""

    metric: str
    from_: float
    to: float

    @property
    def relative(self) -> float:
        return (self.to - self.from_) / self.from_ if self.from_ else 0.0

    @property
    def size(self) -> float:
        """|log(to/from)|: a symmetric size of the change (×2 and ÷2 are the same size)."""
        if self.from_ <= 0 or self.to <= 0:
            return 0.0
        # The difference of logs, not the log of the ratio: to / from_ underflows to 0 (a math
        # domain error) when the two are hundreds of orders of magnitude apart.
        return abs(math.log(self.to) - math.log(self.from_))

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "from": _round(self.from_),
            "to": _round(self.to),
            "relative": round(self.relative, 3),
        }


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class Finding:
    """What :meth:`Rule.evaluate` returns. The engine adds identity, score and ranking."""

    severity: Severity
    title: str
    evidence: tuple[Evidence, ...]
    fix: Mapping[str, str]
    expected_gain: Gain | None = None
    confidence: float = 0.5
    #: One of the rule's declared ``actions`` when the situation calls for an alternative.
    action: str | None = None
    #: Extra machine-readable facts (e.g. ranked hardware options) for clients that want them.
    details: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RuleDocs:
    summary: str
    sections: Mapping[str, str]


_SECTION_RE = re.compile(r"^## (.+?)\s*$", re.MULTILINE)


class Rule:
    """Base class. Subclasses set the class attributes and implement :meth:`evaluate`.

    ``thresholds`` declares every key the rule reads from ``rules/thresholds.toml`` (four-level
    :class:`ThresholdSpec` or scalar :class:`ParamSpec`). ``actions`` lists alternative actions a
    finding may carry instead of ``action``; ``supersedes`` names rules whose finding is dropped when
    this one fires (one root cause, one recommendation).
    """

    id: ClassVar[str]
    name: ClassVar[str]
    action: ClassVar[str]
    #: Set from the group folder (:data:`GROUPS`) when the class is defined; a rule sets its own
    #: only where it genuinely differs from its group, with a comment why.
    phase: ClassVar[Phase]
    rule_status: ClassVar[Status] = Status.STABLE
    aliases: ClassVar[tuple[str, ...]] = ()
    thresholds: ClassVar[tuple[Spec, ...]] = ()
    actions: ClassVar[tuple[str, ...]] = ()
    supersedes: ClassVar[tuple[str, ...]] = ()
    #: The verdict is ``fail`` when this rule fires at or above this severity (None: never).
    fails_verdict_at: ClassVar[Severity | None] = None
    #: The engine caps severity by the size of the expected gain; a rule whose thresholds already
    #: grade that size (a regression's relative drop) opts out.
    damp_by_gain: ClassVar[bool] = True
    #: A "cannot judge, add X" rule: the engine caps it at ``moderate`` and it never fails a verdict.
    asks_for_context: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A rule's phase is its group's (:data:`GROUPS`), unless the class sets its own."""
        super().__init_subclass__(**kwargs)
        group = GROUPS.get(cls.group())
        if "phase" not in vars(cls) and group is not None:
            cls.phase = group[1]

    def __init__(self, config: RuleConfig, common: RuleConfig) -> None:
        self.config = config
        self.common = common
        # The config's mappings, read directly by t() and p(): rules ask them dozens of times a run.
        self._thresholds = config.thresholds
        self._params = config.params

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.id} {self.name}>"

    def t(self, key: str) -> Thresholds:
        """This rule's thresholds ``key``."""
        try:
            return self._thresholds[key]
        except KeyError:
            return self.config.t(key)  # raises the KeyError naming the section

    def p(self, key: str) -> float:
        """This rule's scalar parameter ``key``."""
        try:
            return self._params[key]
        except KeyError:
            return self.config.p(key)  # raises the KeyError naming the section

    def evaluate(self, ctx: RunContext) -> Finding | None:
        """Pure: read ``ctx``, return a finding or ``None`` when the rule does not apply."""
        raise NotImplementedError

    @property
    def all_actions(self) -> tuple[str, ...]:
        return (self.action, *(a for a in self.actions if a != self.action))

    @classmethod
    def group(cls) -> str:
        """The group folder (``pre``, ``dec``, ...), from the module path."""
        parts = cls.__module__.split(".")
        return parts[-2] if len(parts) >= 2 else ""

    @classmethod
    def docs(cls) -> RuleDocs:
        """The docstring split into its summary line and ``## `` sections."""
        text = inspect.cleandoc(cls.__doc__ or "")
        summary, _, rest = text.partition("\n")
        sections: dict[str, str] = {}
        matches = list(_SECTION_RE.finditer(rest))
        for i, match in enumerate(matches):
            end = matches[i + 1].start() if i + 1 < len(matches) else len(rest)
            sections[match.group(1)] = rest[match.end() : end].strip()
        return RuleDocs(summary.strip(), sections)
