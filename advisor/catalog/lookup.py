"""The catalog: hardware, model and quantization lookups over shipped data plus user entries.

``Catalog.default()`` reads the package data once (cached). ``with_entries`` returns a new catalog
with extra entries (the database layer adds user-defined rows this way). Resolution accepts a
catalog id, a known alias (vendor and driver names, Hugging Face repo ids, Ollama tags, llama-bench
strings) or an inline spec object, and raises :class:`UnknownName` with the nearest matches
otherwise; it never guesses between devices with different figures.
"""

from __future__ import annotations

import csv
import difflib
import functools
import io
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib import resources
from typing import Any

from advisor.catalog.inline import (
    hardware_from_dict,
    is_hf_config,
    model_from_dict,
    model_from_hf_config,
    quant_from_dict,
)
from advisor.catalog.normalise import (
    MODEL_DROP_TOKENS,
    hardware_key,
    memory_gb_in,
    model_tokens,
    plain_key,
    quant_key,
    strip_memory,
    strip_parenthetical,
)
from advisor.errors import AdvisorError, Conflict, InvalidInput, NotFound, UnknownName
from advisor.physics import KV_BYTES_PER_ELEMENT, HardwareSpec, ModelSpec, QuantSpec

__all__ = ["KV_CACHE_DTYPE_ALIASES", "Catalog", "OllamaFamily", "ResolvedSetup", "catalog_records"]

#: Spellings of KV-cache dtypes (vLLM ``--kv-cache-dtype``, SGLang, llama.cpp ``-ctk``/``type_k``)
#: mapped to the keys of :data:`advisor.physics.KV_BYTES_PER_ELEMENT`.
KV_CACHE_DTYPE_ALIASES: dict[str, str] = {
    "auto": "auto",
    "": "auto",
    "fp16": "fp16",
    "f16": "fp16",
    "float16": "fp16",
    "half": "fp16",
    "bf16": "bf16",
    "bfloat16": "bf16",
    "fp32": "fp32",
    "f32": "fp32",
    "float32": "fp32",
    "float": "fp32",
    "fp8": "fp8",
    "fp8_e4m3": "fp8_e4m3",
    "fp8e4m3": "fp8_e4m3",
    "fp8_e4m3fn": "fp8_e4m3",
    "fp8_e5m2": "fp8_e5m2",
    "fp8e5m2": "fp8_e5m2",
    "fp8_inc": "fp8",
    "fp8_ds_mla": "fp8",
    "int8": "int8",
    "q8_0": "q8_0",
    "q5_1": "q5_1",
    "q5_0": "q5_0",
    "q4_1": "q4_1",
    "q4_0": "q4_0",
    "iq4_nl": "iq4_nl",
}

# Model-name tokens that look like a weight format even when the catalog does not know it
# (Q4_K_S, IQ3_XXS, UD-Q4_K_XL, and the llm-compressor / AutoRound names of published checkpoints:
# int4a16, nvfp4a16, 5.5bit, autoround): they are never part of the architecture's name.
_QUANTISH = re.compile(
    r"^(?:i?q\d.*|f16|bf16|f32|fp\d+.*|int\d+(?:a\d+)?|w\d+a\d+.*|nf4|\d+(?:\.\d+)?bits?|mxfp\d.*|nvfp\d.*"
    r"|autoround)$"
)
# A generic marker ("int4") yields to a specific one in the same name ("gptq-int4" is GPTQ).
_GENERIC_QUANT_TOKENS = frozenset({"int4", "int8", "w4a16", "fp16", "bf16"})
_LLAMA_BENCH = re.compile(r"^(?P<arch>[a-z0-9][\w.\-]*) (?P<size>[0-9.?]+[bm](?:\.a[0-9.]+b)?) (?P<ftype>.+)$")
_MAX_MATCHES = 5


_MEMO_SIZE = 10_000


@dataclass(frozen=True, slots=True)
class _Unknown:
    matches: tuple[str, ...]

    def __init__(self, matches: Sequence[str]) -> None:
        object.__setattr__(self, "matches", tuple(matches))


@dataclass(frozen=True, slots=True)
class ResolvedSetup:
    """What a run's hardware, model and quantization names mean in the catalog.

    ``quantization`` is ``implied_quantization`` (what the model name says) when the run names
    none. ``unresolved`` maps each kind that did not resolve to why (not given, or the catalog's
    message), for the analysis to report as a missing field.
    """

    hardware: HardwareSpec | None
    model: ModelSpec | None
    quantization: QuantSpec | None
    implied_quantization: QuantSpec | None = None
    unresolved: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if (
            self.quantization is None
            and self.implied_quantization is not None
            and "quantization" not in self.unresolved
        ):
            object.__setattr__(self, "quantization", self.implied_quantization)


