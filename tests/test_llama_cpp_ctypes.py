"""``llama_cpp.llama_cpp``, llama-cpp-python's ctypes layer, checked against llama.h by the
C compiler, and used on the same model and context as ``llama_cpp.Llama``.

The generator (tools/gen_llama_ctypes.py) parses the header with pycparser; these checks
do not trust it: the compiler checks each prototype it wrote down, and a C program built
against the real header prints the sizes, kinds, offsets and values that the ctypes
declarations must have.
"""

from __future__ import annotations

import ctypes
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import llama_cpp
import numpy as np
import pytest
from llama_cpp import llama_cpp as capi

ROOT = Path(__file__).resolve().parent.parent
MODULE = ROOT / "compat" / "llama_cpp" / "llama_cpp.py"

# GCC's __builtin_classify_type in C: integer (_Bool too), enum, pointer, real, record, union.
INTEGER, ENUM, POINTER, REAL, RECORD, UNION = 1, 3, 5, 8, 12, 13


def declared() -> list[tuple[str, str]]:
    """(name, C prototype) of every function the module declares, from its comments."""
    pairs = re.findall(r"^# (.+)\n(\w+) = _function\(", MODULE.read_text(), re.M)
    return [(name, proto) for proto, name in pairs]


def ctypes_kind(t: Any) -> tuple[int, int]:
    """(size, GCC type class) of a ctypes type as the C ABI sees it."""
    if issubclass(t, ctypes.c_void_p | ctypes.c_char_p | ctypes._Pointer | ctypes._CFuncPtr):  # type: ignore[attr-defined]
        return ctypes.sizeof(t), POINTER
    if issubclass(t, ctypes.Union):
        return ctypes.sizeof(t), UNION
    if issubclass(t, ctypes.Structure):
        return ctypes.sizeof(t), RECORD
    size = ctypes.sizeof(t)
    return size, REAL if t in (ctypes.c_float, ctypes.c_double) else INTEGER


def split_params(proto: str) -> tuple[str, list[str]]:
    """The return type and parameter types (names dropped) of a prototype."""
    head, _, rest = proto.partition("(")
    ret = re.sub(r"\b\w+\s*$", "", head).strip()
    body = rest.rsplit(")", 1)[0]
    params, depth, cur = [], 0, ""
    for ch in body:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            params.append(cur)
            cur = ""
        else:
            cur += ch
    params.append(cur)
    types = []
    for p in (p.strip() for p in params):
        if p in ("", "void"):
            continue
        p = re.sub(r"\(\s*\*\s*\w+\s*\)", "(*)", p)  # a function pointer's name
        types.append(re.sub(r"(?<=[\s*])\w+$", "", p).strip() if not p.endswith(")") else p)
    return ret, types


def compile_and_run(tmp_path: Path, body: str, llama_cpp_source: Path) -> str:
    src = tmp_path / "check.c"
    src.write_text('#include <stdio.h>\n#include <stddef.h>\n#include "llama.h"\n' + body)
    exe = tmp_path / "check"
    inc = [f"-I{llama_cpp_source / 'include'}", f"-I{llama_cpp_source / 'ggml' / 'include'}"]
    build = subprocess.run(
        ["cc", "-std=gnu11", *inc, str(src), "-o", str(exe)], capture_output=True, text=True
    )
    assert build.returncode == 0, build.stderr[-4000:]
    return subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout


def test_the_module_is_what_the_generator_writes(llama_cpp_source: Path) -> None:
    pytest.importorskip("pycparser")
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gen_llama_ctypes.py"), "--check"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr


def test_every_llama_api_function_is_declared(llama_cpp_source: Path) -> None:
    header = (llama_cpp_source / "include" / "llama.h").read_text()
    header = re.sub(r"//[^\n]*|/\*.*?\*/", "", header, flags=re.S)
    header = re.sub(r"^\s*#.*?(?<!\\)$", "", header, flags=re.M | re.S)  # the macros
    header = header.replace("DEPRECATED(", "")  # LLAMA_API DEPRECATED(type name(...), hint)
    in_header = set(re.findall(r"LLAMA_API\s[^;{]*?\b(\w+)\s*\(", header))
    in_module = {name for name, _ in declared()}
    assert in_header - in_module == set()
    assert in_module - in_header == set()
    assert len(in_module) > 200


