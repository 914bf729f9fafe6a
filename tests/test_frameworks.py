"""Programs built on llama-cpp-python, installed from the package index and run unchanged
(but for the model path) against ``llama_cpp`` (compat/).

All of them run in ``.ci/run``. LangChain, outlines, LlamaIndex's core, instructor,
guidance, llguidance and Haystack are test dependencies. LlamaIndex's and Haystack's
llama.cpp integrations (marker ``frameworks``) require llama-cpp-python by name, so pip
would build it for them: :func:`integrations` installs them without their dependencies,
as docs/compat.md tells users to.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import llama_cpp
import pytest

#: llama.cpp integrations that require llama-cpp-python by name (pinned: run unchanged)
NO_DEPS = ("llama-index-llms-llama-cpp==0.7.0", "llama-cpp-haystack==3.0.2")


@pytest.fixture(scope="module")
def integrations(request: pytest.FixtureRequest) -> Iterator[None]:
    """:data:`NO_DEPS` from the package index, without their dependencies, into a folder
    of pytest's cache put first on ``sys.path`` (once per cache: they are kept)."""
    target = request.config.cache.mkdir("framework-integrations")
    done = target / ("-".join(NO_DEPS) + ".done")
    if not done.exists():
        pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--upgrade"]
        subprocess.run([*pip, "--target", str(target), *NO_DEPS], check=True, timeout=600)
        done.touch()
    sys.path.insert(0, str(target))
    try:
        yield
    finally:
        sys.path.remove(str(target))


@pytest.fixture(scope="module")
def gemma_file(gemma_path: Path) -> str:
    return str(gemma_path)


@pytest.fixture(scope="module")
def gemma_chat_file(gemma_chat_path: Path) -> str:
    """Gemma with its chat template (the packaged file has none)."""
    return str(gemma_chat_path)


# ---- LangChain ------------------------------------------------------------------------


def test_langchain_llamacpp(gemma_file: str) -> None:
    from langchain_community.llms import LlamaCpp

    llm = LlamaCpp(model_path=gemma_file, n_ctx=256, temperature=0, max_tokens=8, verbose=False)
    text = llm.invoke("The capital of France is")
    assert text.strip()
    assert isinstance(llm.client, llama_cpp.Llama)
    assert llm.get_num_tokens("hello world") == len(llm.client.tokenize(b"hello world"))
    chunks = list(llm.stream("The capital of France is"))
    assert "".join(chunks) == text


def test_langchain_chat_llamacpp_tool_call(gemma_chat_file: str) -> None:
    from langchain_community.chat_models import ChatLlamaCpp
    from pydantic import BaseModel, Field

    class GetWeather(BaseModel):
        """Get the current weather in a city."""

        city: str = Field(description="the city")

    chat = ChatLlamaCpp(
        model_path=gemma_chat_file, n_ctx=512, temperature=0, max_tokens=64, verbose=False
    )
    bound = chat.bind_tools(
        [GetWeather], tool_choice={"type": "function", "function": {"name": "GetWeather"}}
    )
    message = bound.invoke("What is the weather in Paris?")
    assert message.tool_calls, message
    call = message.tool_calls[0]
    assert call["name"] == "GetWeather"
    assert isinstance(call["args"]["city"], str)
    reply = chat.invoke("Say hello.")
    assert isinstance(reply.content, str)
    assert reply.content


def test_langchain_embeddings(tiny_bert_path: Path) -> None:
    from langchain_community.embeddings import LlamaCppEmbeddings

    emb = LlamaCppEmbeddings(model_path=str(tiny_bert_path), verbose=False)  # type: ignore[call-arg]
    one = emb.embed_query("hello world")
    many = emb.embed_documents(["hello world", "another text"])
    assert len(one) == 64
    assert len(many) == 2
    assert many[0] == pytest.approx(one, abs=1e-5)


# ---- outlines -------------------------------------------------------------------------


def test_outlines_json_schema(gemma_file: str) -> None:
    import outlines
    from outlines.types import JsonSchema

    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"}},
        "required": ["name", "age"],
    }
    model = outlines.from_llamacpp(
        llama_cpp.Llama(gemma_file, n_ctx=512, verbose=False), chat_mode=False
    )
    out = model("A person as JSON: ", JsonSchema(schema), max_tokens=60, temperature=0)
    value = json.loads(out)
    assert set(value) == {"name", "age"}
    assert isinstance(value["age"], int)


# ---- the others ---------------------------------------------------------------------------


@pytest.mark.frameworks
@pytest.mark.usefixtures("integrations")
def test_llama_index_llamacpp(gemma_file: str) -> None:
    from llama_index.llms.llama_cpp import LlamaCPP

    llm = LlamaCPP(
        model_path=gemma_file, temperature=0, max_new_tokens=8, context_window=256,
        model_kwargs={"n_gpu_layers": 0}, verbose=False,
    )  # fmt: skip
    assert llm.complete("The capital of France is").text.strip()
    assert llm._model.context_params.n_ctx >= 256


def test_instructor_json_schema(gemma_chat_file: str) -> None:
    import instructor
    from pydantic import BaseModel

    class User(BaseModel):
        name: str
        age: int

    llm = llama_cpp.Llama(gemma_chat_file, n_ctx=512, verbose=False)
    create = instructor.patch(
        create=llm.create_chat_completion_openai_v1, mode=instructor.Mode.JSON_SCHEMA
    )
    user: Any = create(
        messages=[{"role": "user", "content": "Extract: Jason is 25 years old."}],
        response_model=User,
        max_tokens=200,
        temperature=0,
    )
    assert isinstance(user, User)
    assert user.name == "Jason"


def test_guidance_gen_and_select(gemma_file: str) -> None:
    from guidance import gen, models, select

    lm = models.LlamaCpp(gemma_file, n_ctx=512, echo=False)
    lm += "The capital of France is " + select(["Paris", "London"], name="city")
    assert lm["city"] == "Paris"
    lm += ". In one word, it is " + gen("word", max_tokens=4)
    assert isinstance(lm["word"], str)


def test_llguidance_tokenizer(gemma_file: str) -> None:
    import llguidance.llamacpp

    llm = llama_cpp.Llama(gemma_file, n_ctx=64, verbose=False)
    tok = llguidance.llamacpp.lltokenizer_from_vocab(llama_cpp.llama_model_get_vocab(llm.model))
    assert tok.vocab_size == llm.n_vocab()
    ids = tok.tokenize_str("hello world")
    assert ids == llm.tokenize(b"hello world", add_bos=False)


@pytest.mark.frameworks
@pytest.mark.usefixtures("integrations")
def test_haystack_chat_generator(gemma_chat_file: str) -> None:
    from haystack.dataclasses import ChatMessage
    from haystack_integrations.components.generators.llama_cpp import LlamaCppChatGenerator

    gen = LlamaCppChatGenerator(
        model=gemma_chat_file, n_ctx=512, generation_kwargs={"max_tokens": 16, "temperature": 0}
    )
    gen.warm_up()
    out = gen.run([ChatMessage.from_user("Say hello.")])
    assert out["replies"][0].text
