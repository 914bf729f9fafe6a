"""Tiny random-weight GGUF models with a real vocabulary, written with the gguf package.

Small enough to load in milliseconds, real enough that llama.cpp tokenizes, decodes and
samples them exactly as it would a trained model: the vocabulary (tokens, scores, types,
merges, special ids) is copied from one of llama.cpp's own ``models/ggml-vocab-*.gguf``.
The multimodal projectors that go with them are in ``tiny_projectors``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parent.parent
LLAMA_CPP = ROOT / "subprojects" / "llama.cpp"


def vocab_file(name: str) -> Path:
    return LLAMA_CPP / "models" / f"ggml-vocab-{name}.gguf"


def _copy_tokenizer(
    reader: gguf.GGUFReader, writer: gguf.GGUFWriter, extra: Sequence[str] = ()
) -> int:
    """Copy the vocabulary, with ``extra`` tokens appended as user-defined ones (always
    one token each, as a thinking model's ``<think>``)."""
    n_vocab = 0
    appended: dict[str, list[Any]] = {
        "tokenizer.ggml.tokens": list(extra),
        "tokenizer.ggml.token_type": [gguf.TokenType.USER_DEFINED] * len(extra),
        "tokenizer.ggml.scores": [0.0] * len(extra),
    }
    for key, field in reader.fields.items():
        if not key.startswith("tokenizer."):
            continue
        vtype = field.types[0]
        sub = field.types[1] if vtype == gguf.GGUFValueType.ARRAY else None
        value = field.contents()
        if key in appended:
            value = [*list(value), *appended[key]]
        writer.add_key_value(key, value, vtype, sub_type=sub)
        if key == "tokenizer.ggml.tokens":
            n_vocab = len(value)
    return n_vocab


def transformer_header(
    writer: gguf.GGUFWriter,
    n_ctx_train: int,
    n_embd: int,
    n_block: int,
    n_ff: int,
    n_head: int,
    n_head_kv: int,
) -> None:
    """The hyperparameters every attention model here shares (RMS norm eps 1e-5, rotary
    over the whole head)."""
    writer.add_context_length(n_ctx_train)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(n_block)
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head_kv)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(n_embd // n_head)


def write_tiny_llama(
    path: Path,
    *,
    vocab: str = "llama-spm",
    n_embd: int = 64,
    n_layer: int = 2,
    n_head: int = 4,
    n_head_kv: int = 2,
    n_ff: int = 128,
    n_ctx_train: int = 4096,
    seed: int = 0,
    extra_tokens: Sequence[str] = (),
    fim: bool = False,
    output: Callable[[int, int], npt.NDArray[np.float32]] | None = None,
    n_expert: int = 0,
    n_expert_used: int = 2,
    arch: str = "llama",
    rope_sections: Sequence[int] = (),
    deepstack: int = 0,
) -> Path:
    """Write a llama-architecture model with random float32 weights to ``path``
    (``fim``: with fill-in-the-middle tokens, appended to the vocabulary; ``output``:
    makes the output projection from ``(n_vocab, n_embd)``, to shape the logits;
    ``n_expert``: a Mixtral-style MoE, ``n_expert_used`` experts per token). ``arch``
    ``qwen2vl`` is the same network with M-RoPE: ``rope_sections`` split each head's
    rotary pairs between a token's time, height and width positions; ``qwen3vl`` adds
    Q/K norms, interleaved M-RoPE and ``deepstack`` layers that take an image's extra
    features (its embeddings are ``(1 + deepstack) * n_embd`` wide)."""
    rng = np.random.default_rng(seed)
    reader = gguf.GGUFReader(vocab_file(vocab))
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name(f"tiny-{arch}-{vocab}")
    if rope_sections:
        writer.add_array(f"{arch}.rope.dimension_sections", list(rope_sections))
    if arch == "qwen3vl":
        writer.add_uint32(f"{arch}.n_deepstack_layers", deepstack)
    fim_tokens = ("<fim_prefix>", "<fim_suffix>", "<fim_middle>") if fim else ()
    n_vocab = _copy_tokenizer(reader, writer, [*extra_tokens, *fim_tokens])
    for i, key in enumerate(("fim_pre", "fim_suf", "fim_mid") if fim else ()):
        writer.add_uint32(f"tokenizer.ggml.{key}_token_id", n_vocab - len(fim_tokens) + i)
    head_dim = n_embd // n_head
    transformer_header(writer, n_ctx_train, n_embd, n_layer, n_ff, n_head, n_head_kv)
    writer.add_vocab_size(n_vocab)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    if n_expert:
        writer.add_expert_count(n_expert)
        writer.add_expert_used_count(n_expert_used)

    def weight(*shape: int) -> npt.NDArray[np.float32]:
        # Scaled so activations stay O(1) through the layers: logits are varied, not flat.
        w: npt.NDArray[np.float32] = rng.standard_normal(shape, dtype=np.float32)
        return w / np.float32(np.sqrt(shape[-1]))

    ones = np.ones(n_embd, dtype=np.float32)
    writer.add_tensor("token_embd.weight", weight(n_vocab, n_embd))
    writer.add_tensor("output_norm.weight", ones)
    writer.add_tensor(
        "output.weight", weight(n_vocab, n_embd) if output is None else output(n_vocab, n_embd)
    )
    for i in range(n_layer):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", ones)
        writer.add_tensor(f"blk.{i}.attn_q.weight", weight(n_embd, n_embd))
        writer.add_tensor(f"blk.{i}.attn_k.weight", weight(n_head_kv * head_dim, n_embd))
        writer.add_tensor(f"blk.{i}.attn_v.weight", weight(n_head_kv * head_dim, n_embd))
        writer.add_tensor(f"blk.{i}.attn_output.weight", weight(n_embd, n_embd))
        if arch == "qwen3vl":
            writer.add_tensor(f"blk.{i}.attn_q_norm.weight", np.ones(head_dim, dtype=np.float32))
            writer.add_tensor(f"blk.{i}.attn_k_norm.weight", np.ones(head_dim, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", ones)
        if n_expert:
            writer.add_tensor(f"blk.{i}.ffn_gate_inp.weight", weight(n_expert, n_embd))
            writer.add_tensor(f"blk.{i}.ffn_gate_exps.weight", weight(n_expert, n_ff, n_embd))
            writer.add_tensor(f"blk.{i}.ffn_up_exps.weight", weight(n_expert, n_ff, n_embd))
            writer.add_tensor(f"blk.{i}.ffn_down_exps.weight", weight(n_expert, n_embd, n_ff))
            continue
        writer.add_tensor(f"blk.{i}.ffn_gate.weight", weight(n_ff, n_embd))
        writer.add_tensor(f"blk.{i}.ffn_up.weight", weight(n_ff, n_embd))
        writer.add_tensor(f"blk.{i}.ffn_down.weight", weight(n_embd, n_ff))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def file_offset(reader: gguf.GGUFReader, part: npt.NDArray[Any]) -> int:
    """Where ``part`` (one of a GGUFReader field's parts) lies in the file."""
    return int(part.__array_interface__["data"][0] - reader.data.__array_interface__["data"][0])


def scalar_offset(reader: gguf.GGUFReader, key: str) -> tuple[int, np.dtype[Any]]:
    """Offset and type of the value of the scalar (or the bytes of the string) ``key``."""
    field = reader.fields[key]
    part = field.parts[field.data[0]]
    return file_offset(reader, part), part.dtype


def write_tiny_bert(
    path: Path,
    *,
    rank: bool = False,
    n_embd: int = 64,
    n_layer: int = 2,
    n_head: int = 4,
    n_ff: int = 128,
    n_ctx_train: int = 512,
    seed: int = 0,
) -> Path:
    """Write a BERT encoder with llama.cpp's bge vocabulary and random float32 weights:
    CLS pooling, or (``rank``) a reranker's classification head with RANK pooling."""
    rng = np.random.default_rng(seed)
    reader = gguf.GGUFReader(vocab_file("bert-bge"))
    writer = gguf.GGUFWriter(str(path), "bert")
    writer.add_name("tiny-bert-rank" if rank else "tiny-bert")
    n_vocab = _copy_tokenizer(reader, writer)
    writer.add_context_length(n_ctx_train)
    writer.add_embedding_length(n_embd)
    writer.add_feed_forward_length(n_ff)
    writer.add_block_count(n_layer)
    writer.add_head_count(n_head)
    writer.add_layer_norm_eps(1e-12)
    writer.add_causal_attention(False)
    writer.add_pooling_type(gguf.PoolingType.RANK if rank else gguf.PoolingType.CLS)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)

    def weight(*shape: int) -> npt.NDArray[np.float32]:
        w: npt.NDArray[np.float32] = rng.standard_normal(shape, dtype=np.float32)
        return w / np.float32(np.sqrt(shape[-1]))

    ones = np.ones(n_embd, dtype=np.float32)
    zeros = np.zeros(n_embd, dtype=np.float32)
    writer.add_tensor("token_embd.weight", weight(n_vocab, n_embd))
    writer.add_tensor("token_types.weight", weight(2, n_embd))
    writer.add_tensor("position_embd.weight", weight(n_ctx_train, n_embd))
    writer.add_tensor("token_embd_norm.weight", ones)
    writer.add_tensor("token_embd_norm.bias", zeros)
    for i in range(n_layer):
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            writer.add_tensor(f"blk.{i}.{name}.weight", weight(n_embd, n_embd))
            writer.add_tensor(f"blk.{i}.{name}.bias", zeros)
        for name in ("attn_output_norm", "layer_output_norm"):
            writer.add_tensor(f"blk.{i}.{name}.weight", ones)
            writer.add_tensor(f"blk.{i}.{name}.bias", zeros)
        writer.add_tensor(f"blk.{i}.ffn_up.weight", weight(n_ff, n_embd))
        writer.add_tensor(f"blk.{i}.ffn_up.bias", np.zeros(n_ff, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.ffn_down.weight", weight(n_embd, n_ff))
        writer.add_tensor(f"blk.{i}.ffn_down.bias", zeros)
    if rank:
        writer.add_tensor("cls.weight", weight(n_embd, n_embd))
        writer.add_tensor("cls.bias", zeros)
        writer.add_tensor("cls.output.weight", weight(1, n_embd))
        writer.add_tensor("cls.output.bias", np.zeros(1, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def write_tiny_lora(path: Path, model: Any, rank: int = 4, seed: int = 1) -> Path:
    """A LoRA on every attention query projection of the tiny llama (random A and B)."""
    rng = np.random.default_rng(seed)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_string("general.type", "adapter")
    writer.add_string("adapter.type", "lora")
    writer.add_float32("adapter.lora.alpha", float(rank))
    n = model.n_embd
    for i in range(model.n_layer):
        a = rng.standard_normal((rank, n), dtype=np.float32)  # ggml ne = (n_in, rank)
        b = rng.standard_normal((n, rank), dtype=np.float32)  # ggml ne = (rank, n_out)
        writer.add_tensor(f"blk.{i}.attn_q.weight.lora_a", a)
        writer.add_tensor(f"blk.{i}.attn_q.weight.lora_b", b)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _writer_rng(path: Path, name: str, seed: int) -> tuple[gguf.GGUFWriter, np.random.Generator]:
    writer = gguf.GGUFWriter(str(path), "clip")
    writer.add_name(name)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    return writer, np.random.default_rng(seed)


def _finish(writer: gguf.GGUFWriter) -> None:
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _weights(rng: np.random.Generator) -> Callable[..., npt.NDArray[np.float32]]:
    def weight(*shape: int) -> npt.NDArray[np.float32]:
        w: npt.NDArray[np.float32] = rng.standard_normal(shape, dtype=np.float32)
        return w / np.float32(np.sqrt(shape[-1]))

    return weight


def _write_ssm_layer(
    writer: gguf.GGUFWriter,
    i: int,
    weight: Callable[..., npt.NDArray[np.float32]],
    *,
    n_embd: int,
    d_inner: int,
    d_conv: int,
    d_state: int,
    dt_rank: int,
    norms: bool,
) -> None:
    """One Mamba (S6) block's tensors; ``norms``: Jamba's dt/B/C norms too."""
    writer.add_tensor(f"blk.{i}.ssm_in.weight", weight(2 * d_inner, n_embd))
    writer.add_tensor(f"blk.{i}.ssm_conv1d.weight", weight(d_inner, d_conv))
    writer.add_tensor(f"blk.{i}.ssm_conv1d.bias", np.zeros(d_inner, dtype=np.float32))
    writer.add_tensor(f"blk.{i}.ssm_x.weight", weight(dt_rank + 2 * d_state, d_inner))
    writer.add_tensor(f"blk.{i}.ssm_dt.weight", weight(d_inner, dt_rank))
    writer.add_tensor(f"blk.{i}.ssm_dt.bias", np.zeros(d_inner, dtype=np.float32))
    # A = -exp(A_log) < 0, as converted checkpoints store it: the state decays.
    a = -np.tile(np.arange(1, d_state + 1, dtype=np.float32), (d_inner, 1))
    writer.add_tensor(f"blk.{i}.ssm_a", a)
    writer.add_tensor(f"blk.{i}.ssm_d", np.ones(d_inner, dtype=np.float32))
    writer.add_tensor(f"blk.{i}.ssm_out.weight", weight(n_embd, d_inner))
    if norms:
        writer.add_tensor(f"blk.{i}.ssm_dt_norm.weight", np.ones(dt_rank, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.ssm_b_norm.weight", np.ones(d_state, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.ssm_c_norm.weight", np.ones(d_state, dtype=np.float32))


def write_tiny_recurrent(
    path: Path,
    *,
    hybrid: bool = False,
    vocab: str = "llama-spm",
    n_embd: int = 64,
    n_layer: int = 2,
    seed: int = 0,
) -> Path:
    """A recurrent model (llama.cpp's ``mamba``) or, with ``hybrid``, a recurrent and
    attention hybrid (``jamba``: its second layer is attention, the others Mamba)."""
    rng = np.random.default_rng(seed)
    arch = "jamba" if hybrid else "mamba"
    reader = gguf.GGUFReader(vocab_file(vocab))
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name(f"tiny-{arch}-{vocab}")
    n_vocab = _copy_tokenizer(reader, writer)
    d_inner, d_conv, d_state, dt_rank = 2 * n_embd, 4, 8, 4
    n_head, n_ff = 4, 2 * n_embd
    attention = [hybrid and i % 2 == 1 for i in range(n_layer)]
    writer.add_context_length(4096)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(n_layer)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_ssm_conv_kernel(d_conv)
    writer.add_ssm_inner_size(d_inner)
    writer.add_ssm_state_size(d_state)
    writer.add_ssm_time_step_rank(dt_rank)
    if hybrid:
        writer.add_feed_forward_length(n_ff)
        writer.add_head_count(n_head)
        writer.add_head_count_kv([n_head if a else 0 for a in attention])
    else:
        writer.add_head_count(0)
    writer.add_vocab_size(n_vocab)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    weight = _weights(rng)
    ones = np.ones(n_embd, dtype=np.float32)
    writer.add_tensor("token_embd.weight", weight(n_vocab, n_embd))
    writer.add_tensor("output_norm.weight", ones)
    writer.add_tensor("output.weight", weight(n_vocab, n_embd))
    for i in range(n_layer):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", ones)
        if attention[i]:
            for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
                writer.add_tensor(f"blk.{i}.{name}.weight", weight(n_embd, n_embd))
        else:
            _write_ssm_layer(
                writer, i, weight, n_embd=n_embd, d_inner=d_inner, d_conv=d_conv,
                d_state=d_state, dt_rank=dt_rank, norms=hybrid,
            )  # fmt: skip
        if hybrid:
            writer.add_tensor(f"blk.{i}.ffn_norm.weight", ones)
            writer.add_tensor(f"blk.{i}.ffn_gate.weight", weight(n_ff, n_embd))
            writer.add_tensor(f"blk.{i}.ffn_up.weight", weight(n_ff, n_embd))
            writer.add_tensor(f"blk.{i}.ffn_down.weight", weight(n_embd, n_ff))
    _finish(writer)
    return path