@dataclass(frozen=True, slots=True)
class OllamaFamily:
    """One Ollama library name: its size tags, the size a bare tag means and the default quant."""

    sizes: Mapping[str, str]
    quant: str | None = None
    default: str | None = None


@dataclass(slots=True)
class _Index:
    """Key → catalog ids. A key held by several ids is ambiguous (resolution refuses to guess)."""

    keys: dict[str, set[str]] = field(default_factory=dict)

    def add(self, key: str, entry_id: str) -> None:
        if key:
            self.keys.setdefault(key, set()).add(entry_id)

    def get(self, key: str) -> set[str]:
        return self.keys.get(key, set())

    def near(self, key: str) -> list[str]:
        """Ids whose keys are closest to ``key`` (difflib ratio), best first, unique."""
        found: list[str] = []
        for match in difflib.get_close_matches(key, list(self.keys), n=12, cutoff=0.55):
            for entry_id in sorted(self.keys[match]):
                if entry_id not in found:
                    found.append(entry_id)
        return found[:_MAX_MATCHES]


def _read_csv(name: str) -> list[dict[str, str]]:
    text = resources.files("advisor.catalog").joinpath("data", name).read_text(encoding="utf-8")
    return list(csv.DictReader(io.StringIO(text)))


def _read_toml(name: str) -> dict[str, Any]:
    return tomllib.loads(resources.files("advisor.catalog").joinpath("data", name).read_text(encoding="utf-8"))


def _float(value: str) -> float | None:
    return float(value) if value.strip() else None


def _int(value: str) -> int | None:
    return int(float(value)) if value.strip() else None


def _with_compute(row: dict[str, str], figure: dict[str, str] | None) -> dict[str, str]:
    """``row`` with the overlay's fp16/bf16 figures in the fields it leaves empty."""
    if figure is None:
        return row
    filled = dict(row)
    for column in ("fp16_dense_tflops", "bf16_dense_tflops"):
        if not filled[column].strip() and figure[column].strip():
            filled[column] = figure[column]
    return filled


