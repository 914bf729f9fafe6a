"""``import llama_cpp`` (compat/): llama-cpp-python's names and behaviours that programs
built on it use, one test per gap that issue 33 found on llama_cy alone."""

from __future__ import annotations

import importlib.util
import json
import os
import pickle
import shutil
import subprocess
import sys
import threading
import zipfile
from pathlib import Path
from typing import Any

import llama_cpp
import numpy as np
import pytest
from child import run_python
from llama_cpp import llama_chat_format, llama_types
from llama_cpp.llama_cache import LlamaDiskCache, LlamaRAMCache
from llama_cpp.llama_speculative import LlamaPromptLookupDecoding
from llama_cpp.llama_tokenizer import LlamaHFTokenizer, LlamaTokenizer

import llama_cy

ROOT = Path(__file__).resolve().parent.parent
SPM = ROOT / "subprojects" / "llama.cpp" / "models" / "ggml-vocab-llama-spm.gguf"


@pytest.fixture
def llm(tiny_model_path: Path) -> llama_cpp.Llama:
    return llama_cpp.Llama(str(tiny_model_path), n_ctx=128, verbose=False)


def test_the_names_programs_import_exist() -> None:
    for name in (
        "Llama", "LlamaGrammar", "LogitsProcessorList", "StoppingCriteriaList", "LlamaState",
        "LlamaRAMCache", "LlamaDiskCache", "LlamaCache", "ChatCompletionRequestUserMessage",
        "LLAMA_SPLIT_MODE_LAYER", "LLAMA_POOLING_TYPE_MEAN", "GGML_TYPE_Q8_0",
        "LLAMA_DEFAULT_SEED", "llama_batch_init", "llama_decode", "llama_get_logits",
    ):  # fmt: skip
        assert hasattr(llama_cpp, name), name
    assert llama_types.ChatCompletionRequestUserMessage(role="user", content="x")["role"] == "user"
    assert callable(llama_chat_format.format_mistral_instruct)
    # llama-cpp-python's handler classes in its tree, each llama_cy's handler of that format
    f = llama_chat_format
    assert issubclass(f.MTMDChatHandler, llama_cy.MtmdChatHandler)
    assert issubclass(f.Gemma4ChatHandler, f.MTMDChatHandler)
    assert issubclass(f.Gemma4ChatHandler, llama_cy.chat_handlers.Gemma4ChatHandler)
    for name in ("Obsidian", "Llava16", "Moondream", "NanoLlava", "Llama3VisionAlpha",
                 "MiniCPMv26", "Qwen25VL"):  # fmt: skip
        cls = getattr(f, f"{name}ChatHandler")
        assert issubclass(cls, f.Llava15ChatHandler), name
        assert issubclass(cls, getattr(llama_cy.chat_handlers, f"{name}ChatHandler")), name
    assert f.Llama3VisionAlpha is f.Llama3VisionAlphaChatHandler
    assert issubclass(LlamaHFTokenizer, llama_cpp.llama_tokenizer.BaseLlamaTokenizer)
    assert issubclass(LlamaTokenizer, llama_cpp.llama_tokenizer.BaseLlamaTokenizer)
    assert llama_cpp.__version__.startswith("0.3.")


def test_llama_cpp_pythons_attributes(tiny_model_path: Path) -> None:
    """The attributes programs read from llama-cpp-python's Llama: the GGUF metadata (a
    chat template is read from it), the threads in use, and what was asked for."""
    from llama_cy import LlamaModel

    overrides: dict[str, bool | int | float | str] = {"general.name": "renamed"}
    llm = llama_cpp.Llama(str(tiny_model_path), n_ctx=128, n_threads=1, n_threads_batch=2,
                          kv_overrides=overrides, verbose=False)  # fmt: skip
    with LlamaModel.load(tiny_model_path, vocab_only=True) as model:
        want = model.metadata
    assert llm.metadata == {**want, "general.name": "renamed"}
    assert all(isinstance(v, str) for v in llm.metadata.values())
    assert (llm.n_threads, llm.n_threads_batch) == (1, 2)
    assert llm.kv_overrides == overrides
    assert (llm.numa, llm.tensor_split, llm.lora_base, llm.draft_model) == (False, None, None, None)
    llm.close()


