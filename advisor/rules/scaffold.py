"""Scaffold a new rule: ``make new-rule ID=PRE007 [NAME=prefill.snake_name] [ACTION=shorten-prompt]``.

Writes the four places a rule lives, under a repository ``root``:

* ``advisor/rules/<group>/<ID>.py``: the class, its docstring with the sections the meta tests
  require (``## Why is this bad?``, ``## Fix``, ``## Example``) and an ``evaluate`` that returns None;
* its ``[<ID>]`` section in ``rules/thresholds.toml``, after the last rule of its group;
* ``rules/cases/<ID>.yaml`` with a firing and a silent case to fill in;
* the docs page entry: ``docs/rules.md`` is generated from the docstring and the thresholds
  (``make new-rule`` runs ``python -m advisor.rules.docs --write`` afterwards).

It refuses a malformed ID, a prefix that is no group's, and an ID (or name) already in use, before
writing anything. The firing case fails until ``evaluate`` is written: that is the first test to
make pass. Hand-written: cookiecutter and copier scaffold whole projects from a template
repository, not four edits inside an existing one.
"""

from __future__ import annotations

import argparse
import re
import string
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from advisor.rules.base import ACTIONS, GROUPS

__all__ = ["DEFAULT_ACTIONS", "NewRule", "ScaffoldError", "main", "plan", "write"]

#: The action a new rule starts with when none is given (the group's most common one).
DEFAULT_ACTIONS: dict[str, str] = {"meas": "improve-measurement", "reg": "investigate-regression"}
_FALLBACK_ACTION = "fix-serving-stack"

_ID_RE = re.compile(r"([A-Z]+)(\d{3})")
_NAME_RE = re.compile(r"[a-z]+\.[a-z0-9_]+")
_SECTION_RE = re.compile(r"^\[([A-Za-z0-9_]+)\]\s*$", re.MULTILINE)
_RULE_NAME_RE = re.compile(r'^    name = "([^"]+)"', re.MULTILINE)


class ScaffoldError(ValueError):
    """The rule cannot be scaffolded as asked; nothing was written."""


@dataclass(frozen=True, slots=True)
class NewRule:
    """What will be written, and where (all paths under the root)."""

    rule_id: str
    group: str
    name: str
    action: str
    class_name: str
    rule_path: Path
    thresholds_path: Path
    cases_path: Path


def _rule_files(root: Path) -> list[Path]:
    return sorted(p for group in GROUPS for p in (root / "advisor" / "rules" / group).glob("*.py") if p.stem.isupper())


def plan(root: Path, rule_id: str, *, name: str | None = None, action: str | None = None) -> NewRule:
    """Validate the request against the tree under ``root``; raises :class:`ScaffoldError`."""
    match = _ID_RE.fullmatch(rule_id)
    if match is None:
        raise ScaffoldError(f"bad rule id {rule_id!r}: expected a group prefix and 3 digits, such as PRE007")
    by_prefix = {prefix: group for group, (prefix, _phase) in GROUPS.items()}
    group = by_prefix.get(match.group(1))
    if group is None:
        known = ", ".join(f"{prefix} ({g})" for g, (prefix, _p) in GROUPS.items())
        raise ScaffoldError(f"unknown group prefix {match.group(1)!r} in {rule_id!r}; groups: {known}")
    phase = GROUPS[group][1]
    name = name or f"{phase}.{rule_id.lower()}"
    if not _NAME_RE.fullmatch(name):
        raise ScaffoldError(f"bad rule name {name!r}: expected group.snake_case, such as {phase}.long_prompt")
    action = action or DEFAULT_ACTIONS.get(group, _FALLBACK_ACTION)
    if action not in ACTIONS:
        raise ScaffoldError(f"unknown action {action!r}; DESIGN §4's vocabulary: {', '.join(ACTIONS)}")
    new = NewRule(
        rule_id=rule_id,
        group=group,
        name=name,
        action=action,
        class_name="".join(part.capitalize() for part in name.split(".", 1)[1].split("_") if part),
        rule_path=root / "advisor" / "rules" / group / f"{rule_id}.py",
        thresholds_path=root / "rules" / "thresholds.toml",
        cases_path=root / "rules" / "cases" / f"{rule_id}.yaml",
    )
    if not new.rule_path.parent.is_dir() or not new.thresholds_path.is_file():
        raise ScaffoldError(f"{root} is not an advisor checkout (no {new.rule_path.parent} or {new.thresholds_path})")
    for path in (new.rule_path, new.cases_path):
        if path.exists():
            raise ScaffoldError(f"{rule_id} exists: {path}")
    if rule_id in _SECTION_RE.findall(new.thresholds_path.read_text(encoding="utf-8")):
        raise ScaffoldError(f"{rule_id} exists: [{rule_id}] in {new.thresholds_path}")
    for path in _rule_files(root):
        text = path.read_text(encoding="utf-8")
        if f'"{rule_id}"' in text:  # an alias: IDs are never recycled
            raise ScaffoldError(f"{rule_id} is used by {path} (IDs are never recycled)")
        if name in _RULE_NAME_RE.findall(text):
            raise ScaffoldError(f"rule name {name!r} is used by {path}")
    return new


