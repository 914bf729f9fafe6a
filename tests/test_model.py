"""LlamaModel: loading (and every way a load can fail), description, save, models built
in memory, the vocabulary, and the lifetime rules of a closed model."""

from __future__ import annotations

import gc
import itertools
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import numpy.typing as npt
import pytest
from child import run_python
from offload import LOGITS_TOL, OFFLOADED
from tiny_model import vocab_file

import llama_cy as lc
from llama_cy.errors import ClosedError, InvalidTokenError, LlamaError, ModelLoadError

PROMPT = "The quick brown fox jumps over the lazy dog"


@pytest.fixture(scope="module")
def tiny_reader(tiny_model_path: Path) -> Any:
    return gguf.GGUFReader(tiny_model_path)


@pytest.fixture(scope="module")
def gemma(gemma_path: Path) -> Iterator[lc.LlamaModel]:
    model = lc.LlamaModel.load(gemma_path)
    yield model
    model.close()


def field(reader: Any, key: str) -> Any:
    return reader.fields[key].contents()


def last_logits(model: lc.LlamaModel, text: str = PROMPT) -> npt.NDArray[np.float32]:
    """Logits of the last token of ``text``, in a fresh context."""
    tokens = model.tokenize(text)
    with lc.LlamaContext(model, n_ctx=256, n_batch=64, n_threads=1) as ctx:
        batch = lc.LlamaBatch(len(tokens))
        batch.add_sequence(tokens)
        ctx.decode(batch)
        return ctx.logits(-1).copy()


def mapped(path: Path) -> bool:
    """Whether this process has ``path`` memory-mapped (llama.cpp maps model files)."""
    return str(path) in Path("/proc/self/maps").read_text()


# ---- loading failures -------------------------------------------------------------------


def test_constructor_is_not_public() -> None:
    with pytest.raises(TypeError):
        lc.LlamaModel()


def test_missing_file_raises_model_load_error(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="not found") as info:
        lc.LlamaModel.load(tmp_path / "nope.gguf")
    assert isinstance(info.value, OSError)


def test_empty_file_raises_model_load_error(tmp_path: Path) -> None:
    path = tmp_path / "empty.gguf"
    path.touch()
    with pytest.raises(ModelLoadError, match="empty"):
        lc.LlamaModel.load(path)


@pytest.mark.parametrize("header", [b"", b"GGUF\x03\x00\x00\x00"], ids=["random", "gguf-magic"])
def test_corrupt_file_raises_model_load_error(tmp_path: Path, header: bytes) -> None:
    path = tmp_path / "corrupt.gguf"
    rng = np.random.default_rng(7)
    path.write_bytes(header + rng.integers(0, 256, 4096, dtype=np.uint8).tobytes())
    with pytest.raises(ModelLoadError):
        lc.LlamaModel.load(path)


@pytest.mark.parametrize("use_mmap", [True, False])
def test_truncated_file_raises_model_load_error(
    tmp_path: Path, tiny_model_path: Path, use_mmap: bool
) -> None:
    data = tiny_model_path.read_bytes()
    path = tmp_path / "truncated.gguf"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelLoadError):
        lc.LlamaModel.load(path, use_mmap=use_mmap)


def test_unknown_split_mode_raises_value_error(tiny_model_path: Path) -> None:
    with pytest.raises(ValueError, match="split_mode"):
        lc.LlamaModel.load(tiny_model_path, split_mode="diagonal")  # type: ignore[arg-type]


# ---- progress callback -------------------------------------------------------------------


@pytest.mark.parametrize("use_mmap", [True, False])
def test_progress_fractions_increase_to_one(tiny_model_path: Path, use_mmap: bool) -> None:
    fractions: list[float] = []
    model = lc.LlamaModel.load(tiny_model_path, use_mmap=use_mmap, progress=fractions.append)
    assert len(fractions) >= 2
    assert all(0.0 <= f <= 1.0 for f in fractions)
    assert all(a <= b for a, b in itertools.pairwise(fractions))
    assert fractions[-1] == 1.0
    assert fractions[0] < 1.0
    model.close()


def test_progress_returning_false_cancels_the_load(tiny_model_path: Path) -> None:
    calls: list[float] = []

    def cancel(fraction: float) -> bool:
        calls.append(fraction)
        return False

    with pytest.raises(ModelLoadError, match="cancelled"):
        lc.LlamaModel.load(tiny_model_path, progress=cancel)
    # llama.cpp stops at the first False.
    assert len(calls) == 1