def test_the_package_does_not_shadow_llama_cpp_python(tmp_path: Path) -> None:
    """With llama-cpp-python's metadata in the environment, the import refuses."""
    fake = tmp_path / "llama_cpp_python-0.3.36.dist-info"
    fake.mkdir()
    metadata = "Metadata-Version: 2.1\nName: llama-cpp-python\nVersion: 0.3.36\n"
    (fake / "METADATA").write_text(metadata)
    result = run_python(
        "import sys; sys.path.insert(0, sys.argv[1]); import llama_cpp", str(tmp_path)
    )
    assert result.returncode != 0
    assert "llama-cpp-python and llama-cy-llama-cpp are both installed" in result.stderr


def test_tokenizer_from_ggml_file_tokenizes_as_llama() -> None:
    """llama-cpp-python's LlamaTokenizer.from_ggml_file: the file's vocabulary alone, with
    llama_cpp.Llama's tokens and text (no SentencePiece space after BOS)."""
    from llama_cpp.llama_tokenizer import LlamaTokenizer

    tokenizer = LlamaTokenizer.from_ggml_file(str(SPM))
    llm = llama_cpp.Llama(str(SPM), vocab_only=True, verbose=False)
    assert tokenizer.tokenize(b"Hello World") == llm.tokenize(b"Hello World") == [1, 15043, 2787]
    assert tokenizer.detokenize([1, 15043, 2787]) == llm.detokenize([1, 15043, 2787])
    assert tokenizer.decode([1, 15043, 2787]) == "Hello World"


def test_vocab_only_is_a_tokenizer(tiny_model_path: Path) -> None:
    llm = llama_cpp.Llama(str(SPM), vocab_only=True, verbose=False)
    assert llm.llama_cy_ctx.ctx is not None
    tokens = llm.tokenize(b"Hello World")
    assert tokens == [1, 15043, 2787]
    assert llm.detokenize(tokens) == b"Hello World"  # no SentencePiece space after BOS
    assert llm.detokenize(tokens[1:]) == b" Hello World"
    with pytest.raises(llama_cy.LlamaError, match="vocab_only"):
        llm.create_completion("Hello", max_tokens=2)
    with pytest.raises(llama_cy.LlamaError, match="vocab_only"):
        llm.eval(tokens)
    llm.reset()  # nothing to clear: no error


def test_integer_enums_and_accepted_keywords(tiny_model_path: Path) -> None:
    llm = llama_cpp.Llama(
        str(tiny_model_path),
        n_ctx=64,
        split_mode=llama_cpp.LLAMA_SPLIT_MODE_LAYER,
        rope_scaling_type=llama_cpp.LLAMA_ROPE_SCALING_TYPE_UNSPECIFIED,
        attention_type=llama_cpp.LLAMA_ATTENTION_TYPE_CAUSAL,
        type_k=llama_cpp.GGML_TYPE_Q8_0,
        swa_full=True,
        op_offload=False,
        n_parts=-1,  # LangChain's legacy keywords, which llama-cpp-python ignores too
        f16_kv=True,
        verbose=False,
    )
    assert llm.create_completion("Hi", max_tokens=2)["choices"][0]["text"]
    emb = llama_cpp.Llama(
        str(tiny_model_path), embedding=True, pooling_type=llama_cpp.LLAMA_POOLING_TYPE_MEAN,
        verbose=False,
    )  # fmt: skip
    assert emb.pooling_type() == "mean"
    with pytest.raises(ValueError, match="pooling_type=77"):
        llama_cpp.Llama(str(tiny_model_path), pooling_type=77, verbose=False)


def test_a_bad_seed_is_refused_and_forgotten(llm: llama_cpp.Llama) -> None:
    """A call's seed that is no integer raised only after it was kept: every later call
    failed on it."""
    for bad in ([1], 1.5, "7"):
        with pytest.raises(TypeError):
            llm.create_completion("The", max_tokens=2, seed=bad)
        with pytest.raises(TypeError):
            llm.set_seed(bad)  # type: ignore[arg-type]
    assert llm.create_completion("The", max_tokens=2)["usage"]["completion_tokens"] >= 1
    llm.set_seed(np.int64(5))  # type: ignore[arg-type]  # an integer of another type is one