class Catalog:
    """Hardware, models and quantizations with alias resolution. Immutable once built."""

    def __init__(
        self,
        *,
        hardware: Iterable[HardwareSpec] = (),
        models: Iterable[ModelSpec] = (),
        quantizations: Iterable[QuantSpec] = (),
        aliases: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
        ollama: Mapping[str, OllamaFamily] | None = None,
        llama_bench: Mapping[str, str] | None = None,
        extras: Mapping[tuple[str, str], Mapping[str, Any]] | None = None,
        user_ids: Iterable[tuple[str, str]] = (),
    ) -> None:
        self._hardware = {h.id: h for h in hardware}
        self._models = {m.id: m for m in models}
        self._quants = {q.id: q for q in quantizations}
        self._aliases: dict[str, dict[str, list[str]]] = {
            kind: {k: list(v) for k, v in (aliases or {}).get(kind, {}).items()}
            for kind in ("hardware", "models", "quantizations")
        }
        self._ollama = dict(ollama or {})
        self._llama_bench = {plain_key(k): v for k, v in (llama_bench or {}).items()}
        self._extras = {k: dict(v) for k, v in (extras or {}).items()}
        self._user_ids = set(user_ids)
        self._hw_index = _Index()
        self._model_index = _Index()
        self._quant_index = _Index()
        self._build_indexes()
        # Names resolved so far (the catalog is immutable, so answers never go stale): a bulk request
        # naming one device ten thousand times resolves it once. Unknown names are remembered as the
        # matches to report, so that the near-match search is not repeated either.
        self._memo: dict[tuple[str, str], Any] = {}

    # ------------------------------------------------------------------ construction

    @classmethod
    @functools.cache
    def default(cls) -> Catalog:
        """The shipped catalog (package data under ``advisor/catalog/data``), built once."""
        extras: dict[tuple[str, str], dict[str, Any]] = {}
        hardware: list[HardwareSpec] = []
        # Compute figures for rows that publish none (hardware_compute.csv, with sources): they
        # fill empty fp16/bf16 fields only, never replace a figure of hardware.csv.
        compute = {r["id"]: r for r in _read_csv("hardware_compute.csv")}
        # SM counts and boost clocks of NVIDIA GPUs (hardware_sm.csv, with sources).
        issue = {r["id"]: r for r in _read_csv("hardware_sm.csv")}
        for shipped in _read_csv("hardware.csv") + _read_csv("hardware_added.csv"):
            row = _with_compute(shipped, compute.get(shipped["id"]))
            hardware.append(
                HardwareSpec(
                    id=row["id"],
                    name=row["name"],
                    kind=row["kind"],
                    vendor=row["vendor"],
                    mem_bandwidth_gb_s=float(row["mem_bandwidth_gb_s"]),
                    memory_gb=_float(row["memory_gb"]),
                    fp16_tflops=_float(row["fp16_dense_tflops"]),
                    bf16_tflops=_float(row["bf16_dense_tflops"]),
                    fp8_tflops=_float(row["fp8_dense_tflops"]),
                    int8_tops=_float(row["int8_dense_tops"]),
                    sm_count=_int(issue[row["id"]]["sm_count"]) if row["id"] in issue else None,
                    boost_clock_mhz=_float(issue[row["id"]]["boost_clock_mhz"]) if row["id"] in issue else None,
                )
            )
            extras["hardware", row["id"]] = {
                "tdp_w": _float(row["tdp_w"]),
                "interconnect": row["interconnect"] or None,
                "source": row["source"],
            }
            if row["id"] in issue:
                extras["hardware", row["id"]]["sm_source"] = issue[row["id"]]["source"]
            if row["id"] in compute:
                figure = compute[row["id"]]
                extras["hardware", row["id"]]["compute"] = {
                    "estimated": figure["estimated"] == "yes",
                    "how": figure["how"],
                    "source": figure["source"],
                }
        model_extras = _read_toml("model_extras.toml")
        models: list[ModelSpec] = []
        # models_added.csv: generations the reference table folds into a later one (Llama 3 vs 3.1).
        for row in _read_csv("models.csv") + _read_csv("models_added.csv"):
            extra = model_extras.get(row["id"], {})
            models.append(
                ModelSpec(
                    id=row["id"],
                    params_b=float(row["params_b"]),
                    active_params_b=float(row["active_params_b"]),
                    num_hidden_layers=_int(row["num_hidden_layers"]),
                    hidden_size=_int(row["hidden_size"]),
                    num_attention_heads=_int(row["num_attention_heads"]),
                    num_key_value_heads=_int(row["num_key_value_heads"]),
                    head_dim=_int(row["head_dim"]),
                    attention=row["attention"],
                    kv_lora_rank=extra.get("kv_lora_rank"),
                    qk_rope_head_dim=extra.get("qk_rope_head_dim"),
                    sliding_window=extra.get("sliding_window"),
                    sliding_layers=extra.get("sliding_layers", 0),
                    max_position_embeddings=_int(row["max_position_embeddings"]),
                    vocab_size=_int(row["vocab_size"]),
                    family=row["family"] or None,
                    hf_repo=row["hf_repo"] or None,
                    num_experts=extra.get("num_experts"),
                    num_experts_per_tok=extra.get("num_experts_per_tok"),
                )
            )
            extras["models", row["id"]] = {
                "kv_bytes_per_token_fp16": _float(row["kv_bytes_per_token_fp16"]),
                "source": row["source"],
                "notes": row["notes"],
            }
            if "checkpoint_quantization" in extra:
                extras["models", row["id"]]["checkpoint_quantization"] = extra["checkpoint_quantization"]
        quants: list[QuantSpec] = []
        for row in _read_csv("quantization.csv"):
            quants.append(
                QuantSpec(
                    row["id"],
                    row["name"],
                    float(row["bits_per_weight"]),
                    row["family"],
                    _float(row["dense_bits_per_weight"]),
                )
            )
            extras["quantizations", row["id"]] = {"notes": row["notes"], "source": row["source"]}
        alias_data = _read_toml("aliases.toml")
        ollama = {
            name: OllamaFamily(sizes=dict(spec["sizes"]), quant=spec.get("quant"), default=spec.get("default"))
            for name, spec in alias_data.get("ollama", {}).items()
        }
        return cls(
            hardware=hardware,
            models=models,
            quantizations=quants,
            aliases={
                "hardware": alias_data.get("hardware", {}),
                "models": alias_data.get("models", {}),
                "quantizations": alias_data.get("quantizations", {}),
            },
            ollama=ollama,
            llama_bench=alias_data.get("llama_bench", {}),
            extras=extras,
        )

    def with_entries(
        self,
        *,
        hardware: Iterable[HardwareSpec | Mapping[str, Any]] = (),
        models: Iterable[ModelSpec | Mapping[str, Any]] = (),
        quantizations: Iterable[QuantSpec | Mapping[str, Any]] = (),
    ) -> Catalog:
        """A new catalog with extra entries (specs, or dicts in inline-spec form with an ``id``
        and optional ``aliases``; a model dict may carry a Hugging Face body under ``config``).

        Raises :class:`Conflict` when an id already exists and :class:`InvalidInput` for an
        invalid entry (field ``hardware[0].mem_bandwidth_gb_s`` and so on).
        """
        aliases = {kind: {k: list(v) for k, v in table.items()} for kind, table in self._aliases.items()}
        new_hw = dict(self._hardware)
        new_models = dict(self._models)
        new_quants = dict(self._quants)
        user_ids = set(self._user_ids)

        def take(kind: str, store: dict[str, Any], spec: Any, raw: Mapping[str, Any] | None, prefix: str) -> None:
            if spec.id in store or spec.id == "inline":
                raise Conflict(f"{kind} id {spec.id!r} already exists or is reserved", field=f"{prefix}.id")
            store[spec.id] = spec
            user_ids.add((kind, spec.id))
            names = raw.get("aliases", []) if raw is not None else []
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                raise InvalidInput("must be a list of strings", field=f"{prefix}.aliases")
            if names:
                aliases[kind].setdefault(spec.id, []).extend(names)

        for i, item in enumerate(hardware):
            prefix = f"hardware[{i}]"
            if isinstance(item, HardwareSpec):
                take("hardware", new_hw, item, None, prefix)
            else:
                _require_id(item, prefix)
                take("hardware", new_hw, hardware_from_dict(item, field_prefix=prefix), item, prefix)
        for i, model_item in enumerate(models):
            prefix = f"models[{i}]"
            if isinstance(model_item, ModelSpec):
                take("models", new_models, model_item, None, prefix)
                continue
            _require_id(model_item, prefix)
            body = model_item.get("config")
            if isinstance(body, Mapping):
                spec = replace(model_from_hf_config(body, field_prefix=f"{prefix}.config"), id=str(model_item["id"]))
            else:
                spec = model_from_dict(model_item, field_prefix=prefix)
            take("models", new_models, spec, model_item, prefix)
        for i, quant_item in enumerate(quantizations):
            prefix = f"quantizations[{i}]"
            if isinstance(quant_item, QuantSpec):
                take("quantizations", new_quants, quant_item, None, prefix)
            else:
                _require_id(quant_item, prefix)
                take(
                    "quantizations",
                    new_quants,
                    quant_from_dict(quant_item, field_prefix=prefix),
                    quant_item,
                    prefix,
                )

        return Catalog(
            hardware=new_hw.values(),
            models=new_models.values(),
            quantizations=new_quants.values(),
            aliases=aliases,
            ollama=self._ollama,
            llama_bench={k: v for k, v in self._llama_bench.items()},
            extras=self._extras,
            user_ids=user_ids,
        )

    def _build_indexes(self) -> None:
        for hw in self._hardware.values():
            for name in (
                hw.id,
                hw.name,
                strip_parenthetical(hw.name),
                *self._aliases["hardware"].get(hw.id, []),
            ):
                self._hw_index.add(hardware_key(name), hw.id)
        for model in self._models.values():
            names = [model.id, *self._aliases["models"].get(model.id, [])]
            if model.hf_repo:
                names.append(model.hf_repo)
            for name in names:
                self._model_index.add(self._model_key(name)[0], model.id)
        for quant in self._quants.values():
            names = [
                quant.id,
                quant.name,
                strip_parenthetical(quant.name),
                *self._aliases["quantizations"].get(quant.id, []),
            ]
            for name in names:
                self._quant_index.add(quant_key(name), quant.id)

    # ------------------------------------------------------------------ listing

    def list_hardware(self) -> list[HardwareSpec]:
        return list(self._hardware.values())

    def list_models(self) -> list[ModelSpec]:
        return list(self._models.values())

    def list_quantizations(self) -> list[QuantSpec]:
        return list(self._quants.values())

    def get_hardware(self, hardware_id: str) -> HardwareSpec:
        """Exact id lookup; :class:`NotFound` otherwise."""
        try:
            return self._hardware[hardware_id]
        except KeyError:
            raise NotFound(f"no hardware with id {hardware_id!r}", field="id") from None

    def get_model(self, model_id: str) -> ModelSpec:
        try:
            return self._models[model_id]
        except KeyError:
            raise NotFound(f"no model with id {model_id!r}", field="id") from None

    def get_quantization(self, quant_id: str) -> QuantSpec:
        try:
            return self._quants[quant_id]
        except KeyError:
            raise NotFound(f"no quantization with id {quant_id!r}", field="id") from None

    def extra(self, kind: str, entry_id: str) -> dict[str, Any]:
        """The shipped columns of one entry that are not part of its spec (``interconnect``,
        ``source``, ``compute``, ...); empty for unknown or user entries."""
        return dict(self._extras.get((kind, entry_id), {}))

    def checkpoint_quantization(self, model: ModelSpec) -> QuantSpec | None:
        """The weight format of a shipped model's own published checkpoint (gpt-oss: MXFP4 experts,
        DeepSeek-V3: block FP8), what a what-if that names no quantization should assume; None
        for checkpoints published in 16-bit weights and for user entries."""
        quant_id = self._extras.get(("models", model.id), {}).get("checkpoint_quantization")
        return self._quants.get(quant_id) if quant_id is not None else None

    def aliases(self, kind: str, entry_id: str) -> list[str]:
        """Curated aliases of one entry (``kind``: hardware, models or quantizations)."""
        return list(self._aliases.get(kind, {}).get(entry_id, []))

    def records(self) -> list[dict[str, Any]]:
        """Every entry as a plain dict for seeding database tables::

            {"entry_kind": "hardware"|"model"|"quantization", "id": ..., "fields": {...},
             "aliases": [...], "builtin": bool}

        ``fields`` holds the spec's fields plus the shipped columns that are not part of the spec
        (``source``, ``tdp_w``, ``notes``, ...).
        """
        out: list[dict[str, Any]] = []
        groups: tuple[tuple[str, str, Mapping[str, Any]], ...] = (
            ("hardware", "hardware", self._hardware),
            ("models", "model", self._models),
            ("quantizations", "quantization", self._quants),
        )
        for kind, entry_kind, store in groups:
            for entry_id, spec in store.items():
                fields = spec.to_dict()
                fields.update(self._extras.get((kind, entry_id), {}))
                out.append(
                    {
                        "entry_kind": entry_kind,
                        "id": entry_id,
                        "fields": fields,
                        "aliases": self.aliases(kind, entry_id),
                        "builtin": (kind, entry_id) not in self._user_ids,
                    }
                )
        return out

    # ------------------------------------------------------------------ resolution

    def _memoised(
        self,
        kind: str,
        value: Any,
        field_prefix: str,
        from_spec: Callable[[Mapping[str, Any], str], Any],
        by_name: Callable[[str, str], Any],
    ) -> Any:
        """An inline spec object through ``from_spec`` (built anew each time: cheap, not hashable),
        a name through ``by_name``, remembered per name; the error's field is always the caller's."""
        if isinstance(value, Mapping):
            return from_spec(value, field_prefix)
        if not isinstance(value, str) or not value.strip():
            raise InvalidInput(f"must be a {kind} id, name or spec object", field=field_prefix)
        resolve = by_name
        key = (kind, value)
        known = self._memo.get(key)
        if known is None:
            if len(self._memo) >= _MEMO_SIZE:
                self._memo.clear()
            try:
                known = resolve(value, field_prefix)
            except UnknownName as exc:
                known = _Unknown(exc.matches)
            self._memo[key] = known
        if isinstance(known, _Unknown):
            raise UnknownName(kind, value, list(known.matches), field=field_prefix)
        return known

    def resolve_setup(self, setup: Any) -> ResolvedSetup:
        """The specs a run's setup names, never raising: what does not resolve is reported in
        ``unresolved`` (kind → why) for the analysis to say what it blocks. A quantization the
        model name implies ("…-AWQ", "llama3.1:8b-instruct-q8_0") stands in for a missing one."""
        specs: dict[str, Any] = {}
        unresolved: dict[str, str] = {}
        implied: QuantSpec | None = None
        resolvers: tuple[tuple[str, Callable[..., Any]], ...] = (
            ("hardware", self.resolve_hardware),
            ("model", self.resolve_model),
            ("quantization", self.resolve_quantization),
        )
        for kind, resolve in resolvers:
            value = getattr(setup, kind)
            specs[kind] = None
            if value is None or (isinstance(value, str) and not value.strip()):
                if kind != "quantization" or implied is None:
                    unresolved[kind] = f"no {kind} given"
                continue
            try:
                spec: Any = resolve(value, field_prefix=f"setup.{kind}")
            except AdvisorError as exc:
                unresolved[kind] = exc.detail
                continue
            except (ValueError, KeyError, LookupError, TypeError) as exc:
                unresolved[kind] = str(exc)
                continue
            if kind == "model":
                spec, implied = spec
            specs[kind] = spec
        quant = specs["quantization"] if specs["quantization"] is not None or "quantization" in unresolved else implied
        return ResolvedSetup(specs["hardware"], specs["model"], quant, implied, unresolved)

    # ------------------------------------------------------------------ hardware

    def resolve_hardware(self, value: str | Mapping[str, Any], *, field_prefix: str = "hardware") -> HardwareSpec:
        """A device from an id, an alias (nvidia-smi, vendor or llama-bench name) or an inline
        spec object. Unknown or ambiguous names raise :class:`UnknownName` with suggestions."""
        found: HardwareSpec = self._memoised(
            "hardware",
            value,
            field_prefix,
            lambda spec, prefix: hardware_from_dict(spec, field_prefix=prefix),
            self._resolve_hardware,
        )
        return found

    def _resolve_hardware(self, value: str, field_prefix: str) -> HardwareSpec:
        text = value.strip()
        if text in self._hardware:
            return self._hardware[text]
        ids = self._hardware_candidates(text)
        if len(ids) > 1:
            ids = self._by_name_detail(ids, text) or ids
        if len(ids) == 1:
            return self._hardware[next(iter(ids))]
        if ids:
            raise UnknownName("hardware", value, sorted(ids), field=field_prefix)
        raise UnknownName("hardware", value, self._hw_index.near(hardware_key(text)), field=field_prefix)

    def _hardware_candidates(self, text: str) -> set[str]:
        """Ids the name can mean (empty: none; several: ambiguous)."""
        memory = memory_gb_in(text)
        for candidate in (text, strip_parenthetical(text)):
            ids = self._hw_index.get(hardware_key(candidate))
            if not ids:
                continue
            if memory is not None and memory_gb_in(candidate) is None:
                # The size sat in the dropped parentheses: it must agree with the catalog.
                return self._by_memory(ids, memory)
            return (self._by_memory(ids, memory) or ids) if len(ids) > 1 else ids
        # A memory size in the name: drop it, but only accept entries with that much memory.
        if memory is not None:
            ids = self._hw_index.get(hardware_key(strip_memory(strip_parenthetical(text))))
            matched = self._by_memory(ids, memory)
            if matched:
                return matched
        # llama-bench gpu_info lists every device, comma separated: use the one(s) that resolve.
        if "," in text:
            found: set[str] = set()
            for part in strip_parenthetical(text).split(","):
                if part.strip():
                    part_ids = self._hardware_candidates(part.strip())
                    if len(part_ids) == 1:
                        found |= part_ids
            return found
        return set()

    def _by_name_detail(self, ids: set[str], text: str) -> set[str]:
        """Break a tie with the details only one candidate's catalog name has ("40-core" in
        "M4 Max (16-core CPU / 40-core GPU, 48GB)"). Returns one id or nothing."""
        words = {ids_id: set(re.findall(r"[0-9a-z]+", self._hardware[ids_id].name.lower())) for ids_id in ids}
        common = set.intersection(*words.values())
        given = set(re.findall(r"[0-9a-z]+", text.lower()))
        hits = {i for i, w in words.items() if (w - common) & given}
        return hits if len(hits) == 1 else set()

    def _by_memory(self, ids: set[str], memory: float | None) -> set[str]:
        """The ids whose memory agrees with ``memory`` GB: equal within 7.5 % (GB vs GiB) for
        GPUs and accelerators; at most the catalogued maximum for Apple SoCs and CPUs, whose
        ``memory_gb`` is the largest configuration."""
        if memory is None:
            return set()
        matched = set()
        for entry_id in ids:
            spec = self._hardware[entry_id]
            if spec.memory_gb is None:
                continue
            if spec.kind in ("apple_soc", "cpu"):
                if memory <= spec.memory_gb * 1.075:
                    matched.add(entry_id)
            elif abs(spec.memory_gb - memory) <= 0.075 * memory:
                matched.add(entry_id)
        return matched

    # ------------------------------------------------------------------ quantization

    def resolve_quantization(self, value: str | Mapping[str, Any], *, field_prefix: str = "quantization") -> QuantSpec:
        """A weight format from an id, a spelling (``bf16``, ``FP8-dynamic``, ``Q4_K_M``, ``awq``,
        llama-bench's ``Q4_K - Medium``, ...) or ``{"bits_per_weight": ...}``."""
        found: QuantSpec = self._memoised(
            "quantization",
            value,
            field_prefix,
            lambda spec, prefix: quant_from_dict(spec, field_prefix=prefix),
            self._resolve_quantization,
        )
        return found

    def _resolve_quantization(self, value: str, field_prefix: str) -> QuantSpec:
        found = self._quant_lookup(value)
        if found is not None:
            return found
        raise UnknownName("quantization", value, self._quant_index.near(quant_key(value)), field=field_prefix)

    def _quant_lookup(self, value: str) -> QuantSpec | None:
        text = value.strip()
        if text in self._quants:
            return self._quants[text]
        for candidate in (text, strip_parenthetical(text)):
            ids = self._quant_index.get(quant_key(candidate))
            if len(ids) == 1:
                return self._quants[next(iter(ids))]
        return None

    def resolve_kv_cache_dtype(self, value: str | None, *, field: str = "kv_cache_dtype") -> str:
        """Canonical KV-cache dtype (a key of ``KV_BYTES_PER_ELEMENT``); None means ``auto``."""
        if value is None:
            return "auto"
        key = value.strip().lower().replace("-", "_")
        resolved = KV_CACHE_DTYPE_ALIASES.get(key)
        if resolved is None or resolved not in KV_BYTES_PER_ELEMENT:
            near = difflib.get_close_matches(key, list(KV_CACHE_DTYPE_ALIASES), n=_MAX_MATCHES, cutoff=0.5)
            raise UnknownName("kv_cache_dtype", value, [KV_CACHE_DTYPE_ALIASES[n] for n in near], field=field)
        return resolved

    # ------------------------------------------------------------------ models

    def resolve_model(
        self, value: str | Mapping[str, Any], *, field_prefix: str = "model"
    ) -> tuple[ModelSpec, QuantSpec | None]:
        """The architecture a name means and the quantization the name implies (or None).

        Accepts catalog ids, Hugging Face repo ids (``meta-llama/Llama-3.1-8B-Instruct``,
        ``…-AWQ``, ``…-FP8``, ``unsloth/…-GGUF``, GGUF file names), Ollama tags (``llama3.1:8b``,
        ``qwen2.5:7b-instruct-q8_0``), llama-bench ``model_type`` strings (``llama 8B Q4_K -
        Medium``), inline spec objects and Hugging Face ``config.json`` bodies.
        """
        found: tuple[ModelSpec, QuantSpec | None] = self._memoised(
            "model", value, field_prefix, self._model_from_spec, self._resolve_model
        )
        return found

    def _model_from_spec(self, value: Mapping[str, Any], field_prefix: str) -> tuple[ModelSpec, QuantSpec | None]:
        spec = model_from_dict(value, field_prefix=field_prefix)
        implied = self._quant_from_hf_config(value) if is_hf_config(value) else None
        return spec, implied

    def _resolve_model(self, value: str, field_prefix: str) -> tuple[ModelSpec, QuantSpec | None]:
        text = value.strip()
        if text in self._models:
            return self._models[text], None

        bench = _LLAMA_BENCH.match(text.lower())
        if bench is not None:
            model_id = self._llama_bench.get(plain_key(f"{bench['arch']} {bench['size']}"))
            if model_id is not None:
                return self._models[model_id], self._quant_lookup(bench["ftype"])

        if ":" in text:
            resolved = self._resolve_ollama(text, field_prefix)
            if resolved is not None:
                return resolved

        key, quant_tokens, unknown_quant = self._model_key(text)
        ids = self._model_index.get(key)
        if len(ids) == 1:
            quant = None if unknown_quant else self._pick_quant(quant_tokens)
            return self._models[next(iter(ids))], quant
        if not ids and text.lower() in self._ollama:
            # Ollama reports an untagged name ("model": "mistral") for the ":latest" tag.
            resolved = self._resolve_ollama(f"{text}:latest", field_prefix)
            if resolved is not None:
                return resolved
        matches = sorted(ids) if ids else self._model_index.near(key)
        raise UnknownName("model", value, matches, field=field_prefix)

    def _model_key(self, name: str) -> tuple[str, list[str], bool]:
        """``(architecture key, quant-marker tokens, saw an unknown quant marker)``."""
        arch: list[str] = []
        quants: list[str] = []
        unknown = False
        for token in model_tokens(name):
            if token in MODEL_DROP_TOKENS or token == "ud":
                continue
            if quant_key(token) in self._quant_index.keys and not token[0].isdigit():
                quants.append(token)
            elif _QUANTISH.match(token):
                unknown = True
            else:
                arch.append(token)
        return "".join(arch), quants, unknown

    def _pick_quant(self, tokens: list[str]) -> QuantSpec | None:
        ordered = [t for t in tokens if t not in _GENERIC_QUANT_TOKENS] + [
            t for t in tokens if t in _GENERIC_QUANT_TOKENS
        ]
        for token in ordered:
            found = self._quant_lookup(token)
            if found is not None:
                return found
        return None

    def _resolve_ollama(self, text: str, field_prefix: str) -> tuple[ModelSpec, QuantSpec | None] | None:
        name, _, tag = text.strip().lower().rpartition(":")
        if name.startswith(("hf.co/", "huggingface.co/")):
            # `ollama run hf.co/<repo>:<quant>`: the repo names the model, the tag the file.
            key, quants, unknown = self._model_key(name)
            ids = self._model_index.get(key)
            if len(ids) == 1:
                quant = self._quant_lookup(tag) or (None if unknown else self._pick_quant(quants))
                return self._models[next(iter(ids))], quant
            return None
        name = name.rsplit("/", 1)[-1]
        family = self._ollama.get(name)
        if family is None:
            return None
        tokens = [t for t in tag.split("-") if t] if tag and tag != "latest" else []
        size = None
        rest = tokens
        for width in (2, 1):
            if len(tokens) >= width and "-".join(tokens[:width]) in family.sizes:
                size, rest = "-".join(tokens[:width]), tokens[width:]
                break
        if size is None:
            size = family.default
        if size is None:
            options = [f"{name}:{s}" for s in family.sizes]
            raise UnknownName("model", text, options[:_MAX_MATCHES], field=field_prefix)
        model = self._models[family.sizes[size]]
        quant_tokens = [t for t in rest if _QUANTISH.match(t) or quant_key(t) in self._quant_index.keys]
        if quant_tokens:
            return model, self._pick_quant(quant_tokens)
        return model, self._quants.get(family.quant) if family.quant else None

    def _quant_from_hf_config(self, config: Mapping[str, Any]) -> QuantSpec | None:
        """The weight format a ``config.json`` declares in ``quantization_config``."""
        qc = config.get("quantization_config")
        if not isinstance(qc, Mapping):
            return None
        method = str(qc.get("quant_method") or "").lower()
        if method == "compressed-tensors":
            groups = qc.get("config_groups")
            for group in (groups or {}).values() if isinstance(groups, Mapping) else ():
                weights = group.get("weights") if isinstance(group, Mapping) else None
                if not isinstance(weights, Mapping):
                    continue
                bits, kind = weights.get("num_bits"), str(weights.get("type") or "")
                if bits == 8:
                    return self._quants.get("fp8-e4m3" if kind == "float" else "int8-w8a8-smoothquant")
                if bits == 4 and kind == "int":
                    return self._quants.get("gptq-int4-g128")
                if bits == 4 and kind == "float":
                    return self._quants.get("nvfp4")
            return None
        if method == "modelopt":
            algo = str(qc.get("quant_algo") or "").lower()
            return self._quants.get("nvfp4" if "fp4" in algo else "fp8-e4m3")
        if method in ("awq", "gptq", "fp8", "mxfp4"):
            return self._quant_lookup(method)
        return None


def _require_id(item: Mapping[str, Any], prefix: str) -> None:
    entry_id = item.get("id")
    if not isinstance(entry_id, str) or not entry_id.strip():
        raise InvalidInput("is required for a catalog entry", field=f"{prefix}.id")


def catalog_records(catalog: Catalog | None = None) -> list[dict[str, Any]]:
    """:meth:`Catalog.records` of ``catalog`` (default: the shipped catalog)."""
    return (catalog or Catalog.default()).records()