def test_progress_exception_propagates(tiny_model_path: Path) -> None:
    class BoomError(Exception):
        pass

    calls: list[float] = []

    def explode(fraction: float) -> None:
        calls.append(fraction)
        if fraction > 0.4:
            raise BoomError(f"at {fraction}")

    with pytest.raises(BoomError, match=r"^at 0\."):
        lc.LlamaModel.load(tiny_model_path, progress=explode)
    assert calls[-1] > 0.4
    assert calls[-1] < 1.0


# ---- kv_overrides, vocab_only, splits ---------------------------------------------------


def test_kv_overrides_change_hyperparameters_and_tokenizer(tiny_model_path: Path) -> None:
    model = lc.LlamaModel.load(
        tiny_model_path,
        kv_overrides={"llama.context_length": 1234, "tokenizer.ggml.add_bos_token": False},
    )
    plain = lc.LlamaModel.load(tiny_model_path)
    assert plain.n_ctx_train == 4096
    assert model.n_ctx_train == 1234
    assert plain.add_bos
    assert not model.add_bos
    assert model.tokenize("Hello")[0] != model.token_bos
    assert list(plain.tokenize("Hello")) == [plain.token_bos, *model.tokenize("Hello")]


def test_kv_overrides_are_visible_in_metadata(tiny_model_path: Path) -> None:
    """The metadata a caller reads back is the metadata the model was loaded with."""
    model = lc.LlamaModel.load(
        tiny_model_path,
        kv_overrides={"llama.context_length": 1234, "general.name": "overridden"},
    )
    assert model.n_ctx_train == 1234
    assert model.meta_val("general.name") == "overridden"
    assert model.meta_val("llama.context_length") == "1234"
    assert model.metadata["general.name"] == "overridden"


@pytest.mark.parametrize(
    ("overrides", "error"),
    [
        ({"x" * 200: 1}, ValueError),
        ({"": 1}, ValueError),
        ({"general.name": "y" * 200}, ValueError),
        ({"general.name": [1, 2]}, TypeError),
    ],
)
def test_invalid_kv_overrides(
    tiny_model_path: Path, overrides: dict[str, Any], error: type[Exception]
) -> None:
    with pytest.raises(error):
        lc.LlamaModel.load(tiny_model_path, kv_overrides=overrides)


def test_vocab_only_model_tokenizes(tiny_model_path: Path, tiny: lc.LlamaModel) -> None:
    vocab = lc.LlamaModel.load(tiny_model_path, vocab_only=True)
    assert vocab.n_vocab == tiny.n_vocab
    tokens = vocab.tokenize(PROMPT)
    np.testing.assert_array_equal(tokens, tiny.tokenize(PROMPT))
    assert vocab.detokenize(tokens[1:]) == PROMPT
    assert vocab.token_bos == tiny.token_bos
    vocab.close()


def test_context_on_vocab_only_model_is_refused(tiny_model_path: Path) -> None:
    # In a subprocess: decoding on a model without weights aborts inside llama.cpp.
    result = run_python(
        """
        import sys
        import llama_cy as lc
        model = lc.LlamaModel.load(sys.argv[1], vocab_only=True)
        try:
            ctx = lc.LlamaContext(model, n_ctx=64)
            batch = lc.LlamaBatch(4)
            batch.add_sequence(model.tokenize("Hello"))
            ctx.decode(batch)
        except lc.LlamaError as exc:
            print("refused:", type(exc).__name__)
        else:
            print("decoded")
        """,
        str(tiny_model_path),
    )
    assert result.returncode == 0, f"rc={result.returncode}\n{result.stderr[-2000:]}"
    assert "refused:" in result.stdout


def test_load_splits_empty_list_raises_value_error() -> None:
    with pytest.raises(ValueError, match="at least one"):
        lc.LlamaModel.load_splits([])