_RULE = string.Template('''from __future__ import annotations

from typing import ClassVar

from advisor.rules.base import Finding, Rule
from advisor.rules.config import Spec
from advisor.rules.context import RunContext


class $class_name(Rule):
    """TODO: what is wrong, in one line that ends with a full stop.

    ## Why is this bad?
    TODO: the mechanism: what the server does, and what it costs (TTFT, decode speed, memory).

    ## Fix
    TODO: what to change, per runtime where the flags differ (vLLM ``--flag``, llama.cpp ``-x``).

    ## Example
    TODO: a concrete run (hardware, model, numbers) and what the fix changes in it.
    """

    id = "$rule_id"
    name = "$name"
    action = "$action"
    # Every key evaluate reads: ThresholdSpec (four levels) or ParamSpec (a number), with its value
    # in rules/thresholds.toml [$rule_id]; a limit other rules share is a reference there
    # (ttft_ms = "@limits.ttft_ms"). A key other rules declare alike is referenced from
    # advisor.rules.limits, not copied. For example:
    # (ThresholdSpec("prompt_tokens", ascending=True, unit="tokens", doc="prompt length"), TTFT_MS)
    thresholds: ClassVar[tuple[Spec, ...]] = ()

    def evaluate(self, ctx: RunContext) -> Finding | None:
        # TODO: None when the rule does not apply; else grade the value (self.t("key").severity_of),
        # damp it by whether it matters (advisor.rules.helpers.matter_cap) and return a Finding with
        # evidence, a fix per runtime (advisor.rules.fixes) and the expected gain.
        return None
''')

_THRESHOLDS = string.Template("""[$rule_id]
# One line per key $rule_id declares: four levels [low, moderate, severe, critical], a number,
# or a shared limit such as ttft_ms = "@limits.ttft_ms".

""")

_CASES = string.Template("""rule: $rule_id
# Each case's run is deep-merged over base and validated as a canonical run; severity none means
# the rule stays silent. The keys are described in tests/unit/rules/harness.py. Run them with
#   .venv/bin/python -m pytest tests/unit/rules -k $rule_id
base:
  setup:
    runtime: vllm
    runtime_version: "0.11.0"
    hardware: nvidia-l4
    model: meta-llama/Llama-3.1-8B-Instruct
    quantization: bf16
  workload: {num_requests: 400, concurrency: 1, prompt_tokens_mean: 2000, output_tokens_mean: 200}
  metrics: {decode_tok_s: 16, ttft_ms: {p50: 500, p99: 800}}
cases:
  fires_when_todo:
    description: TODO the situation the rule exists for, with the numbers that make it fire.
    run: {}
    expect:
      severity: moderate
      action: $action
  silent_when_todo:
    description: TODO a healthy run just on the other side of the threshold.
    run: {}
    expect: {severity: none}
""")


def _insert_section(toml: str, new: NewRule) -> str:
    """The new section after the last section of its group (at the end when it is the first)."""
    prefix = GROUPS[new.group][0]
    headers = list(_SECTION_RE.finditer(toml))
    mine = [i for i, h in enumerate(headers) if (m := _ID_RE.fullmatch(h.group(1))) and m.group(1) == prefix]
    block = _THRESHOLDS.substitute(rule_id=new.rule_id)
    if not mine or mine[-1] + 1 >= len(headers):
        return toml.rstrip("\n") + "\n\n" + block.rstrip("\n") + "\n"
    at = headers[mine[-1] + 1].start()
    return toml[:at] + block + toml[at:]


def write(new: NewRule) -> list[Path]:
    """Write the rule, its thresholds section and its cases; returns the paths written."""
    fields = {"rule_id": new.rule_id, "name": new.name, "action": new.action, "class_name": new.class_name}
    new.rule_path.write_text(_RULE.substitute(fields), encoding="utf-8")
    toml = new.thresholds_path.read_text(encoding="utf-8")
    new.thresholds_path.write_text(_insert_section(toml, new), encoding="utf-8")
    new.cases_path.parent.mkdir(parents=True, exist_ok=True)
    new.cases_path.write_text(_CASES.substitute(fields), encoding="utf-8")
    return [new.rule_path, new.thresholds_path, new.cases_path]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m advisor.rules.scaffold", description=__doc__.split("\n")[0])
    parser.add_argument("rule_id", metavar="ID", help="group prefix + 3 digits, e.g. PRE007")
    parser.add_argument("--name", help="dotted snake-case name of the problem, e.g. prefill.long_prompt")
    parser.add_argument("--action", help=f"one of DESIGN §4's actions (default: {_FALLBACK_ACTION})")
    parser.add_argument(
        "--root", type=Path, default=Path(__file__).resolve().parents[2], help="repository root (default: this one)"
    )
    args = parser.parse_args(argv)
    try:
        new = plan(args.root, args.rule_id, name=args.name, action=args.action)
    except ScaffoldError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for path in write(new):
        print(f"wrote {path}")
    print(
        f"next: fill in the TODOs of {new.rule_path.name} and {new.cases_path.name}, then\n"
        f"  .venv/bin/python -m pytest tests/unit/rules -k {new.rule_id}  # fails until evaluate fires\n"
        "  make rules-docs"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