def test_seeds_differ_per_call_and_repeat_from_the_seed(tiny_model_path: Path) -> None:
    def texts(llm: llama_cpp.Llama) -> list[str]:
        return [llm("The", max_tokens=8, temperature=1.0)["choices"][0]["text"] for _ in range(3)]

    a = texts(llama_cpp.Llama(str(tiny_model_path), seed=1337, verbose=False))
    b = texts(llama_cpp.Llama(str(tiny_model_path), seed=1337, verbose=False))
    assert a == b
    assert len(set(a)) == 3


def test_token_loop_state_and_cache(llm: llama_cpp.Llama, tmp_path: Path) -> None:
    tokens = llm.tokenize(b"The quick brown fox")
    fresh = [t for t, _ in zip(llm.generate(tokens, temp=0.0), range(4), strict=False)]
    llm.reset()
    llm.eval(tokens)
    assert llm.n_tokens == len(tokens)
    assert llm.input_ids[: llm.n_tokens].tolist() == tokens
    assert llm.sample(temp=0.0) == fresh[0]
    state = llm.save_state()
    assert isinstance(state, llama_cpp.LlamaState)
    assert state.n_tokens == len(tokens)
    llm.reset()
    llm.load_state(state)
    assert llm.n_tokens == len(tokens)
    assert [t for t, _ in zip(llm.generate(tokens, temp=0.0), range(4), strict=False)] == fresh

    for cache in (LlamaRAMCache(), LlamaDiskCache(str(tmp_path / "cache"))):
        llm.reset()
        llm.set_cache(cache)
        first = llm.create_completion(tokens, max_tokens=3, temperature=0.0)
        assert tokens in cache
        llm.reset()
        again = llm.create_completion(tokens, max_tokens=3, temperature=0.0)
        assert again["choices"][0]["text"] == first["choices"][0]["text"]
    llm.set_cache(None)