def write_split_copy(src: Path, folder: Path, max_tensors: int) -> list[Path]:
    """Write ``src`` again as a ``-0000i-of-0000N.gguf`` split set with the gguf package."""
    reader = gguf.GGUFReader(src)
    folder.mkdir()
    writer = gguf.GGUFWriter(folder / "tiny.gguf", "llama", split_max_tensors=max_tensors)
    for key, fld in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        vtype = fld.types[0]
        sub = fld.types[1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(key, fld.contents(), vtype, sub_type=sub)
    for tensor in reader.tensors:
        writer.add_tensor(tensor.name, np.asarray(tensor.data))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return sorted(folder.iterdir())


def test_split_models_load_and_compute_like_the_single_file(
    tmp_path: Path, tiny_model_path: Path, tiny: lc.LlamaModel
) -> None:
    files = write_split_copy(tiny_model_path, tmp_path / "split", max_tensors=8)
    assert len(files) == 3
    expected = last_logits(tiny)
    by_name = lc.LlamaModel.load(files[0])
    by_list = lc.LlamaModel.load_splits(files)
    for model in (by_name, by_list):
        assert model.n_params == tiny.n_params
        np.testing.assert_array_equal(last_logits(model), expected)
    with pytest.raises(ModelLoadError):
        lc.LlamaModel.load_splits(files[::-1])
    with pytest.raises(ModelLoadError, match="not found"):
        lc.LlamaModel.load_splits([files[0], tmp_path / "missing.gguf"])


# ---- description ------------------------------------------------------------------------


def test_tiny_model_description(
    tiny: lc.LlamaModel, tiny_reader: Any, tiny_model_path: Path
) -> None:
    meta = tiny.metadata
    assert meta["general.architecture"] == "llama"
    assert meta["general.name"] == field(tiny_reader, "general.name")
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items())
    for key, value in meta.items():
        assert tiny.meta_val(key) == value
    assert tiny.meta_val("no.such.key") is None
    assert tiny.path == os.fspath(tiny_model_path)
    assert "llama" in tiny.desc
    assert tiny.size == sum(int(t.n_bytes) for t in tiny_reader.tensors)
    assert tiny.n_params == sum(int(t.n_elements) for t in tiny_reader.tensors)
    assert tiny.n_ctx_train == field(tiny_reader, "llama.context_length")
    assert tiny.n_embd == tiny.n_embd_out == field(tiny_reader, "llama.embedding_length")
    assert tiny.n_layer == field(tiny_reader, "llama.block_count")
    assert tiny.n_head == field(tiny_reader, "llama.attention.head_count")
    assert tiny.n_head_kv == field(tiny_reader, "llama.attention.head_count_kv")
    assert tiny.n_vocab == len(field(tiny_reader, "tokenizer.ggml.tokens"))
    assert tiny.n_swa == 0
    assert tiny.rope_type == "norm"
    assert tiny.rope_freq_scale_train == 1.0
    assert tiny.decoder_start_token == -1  # only encoder-decoder models have one
    assert tiny.n_cls_out == 1  # llama.cpp's default: the model has no classifier head
    assert not tiny.has_encoder
    assert tiny.has_decoder
    assert not tiny.is_recurrent
    assert not tiny.is_hybrid
    assert not tiny.is_diffusion
    assert tiny.chat_template() is None
    assert repr(tiny).startswith("<LlamaModel")


def meta_int(model: lc.LlamaModel, key: str) -> int:
    """A metadata value as llama.cpp read it from the file (not via its hyperparameters)."""
    value = model.meta_val(key)
    assert value is not None, key
    return int(value)


def test_gemma_description(gemma: lc.LlamaModel, gemma_path: Path) -> None:
    # (gguf.GGUFReader takes seconds on Gemma's 262k-token vocabulary: the raw metadata
    # strings are the reference here.)
    assert gemma.metadata["general.architecture"] == "gemma3"
    assert "gemma3" in gemma.desc
    assert gemma.n_embd == meta_int(gemma, "gemma3.embedding_length")
    assert gemma.n_layer == meta_int(gemma, "gemma3.block_count")
    assert gemma.n_head == meta_int(gemma, "gemma3.attention.head_count")
    assert gemma.n_head_kv == meta_int(gemma, "gemma3.attention.head_count_kv")
    assert gemma.n_ctx_train == meta_int(gemma, "gemma3.context_length")
    assert gemma.n_swa == meta_int(gemma, "gemma3.attention.sliding_window")
    # general.size_label is "270M".
    label = gemma.meta_val("general.size_label")
    assert label is not None
    assert label.endswith("M")
    assert abs(gemma.n_params / 1e6 - float(label[:-1])) / float(label[:-1]) < 0.1
    assert 0 < gemma.size <= gemma_path.stat().st_size
    assert gemma.rope_type == "neox"
    assert gemma.has_decoder
    assert not gemma.has_encoder
    assert not gemma.is_recurrent
    assert gemma.vocab_type == "spm"
    # This GGUF carries no chat template.
    assert gemma.meta_val("tokenizer.chat_template") is None
    assert gemma.chat_template() is None