def test_prototypes_compile_against_the_header(tmp_path: Path, llama_cpp_source: Path) -> None:
    """Redeclaring a function with another prototype is a C error: the compiler checks
    each prototype the module was generated from."""
    protos = "".join(f"{proto};\n" for _, proto in declared())
    compile_and_run(tmp_path, protos + "int main(void) { return 0; }\n", llama_cpp_source)


def test_argument_and_return_types_match_the_c_abi(tmp_path: Path, llama_cpp_source: Path) -> None:
    lines, expected = [], []
    for name, proto in declared():
        fn = getattr(capi, name)
        ret, params = split_params(proto)
        assert len(params) == len(fn.argtypes), (name, params, fn.argtypes)
        for i, (ctype, argtype) in enumerate(zip(params, fn.argtypes, strict=True)):
            lines.append(
                f'printf("{name} {i} %zu %d\\n", sizeof({ctype}), '
                f"__builtin_classify_type(*({ctype} *)0));"
            )
            expected.append(f"{name} {i} {' '.join(map(str, ctypes_kind(argtype)))}")
        if ret != "void":
            lines.append(
                f'printf("{name} ret %zu %d\\n", sizeof({ret}), '
                f"__builtin_classify_type(*({ret} *)0));"
            )
            expected.append(f"{name} ret {' '.join(map(str, ctypes_kind(fn.restype)))}")
        else:
            assert fn.restype is None, name
    out = compile_and_run(
        tmp_path, "int main(void) {\n" + "\n".join(lines) + "\nreturn 0; }\n", llama_cpp_source
    )

    def norm(line: str) -> str:  # an enum is an integer to ctypes
        name, i, size, kind = line.split()
        return f"{name} {i} {size} {INTEGER if int(kind) == ENUM else kind}"

    got = [norm(x) for x in out.splitlines()]
    mismatched = [(e, g) for e, g in zip(expected, got, strict=True) if e != g]
    assert not mismatched, mismatched[:20]


def test_struct_layouts_match_the_header(tmp_path: Path, llama_cpp_source: Path) -> None:
    lines, expected = [], []
    for name in dir(capi):
        t = getattr(capi, name)
        if (
            not (isinstance(t, type) and issubclass(t, ctypes.Structure))
            or t.__module__ != capi.__name__
        ):
            continue
        lines.append(f'printf("{name} size %zu\\n", sizeof(struct {name}));')
        expected.append(f"{name} size {ctypes.sizeof(t)}")
        anonymous = getattr(t, "_anonymous_", ())
        fields: Any = t._fields_
        for field, ftype, *_ in fields:
            c_field = ftype._fields_[0][0] if field in anonymous else field
            lines.append(f'printf("{name}.{field} %zu\\n", offsetof(struct {name}, {c_field}));')
            expected.append(f"{name}.{field} {getattr(t, field).offset}")
    assert len(expected) > 100
    out = compile_and_run(
        tmp_path, "int main(void) {\n" + "\n".join(lines) + "\nreturn 0; }\n", llama_cpp_source
    )
    assert out.splitlines() == expected


def test_constants_match_the_header(tmp_path: Path, llama_cpp_source: Path) -> None:
    names = [
        n for n in dir(capi)
        if re.fullmatch(r"(LLAMA|GGML)_[A-Z0-9_]+", n) and isinstance(getattr(capi, n), int)
        and n != "LLAMA_MAX_DEVICES" and not n.startswith("LLAMA_VOCAB_PRE_TYPE_")
    ]  # fmt: skip
    assert len(names) > 100
    body = "".join(f'printf("{n} %lld\\n", (long long)({n}));\n' for n in names)
    out = compile_and_run(tmp_path, "int main(void) {\n" + body + "return 0; }\n", llama_cpp_source)
    assert out.splitlines() == [f"{n} {getattr(capi, n)}" for n in names]
    assert capi.llama_max_devices() == capi.LLAMA_MAX_DEVICES


