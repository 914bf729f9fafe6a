"""Misuse that used to kill the process: each case runs in a child interpreter.

Every case asserts the specific exception (or the defined outcome, for a close from
another thread) and then that the same process still decodes and samples normally.
"""

from __future__ import annotations

import os
from pathlib import Path

import gguf
import numpy as np
import pytest
from child import run_python
from tiny_model import scalar_offset

PRELUDE = '''
import os, sys, threading, time
import numpy as np
import llama_cy as lc
from llama_cy.errors import *

model = lc.LlamaModel.load(sys.argv[1])


def make_llama(path=None, **kw):
    """The Llama under test: llama_cy's, or llama-cpp-python's name for it (compat/)."""
    if os.environ["HAZARD_LLAMA"] == "llama_cpp":
        import llama_cpp
        return llama_cpp.Llama(path or sys.argv[1], verbose=False, **kw)
    return lc.Llama(path, **kw) if path else lc.Llama.from_model(model, **kw)


def expect(exc, fn, *args, match=None, **kwargs):
    """Call fn; it must raise exc (whose message contains match)."""
    try:
        fn(*args, **kwargs)
    except exc as e:
        assert match is None or match in str(e), f"{type(e).__name__}: {e}"
        return e
    raise AssertionError(f"did not raise {exc.__name__}")


def decoded(n_batch=32, **kw):
    """A context with the logits of "hello world" decoded."""
    ctx = lc.LlamaContext(model, n_ctx=128, n_batch=n_batch, n_threads=1, **kw)
    batch = lc.LlamaBatch(n_batch)
    batch.add_sequence(model.tokenize("hello world"), 0, 0)
    ctx.decode(batch)
    return ctx


def allowed(grammar_text):
    g = lc.LlamaSampler.grammar(model, grammar_text)
    return [t for t in range(model.n_vocab) if g.allows(t)]


def still_serves():
    ctx = decoded()
    token = lc.LlamaSampler.chain([lc.LlamaSampler.greedy()]).sample(ctx, -1)
    assert token == int(np.argmax(ctx.logits(-1)))
    print("STILL-SERVES")
'''


def hazard(code: str, model: Path, *args: str, llama: str = "llama_cy") -> str:
    """Run ``code`` after the prelude, then the normal decode; the child's stdout.
    ``llama`` picks the class ``make_llama`` makes: ``llama_cy`` or ``llama_cpp``."""
    env = {**os.environ, "HAZARD_LLAMA": llama}
    proc = run_python(PRELUDE + code + "\nstill_serves()\n", str(model), *args, env=env)
    tail = proc.stderr[-3000:]
    assert proc.returncode == 0, f"the child died with {proc.returncode}:\n{tail}"
    assert "STILL-SERVES" in proc.stdout, tail
    return proc.stdout


#: The hazards a ``Llama`` can meet run through both classes.
BOTH = pytest.mark.parametrize("llama", ["llama_cy", "llama_cpp"])


# ---- decode --------------------------------------------------------------------------


def test_batch_larger_than_n_batch(tiny_model_path: Path) -> None:
    hazard(
        """
ctx = lc.LlamaContext(model, n_ctx=128, n_batch=16, n_threads=1)
batch = lc.LlamaBatch(64)
batch.add_sequence(list(range(10, 40)), 0, 0)
expect(InvalidBatchError, ctx.decode, batch, match="n_batch=16")
expect(EncodeError, ctx.encode, batch, match="no encoder")
""",
        tiny_model_path,
    )


def test_raw_batch_struct_counts_are_checked(tiny_model_path: Path) -> None:
    """Counts written through the struct's address (llama-cpp-python's ``batch.batch``)
    that would make llama.cpp read past the batch's arrays."""
    hazard(
        """
import ctypes
class Head(ctypes.Structure):  # llama_batch's first fields
    _fields_ = [("n_tokens", ctypes.c_int32), ("token", ctypes.c_void_p),
                ("embd", ctypes.c_void_p), ("pos", ctypes.c_void_p),
                ("n_seq_id", ctypes.POINTER(ctypes.c_int32))]
ctx = lc.LlamaContext(model, n_ctx=128, n_batch=64, n_threads=1)
batch = lc.LlamaBatch(8)
batch.add_sequence([10, 11, 12], 0, 0)
raw = Head.from_address(batch.address)
raw.n_tokens = 9
expect(InvalidBatchError, ctx.decode, batch, match="capacity is 8")
raw.n_tokens = -5
expect(InvalidBatchError, ctx.decode, batch, match="capacity is 8")
raw.n_tokens = 3
raw.n_seq_id[1] = 0
expect(InvalidBatchError, ctx.decode, batch, match="token 1 belongs to 0 sequences")
raw.n_seq_id[1] = 2
expect(InvalidBatchError, ctx.decode, batch, match="n_seq_max=1")
raw.n_seq_id[1] = 1
ctx.decode(batch)
batch.close()
expect(ClosedError, lambda: batch.address)
""",
        tiny_model_path,
    )