# ---- save --------------------------------------------------------------------------------


def test_save_and_reload_give_identical_logits(tmp_path: Path, tiny: lc.LlamaModel) -> None:
    path = tmp_path / "saved.gguf"
    tiny.save(path)
    assert path.stat().st_size > tiny.size
    again = lc.LlamaModel.load(path)
    assert again.n_params == tiny.n_params
    assert again.n_vocab == tiny.n_vocab
    for key in ("general.architecture", "llama.embedding_length", "llama.block_count"):
        assert again.meta_val(key) == tiny.meta_val(key)
    np.testing.assert_array_equal(again.tokenize(PROMPT), tiny.tokenize(PROMPT))
    np.testing.assert_array_equal(last_logits(again), last_logits(tiny))
    again.close()


def test_save_to_an_unwritable_path_raises(tmp_path: Path, tiny: lc.LlamaModel) -> None:
    target = tmp_path / "no" / "such" / "folder" / "model.gguf"
    with pytest.raises((LlamaError, OSError)):
        tiny.save(target)
    assert not target.exists()


# ---- models built in memory ---------------------------------------------------------------

_ARRAY_DTYPES = {
    gguf.GGUFValueType.FLOAT32: np.float32,
    gguf.GGUFValueType.INT32: np.int32,
    gguf.GGUFValueType.UINT32: np.uint32,
}


def tokenizer_metadata(path: Path) -> dict[str, Any]:
    """The ``tokenizer.*`` keys of a GGUF file as from_metadata values."""
    reader = gguf.GGUFReader(path)
    out: dict[str, Any] = {}
    for key, fld in reader.fields.items():
        if not key.startswith("tokenizer."):
            continue
        value = fld.contents()
        if fld.types[0] == gguf.GGUFValueType.ARRAY and fld.types[1] in _ARRAY_DTYPES:
            value = np.asarray(value, dtype=_ARRAY_DTYPES[fld.types[1]])
        out[key] = value
    return out


def tiny_metadata(tiny_reader: Any) -> dict[str, Any]:
    """Metadata of the tiny llama: its hyperparameters plus the vocabulary file's tokenizer."""
    meta: dict[str, Any] = {"general.architecture": "llama", "general.name": "in-memory"}
    for key in (
        "llama.context_length",
        "llama.embedding_length",
        "llama.block_count",
        "llama.feed_forward_length",
        "llama.attention.head_count",
        "llama.attention.head_count_kv",
        "llama.rope.dimension_count",
        "llama.vocab_size",
    ):
        meta[key] = int(field(tiny_reader, key))
    meta["llama.attention.layer_norm_rms_epsilon"] = float(
        field(tiny_reader, "llama.attention.layer_norm_rms_epsilon")
    )
    meta.update(tokenizer_metadata(vocab_file("llama-spm")))
    return meta


@pytest.fixture(scope="module")
def tiny_meta(tiny_reader: Any) -> dict[str, Any]:
    return tiny_metadata(tiny_reader)


def neutral_value(name: str) -> float:
    """What an optional tensor absent from the file must hold to change nothing."""
    if name.endswith(".bias"):
        return 0.0
    if name.endswith((".scale", ".input_scale")) or name.startswith("rope_freqs."):
        return 1.0
    raise AssertionError(f"unexpected tensor {name}")


def tensor_filler(reader: Any) -> tuple[Callable[[str, npt.NDArray[Any]], None], list[str]]:
    """A set_tensor_data callback copying the weights of ``reader``'s file.

    llama.cpp also creates the optional tensors of the architecture (biases, scales,
    rope frequency factors) and asks for their values: they get neutral ones.
    """
    weights = {t.name: np.asarray(t.data) for t in reader.tensors}
    seen: list[str] = []

    def fill(name: str, data: npt.NDArray[Any]) -> None:
        seen.append(name)
        assert data.dtype == np.float32, name
        if name in weights:
            assert data.shape == weights[name].shape, name
            data[...] = weights[name]
        else:
            data[...] = neutral_value(name)

    return fill, seen


