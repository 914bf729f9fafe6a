"""A program on llama-cpp-python's token-level API, as its README and docs show it
(run unchanged by tests/test_llama_cpp_token_api.py, which reads what it prints)."""

import sys

import llama_cpp
import numpy as np
from llama_cpp import Llama, LogitsProcessorList, StoppingCriteriaList

llm = Llama(model_path=sys.argv[1], n_ctx=256, logits_all=True, verbose=False)
tokens = llm.tokenize(b"Q: Name the planets in the solar system? A: ")
llm.eval(tokens)
print("n_tokens", llm.n_tokens, len(tokens))
print("argmax", int(np.argmax(llm.scores[llm.n_tokens - 1])))
state = llm.save_state()
token = llm.sample(temp=0.0)
print("sample", token)
llm.eval([token])
print("after", llm.n_tokens, int(np.argmax(llm.scores[llm.n_tokens - 1])))
llm.load_state(state)
print("restored", llm.n_tokens, int(np.argmax(llm.scores[llm.n_tokens - 1])), llm.sample(temp=0.0))

forced = 1234


def force(input_ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
    scores[:] = -np.inf
    scores[forced] = 0.0
    return scores


out = llm.create_completion("Hello", max_tokens=3, logits_processor=LogitsProcessorList([force]))
text = out["choices"][0]["text"]
expected = llm.detokenize([forced] * 3, prev_tokens=llm.tokenize(b"Hello")).decode()
print("forced", out["usage"]["completion_tokens"], text == expected)

n_prompt = len(llm.tokenize(b"Hello"))


def two_more(input_ids: np.ndarray, logits: np.ndarray) -> bool:
    return len(input_ids) >= n_prompt + 2


out = llm.create_completion(
    "Hello", max_tokens=20, stopping_criteria=StoppingCriteriaList([two_more])
)
print("stopped", out["usage"]["completion_tokens"], out["choices"][0]["finish_reason"])

vocab = llama_cpp.llama_model_get_vocab(llm.model)
print(
    "ctypes", llama_cpp.llama_vocab_n_tokens(vocab), llm.n_vocab(), llama_cpp.llama_n_ctx(llm.ctx)
)

out = llm.create_completion("Hello", max_tokens=2, logprobs=3, temperature=0)
lp = out["choices"][0]["logprobs"]
print(
    "logprobs",
    len(lp["tokens"]),
    [len(t) for t in lp["top_logprobs"]],
    all(v <= 0 for v in lp["token_logprobs"]),
)
