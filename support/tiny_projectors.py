"""Tiny random-weight multimodal projectors (mmproj GGUF files): the vision and audio
encoders that llama.cpp's mtmd pairs with a text model, written with the gguf package
in the layouts of llama.cpp's clip loaders (LLaVA, Ultravox, Gemma 3, Qwen2-VL,
Qwen3-VL, InternVL)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import gguf
import numpy as np
import numpy.typing as npt
from tiny_model import _finish, _weights, _writer_rng


def _vit_blocks(
    writer: gguf.GGUFWriter,
    weight: Callable[..., npt.NDArray[np.float32]],
    prefix: str,
    n_embd: int,
    n_ff: int,
    n_layer: int,
    k_bias: bool,
    fused_qkv: bool = False,
) -> None:
    """A pre-norm ViT encoder's blocks, as clip.cpp names them (``v.blk.N.*``/``a.blk.N.*``);
    ``fused_qkv``: one ``attn_qkv`` projection (Qwen3-VL) instead of three."""
    ones = np.ones(n_embd, dtype=np.float32)
    zeros = np.zeros(n_embd, dtype=np.float32)
    for i in range(n_layer):
        b = f"{prefix}.blk.{i}"
        if fused_qkv:
            writer.add_tensor(f"{b}.attn_qkv.weight", weight(3 * n_embd, n_embd))
            writer.add_tensor(f"{b}.attn_qkv.bias", weight(3 * n_embd) * np.float32(0.1))
        for proj in ("attn_out",) if fused_qkv else ("attn_q", "attn_k", "attn_v", "attn_out"):
            writer.add_tensor(f"{b}.{proj}.weight", weight(n_embd, n_embd))
            if proj != "attn_k" or k_bias:
                writer.add_tensor(f"{b}.{proj}.bias", weight(n_embd) * np.float32(0.1))
        for norm in ("ln1", "ln2"):
            writer.add_tensor(f"{b}.{norm}.weight", ones)
            writer.add_tensor(f"{b}.{norm}.bias", zeros)
        writer.add_tensor(f"{b}.ffn_up.weight", weight(n_ff, n_embd))
        writer.add_tensor(f"{b}.ffn_up.bias", weight(n_ff) * np.float32(0.1))
        writer.add_tensor(f"{b}.ffn_down.weight", weight(n_embd, n_ff))
        writer.add_tensor(f"{b}.ffn_down.bias", weight(n_embd) * np.float32(0.1))


def _mlp(
    writer: gguf.GGUFWriter,
    weight: Callable[..., npt.NDArray[np.float32]],
    n_in: int,
    n_mm: int,
    n_out: int,
) -> None:
    """The two-layer projection ``mm.0``/``mm.2`` (LLaVA's, Qwen-VL's mergers)."""
    writer.add_tensor("mm.0.weight", weight(n_mm, n_in))
    writer.add_tensor("mm.0.bias", weight(n_mm) * np.float32(0.1))
    writer.add_tensor("mm.2.weight", weight(n_out, n_mm))
    writer.add_tensor("mm.2.bias", weight(n_out) * np.float32(0.1))


def _qwen_patches(
    writer: gguf.GGUFWriter, weight: Callable[..., npt.NDArray[np.float32]], n_embd: int, p: int
) -> None:
    """Qwen-VL's two patch convolutions (one per frame of a pair), added."""
    writer.add_tensor("v.patch_embd.weight", weight(n_embd, 3, p, p).astype(np.float16))
    writer.add_tensor("v.patch_embd.weight.1", weight(n_embd, 3, p, p).astype(np.float16))


def _vision_header(
    writer: gguf.GGUFWriter,
    projector: str,
    image_size: int,
    patch_size: int,
    n_embd: int,
    n_ff: int,
    n_embd_text: int,
    n_layer: int,
    n_head: int,
) -> None:
    """The metadata clip.cpp reads for a ViT vision encoder (GELU, layer norm eps 1e-6)."""
    writer.add_bool("clip.has_vision_encoder", True)
    writer.add_bool("clip.has_audio_encoder", False)
    writer.add_string("clip.projector_type", projector)
    writer.add_bool("clip.use_gelu", True)
    writer.add_uint32("clip.vision.image_size", image_size)
    writer.add_uint32("clip.vision.patch_size", patch_size)
    writer.add_uint32("clip.vision.embedding_length", n_embd)
    writer.add_uint32("clip.vision.feed_forward_length", n_ff)
    writer.add_uint32("clip.vision.projection_dim", n_embd_text)
    writer.add_uint32("clip.vision.block_count", n_layer)
    writer.add_uint32("clip.vision.attention.head_count", n_head)
    writer.add_float32("clip.vision.attention.layer_norm_epsilon", 1e-6)