def test_shift_and_divide_take_one_sequence(tiny_model_path: Path) -> None:
    """seq_add/seq_div on -1 (llama.cpp's "all" in seq_rm only): its KV cache asserts."""
    hazard(
        """
ctx = decoded()
expect(ValueError, ctx.seq_add, -1, 0, -1, 1, match="out of range")
expect(ValueError, ctx.seq_div, -1, 0, -1, 2, match="out of range")
ctx.seq_add(0, 0, -1, 0)
ctx.seq_div(0, 0, -1, 1)
""",
        tiny_model_path,
    )


def test_a_descriptor_is_not_a_path(tiny_model_path: Path) -> None:
    """open() takes an int as a file descriptor and closes it: model.save(1) and
    LlamaGrammar.from_file(1) closed stdout before they failed (still_serves prints)."""
    hazard(
        """
expect(TypeError, model.save, 1)
expect(TypeError, lc.LlamaGrammar.from_file, 1)
""",
        tiny_model_path,
    )


def test_non_causal_batch_larger_than_n_ubatch(tiny_model_path: Path) -> None:
    hazard(
        """
ctx = lc.LlamaContext(model, n_ctx=128, n_batch=64, n_ubatch=8, n_threads=1)
ctx.set_causal_attn(False)
batch = lc.LlamaBatch(64)
batch.add_sequence(list(range(10, 40)), 0, 0)
expect(InvalidBatchError, ctx.decode, batch, match="n_ubatch=8")
batch.clear()
batch.add_sequence(list(range(10, 18)), 0, 0)
ctx.decode(batch)  # one micro-batch: fine
""",
        tiny_model_path,
    )


# ---- grammars ----------------------------------------------------------------------


GRAMMAR_SETUP = """
from llama_cy.sampling import SamplingParams, build_sampler
G = 'root ::= "x"'
only = allowed(G)
assert only, "the grammar allows some token"
ctx = decoded()
"""


@pytest.mark.parametrize("bias", ["float('-inf')", "float('nan')"])
def test_bias_that_empties_the_grammar(tiny_model_path: Path, bias: str) -> None:
    hazard(
        GRAMMAR_SETUP
        + f"""
for temperature in (0.0, 0.8):
    params = SamplingParams(temperature=temperature, grammar=G,
                            logit_bias={{t: {bias} for t in only}})
    chain, grammar = build_sampler(model, params, n_ctx=128)
    expect(GrammarError, chain.sample, ctx, -1, grammar=grammar)
""",
        tiny_model_path,
    )


def test_negative_repeat_penalty_under_a_grammar(tiny_model_path: Path) -> None:
    hazard(
        GRAMMAR_SETUP
        + """
# The settings table refuses it; the building blocks take it, and must not crash.
expect(ValueError, SamplingParams, temperature=0, repeat_penalty=-1.0)
from llama_cy import LlamaSampler as S
chain = S.chain([S.penalties(model.n_vocab, 64, -1.0, 0.0, 0.0), S.greedy()])
grammar = S.grammar(model, G, "root")
for t in only:
    chain.accept(t)
try:
    token = chain.sample(ctx, -1, grammar=grammar)
    assert token in only, token
except GrammarError:
    pass
""",
        tiny_model_path,
    )


def test_top_k_before_the_grammar_in_one_chain(tiny_model_path: Path) -> None:
    hazard(
        GRAMMAR_SETUP
        + """
assert int(np.argmax(ctx.logits(-1))) not in only
chain = lc.LlamaSampler.chain(
    [lc.LlamaSampler.top_k(1), lc.LlamaSampler.grammar(model, G), lc.LlamaSampler.greedy()])
expect(GrammarError, chain.sample, ctx, -1)
""",
        tiny_model_path,
    )


def test_python_sampler_picks_what_the_grammar_forbids(tiny_model_path: Path) -> None:
    hazard(
        GRAMMAR_SETUP
        + """
forbidden = next(t for t in range(model.n_vocab) if t not in only)

class Stubborn:
    def apply(self, candidates):
        return int(np.nonzero(candidates["id"] == forbidden)[0][0])

chain = lc.LlamaSampler.chain([Stubborn()])
expect(GrammarError, chain.sample, ctx, -1, grammar=lc.LlamaSampler.grammar(model, G))
""",
        tiny_model_path,
    )


