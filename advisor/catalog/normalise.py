"""Name normalisation for catalog lookups.

Matching is by *key*: a lower-cased string with the characters people spell differently removed.
The rules are deliberately narrow so that two different devices or models never share a key by
accident; everything looser (vendor prefixes, parenthetical suffixes, memory sizes) is a separate,
explicit step in :mod:`advisor.catalog.lookup` that can be checked against the entry it lands on.
"""

from __future__ import annotations

import re

__all__ = [
    "MODEL_DROP_TOKENS",
    "hardware_key",
    "memory_gb_in",
    "model_tokens",
    "plain_key",
    "quant_key",
    "strip_memory",
    "strip_parenthetical",
]

_NON_ALNUM = re.compile(r"[^0-9a-z]+")
_PARENS = re.compile(r"\([^()]*\)|\[[^\[\]]*\]")
_TRADEMARKS = re.compile(r"\((?:r|tm|c)\)", re.IGNORECASE)
#: Vendor and brand words that say nothing about which device it is.
_VENDOR_WORDS = frozenset({"nvidia", "geforce", "tesla", "amd", "intel", "apple", "google", "aws", "cloud"})
_MEMORY = re.compile(r"(?<![0-9.])(\d+(?:\.\d+)?)\s*(?:gb|gib|g)(?![a-z0-9])", re.IGNORECASE)


def plain_key(value: str) -> str:
    """Lower case with every non-alphanumeric character removed: ``"Q4_K - Medium"`` →
    ``"q4kmedium"``."""
    return _NON_ALNUM.sub("", value.lower())


def quant_key(value: str) -> str:
    """Key for quantization names (same as :func:`plain_key`; kept separate so the rules can
    diverge without touching hardware)."""
    return plain_key(value)


def strip_parenthetical(value: str) -> str:
    """Drop ``(...)``/``[...]`` groups: ``"AMD Radeon RX 7900 XTX (RADV NAVI31)"`` → ``"AMD Radeon
    RX 7900 XTX"``."""
    previous = None
    text = _TRADEMARKS.sub("", value)
    while previous != text:
        previous, text = text, _PARENS.sub(" ", text)
    return " ".join(text.split())


def hardware_key(value: str) -> str:
    """Key for device names: trademarks and vendor words removed, then :func:`plain_key`.

    ``"NVIDIA GeForce RTX 4090"`` → ``"rtx4090"``; ``"Intel(R) Arc(TM) A770 Graphics"`` →
    ``"arca770graphics"``.
    """
    text = _TRADEMARKS.sub(" ", value.lower())
    words = [w for w in _NON_ALNUM.split(text) if w and w not in _VENDOR_WORDS]
    return "".join(words)


def memory_gb_in(value: str) -> float | None:
    """The memory size a device name states (``"A100-SXM4-40GB"`` → 40.0), or None."""
    found = _MEMORY.findall(value)
    return float(found[-1]) if len(found) == 1 else None


def strip_memory(value: str) -> str:
    """The name without its memory size token."""
    return " ".join(_MEMORY.sub(" ", value).split())


#: Tokens of Hugging Face repo names and GGUF file names that do not change the architecture.
MODEL_DROP_TOKENS = frozenset(
    {
        "instruct",
        "chat",
        "it",
        "hf",
        "gguf",
        "base",
        "dynamic",
        "marlin",
        "bnb",
        "4bit",
        "8bit",
        "mlx",
        "quantized",
        "g128",
        "128g",
        "gs128",
        "imat",
        "imatrix",
        "ggml",
        "model",
        "latest",
        # Unsloth Dynamic ("-UD-Q4_K_XL") and mradermacher's importance-matrix builds ("-i1"): they
        # mark how a GGUF was quantised, not which model it is.
        "ud",
        "i1",
    }
)
_DATE = re.compile(r"^\d{4}$")
_TOKEN_SPLIT = re.compile(r"[\s\-]+")
# A dot that starts a GGUF quantization tag or its marker ("Meta-Llama-3-8B-Instruct.Q4_K_M",
# "….i1-Q4_K_M"), unlike the dot of a version ("3.1") or a size ("0.5b").
_QUANT_DOT = re.compile(r"\.(?=(?:i?q\d|tq\d|b?f16|f32|i1|imat|imatrix|ud)(?:[_\-.]|$))")


def model_tokens(value: str) -> list[str]:
    """Lower-cased name tokens of a model name, repo id or GGUF file name.

    The org (``meta-llama/``), ``hf.co/``, a ``.gguf`` extension and a leading ``Meta-`` are
    removed; tokens are split on spaces and dashes, and on a dot that starts a quantization tag
    (``….Q4_K_M``); underscores stay: ``Q4_K_M`` is one token.
    Dates such as ``2501``/``2507`` are dropped: they mark re-releases with the same shapes.
    """
    text = value.strip().lower()
    text = text.removeprefix("hf.co/").removeprefix("huggingface.co/")
    text = text.rsplit("/", 1)[-1]
    text = text.removesuffix(".gguf")
    text = _QUANT_DOT.sub("-", text)
    tokens = [t for t in _TOKEN_SPLIT.split(text) if t]
    if tokens and tokens[0] == "meta" and len(tokens) > 1:
        tokens = tokens[1:]
    return [t for t in tokens if not _DATE.match(t)]
