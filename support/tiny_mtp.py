"""Tiny drafters that read a target's hidden states, written with the gguf package: a
model with an MTP (NextN) layer, llama.cpp's ``glm4moe`` (GLM-4.5: a dense first block,
MoE blocks with a shared expert and sigmoid routing) whose last block drafts from the
trunk's hidden state (``draft-mtp``); and an EAGLE3 draft model (``eagle3``: one decoder
block over the target's token embedding and three of its layers' hidden states,
``draft-eagle3``)."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
from tiny_model import _copy_tokenizer, _finish, _weights, transformer_header, vocab_file

__all__ = ["write_tiny_eagle3", "write_tiny_glm4moe_mtp"]


def write_tiny_glm4moe_mtp(
    path: Path,
    *,
    vocab: str = "llama-spm",
    n_embd: int = 64,
    n_layer: int = 2,
    n_head: int = 4,
    n_head_kv: int = 2,
    n_ff: int = 128,
    n_expert: int = 4,
    n_expert_used: int = 2,
    n_ff_exp: int = 32,
    seed: int = 3,
) -> Path:
    """``n_layer`` trunk blocks (the first dense) and one NextN block after them, random
    float32 weights. Loaded without ``load_mtp`` it is a plain MoE model."""
    arch = "glm4moe"
    rng = np.random.default_rng(seed)
    weight = _weights(rng)
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name(f"tiny-{arch}-mtp")
    n_vocab = _copy_tokenizer(gguf.GGUFReader(vocab_file(vocab)), writer)
    head_dim = n_embd // n_head
    n_kv = n_head_kv * head_dim
    transformer_header(writer, 4096, n_embd, n_layer + 1, n_ff, n_head, n_head_kv)
    writer.add_expert_count(n_expert)
    writer.add_expert_used_count(n_expert_used)
    writer.add_uint32(f"{arch}.expert_feed_forward_length", n_ff_exp)
    writer.add_uint32(f"{arch}.expert_shared_count", 1)
    writer.add_uint32(f"{arch}.leading_dense_block_count", 1)
    writer.add_uint32(f"{arch}.nextn_predict_layers", 1)
    writer.add_float32(f"{arch}.expert_weights_scale", 1.0)
    writer.add_bool(f"{arch}.expert_weights_norm", True)
    writer.add_vocab_size(n_vocab)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    ones = np.ones(n_embd, dtype=np.float32)
    writer.add_tensor("token_embd.weight", weight(n_vocab, n_embd))
    writer.add_tensor("output_norm.weight", ones)
    writer.add_tensor("output.weight", weight(n_vocab, n_embd))
    for i in range(n_layer + 1):
        b = f"blk.{i}"
        writer.add_tensor(f"{b}.attn_norm.weight", ones)
        writer.add_tensor(f"{b}.attn_q.weight", weight(n_embd, n_embd))
        writer.add_tensor(f"{b}.attn_k.weight", weight(n_kv, n_embd))
        writer.add_tensor(f"{b}.attn_v.weight", weight(n_kv, n_embd))
        writer.add_tensor(f"{b}.attn_output.weight", weight(n_embd, n_embd))
        writer.add_tensor(f"{b}.post_attention_norm.weight", ones)
        if i == 0:
            writer.add_tensor(f"{b}.ffn_gate.weight", weight(n_ff, n_embd))
            writer.add_tensor(f"{b}.ffn_up.weight", weight(n_ff, n_embd))
            writer.add_tensor(f"{b}.ffn_down.weight", weight(n_embd, n_ff))
        else:
            writer.add_tensor(f"{b}.ffn_gate_inp.weight", weight(n_expert, n_embd))
            writer.add_tensor(f"{b}.exp_probs_b.bias", np.zeros(n_expert, dtype=np.float32))
            writer.add_tensor(f"{b}.ffn_gate_exps.weight", weight(n_expert, n_ff_exp, n_embd))
            writer.add_tensor(f"{b}.ffn_up_exps.weight", weight(n_expert, n_ff_exp, n_embd))
            writer.add_tensor(f"{b}.ffn_down_exps.weight", weight(n_expert, n_embd, n_ff_exp))
            writer.add_tensor(f"{b}.ffn_gate_shexp.weight", weight(n_ff_exp, n_embd))
            writer.add_tensor(f"{b}.ffn_up_shexp.weight", weight(n_ff_exp, n_embd))
            writer.add_tensor(f"{b}.ffn_down_shexp.weight", weight(n_embd, n_ff_exp))
        if i == n_layer:  # the NextN block: [embedding of the next token; hidden state]
            writer.add_tensor(f"{b}.nextn.eh_proj.weight", weight(n_embd, 2 * n_embd))
            writer.add_tensor(f"{b}.nextn.enorm.weight", ones)
            writer.add_tensor(f"{b}.nextn.hnorm.weight", ones)
    _finish(writer)
    return path


def write_tiny_eagle3(
    path: Path,
    *,
    vocab: str = "llama-spm",
    n_embd_target: int = 64,
    target_layers: tuple[int, int, int] = (0, 1, 2),
    n_embd: int = 64,
    n_head: int = 4,
    n_head_kv: int = 2,
    n_ff: int = 128,
    seed: int = 5,
) -> Path:
    """An EAGLE3 draft for a target ``n_embd_target`` wide, reading the inputs of its
    ``target_layers`` (the last may be its layer count: its output)."""
    arch = "eagle3"
    weight = _weights(np.random.default_rng(seed))
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name("tiny-eagle3")
    n_vocab = _copy_tokenizer(gguf.GGUFReader(vocab_file(vocab)), writer)
    head_dim = n_embd // n_head
    n_kv = n_head_kv * head_dim
    transformer_header(writer, 4096, n_embd, 1, n_ff, n_head, n_head_kv)
    writer.add_array(f"{arch}.target_layers", list(target_layers))
    writer.add_uint32(f"{arch}.target_hidden_size", n_embd_target)
    writer.add_vocab_size(n_vocab)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    ones = np.ones(n_embd, dtype=np.float32)
    writer.add_tensor("token_embd.weight", weight(n_vocab, n_embd))
    writer.add_tensor("fc.weight", weight(n_embd, 3 * n_embd_target))
    writer.add_tensor("output_norm.weight", ones)
    writer.add_tensor("output.weight", weight(n_vocab, n_embd))
    writer.add_tensor("blk.0.attn_norm.weight", ones)
    writer.add_tensor("blk.0.attn_norm_2.weight", ones)
    writer.add_tensor("blk.0.attn_q.weight", weight(n_embd, 2 * n_embd))
    writer.add_tensor("blk.0.attn_k.weight", weight(n_kv, 2 * n_embd))
    writer.add_tensor("blk.0.attn_v.weight", weight(n_kv, 2 * n_embd))
    writer.add_tensor("blk.0.attn_output.weight", weight(n_embd, n_embd))
    writer.add_tensor("blk.0.ffn_norm.weight", ones)
    writer.add_tensor("blk.0.ffn_gate.weight", weight(n_ff, n_embd))
    writer.add_tensor("blk.0.ffn_up.weight", weight(n_ff, n_embd))
    writer.add_tensor("blk.0.ffn_down.weight", weight(n_embd, n_ff))
    _finish(writer)
    return path