# ---- both layers on one model and context (outlines, guidance) ----------------------------


@pytest.fixture
def llm(tiny_model_path: Path) -> llama_cpp.Llama:
    return llama_cpp.Llama(str(tiny_model_path), n_ctx=64, verbose=False)


def test_model_and_ctx_are_the_addresses_the_ctypes_layer_takes(llm: llama_cpp.Llama) -> None:
    assert isinstance(llm.model, int)
    assert isinstance(llm.ctx, int)
    assert capi.llama_n_ctx(llm.ctx) == llm.n_ctx()
    vocab = capi.llama_model_get_vocab(llm.model)
    assert capi.llama_vocab_n_tokens(vocab) == llm.n_vocab()
    token = llm.tokenize(b"Hello", add_bos=False)[0]
    buf = ctypes.create_string_buffer(32)
    n = capi.llama_token_to_piece(vocab, token, buf, 32, 0, False)
    assert buf.raw[:n] == llm.detokenize([token])
    # llguidance reads llama_tokenize through the library handle.
    assert capi._lib.llama_tokenize is capi.llama_tokenize


def test_a_hand_written_batch_decodes_in_the_llamas_context(llm: llama_cpp.Llama) -> None:
    """guidance's loop: llama_batch_init, fields written by hand, llama_decode,
    llama_get_logits read through NumPy, llama_memory_seq_rm."""
    tokens = llm.tokenize(b"The quick brown fox")
    batch = capi.llama_batch_init(len(tokens), 0, 1)
    try:
        batch.n_tokens = len(tokens)
        for i, t in enumerate(tokens):
            batch.token[i] = t
            batch.pos[i] = i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = i == len(tokens) - 1
        assert capi.llama_decode(llm.ctx, batch) == 0
        logits = np.ctypeslib.as_array(
            capi.llama_get_logits(llm.ctx), shape=(llm.n_vocab(),)
        ).copy()
    finally:
        capi.llama_batch_free(batch)
    assert capi.llama_memory_seq_rm(capi.llama_get_memory(llm.ctx), 0, -1, -1)
    llm.reset()
    llm.eval(tokens)
    np.testing.assert_allclose(llm._scores[-1], logits, rtol=1e-5, atol=1e-5)


def test_vocab_pre_types_match_the_cxx_header(tmp_path: Path, llama_cpp_source: Path) -> None:
    """llama-cpp-python also exports ``enum llama_vocab_pre_type`` of src/llama-vocab.h,
    a C++ header: a C++ program prints its values."""
    names = [n for n in dir(capi) if n.startswith("LLAMA_VOCAB_PRE_TYPE_")]
    assert len(names) > 30
    src = tmp_path / "pre.cpp"
    src.write_text(
        '#include <cstdio>\n#include "llama-vocab.h"\nint main() {\n'
        + "".join(f'printf("{n} %d\\n", (int){n});\n' for n in names)
        + "return 0; }\n"
    )
    inc = [f"-I{llama_cpp_source / d}" for d in ("src", "include", "ggml/include")]
    exe = tmp_path / "pre"
    build = subprocess.run(
        ["c++", "-std=c++17", *inc, str(src), "-o", str(exe)], capture_output=True, text=True
    )
    assert build.returncode == 0, build.stderr[-3000:]
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == [f"{n} {getattr(capi, n)}" for n in names]


def test_llama_cpp_pythons_names_beyond_llama_h() -> None:
    """What llama-cpp-python's ctypes layer keeps for renamed and removed APIs."""
    assert capi.llama_log_callback is capi.ggml_log_callback
    assert capi.llama_sampler_context_t is ctypes.c_void_p
    members = {f[0]: f[1] for f in capi.llama_sampler_i._fields_}
    assert capi.llama_sampler_i_apply is members["apply"]

    @capi.ctypes_function("llama_max_devices", [], ctypes.c_size_t)
    def llama_max_devices() -> int:
        return -1  # the stub's body: the decorator returns the C function instead

    assert llama_max_devices() == capi.LLAMA_MAX_DEVICES
    assert callable(capi.llama_set_adapter_lora)
    assert callable(capi.llama_apply_adapter_cvec)