def test_from_metadata_builds_a_model_that_decodes(
    tiny: lc.LlamaModel, tiny_reader: Any, tiny_meta: dict[str, Any]
) -> None:
    fill, seen = tensor_filler(tiny_reader)
    model = lc.LlamaModel.from_metadata(dict(tiny_meta), fill)
    assert {t.name for t in tiny_reader.tensors} <= set(seen)
    assert model.path is None
    assert model.meta_val("general.name") == "in-memory"
    assert model.n_layer == tiny.n_layer
    assert model.vocab_type == "spm"
    np.testing.assert_array_equal(model.tokenize(PROMPT), tiny.tokenize(PROMPT))
    # Same weights, same vocabulary: the same computation as the file on disk.
    if OFFLOADED:  # a GPU's kernels round with where the weights lie
        np.testing.assert_allclose(
            last_logits(model), last_logits(tiny), rtol=LOGITS_TOL, atol=LOGITS_TOL
        )
    else:
        np.testing.assert_array_equal(last_logits(model), last_logits(tiny))
    model.close()


def test_from_metadata_with_chat_templates(tiny_reader: Any, tiny_meta: dict[str, Any]) -> None:
    meta = dict(tiny_meta)
    meta["tokenizer.chat_template"] = "{% for m in messages %}{{ m.content }}{% endfor %}"
    meta["tokenizer.chat_template.tool_use"] = "{{ tools }}"
    fill, _ = tensor_filler(tiny_reader)
    model = lc.LlamaModel.from_metadata(meta, fill)
    assert model.chat_template() == meta["tokenizer.chat_template"]
    assert model.chat_template("tool_use") == "{{ tools }}"
    assert model.chat_template("missing") is None
    model.close()


def test_from_metadata_callback_exception_propagates(tiny_meta: dict[str, Any]) -> None:
    class BoomError(Exception):
        pass

    names: list[str] = []

    def explode(name: str, data: npt.NDArray[Any]) -> None:
        names.append(name)
        raise BoomError(name)

    with pytest.raises(BoomError):
        lc.LlamaModel.from_metadata(dict(tiny_meta), explode)
    # The first failure stops the filling: the callback is not called again.
    assert len(names) == 1


def test_from_metadata_without_architecture_raises() -> None:
    with pytest.raises(ModelLoadError):
        lc.LlamaModel.from_metadata({"general.name": "nothing"}, lambda name, data: None)


def test_from_metadata_unsupported_value_raises_type_error(tiny_meta: dict[str, Any]) -> None:
    meta = dict(tiny_meta)
    meta["general.bad"] = {"a": 1}
    with pytest.raises(TypeError, match=r"general\.bad"):
        lc.LlamaModel.from_metadata(meta, lambda name, data: None)


# ---- vocabulary ------------------------------------------------------------------------


def test_tokenize_str_and_bytes(tiny: lc.LlamaModel) -> None:
    from_str = tiny.tokenize(PROMPT)
    from_bytes = tiny.tokenize(PROMPT.encode())
    assert from_str.dtype == np.int32
    assert from_str.ndim == 1
    np.testing.assert_array_equal(from_str, from_bytes)
    assert tiny.tokenize("", add_special=False).size == 0


def test_add_special_adds_bos(tiny: lc.LlamaModel) -> None:
    with_bos = tiny.tokenize(PROMPT, add_special=True)
    without = tiny.tokenize(PROMPT, add_special=False)
    assert tiny.add_bos
    assert with_bos[0] == tiny.token_bos
    assert tiny.token_bos not in without
    np.testing.assert_array_equal(with_bos[1:], without)


def test_parse_special(tiny: lc.LlamaModel) -> None:
    bos_text = tiny.token_text(tiny.token_bos)
    text = f"{bos_text}Hello"
    parsed = tiny.tokenize(text, add_special=False, parse_special=True)
    literal = tiny.tokenize(text, add_special=False, parse_special=False)
    assert parsed[0] == tiny.token_bos
    assert tiny.token_bos not in literal
    assert len(literal) > len(parsed)
    assert tiny.detokenize(literal) == text


