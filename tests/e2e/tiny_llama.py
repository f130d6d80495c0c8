"""Write a tiny random-weight Llama GGUF with the ``gguf`` package (the e2e extra).

The shape is the issue's: a byte-level SentencePiece vocabulary of 259 tokens (``<unk>``, ``<s>``,
``</s>`` and the 256 ``<0xNN>`` byte tokens), 4 layers, hidden size 256, 8 heads, 4 KV heads, fp16
weights (norms stay f32, as llama.cpp's converters write them).

Random weights would stop early at a sampled ``</s>`` and emit bytes that are not valid UTF-8,
which servers hold back while streaming; either would blur the decode measurement. So one hidden
dimension carries a constant, dominant value through the residual stream, and the output rows of
every token except the printable ASCII bytes are pushed far negative along it: the model never
ends a reply early and streams exactly one character per token.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["HIDDEN", "VOCAB", "write_tiny_llama"]

VOCAB = 259
HIDDEN = 256
LAYERS = 4
HEADS = 8
KV_HEADS = 4
FFN = 512
CONTEXT = 4096
_ANCHOR = 0  # the hidden dimension that is constant in every token embedding


def _tokens() -> tuple[list[str], list[float], list[int]]:
    import gguf

    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    scores = [0.0] * VOCAB
    types = [int(gguf.TokenType.UNKNOWN), int(gguf.TokenType.CONTROL), int(gguf.TokenType.CONTROL)]
    types += [int(gguf.TokenType.BYTE)] * 256
    return tokens, scores, types


def write_tiny_llama(path: Path, *, seed: int = 0) -> Path:
    import gguf

    rng = np.random.default_rng(seed)

    def w(rows: int, cols: int) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) * 0.02).astype(np.float16)

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("advisor-e2e-tiny-llama")
    writer.add_context_length(CONTEXT)
    writer.add_embedding_length(HIDDEN)
    writer.add_block_count(LAYERS)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_rope_dimension_count(HIDDEN // HEADS)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    writer.add_vocab_size(VOCAB)
    tokens, scores, types = _tokens()
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)

    embd = w(VOCAB, HIDDEN)
    embd[:, _ANCHOR] = 1.0
    writer.add_tensor("token_embd.weight", embd)
    for i in range(LAYERS):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(HIDDEN, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.attn_q.weight", w(HIDDEN, HIDDEN))
        writer.add_tensor(f"blk.{i}.attn_k.weight", w(KV_HEADS * HIDDEN // HEADS, HIDDEN))
        writer.add_tensor(f"blk.{i}.attn_v.weight", w(KV_HEADS * HIDDEN // HEADS, HIDDEN))
        writer.add_tensor(f"blk.{i}.attn_output.weight", w(HIDDEN, HIDDEN))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(HIDDEN, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.ffn_gate.weight", w(FFN, HIDDEN))
        writer.add_tensor(f"blk.{i}.ffn_up.weight", w(FFN, HIDDEN))
        writer.add_tensor(f"blk.{i}.ffn_down.weight", w(HIDDEN, FFN))
    writer.add_tensor("output_norm.weight", np.ones(HIDDEN, dtype=np.float32))
    output = w(VOCAB, HIDDEN)
    output[:, _ANCHOR] = 0.0
    printable = [3 + b for b in range(0x20, 0x7F)]
    banned = np.setdiff1d(np.arange(VOCAB), printable)
    output[banned, _ANCHOR] = -20.0
    writer.add_tensor("output.weight", output)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