def test_processors_and_criteria_as_lists_or_bare_functions(llm: llama_cpp.Llama) -> None:
    target = llm.tokenize(b"Say yes", add_bos=False)[-1]

    def force(ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
        scores[:] = -np.inf
        scores[target] = 0.0
        return scores

    for processor in (force, llama_cpp.LogitsProcessorList([force])):
        out = llm.create_completion("Say", max_tokens=3, logits_processor=processor)
        assert out["choices"][0]["text"].split() == ["yes"] * 3
    stop = threading.Event()
    stop.set()
    for criteria in (
        lambda ids, logits: stop.is_set(),
        llama_cpp.StoppingCriteriaList([lambda ids, logits: stop.is_set()]),
    ):
        out = llm.create_completion("Say", max_tokens=8, stopping_criteria=criteria)
        assert out["usage"]["completion_tokens"] <= 1


def test_attributes_programs_read(llm: llama_cpp.Llama) -> None:
    assert llm.context_params.n_ctx == llm.n_ctx()  # LlamaIndex
    assert llm.model_params.n_gpu_layers == 0
    assert llm.n_batch == 128  # min(n_ctx, n_batch), as llama-cpp-python
    assert llm.token_nl() == 13
    assert llm.tokenizer().decode(llm.tokenizer().encode("hello")) == "hello"
    assert llm._is_recurrent is False
    assert llm._is_hybrid is False
    assert llm.chat_format == "llama-2"  # the model has no template: llama-cpp-python's choice
    clone = pickle.loads(pickle.dumps(llm))
    assert clone.n_ctx() == llm.n_ctx()
    out = clone.create_chat_completion_openai_v1(
        messages=[{"role": "user", "content": "hi"}], max_tokens=2
    )
    assert out.choices[0].message.role == "assistant"


def test_chat_formats_render_as_llama_cpp_python() -> None:
    """Against prompts rendered by llama-cpp-python itself (tools/lcp_chat_fixtures.py)."""
    data = json.loads((ROOT / "tests" / "data" / "lcp_chat_formats.json").read_text())
    assert len(data["formats"]) >= 11
    for name, rendered in data["formats"].items():
        handler = llama_chat_format.get_chat_completion_handler(name)
        assert handler is not None
        fn = llama_chat_format.FORMATTERS[name]
        for messages, want in zip(data["conversations"], rendered, strict=True):
            got = fn(messages=messages)
            assert (got.prompt, got.stop, got.added_special) == (
                want["prompt"], want["stop"], want["added_special"],
            ), name  # fmt: skip


def test_prompt_lookup_positional_order() -> None:
    lookup = LlamaPromptLookupDecoding(3, 5)
    assert (lookup.max_ngram_size, lookup.num_pred_tokens) == (3, 5)
    ids = np.array([4, 5, 6, 4, 5])
    assert lookup(ids).tolist() == [6, 4, 5]


def test_the_distribution_builds_at_llama_cys_version(tmp_path: Path) -> None:
    version = llama_cy.__version__
    project = (ROOT / "compat" / "pyproject.toml").read_text()
    assert f'version = "{version}"' in project
    assert f'"llama-cy=={version}"' in project
    source = tmp_path / "src"
    shutil.copytree(ROOT / "compat", source, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "-w", str(tmp_path), str(source)],
        check=True,
    )  # fmt: skip
    (wheel,) = tmp_path.glob("llama_cy_llama_cpp-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for module in ("__init__", "llama", "llama_cpp", "_internals", "llama_chat_format"):
        assert f"llama_cpp/{module}.py" in names
    assert "llama_cpp/server/__main__.py" in names
    assert "llama_cpp/py.typed" in names
    assert any(n.endswith(".dist-info/LICENSE") or "/licenses/LICENSE" in n for n in names)


def _hub_cache(root: Path, repo_id: str, name: str, model: Path) -> Path:
    """``model`` as ``repo_id``'s ``name`` in huggingface_hub's cache layout."""
    repo = root / ("models--" + repo_id.replace("/", "--"))
    revision = "0" * 40
    (repo / "blobs").mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    blob = repo / "blobs" / ("b" * 64)
    shutil.copy(model, blob)
    snapshot = repo / "snapshots" / revision
    snapshot.mkdir(parents=True)
    (snapshot / name).symlink_to(Path("..") / ".." / "blobs" / blob.name)
    return root


def test_from_pretrained_from_the_hub_cache_offline(tiny_model_path: Path, tmp_path: Path) -> None:
    """No hub is reachable here: with HF_HUB_OFFLINE the client's cache serves the file,
    and a file it does not hold is an error naming the repository and the pattern."""
    cache = _hub_cache(tmp_path / "hub", "someone/tiny-GGUF", "tiny-q8_0.gguf", tiny_model_path)
    code = """
import sys, llama_cpp
llm = llama_cpp.Llama.from_pretrained(
    "someone/tiny-GGUF", "*q8_0.gguf", cache_dir=sys.argv[1], n_ctx=64, verbose=False)
print("PATH", llm.model_path)
print("TEXT", bool(llm("Hello", max_tokens=2)["choices"][0]["text"]))
try:
    llama_cpp.Llama.from_pretrained("someone/tiny-GGUF", "*q4_k.gguf", cache_dir=sys.argv[1])
except ValueError as e:
    print("ERROR", e)
"""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    result = run_python(code, str(cache), env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "snapshots" in result.stdout
    assert "TEXT True" in result.stdout
    assert "'someone/tiny-GGUF'" in result.stdout
    assert "'*q4_k.gguf'" in result.stdout


def test_chat_handler_from_pretrained(vision_path: Path, tmp_path: Path) -> None:
    """The vision handlers' from_pretrained (llama-cpp-python's README: the projector by
    repository and glob), from huggingface_hub's cache when offline."""
    cache = _hub_cache(tmp_path / "hub", "someone/llava-GGUF", "mmproj-f16.gguf", vision_path)
    code = """
import sys
from llama_cpp.llama_chat_format import Llava15ChatHandler, MoondreamChatHandler
h = MoondreamChatHandler.from_pretrained(
    repo_id="someone/llava-GGUF", filename="*mmproj*", cache_dir=sys.argv[1], verbose=False)
print(type(h).__name__, h.verbose, h.clip_model_path)
try:
    Llava15ChatHandler.from_pretrained("someone/llava-GGUF", "*clip*", cache_dir=sys.argv[1])
except ValueError as e:
    print("ERROR", e)
"""
    result = run_python(code, str(cache), env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    name, verbose, path = lines[0].split()
    assert (name, verbose) == ("MoondreamChatHandler", "False")
    assert Path(path).read_bytes() == vision_path.read_bytes()
    assert "'*clip*'" in lines[1]


def test_legacy_function_results_and_logprobs_in_chat(gemma_chat_path: Path) -> None:
    """Haystack sends tool results with role "function"; LangChain asks for logprobs."""
    llm = llama_cpp.Llama(str(gemma_chat_path), n_ctx=256, verbose=False)
    call = {"id": "1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "What is f()?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "function", "name": "f", "content": "42"},
    ]
    out = llm.create_chat_completion(messages, max_tokens=3, logprobs=True, top_logprobs=2)
    assert out["choices"][0]["message"]["role"] == "assistant"
    assert len(out["choices"][0]["logprobs"]["content"][0]["top_logprobs"]) == 2


def test_a_registered_chat_format_renders_the_prompt(tiny_model_path: Path) -> None:
    @llama_chat_format.register_chat_format("test-shout")
    def shout(messages: Any, **kwargs: Any) -> llama_chat_format.ChatFormatterResponse:
        text = "".join(f"{m['role'].upper()}: {m['content']}\n" for m in messages)
        return llama_chat_format.ChatFormatterResponse(prompt=text + "ASSISTANT:", stop="\n")

    llm = llama_cpp.Llama(str(tiny_model_path), chat_format="test-shout", verbose=False)
    assert llm.chat_format == "test-shout"
    seen: list[list[int]] = []

    def spy(ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
        seen.append(ids.tolist())
        return scores

    llm.create_chat_completion(
        [{"role": "user", "content": "hi"}], max_tokens=1, logits_processor=spy
    )
    prompt = llm.tokenize(b"USER: hi\nASSISTANT:", special=True)
    assert seen[0] == prompt


class Shouting:
    """A Hugging Face-style tokenizer (``encode``/``decode``) unlike the model's own: it
    reads text upper-cased, and gives it back lower-cased."""

    def __init__(self, vocab: llama_cy.LlamaModel) -> None:
        self.vocab = vocab

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        ids = self.vocab.tokenize(text.upper(), add_special=add_special_tokens, parse_special=True)
        return [int(t) for t in ids]

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return "".join(self.vocab.token_to_piece(t).decode() for t in ids).lower()


def test_a_python_tokenizer_tokenizes_prompts(tiny_model_path: Path) -> None:
    """llama-cpp-python's ``tokenizer=`` (LlamaHFTokenizer): tokenize, detokenize and
    text prompts go through it."""
    vocab = llama_cy.LlamaModel.load(tiny_model_path, vocab_only=True)
    plain = llama_cpp.Llama(str(tiny_model_path), n_ctx=256, verbose=False)
    hf = llama_cpp.Llama(
        str(tiny_model_path), n_ctx=256, verbose=False, tokenizer=LlamaHFTokenizer(Shouting(vocab))
    )
    assert hf.tokenize(b"Once upon") == plain.tokenize(b"ONCE UPON", add_bos=False)
    assert hf.tokenize(b"Once", special=True) == plain.tokenize(b"ONCE")  # with BOS
    tokens = plain.tokenize(b"ONCE UPON", add_bos=False)
    assert hf.detokenize(tokens) == plain.detokenize(tokens).lower()
    assert hf.detokenize(tokens[1:], prev_tokens=tokens[:1]) == plain.detokenize(tokens[1:]).lower()
    got = hf.create_completion("Once upon a time", max_tokens=6, temperature=0)
    want = plain.create_completion("ONCE UPON A TIME", max_tokens=6, temperature=0)
    assert got["usage"]["prompt_tokens"] == want["usage"]["prompt_tokens"]
    assert got["choices"][0]["text"] == want["choices"][0]["text"]
    assert isinstance(hf.tokenizer(), LlamaTokenizer)  # llama-cpp-python's tokenizer()
    vocab.close()


def _fixture_tool() -> Any:
    """tools/lcp_chat_fixtures.py, which wrote the fixture (its ``Recorder`` stand-in
    model is the one the handler here must ask the same things of)."""
    spec = importlib.util.spec_from_file_location(
        "lcp_chat_fixtures", ROOT / "tools" / "lcp_chat_fixtures.py"
    )
    assert spec is not None
    assert spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


def test_functionary_asks_and_answers_as_llama_cpp_python() -> None:
    """chat_format="functionary": the prompts, stops and grammars it asks the model for,
    and the answers it makes of the completions, are llama-cpp-python's own (recorded
    from its handler with the same stand-in model)."""
    data = json.loads((ROOT / "tests" / "data" / "lcp_chat_formats.json").read_text())
    handler = llama_chat_format.get_chat_completion_handler("functionary")
    recorder = _fixture_tool().Recorder
    for case in data["functionary"]:
        fake = recorder(case["replies"])
        result = handler(llama=fake, **case["request"])
        if case["request"].get("stream"):
            result = list(result)
        assert fake.calls == case["calls"]
        assert json.loads(json.dumps(result)) == case["result"]


def test_functionary_calls_a_tool_on_a_model(tiny_model_path: Path) -> None:
    llm = llama_cpp.Llama(str(tiny_model_path), n_ctx=1024, chat_format="functionary",
                          verbose=False)  # fmt: skip
    unit = {"type": "object", "properties": {"unit": {"enum": ["c", "f"]}}, "required": ["unit"]}
    tools = [{"type": "function", "function": {"name": "units", "parameters": unit}}]
    out = llm.create_chat_completion(
        messages=[{"role": "user", "content": "Which unit?"}],
        tools=tools,
        tool_choice={"type": "function", "function": {"name": "units"}},
    )
    call = out["choices"][0]["message"]["tool_calls"][0]
    assert call["function"]["name"] == "units"
    assert json.loads(call["function"]["arguments"])["unit"] in ("c", "f")  # its grammar held
    assert out["choices"][0]["finish_reason"] == "tool_calls"
    plain = llm.create_chat_completion(messages=[{"role": "user", "content": "Hi"}], max_tokens=3)
    assert plain["choices"][0]["message"]["role"] == "assistant"
    with pytest.raises(NotImplementedError, match="Hugging Face tokenizer"):
        llama_cpp.Llama(str(tiny_model_path), chat_format="functionary-v2", verbose=False)


def test_a_python_chat_format_gives_chat_logprobs(tiny_model_path: Path) -> None:
    """llama-cpp-python turns a chat format's text-completion logprobs into the chat
    shape (``content`` entries with ``top_logprobs`` lists), streamed or not."""
    llm = llama_cpp.Llama(str(tiny_model_path), n_ctx=256, chat_format="chatml", verbose=False)
    kw: dict[str, Any] = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2,
                          "logprobs": True, "top_logprobs": 2}  # fmt: skip
    out = llm.create_chat_completion(**kw)
    (first, *_) = out["choices"][0]["logprobs"]["content"]
    assert set(first) == {"token", "bytes", "logprob", "top_logprobs"}
    assert len(first["top_logprobs"]) == 2
    assert {"token", "logprob", "bytes"} == set(first["top_logprobs"][0])
    chunks = list(llm.create_chat_completion(**kw, stream=True))
    shaped = [c["choices"][0]["logprobs"] for c in chunks if c["choices"][0]["logprobs"]]
    assert shaped
    assert all("content" in lp for lp in shaped)


def test_suppress_stdout_stderr() -> None:
    """llama_cpp._utils.suppress_stdout_stderr, which programs import: disable=False
    silences file descriptors 1 and 2 for the block (C-level output included) and gives
    them back; its default, disable=True, does nothing, as in llama-cpp-python."""
    code = """
import os, sys
from llama_cpp._utils import Singleton, suppress_stdout_stderr
print("before", flush=True)
with suppress_stdout_stderr(disable=False):
    print("hidden-print")
    os.write(1, b"hidden-fd1\\n")
    os.write(2, b"hidden-fd2\\n")
with suppress_stdout_stderr():
    print("default-shows", flush=True)
print("after", flush=True)
os.write(2, b"stderr-after\\n")
class One(Singleton):
    pass
print(One() is One())
"""
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["before", "default-shows", "after", "True"]
    assert "hidden" not in result.stderr
    assert "stderr-after" in result.stderr


def test_logger_set_verbose(tiny_model_path: Path) -> None:
    """llama_cpp._logger, which programs import: set_verbose(True) shows llama.cpp's log
    (its model-loading lines) on stderr, set_verbose(False) keeps all but errors off; its
    llama_log_callback is a ctypes callback that llama_log_set takes."""
    code = """
import ctypes, sys
import llama_cpp
from llama_cpp._logger import llama_log_callback, logger, set_verbose
set_verbose(True)
sys.stderr.write("--verbose--\\n")
llama_cpp.Llama(sys.argv[1], n_ctx=64, verbose=False).close()
set_verbose(False)  # after True: the same log goes quiet again
sys.stderr.write("--quiet--\\n")
llama_cpp.Llama(sys.argv[1], n_ctx=64, verbose=False).close()
llama_cpp.llama_log_set(llama_log_callback, ctypes.c_void_p(0))
print(logger.name)
"""
    result = run_python(code, str(tiny_model_path))
    assert result.returncode == 0, result.stderr[-3000:]
    verbose, quiet = result.stderr.split("--verbose--")[1].split("--quiet--")
    assert "llama_model_loader" not in quiet
    assert "llama_model_loader" in verbose
    assert result.stdout.strip() == "llama-cpp-python"


def test_internals_model_calls_the_progress_callback(tiny_model_path: Path) -> None:
    from llama_cpp import _internals

    seen: list[float] = []

    @llama_cpp.llama_progress_callback  # type: ignore[untyped-decorator]
    def progress(fraction: float, data: Any) -> bool:
        seen.append(fraction)
        return True

    params = llama_cpp.llama_model_default_params()
    params.progress_callback = progress
    model = _internals.LlamaModel(path_model=str(tiny_model_path), params=params, verbose=False)
    model.close()
    assert seen
    assert seen[-1] == pytest.approx(1.0)

    @llama_cpp.llama_progress_callback  # type: ignore[untyped-decorator]
    def cancel(fraction: float, data: Any) -> bool:
        return False

    params.progress_callback = cancel
    with pytest.raises(llama_cy.errors.ModelLoadError):
        _internals.LlamaModel(path_model=str(tiny_model_path), params=params, verbose=False)


def test_internals_batch_of_embeddings_through_its_struct(tiny_model_path: Path) -> None:
    """``LlamaBatch(embd=n)`` filled field by field through ``batch.batch``, as a
    llama-cpp-python program does: the token embeddings decode to the tokens' logits."""
    import gguf
    from llama_cpp import _internals

    model = _internals.LlamaModel(
        path_model=str(tiny_model_path), params=llama_cpp.llama_model_default_params()
    )
    params = llama_cpp.llama_context_default_params()
    params.n_ctx = 64
    ctx = _internals.LlamaContext(model=model, params=params)
    tokens = model.tokenize(b"Hello world", True, False)
    n_embd = model.n_embd()
    [table] = [t for t in gguf.GGUFReader(tiny_model_path).tensors if t.name == "token_embd.weight"]
    rows = np.asarray(table.data, dtype=np.float32).reshape(-1, n_embd)[tokens]

    by_token = _internals.LlamaBatch(n_tokens=8, embd=0, n_seq_max=1)
    by_token.set_batch(tokens, 0, False)
    ctx.decode(by_token)
    want = np.array(ctx.get_logits_ith(len(tokens) - 1))
    ctx.kv_cache_clear()

    by_embd = _internals.LlamaBatch(n_tokens=8, embd=n_embd, n_seq_max=1)
    raw = by_embd.batch
    assert raw is not None
    raw.n_tokens = len(tokens)
    for i in range(len(tokens)):
        for j in range(n_embd):
            raw.embd[i * n_embd + j] = float(rows[i, j])
        raw.pos[i] = i
        raw.n_seq_id[i] = 1
        raw.seq_id[i][0] = 0
        raw.logits[i] = i == len(tokens) - 1
    assert by_embd.n_tokens() == len(tokens)
    ctx.decode(by_embd)
    np.testing.assert_allclose(ctx.get_logits_ith(len(tokens) - 1), want, rtol=1e-4, atol=1e-4)
    by_embd.close()
    assert by_embd.batch is None
    ctx.close()
    model.close()


def test_json_schema_to_gbnf_takes_prop_order() -> None:
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    inner = {"type": "object", "properties": {"z": {"type": "string"}, "a": {"type": "string"}}}
    schema = {
        "type": "object",
        "properties": {"b": {"type": "string"}, "c": inner, "a": {"type": "integer"}},
        "required": ["b", "c", "a"],
    }

    def rule(gbnf: str, name: str) -> str:
        return next(line for line in gbnf.splitlines() if line.startswith(f"{name} ::="))

    as_given = rule(json_schema_to_gbnf(json.dumps(schema)), "root")
    assert as_given.index("b-kv") < as_given.index("c-kv") < as_given.index("a-kv")
    ordered = json_schema_to_gbnf(json.dumps(schema), prop_order=["a", "c"])
    root = rule(ordered, "root")  # named first, in that order; the rest as given
    assert root.index("a-kv") < root.index("c-kv") < root.index("b-kv")
    nested = rule(ordered, "c")  # every object of the schema
    assert nested.index("c-a-kv") < nested.index("c-z-kv")