@pytest.mark.parametrize("text", [PROMPT, "naïve café 🦙 日本語", "a  b\n\tc", "Ünïcödé ∑ 𝄞 end"])
def test_detokenize_round_trip(tiny: lc.LlamaModel, gemma: lc.LlamaModel, text: str) -> None:
    for model in (tiny, gemma):
        tokens = model.tokenize(text, add_special=False)
        assert model.detokenize(tokens) == text
        assert model.detokenize(list(map(int, tokens))) == text
        assert model.detokenize(tokens.astype(np.int64)) == text


def test_detokenize_special_tokens(tiny: lc.LlamaModel) -> None:
    tokens = tiny.tokenize("Hello", add_special=True)
    bos_text = tiny.token_text(tiny.token_bos)
    assert bos_text not in tiny.detokenize(tokens)
    assert tiny.detokenize(tokens, unparse_special=True).startswith(bos_text)
    assert tiny.detokenize(tokens, remove_special=True, unparse_special=True).strip() == "Hello"
    assert tiny.detokenize([]) == ""


def test_token_to_piece_returns_bytes_of_split_characters(tiny: lc.LlamaModel) -> None:
    text = "🦙"
    tokens = tiny.tokenize(text, add_special=False)
    pieces = [tiny.token_to_piece(int(t)) for t in tokens]
    assert all(isinstance(p, bytes) for p in pieces)
    # The llama emoji is not in the vocabulary: byte-fallback tokens split its 4 bytes.
    assert len(pieces) >= 4
    undecodable = 0
    for piece in pieces:
        try:
            piece.decode("utf-8")
        except UnicodeDecodeError:
            undecodable += 1
    assert undecodable >= 1
    assert b"".join(pieces).decode("utf-8").strip() == text
    assert tiny.detokenize(tokens) == text


def test_token_to_piece_of_special_tokens(tiny: lc.LlamaModel) -> None:
    bos = tiny.token_bos
    assert tiny.token_to_piece(bos) == b""
    assert tiny.token_to_piece(bos, special=True) == tiny.token_text(bos).encode()
    hello = int(tiny.tokenize("Hello", add_special=False)[0])
    assert tiny.token_to_piece(hello) == b" Hello"
    assert tiny.token_to_piece(hello, lstrip=1) == b"Hello"


def test_special_tokens_match_the_gguf(
    tiny: lc.LlamaModel, tiny_reader: Any, gemma: lc.LlamaModel
) -> None:
    assert tiny.token_bos == field(tiny_reader, "tokenizer.ggml.bos_token_id")
    assert tiny.token_eos == field(tiny_reader, "tokenizer.ggml.eos_token_id")
    assert tiny.add_bos == field(tiny_reader, "tokenizer.ggml.add_bos_token")
    assert tiny.add_eos == field(tiny_reader, "tokenizer.ggml.add_eos_token")
    assert tiny.token_pad == -1  # the llama vocabulary has no padding token
    assert tiny.token_text(tiny.token_nl) == "<0x0A>"
    assert gemma.token_bos == meta_int(gemma, "tokenizer.ggml.bos_token_id")
    assert gemma.token_eos == meta_int(gemma, "tokenizer.ggml.eos_token_id")
    assert gemma.token_pad == meta_int(gemma, "tokenizer.ggml.padding_token_id")
    assert gemma.add_bos == (gemma.meta_val("tokenizer.ggml.add_bos_token") == "true")
    assert gemma.add_eos == (gemma.meta_val("tokenizer.ggml.add_eos_token") == "true")
    assert gemma.add_sep == (gemma.meta_val("tokenizer.ggml.add_sep_token") == "true")
    assert gemma.token_bos != gemma.token_eos
    for model in (tiny, gemma):
        assert model.vocab_type == "spm"
        for name in (
            "token_eot",
            "token_sep",
            "token_nl",
            "token_pad",
            "token_mask",
            "token_fim_pre",
            "token_fim_suf",
            "token_fim_mid",
            "token_fim_pad",
            "token_fim_rep",
            "token_fim_sep",
        ):
            value = getattr(model, name)
            assert isinstance(value, int)
            assert -1 <= value < model.n_vocab