@BOTH
def test_llama_with_a_bias_against_its_grammar(tiny_model_path: Path, llama: str) -> None:
    hazard(
        GRAMMAR_SETUP
        + """
llm = make_llama(n_ctx=128, n_threads=1)
bias = {t: float("-inf") for t in only}
expect(GrammarError, llm.create_completion, "hi", max_tokens=4, grammar=G, logit_bias=bias,
       temperature=0)
out = llm.create_completion("hi", max_tokens=2, grammar=G, temperature=0)
assert out["choices"][0]["text"] == "x"
llm.close()
""",
        tiny_model_path,
        llama=llama,
    )


@BOTH
def test_deep_grammar(tiny_model_path: Path, llama: str) -> None:
    hazard(
        """
deep = 'root ::= ' + '(' * 20000 + '"a"' + ')' * 20000
expect(GrammarError, lc.LlamaSampler.grammar, model, deep, match="deeper")
expect(GrammarError, lc.LlamaSampler.grammar_lazy_patterns, model, deep, "root", ["a"])
llm = make_llama(n_ctx=128, n_threads=1)
expect(GrammarError, llm.create_completion, "hi", max_tokens=2, grammar=deep)
# Parentheses in strings, classes and comments do not count.
lc.LlamaSampler.grammar(model, 'root ::= "((((" [(] # ((((((\\n')
""",
        tiny_model_path,
        llama=llama,
    )


def test_token_ids_outside_the_vocabulary(tiny_model_path: Path) -> None:
    hazard(
        """
g = lc.LlamaSampler.grammar(model, 'root ::= "x"')
expect(InvalidTokenError, g.allows, -1)
expect(InvalidTokenError, g.accept, model.n_vocab + 5)
chain = lc.LlamaSampler.chain([lc.LlamaSampler.grammar(model, 'root ::= "x"')])
expect(InvalidTokenError, chain.accept, model.n_vocab)
cand = np.zeros(3, dtype=lc.CANDIDATE_DTYPE)
cand["id"] = [1, 2, 10**8]
expect(InvalidTokenError, g.apply, cand)
expect(InvalidTokenError, lc.LlamaSampler.infill(model).apply, cand)
cand["id"] = [1, -2, 3]
expect(InvalidTokenError, lc.LlamaSampler.top_k(2).apply, cand)

class Scribbler:  # writes an id no sampler after it may see
    def apply(self, candidates):
        candidates["id"][0] = 10**8

chain = lc.LlamaSampler.chain(
    [Scribbler(), lc.LlamaSampler.grammar(model, 'root ::= "x"'), lc.LlamaSampler.greedy()])
expect(InvalidTokenError, chain.sample, decoded(), -1)
""",
        tiny_model_path,
    )


# ---- sampler settings ----------------------------------------------------------------


@BOTH
def test_huge_penalty_windows(tiny_model_path: Path, llama: str) -> None:
    hazard(
        """
expect(ValueError, lc.LlamaSampler.penalties, model.n_vocab, 2**31 - 1, 1.1)
expect(ValueError, lc.LlamaSampler.penalties, model.n_vocab, -1, 1.1)
expect(ValueError, lc.LlamaSampler.dry, model, 1.0, 1.75, 2, 2**31 - 1)
# Llama reads the windows as llama-server does: -1 and anything longer is the context.
llm = make_llama(n_ctx=128, n_threads=1)
for n in (-1, 2**31 - 1):
    out = llm.create_completion("hi", max_tokens=3, repeat_penalty=1.1, penalty_last_n=n,
                                dry_multiplier=0.5, dry_penalty_last_n=n, temperature=0)
    assert out["usage"]["completion_tokens"] >= 1
expect(ValueError, llm.create_completion, "hi", max_tokens=2, repeat_penalty=1.1,
       penalty_last_n=-5)
llm.close()
""",
        tiny_model_path,
        llama=llama,
    )


@pytest.mark.parametrize(
    "make",
    [
        "lc.LlamaSampler.top_p(0.9)",
        "lc.LlamaSampler.typical(0.9)",
        "lc.LlamaSampler.mirostat(model.n_vocab)",
        "lc.LlamaSampler.infill(model)",
        "lc.LlamaSampler.adaptive_p(0.5, 0.9)",
    ],
)
def test_empty_candidates(tiny_model_path: Path, make: str) -> None:
    hazard(
        f"""
sampler = {make}
expect(ValueError, sampler.apply, np.zeros(0, dtype=lc.CANDIDATE_DTYPE), match="empty")
cand = np.zeros(4, dtype=lc.CANDIDATE_DTYPE)
cand["id"] = [1, 2, 3, 4]
cand["logit"] = [1, 2, 3, 4]
sampler.apply(cand)
""",
        tiny_model_path,
    )


