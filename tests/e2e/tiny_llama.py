"""Write a small Llama GGUF with random weights, with the ``gguf`` package (the e2e extra).

Every weight matrix is drawn from N(0, 0.02²) with a fixed seed (the usual initialisation of an
untrained transformer), stored as fp16; the RMS-norm weights are ones, in f32, as llama.cpp's
converters write them. Nothing is tuned to make the model behave: it says whatever a random
network says, any of its tokens, ``</s>`` included, wherever it likes.

The vocabulary is SentencePiece with 132 tokens: ``<unk>``, ``<s>``, ``</s>``, the 128 seven-bit byte
tokens ``<0x00>``..``<0x7F>`` and ``▁`` (SentencePiece's space), so ASCII text tokenizes one token a
character with no tokenizer file. There are no bytes above 0x7F: a random network would put out
lone UTF-8 lead bytes, which a server holds back while streaming until the character is complete
(llama-server waits for continuation bytes that never come), and nothing would be streamed.

Two shapes:

- :data:`MEASURE` — the seed's experiment: 2 layers, hidden 128 (2 heads of 64, 1 KV head), FFN
  16,384. The wide feed-forward block holds the weights (25 MB) and the narrow attention keeps the
  KV cache of a 2,000-token prompt at 1 MB, as an 8B model's 16 GB of weights dwarf its 256 MB:
  decode reads every weight once per token and attends over the cache (~2 FLOP per cached value
  per head), so its rate barely depends on the prompt length, while prefill does ~2 FLOP per weight
  per prompt token, so TTFT grows with it. (The shape that this file wrote before, 4 layers of
  hidden 256 with 8 heads and FFN 512, has 5 MB of weights and a 4 MB cache at 2,000 tokens: on
  llama-server it decoded 15x slower at 2,000 prompt tokens than at 200.)
- :data:`TINY` — a few hundred kilobytes, for tests that only need a server to answer.

``eos_first=True`` writes the pathological model of issue #14: the same random network, except
that the output row of ``</s>`` reads a constant direction of the residual stream (hidden
dimension 0 of every token embedding is 1.0) with a large weight, so greedy decoding ends every
answer at once. A probe that does not force the output length measures nothing on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["EOS", "MEASURE", "TINY", "VOCAB", "Shape", "write_tiny_llama"]

BYTES = 128
VOCAB = 3 + BYTES + 1
EOS = 2
INIT_STD = 0.02


@dataclass(frozen=True)
class Shape:
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    ffn: int
    context: int = 4096

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def params(self) -> int:
        h = self.hidden
        per_layer = 2 * h * h + 2 * h * self.kv_dim + 3 * h * self.ffn + 2 * h
        return self.layers * per_layer + 2 * VOCAB * h + h

    @property
    def weight_bytes(self) -> int:
        """fp16 bytes read per decoded token (the norms, in f32, are negligible)."""
        return 2 * self.params

    def kv_bytes(self, tokens: int) -> int:
        """The fp16 KV cache of ``tokens`` tokens: K and V, every layer."""
        return self.layers * 2 * self.kv_dim * tokens * 2


MEASURE = Shape(hidden=128, layers=2, heads=2, kv_heads=1, ffn=16384)
TINY = Shape(hidden=64, layers=2, heads=4, kv_heads=2, ffn=128)


def _tokens() -> tuple[list[str], list[float], list[int]]:
    import gguf

    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(BYTES)] + ["\u2581"]
    scores = [0.0] * VOCAB
    types = [int(gguf.TokenType.UNKNOWN), int(gguf.TokenType.CONTROL), int(gguf.TokenType.CONTROL)]
    types += [int(gguf.TokenType.BYTE)] * BYTES + [int(gguf.TokenType.NORMAL)]
    return tokens, scores, types


def write_tiny_llama(path: Path, shape: Shape = MEASURE, *, seed: int = 0, eos_first: bool = False) -> Path:
    import gguf

    rng = np.random.default_rng(seed)

    def w(rows: int, cols: int) -> np.ndarray:
        return (rng.standard_normal((rows, cols), dtype=np.float32) * INIT_STD).astype(np.float16)

    h = shape.hidden
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("advisor-e2e-random-llama" + ("-eos-first" if eos_first else ""))
    writer.add_context_length(shape.context)
    writer.add_embedding_length(h)
    writer.add_block_count(shape.layers)
    writer.add_feed_forward_length(shape.ffn)
    writer.add_head_count(shape.heads)
    writer.add_head_count_kv(shape.kv_heads)
    writer.add_rope_dimension_count(shape.head_dim)
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
    writer.add_eos_token_id(EOS)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)

    embd = w(VOCAB, h)
    if eos_first:
        embd[:, 0] = 1.0
    writer.add_tensor("token_embd.weight", embd)
    for i in range(shape.layers):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(h, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.attn_q.weight", w(h, h))
        writer.add_tensor(f"blk.{i}.attn_k.weight", w(shape.kv_dim, h))
        writer.add_tensor(f"blk.{i}.attn_v.weight", w(shape.kv_dim, h))
        writer.add_tensor(f"blk.{i}.attn_output.weight", w(h, h))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(h, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.ffn_gate.weight", w(shape.ffn, h))
        writer.add_tensor(f"blk.{i}.ffn_up.weight", w(shape.ffn, h))
        writer.add_tensor(f"blk.{i}.ffn_down.weight", w(h, shape.ffn))
    writer.add_tensor("output_norm.weight", np.ones(h, dtype=np.float32))
    output = w(VOCAB, h)
    if eos_first:
        output[EOS, 0] = 20.0
    writer.add_tensor("output.weight", output)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