def test_token_properties_match_the_gguf(tiny: lc.LlamaModel, tiny_reader: Any) -> None:
    texts = field(tiny_reader, "tokenizer.ggml.tokens")
    scores = field(tiny_reader, "tokenizer.ggml.scores")
    for token in (0, 1, 2, 13, 100, 15043, tiny.n_vocab - 1):
        assert tiny.token_text(token) == texts[token]
        assert tiny.token_score(token) == pytest.approx(scores[token])
    attrs = lc.TOKEN_ATTRS
    normal = int(tiny.tokenize("Hello", add_special=False)[0])
    for special in (tiny.token_bos, tiny.token_eos):
        assert tiny.is_control(special)
        assert tiny.token_attr(special) & attrs["control"]
    assert tiny.is_eog(tiny.token_eos)
    assert not tiny.is_eog(tiny.token_bos)
    assert not tiny.is_eog(normal)
    assert not tiny.is_control(normal)
    assert tiny.token_attr(normal) & attrs["normal"]
    assert not tiny.token_attr(normal) & attrs["control"]
    byte_token = int(tiny.tokenize("🦙", add_special=False)[-1])
    assert tiny.token_attr(byte_token) & attrs["byte"]


def test_gemma_end_of_turn_ends_generation(gemma: lc.LlamaModel) -> None:
    tokens = gemma.tokenize("<end_of_turn>", add_special=False, parse_special=True)
    assert len(tokens) == 1
    eot = int(tokens[0])
    assert gemma.is_eog(eot)
    assert gemma.is_control(eot)
    assert gemma.is_eog(gemma.token_eos)
    assert not gemma.is_eog(int(gemma.tokenize("Hello", add_special=False)[0]))


TOKEN_METHODS: dict[str, Callable[[lc.LlamaModel, int], object]] = {
    "token_to_piece": lambda m, t: m.token_to_piece(t),
    "token_text": lambda m, t: m.token_text(t),
    "token_score": lambda m, t: m.token_score(t),
    "token_attr": lambda m, t: m.token_attr(t),
    "is_eog": lambda m, t: m.is_eog(t),
    "is_control": lambda m, t: m.is_control(t),
    "detokenize": lambda m, t: m.detokenize([1, t]),
}


@pytest.mark.parametrize("method", TOKEN_METHODS.values(), ids=TOKEN_METHODS.keys())
@pytest.mark.parametrize("bad", ["n_vocab", "minus_one", "int32_max", "int32_min"])
def test_out_of_range_token_raises_invalid_token_error(
    tiny: lc.LlamaModel, method: Callable[[lc.LlamaModel, int], object], bad: str
) -> None:
    token = {
        "n_vocab": tiny.n_vocab,
        "minus_one": -1,
        "int32_max": 2**31 - 1,
        "int32_min": -(2**31),
    }[bad]
    with pytest.raises(InvalidTokenError, match="out of range"):
        method(tiny, token)


@pytest.mark.parametrize(
    "tokens",
    [
        np.array([1, 15043, 32000], dtype=np.int32),
        np.array([1, -1, 15043], dtype=np.int32),
        np.array([1, 2**40], dtype=np.int64),
        np.array([-(2**40), 1], dtype=np.int64),
        np.array([1, 2**32 - 1], dtype=np.uint32),
    ],
    ids=["n_vocab", "negative", "huge", "huge-negative", "uint32"],
)
def test_detokenize_numpy_array_with_a_bad_id(
    tiny: lc.LlamaModel, tokens: npt.NDArray[np.integer[Any]]
) -> None:
    with pytest.raises(InvalidTokenError):
        tiny.detokenize(tokens)


def test_detokenize_rejects_non_integer_and_2d_input(tiny: lc.LlamaModel) -> None:
    with pytest.raises(TypeError):
        tiny.detokenize(np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="one-dimensional"):
        tiny.detokenize(np.array([[1, 2], [3, 4]], dtype=np.int32))


# ---- closing ---------------------------------------------------------------------------