def _patch_embd(
    writer: gguf.GGUFWriter,
    weight: Callable[..., npt.NDArray[np.float32]],
    image_size: int,
    patch_size: int,
    n_embd: int,
) -> int:
    """The patch embedding (a convolution, in half precision as the converters write it
    for ggml's im2col); returns the number of patches."""
    writer.add_tensor(
        "v.patch_embd.weight", weight(n_embd, 3, patch_size, patch_size).astype(np.float16)
    )
    return (image_size // patch_size) ** 2


def write_tiny_llava_projector(
    path: Path,
    *,
    n_embd_text: int = 64,
    image_size: int = 32,
    patch_size: int = 8,
    n_embd: int = 48,
    n_ff: int = 96,
    n_layer: int = 2,
    n_head: int = 4,
    n_mm: int = 80,
    seed: int = 7,
) -> Path:
    """A LLaVA-1.5 projector (clip.cpp's ``mlp`` type) with random weights: a CLIP ViT
    whose second-to-last block feeds a two-layer GELU MLP into the text model's
    ``n_embd_text``. One image becomes ``(image_size / patch_size)**2`` tokens."""
    writer, rng = _writer_rng(path, "tiny-llava-mmproj", seed)
    weight = _weights(rng)
    _vision_header(
        writer, "mlp", image_size, patch_size, n_embd, n_ff, n_embd_text, n_layer, n_head
    )
    writer.add_array("clip.vision.image_mean", [0.48145466, 0.4578275, 0.40821073])
    writer.add_array("clip.vision.image_std", [0.26862954, 0.26130258, 0.27577711])
    n_patches = _patch_embd(writer, weight, image_size, patch_size, n_embd)
    writer.add_tensor("v.position_embd.weight", weight(n_patches, n_embd))
    writer.add_tensor("v.pre_ln.weight", np.ones(n_embd, dtype=np.float32))
    writer.add_tensor("v.pre_ln.bias", np.zeros(n_embd, dtype=np.float32))
    _vit_blocks(writer, weight, "v", n_embd, n_ff, n_layer, k_bias=True)
    _mlp(writer, weight, n_embd, n_mm, n_embd_text)
    _finish(writer)
    return path


def write_tiny_ultravox_projector(
    path: Path,
    *,
    n_embd_text: int = 64,
    n_mel: int = 128,
    n_embd: int = 32,
    n_ff: int = 64,
    n_layer: int = 1,
    n_head: int = 4,
    stack: int = 4,
    n_mm: int = 64,
    seed: int = 11,
) -> Path:
    """An Ultravox audio projector (clip.cpp's ``ultravox`` type) with random weights: a
    Whisper encoder (two 1-D convolutions, then ViT blocks over 1500 positions, 30 s of
    16 kHz audio) whose frames are stacked by ``stack`` into an RMS-normed SwiGLU MLP.
    ``stack`` must divide the 1500 positions: clip.cpp counts the output tokens of 30 s
    as 3000 / stack / 2 (rounded down) and its graph makes 1500 / stack (rounded up)."""
    writer, rng = _writer_rng(path, "tiny-ultravox-mmproj", seed)
    weight = _weights(rng)
    writer.add_bool("clip.has_vision_encoder", False)
    writer.add_bool("clip.has_audio_encoder", True)
    writer.add_string("clip.projector_type", "ultravox")
    writer.add_uint32("clip.audio.num_mel_bins", n_mel)
    writer.add_uint32("clip.audio.embedding_length", n_embd)
    writer.add_uint32("clip.audio.feed_forward_length", n_ff)
    writer.add_uint32("clip.audio.projection_dim", n_embd_text)
    writer.add_uint32("clip.audio.block_count", n_layer)
    writer.add_uint32("clip.audio.attention.head_count", n_head)
    writer.add_float32("clip.audio.attention.layer_norm_epsilon", 1e-5)
    writer.add_uint32("clip.audio.projector.stack_factor", stack)
    ones = np.ones(n_embd, dtype=np.float32)
    writer.add_tensor("a.conv1d.1.weight", weight(n_embd, n_mel, 3).astype(np.float16))
    # A convolution's bias is (channels, 1): added across time, as the converter writes it.
    writer.add_tensor("a.conv1d.1.bias", weight(n_embd, 1) * np.float32(0.1))
    writer.add_tensor("a.conv1d.2.weight", weight(n_embd, n_embd, 3).astype(np.float16))
    writer.add_tensor("a.conv1d.2.bias", weight(n_embd, 1) * np.float32(0.1))
    writer.add_tensor("a.position_embd.weight", weight(1500, n_embd))
    _vit_blocks(writer, weight, "a", n_embd, n_ff, n_layer, k_bias=False)
    writer.add_tensor("a.post_ln.weight", ones)
    writer.add_tensor("a.post_ln.bias", np.zeros(n_embd, dtype=np.float32))
    writer.add_tensor("mm.a.norm_pre.weight", np.ones(n_embd * stack, dtype=np.float32))
    writer.add_tensor("mm.a.mlp.1.weight", weight(2 * n_mm, n_embd * stack))
    writer.add_tensor("mm.a.norm_mid.weight", np.ones(n_mm, dtype=np.float32))
    writer.add_tensor("mm.a.mlp.2.weight", weight(n_embd_text, n_mm))
    _finish(writer)
    return path


def write_tiny_gemma3_projector(
    path: Path,
    *,
    n_embd_text: int = 640,
    image_size: int = 64,
    patch_size: int = 8,
    n_embd: int = 48,
    n_ff: int = 96,
    n_layer: int = 2,
    n_head: int = 4,
    seed: int = 13,
) -> Path:
    """A Gemma 3 projector (clip.cpp's ``gemma3`` type) with random weights, for Gemma 3
    text models (640 wide: Gemma 3 270M): a SigLIP ViT, a 4x4 average pool, an RMS norm
    and a projection. Its images are decoded with non-causal attention between
    ``<start_of_image>`` and ``<end_of_image>``; one image is
    ``(image_size / patch_size / 4)**2`` tokens."""
    writer, rng = _writer_rng(path, "tiny-gemma3-mmproj", seed)
    weight = _weights(rng)
    _vision_header(
        writer, "gemma3", image_size, patch_size, n_embd, n_ff, n_embd_text, n_layer, n_head
    )
    writer.add_array("clip.vision.image_mean", [0.5, 0.5, 0.5])
    writer.add_array("clip.vision.image_std", [0.5, 0.5, 0.5])
    n_patches = _patch_embd(writer, weight, image_size, patch_size, n_embd)
    writer.add_tensor("v.patch_embd.bias", weight(n_embd) * np.float32(0.1))
    writer.add_tensor("v.position_embd.weight", weight(n_patches, n_embd))
    _vit_blocks(writer, weight, "v", n_embd, n_ff, n_layer, k_bias=True)
    writer.add_tensor("v.post_ln.weight", np.ones(n_embd, dtype=np.float32))
    writer.add_tensor("v.post_ln.bias", np.zeros(n_embd, dtype=np.float32))
    writer.add_tensor("mm.soft_emb_norm.weight", np.ones(n_embd, dtype=np.float32))
    # (n_embd, n_embd_text): clip.cpp transposes it before the product
    writer.add_tensor("mm.input_projection.weight", weight(n_embd, n_embd_text))
    _finish(writer)
    return path


def write_tiny_qwen2vl_projector(
    path: Path,
    *,
    n_embd_text: int = 64,
    patch_size: int = 8,
    n_embd: int = 64,
    n_ff: int = 96,
    n_layer: int = 2,
    n_head: int = 4,
    n_mm: int = 96,
    seed: int = 17,
) -> Path:
    """A Qwen2-VL projector (clip.cpp's ``qwen2vl_merger`` type) with random weights, for
    a ``qwen2vl`` text model: two patch convolutions added, ViT blocks with 2-D M-RoPE,
    and a GELU MLP over each 2x2 block of patches. Images keep their aspect (rounded to
    ``2 * patch_size``): one token per 2x2 patches, positions ``max(rows, columns)``."""
    writer, rng = _writer_rng(path, "tiny-qwen2vl-mmproj", seed)
    weight = _weights(rng)
    _vision_header(
        writer, "qwen2vl_merger", 4 * patch_size, patch_size, n_embd, n_ff, n_embd_text,
        n_layer, n_head,
    )  # fmt: skip
    writer.add_array("clip.vision.image_mean", [0.48145466, 0.4578275, 0.40821073])
    writer.add_array("clip.vision.image_std", [0.26862954, 0.26130258, 0.27577711])
    _qwen_patches(writer, weight, n_embd, patch_size)
    _vit_blocks(writer, weight, "v", n_embd, n_ff, n_layer, k_bias=True)
    writer.add_tensor("v.post_ln.weight", np.ones(n_embd, dtype=np.float32))
    writer.add_tensor("v.post_ln.bias", np.zeros(n_embd, dtype=np.float32))
    _mlp(writer, weight, 4 * n_embd, n_mm, n_embd_text)
    _finish(writer)
    return path


def write_tiny_qwen3vl_projector(
    path: Path,
    *,
    n_embd_text: int = 64,
    patch_size: int = 8,
    n_embd: int = 64,
    n_ff: int = 96,
    n_layer: int = 2,
    n_head: int = 4,
    n_mm: int = 96,
    deepstack: Sequence[int] = (0,),
    seed: int = 23,
) -> Path:
    """A Qwen3-VL projector (clip.cpp's ``qwen3vl_merger`` type) with random weights: as
    Qwen2-VL's, with a patch bias, learned position embeddings (4x4, interpolated),
    fused QKV, and the ``deepstack`` blocks' merged features appended to each token's
    embedding (``(1 + len(deepstack)) * n_embd_text`` wide), for a ``qwen3vl`` model."""
    writer, rng = _writer_rng(path, "tiny-qwen3vl-mmproj", seed)
    weight = _weights(rng)
    _vision_header(
        writer, "qwen3vl_merger", 4 * patch_size, patch_size, n_embd, n_ff, n_embd_text,
        n_layer, n_head,
    )  # fmt: skip
    writer.add_array("clip.vision.image_mean", [0.5, 0.5, 0.5])
    writer.add_array("clip.vision.image_std", [0.5, 0.5, 0.5])
    _qwen_patches(writer, weight, n_embd, patch_size)
    writer.add_tensor("v.patch_embd.bias", weight(n_embd) * np.float32(0.1))
    writer.add_tensor("v.position_embd.weight", weight(16, n_embd))
    ones, zeros = np.ones(n_embd, dtype=np.float32), np.zeros(n_embd, dtype=np.float32)
    _vit_blocks(writer, weight, "v", n_embd, n_ff, n_layer, k_bias=True, fused_qkv=True)
    for i in deepstack:  # a block's merged features, projected beside the main ones
        d = f"v.deepstack.{i}"
        writer.add_tensor(f"{d}.norm.weight", np.ones(4 * n_embd, dtype=np.float32))
        writer.add_tensor(f"{d}.norm.bias", np.zeros(4 * n_embd, dtype=np.float32))
        writer.add_tensor(f"{d}.fc1.weight", weight(n_mm, 4 * n_embd))
        writer.add_tensor(f"{d}.fc1.bias", weight(n_mm) * np.float32(0.1))
        writer.add_tensor(f"{d}.fc2.weight", weight(n_embd_text, n_mm))
        writer.add_tensor(f"{d}.fc2.bias", weight(n_embd_text) * np.float32(0.1))
    writer.add_tensor("v.post_ln.weight", ones)
    writer.add_tensor("v.post_ln.bias", zeros)
    _mlp(writer, weight, 4 * n_embd, n_mm, n_embd_text)
    _finish(writer)
    return path


def write_tiny_internvl_projector(
    path: Path,
    *,
    n_embd_text: int = 64,
    image_size: int = 32,
    patch_size: int = 8,
    n_embd: int = 48,
    n_ff: int = 96,
    n_layer: int = 2,
    n_head: int = 4,
    n_mm: int = 96,
    seed: int = 19,
) -> Path:
    """An InternVL projector (clip.cpp's ``internvl`` type) with random weights: a ViT
    with a class token, a 2x2 pixel shuffle and a layer-normed GELU MLP. Every image is
    one tile of ``(image_size / patch_size / 2)**2`` tokens; clip.cpp encodes several
    such images in one run (``mtmd_batch``), which the LLaVA projector cannot."""
    writer, rng = _writer_rng(path, "tiny-internvl-mmproj", seed)
    weight = _weights(rng)
    _vision_header(
        writer, "internvl", image_size, patch_size, n_embd, n_ff, n_embd_text, n_layer, n_head
    )
    writer.add_array("clip.vision.image_mean", [0.485, 0.456, 0.406])
    writer.add_array("clip.vision.image_std", [0.229, 0.224, 0.225])
    writer.add_uint32("clip.vision.projector.scale_factor", 2)
    writer.add_uint32("clip.vision.preproc_min_tiles", 1)
    writer.add_uint32("clip.vision.preproc_max_tiles", 1)
    n_patches = _patch_embd(writer, weight, image_size, patch_size, n_embd)
    writer.add_tensor("v.class_embd", weight(n_embd))
    writer.add_tensor("v.position_embd.weight", weight(n_patches + 1, n_embd))
    _vit_blocks(writer, weight, "v", n_embd, n_ff, n_layer, k_bias=True)
    writer.add_tensor("mm.model.mlp.0.weight", np.ones(4 * n_embd, dtype=np.float32))
    writer.add_tensor("mm.model.mlp.0.bias", np.zeros(4 * n_embd, dtype=np.float32))
    writer.add_tensor("mm.model.mlp.1.weight", weight(n_mm, 4 * n_embd))
    writer.add_tensor("mm.model.mlp.1.bias", weight(n_mm) * np.float32(0.1))
    writer.add_tensor("mm.model.mlp.3.weight", weight(n_embd_text, n_mm))
    writer.add_tensor("mm.model.mlp.3.bias", weight(n_embd_text) * np.float32(0.1))
    _finish(writer)
    return path
