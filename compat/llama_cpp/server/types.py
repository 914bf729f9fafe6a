"""llama-cpp-python's ``llama_cpp.server.types``: its server's request bodies as pydantic
models (its names, defaults and bounds), and its ``/v1/models`` and ``/extras`` shapes.

llama-cy's server reads the same fields itself (llama-server's reading, with
llama-cpp-python's request defaults under ``python -m llama_cpp.server``); these are for
programs that build or check request bodies with them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from .. import llama_types as t

__all__ = [
    "ChatCompletionRequestMessage",
    "CreateChatCompletionRequest",
    "CreateCompletionRequest",
    "CreateEmbeddingRequest",
    "DetokenizeInputRequest",
    "DetokenizeInputResponse",
    "ModelData",
    "ModelList",
    "TokenizeInputCountResponse",
    "TokenizeInputRequest",
    "TokenizeInputResponse",
]


class _Sampling(BaseModel):
    """The sampling fields the completion and chat requests share."""

    model: str | None = None
    min_tokens: int = Field(default=0, ge=0)
    temperature: float = 0.8
    top_p: float = Field(default=0.95, ge=0.0, le=1.0)
    min_p: float = Field(default=0.05, ge=0.0, le=1.0)
    stop: str | list[str] | None = None
    stream: bool = False
    presence_penalty: float | None = Field(default=0.0, ge=-2.0, le=2.0)
    frequency_penalty: float | None = Field(default=0.0, ge=-2.0, le=2.0)
    logit_bias: dict[str, float] | None = None
    seed: int | None = None
    n: int | None = 1  # one choice there
    user: str | None = None
    top_k: int = Field(default=40, ge=0)
    repeat_penalty: float = Field(default=1.1, ge=0.0)
    logit_bias_type: Literal["input_ids", "tokens"] | None = None
    mirostat_mode: int = Field(default=0, ge=0, le=2)
    mirostat_tau: float = Field(default=5.0, ge=0.0, le=10.0)
    mirostat_eta: float = Field(default=0.1, ge=0.001, le=1.0)
    grammar: str | None = None


class CreateCompletionRequest(_Sampling):
    prompt: str | list[str] = ""
    suffix: str | None = None
    max_tokens: int | None = Field(default=16, ge=0)
    echo: bool = False
    logprobs: int | None = Field(default=None, ge=0)
    best_of: int | None = 1


class CreateEmbeddingRequest(BaseModel):
    model: str | None = None
    input: str | list[str]
    user: str | None = None


class ChatCompletionRequestMessage(BaseModel):
    role: Literal["system", "user", "assistant", "function"] = "user"
    content: str | None = ""


class CreateChatCompletionRequest(_Sampling):
    messages: list[t.ChatCompletionRequestMessage] = Field(default_factory=list)
    functions: list[t.ChatCompletionFunction] | None = None
    function_call: t.ChatCompletionRequestFunctionCall | None = None
    tools: list[t.ChatCompletionTool] | None = None
    tool_choice: t.ChatCompletionToolChoiceOption | None = None
    max_tokens: int | None = None
    logprobs: bool | None = False
    top_logprobs: int | None = Field(default=None, ge=0)
    response_format: t.ChatCompletionRequestResponseFormat | None = None


class ModelData(TypedDict):
    id: str
    object: Literal["model"]
    owned_by: str
    permissions: list[str]


class ModelList(TypedDict):
    object: Literal["list"]
    data: list[ModelData]


class TokenizeInputRequest(BaseModel):
    model: str | None = None
    input: str


class TokenizeInputResponse(BaseModel):
    tokens: list[int]


class TokenizeInputCountResponse(BaseModel):
    count: int


class DetokenizeInputRequest(BaseModel):
    model: str | None = None
    tokens: list[int]


class DetokenizeInputResponse(BaseModel):
    text: str