MODEL_CALLS: dict[str, Callable[[lc.LlamaModel], object]] = {
    "tokenize": lambda m: m.tokenize("hi"),
    "detokenize": lambda m: m.detokenize([1]),
    "token_to_piece": lambda m: m.token_to_piece(1),
    "token_text": lambda m: m.token_text(1),
    "is_eog": lambda m: m.is_eog(1),
    "metadata": lambda m: m.metadata,
    "meta_val": lambda m: m.meta_val("general.name"),
    "desc": lambda m: m.desc,
    "n_embd": lambda m: m.n_embd,
    "n_params": lambda m: m.n_params,
    "token_bos": lambda m: m.token_bos,
    "vocab_type": lambda m: m.vocab_type,
    "chat_template": lambda m: m.chat_template(),
    "save": lambda m: m.save(os.devnull),
    "context": lambda m: lc.LlamaContext(m, n_ctx=64),
    "enter": lambda m: m.__enter__(),
}


@pytest.mark.parametrize("call", MODEL_CALLS.values(), ids=MODEL_CALLS.keys())
def test_use_after_close_raises_closed_error(
    tiny_model_path: Path, call: Callable[[lc.LlamaModel], object]
) -> None:
    model = lc.LlamaModel.load(tiny_model_path, vocab_only=True)
    model.close()
    model.close()  # idempotent
    assert model.closed
    assert "closed" in repr(model)
    with pytest.raises(ClosedError):
        call(model)


def test_context_manager_closes_the_model(tiny_model_path: Path) -> None:
    with lc.LlamaModel.load(tiny_model_path, vocab_only=True) as model:
        assert not model.closed
        assert model.tokenize("hi").size > 0
    assert model.closed
    with pytest.raises(ClosedError):
        model.tokenize("hi")


def test_closing_a_model_with_a_live_context(tmp_path: Path, tiny_model_path: Path) -> None:
    path = tmp_path / "own-copy.gguf"
    shutil.copyfile(tiny_model_path, path)
    model = lc.LlamaModel.load(path, use_mmap=True)
    tokens = model.tokenize(PROMPT)
    ctx = lc.LlamaContext(model, n_ctx=256, n_batch=64, n_threads=1)
    batch = lc.LlamaBatch(len(tokens))
    batch.add_sequence(tokens)
    ctx.decode(batch)
    before = ctx.logits().copy()
    assert mapped(path)

    model.close()
    assert model.closed
    assert ctx.model is model
    with pytest.raises(ClosedError):
        model.tokenize("hi")
    with pytest.raises(ClosedError):
        _ = model.n_embd
    # The context still owns a working model.
    ctx.clear()
    ctx.decode(batch)
    np.testing.assert_array_equal(ctx.logits(), before)
    ctx.clear()
    ctx.warmup()
    assert ctx.seq_pos_max(0) == -1
    assert mapped(path), "the weights were freed under a live context"

    ctx.close()
    gc.collect()
    # The last user is gone: llama.cpp freed the model and unmapped its file.
    assert not mapped(path)
    del model
    gc.collect()


def test_dropping_the_model_reference_keeps_the_context_working(tiny_model_path: Path) -> None:
    model = lc.LlamaModel.load(tiny_model_path)
    tokens = model.tokenize(PROMPT)
    ctx = lc.LlamaContext(model, n_ctx=256, n_batch=64, n_threads=1)
    del model
    gc.collect()
    batch = lc.LlamaBatch(len(tokens))
    batch.add_sequence(tokens)
    ctx.decode(batch)
    assert np.isfinite(ctx.logits()).all()
    assert ctx.model.n_vocab == ctx.n_vocab
    ctx.close()


def test_default_gpu_layers_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tiny_model_path: Path
) -> None:
    """``$LLAMA_CY_N_GPU_LAYERS``: the offload of every load that gives none (the switch
    that runs the whole suite on a GPU backend)."""
    from llama_cy._model import default_gpu_layers

    monkeypatch.delenv("LLAMA_CY_N_GPU_LAYERS", raising=False)
    assert default_gpu_layers() == 0
    for value, want in (("-1", -1), ("all", -1), ("7", 7), (" 0 ", 0)):
        monkeypatch.setenv("LLAMA_CY_N_GPU_LAYERS", value)
        assert default_gpu_layers() == want
    monkeypatch.setenv("LLAMA_CY_N_GPU_LAYERS", "most")
    with pytest.raises(ValueError, match="LLAMA_CY_N_GPU_LAYERS"):
        lc.LlamaModel.load(tiny_model_path)
    lc.LlamaModel.load(tiny_model_path, n_gpu_layers=0).close()  # given: the variable is not read