def test_thread_counts(tiny_model_path: Path) -> None:
    hazard(
        """
expect(ValueError, lc.LlamaContext, model, n_threads=0, match="n_threads")
expect(ValueError, lc.LlamaContext, model, n_threads=1, n_threads_batch=-3)
expect(ValueError, lc.LlamaContext, model, n_threads=100000)
ctx = decoded()
expect(ValueError, ctx.set_n_threads, 2**31 - 1)
expect(ValueError, ctx.set_n_threads, 1, 0)
ctx.set_n_threads(2, 2)
""",
        tiny_model_path,
    )


def test_kv_cache_types(tiny_model_path: Path) -> None:
    hazard(
        """
for bad in ("i32", "q4_K", "f64", "nonsense"):
    expect(ValueError, lc.LlamaContext, model, n_threads=1, type_k=bad, match="type_k")
    expect(ValueError, lc.LlamaContext, model, n_threads=1, type_v=bad, match="type_v")
ctx = decoded(type_k="f16", type_v="bf16")
""",
        tiny_model_path,
    )


def test_quantized_k_cache_of_split_heads_on_a_device(
    tiny_model_path: Path, rpc_server: str
) -> None:
    """The tiny model's K heads hold 16 values, half a q4_0 block. Without flash attention
    the CPU computes that and ggml-cuda aborts the process at the first decode (seen on
    an H200): refused wherever the layers (and so the cache) live on a device, an RPC
    server standing in for a GPU. With flash attention llama.cpp refuses it everywhere."""
    hazard(
        """
remote = lc.LlamaModel.load(sys.argv[1], n_gpu_layers=-1, rpc_servers=sys.argv[2])
for kind in ("q4_0", "q8_0", "iq4_nl"):
    expect(ContextCreationError, lc.LlamaContext, remote, n_ctx=128, n_threads=1,
           type_k=kind, flash_attn=False, match=f"not whole {kind} blocks of 32")
    expect(ContextCreationError, lc.LlamaContext, model, n_ctx=128, n_threads=1,
           type_k=kind, match="flash attention (on or auto) cannot read")
lc.LlamaContext(remote, n_ctx=128, n_threads=1, type_k="q4_0", flash_attn=False,
                offload_kqv=False).close()
lc.LlamaContext(remote, n_ctx=128, n_threads=1, type_k="bf16").close()
remote.close()
if any(b.startswith("CUDA") for b in model.tensor_buffers.values()):  # an offloaded run
    expect(ContextCreationError, lc.LlamaContext, model, n_ctx=128, type_k="q4_0",
           flash_attn=False, match="cannot compute")
else:
    decoded(type_k="q4_0", flash_attn=False)  # the host's cache: computed
""",
        tiny_model_path,
        rpc_server,
    )


def test_huge_batch_is_a_memory_error(tiny_model_path: Path) -> None:
    hazard(
        """
import os, resource
if not os.environ.get("LLAMA_CY_SANITIZED"):
    # 6 GiB beyond what the process has mapped: a GPU driver reserves tens of GiB of
    # address space at start, which a fixed limit would already be under.
    with open("/proc/self/status") as f:
        vm = next(int(line.split()[1]) << 10 for line in f if line.startswith("VmSize:"))
    resource.setrlimit(resource.RLIMIT_AS, (vm + (6 << 30), vm + (6 << 30)))
    expect(MemoryError, lc.LlamaBatch, 2**31 - 1)
expect(MemoryError, lc.LlamaBatch, 2**31 - 1, 2**31 - 1)
expect(MemoryError, lc.LlamaBatch, 2**31 - 1, embd=2**31 - 1)
""",
        tiny_model_path,
    )


# ---- models ------------------------------------------------------------------------


@BOTH
def test_hostile_kv_overrides(tiny_model_path: Path, llama: str) -> None:
    hazard(
        """
for kv in ({"llama.block_count": 0}, {"llama.block_count": 100000},
           {"llama.attention.layer_norm_rms_epsilon": -1.0},
           {"llama.attention.layer_norm_rms_epsilon": float("nan")},
           {"llama.expert_count": 5000}):
    expect(ModelLoadError, lc.LlamaModel.load, sys.argv[1], kv_overrides=kv)
    expect(ModelLoadError, make_llama, sys.argv[1], kv_overrides=kv)
# The loader's own assert, caught by the guard, is named in the error.
expect(ModelLoadError, lc.LlamaModel.load, sys.argv[1], kv_overrides={"llama.block_count": 0},
       match="GGML_ASSERT(hparams.n_layer_all > 0")
""",
        tiny_model_path,
        llama=llama,
    )


def _patched(src: Path, dst: Path, key: str, value: float) -> Path:
    """A copy of ``src`` with the scalar ``key`` set to ``value`` (same GGUF type)."""
    offset, dtype = scalar_offset(gguf.GGUFReader(src), key)
    data = bytearray(src.read_bytes())
    raw = np.array([value], dtype=dtype).tobytes()
    data[offset : offset + len(raw)] = raw
    dst.write_bytes(data)
    return dst


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("llama.block_count", 0),
        ("llama.block_count", 2**32 - 1),
        ("llama.attention.layer_norm_rms_epsilon", -1.0),
    ],
)
def test_model_file_with_hostile_hyperparameters(
    tiny_model_path: Path, tmp_path: Path, key: str, value: float
) -> None:
    bad = _patched(tiny_model_path, tmp_path / "bad.gguf", key, value)
    hazard(
        """
expect(ModelLoadError, lc.LlamaModel.load, sys.argv[2])
""",
        tiny_model_path,
        str(bad),
    )


# ---- lifetimes across threads ----------------------------------------------------------


def test_python_sampler_closing_its_own_chain(tiny_model_path: Path) -> None:
    hazard(
        """
chain = None

class Closer:
    def apply(self, candidates):
        chain.close()  # the memory stays until this sample() returns
        return 0

chain = lc.LlamaSampler.chain([Closer()])
ctx = decoded()
try:
    chain.sample(ctx, -1)
except ClosedError:
    pass
assert chain.closed
expect(ClosedError, chain.sample, ctx, -1)

class Reentrant:  # reaching back into the context it is sampled from
    def apply(self, candidates):
        ctx.clear()

expect(BusyError, lc.LlamaSampler.chain([Reentrant()]).sample, ctx, -1)
""",
        tiny_model_path,
    )


def test_close_handles_in_use_by_another_thread(tiny_model_path: Path) -> None:
    hazard(
        """
# A context, its batch and a sampler closed while another thread decodes and samples:
# the call in flight finishes on live memory, the next one gets ClosedError.
for victim in ("ctx", "batch", "sampler"):
    ctx = lc.LlamaContext(model, n_ctx=512, n_batch=512, n_threads=1)
    batch = lc.LlamaBatch(512)
    batch.add_sequence([(7 * i) % 1000 + 10 for i in range(500)], 0, 0)
    sampler = lc.LlamaSampler.chain([lc.LlamaSampler.top_k(40), lc.LlamaSampler.dist(1)])
    outcome = []

    def work():
        try:
            for _ in range(50):
                ctx.clear()
                ctx.decode(batch)
                sampler.sample(ctx, -1)
            outcome.append("finished")
        except ClosedError:
            outcome.append("closed")

    t = threading.Thread(target=work)
    t.start()
    time.sleep(0.05)
    {"ctx": ctx, "batch": batch, "sampler": sampler}[victim].close()
    t.join()
    assert outcome == ["closed"], (victim, outcome)
""",
        tiny_model_path,
    )


@BOTH
def test_close_llama_and_model_in_use_by_other_threads(gemma_path: Path, llama: str) -> None:
    hazard(
        """
llm = make_llama(sys.argv[1], n_ctx=512, n_threads=2)
outcomes = []

def work():
    try:
        for _ in range(5):
            out = llm.create_completion("Once upon a time", max_tokens=16, temperature=0)
            assert out["choices"][0]["text"]
        outcomes.append("finished")
    except ClosedError:
        outcomes.append("closed")

threads = [threading.Thread(target=work) for _ in range(3)]
[t.start() for t in threads]
time.sleep(0.5)
llm.close()
[t.join() for t in threads]
assert outcomes == ["closed"] * 3, outcomes

vocab = lc.LlamaModel.load(sys.argv[1], vocab_only=True)
text = "hello world " * 200000
seen = []

def tokenize():
    try:
        for _ in range(20):
            seen.append(len(vocab.tokenize(text)))
    except ClosedError:
        seen.append("closed")

t = threading.Thread(target=tokenize)
t.start()
time.sleep(0.2)
vocab.close()
t.join()
assert seen[-1] == "closed" and all(n == seen[0] for n in seen[:-1]), seen
""",
        gemma_path,
        llama=llama,
    )
