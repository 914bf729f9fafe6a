"""Write ``compat/llama_cpp/llama_cpp.py``, llama-cpp-python's ctypes layer, from llama.h.

usage: python tools/gen_llama_ctypes.py [--check]

The header is preprocessed by the C compiler (with stand-in libc headers, so only
llama.h's and ggml's own declarations remain) and parsed with pycparser; every enum,
struct, callback type and ``LLAMA_API`` function of llama.h becomes a ctypes
declaration under llama-cpp-python's names (``llama_model_p_ctypes``, ``llama_token_p``,
``llama_batch``...). ``--check`` fails if the checked-in file differs from what this
writes (the test suite runs it). Needs ``pycparser`` (a development tool only).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LLAMA_CPP = ROOT / "subprojects" / "llama.cpp"
OUT = ROOT / "compat" / "llama_cpp" / "llama_cpp.py"

# Stand-ins for the libc headers llama.h includes (LP64): the parser then sees nothing
# but llama.h and ggml.
FAKE_LIBC = {
    "stdint.h": (
        "typedef signed char int8_t; typedef unsigned char uint8_t;"
        "typedef short int16_t; typedef unsigned short uint16_t;"
        "typedef int int32_t; typedef unsigned int uint32_t;"
        "typedef long int64_t; typedef unsigned long uint64_t;"
        "typedef long intptr_t; typedef unsigned long uintptr_t;"
    ),
    "stddef.h": "typedef unsigned long size_t; typedef long ptrdiff_t;\n#define NULL ((void*)0)",
    "stdbool.h": "",
    "stdio.h": "typedef struct _IO_FILE FILE;",
}

PRIMITIVES = {
    "void": "None",
    "char": "ctypes.c_char",
    "signed char": "ctypes.c_byte",
    "unsigned char": "ctypes.c_ubyte",
    "short": "ctypes.c_short",
    "unsigned short": "ctypes.c_ushort",
    "int": "ctypes.c_int",
    "unsigned int": "ctypes.c_uint",
    "long": "ctypes.c_long",
    "unsigned long": "ctypes.c_ulong",
    "long long": "ctypes.c_longlong",
    "unsigned long long": "ctypes.c_ulonglong",
    "float": "ctypes.c_float",
    "double": "ctypes.c_double",
    "_Bool": "ctypes.c_bool",
    "int8_t": "ctypes.c_int8",
    "uint8_t": "ctypes.c_uint8",
    "int16_t": "ctypes.c_int16",
    "uint16_t": "ctypes.c_uint16",
    "int32_t": "ctypes.c_int32",
    "uint32_t": "ctypes.c_uint32",
    "int64_t": "ctypes.c_int64",
    "uint64_t": "ctypes.c_uint64",
    "size_t": "ctypes.c_size_t",
    "intptr_t": "ctypes.c_ssize_t",
    "uintptr_t": "ctypes.c_size_t",
}

# llama-cpp-python's names for pointers to structs the header keeps opaque.
OPAQUE = {
    "llama_vocab": "llama_vocab_p",
    "llama_model": "llama_model_p",
    "llama_context": "llama_context_p",
    "llama_adapter_lora": "llama_adapter_lora_p",
    "gguf_context": "gguf_context_p",
}
# llama-cpp-python's names for pointers to structs the header defines.
STRUCT_POINTERS = {
    "llama_token_data": "llama_token_data_p",
    "llama_token_data_array": "llama_token_data_array_p",
    "llama_logit_bias": "llama_logit_bias_p",
    "llama_sampler": "llama_sampler_p_ctypes",
}
# Typedefs of pointers that ctypes passes as plain addresses.
POINTER_TYPEDEFS = {"llama_memory_t": "llama_memory_t_ctypes"}


@dataclass
class Struct:
    name: str
    base: str  # ctypes.Structure or ctypes.Union
    fields: list[tuple[str, str]]
    anonymous: list[str]
    by_value: set[str]  # structs held by value: their _fields_ must be set first


@dataclass
class Module:
    """What llama.h declares, in its order, as ctypes expressions."""

    defines: list[tuple[str, str]] = field(default_factory=list)
    enums: list[tuple[str, list[tuple[str, int]]]] = field(default_factory=list)
    structs: list[Struct] = field(default_factory=list)
    callbacks: dict[str, str] = field(default_factory=dict)
    functions: list[tuple[str, list[str], str, str]] = field(default_factory=list)
    void_pointers: list[str] = field(default_factory=list)  # typedef void * x; of llama.h


class Parser:
    """One pass over the preprocessed header's syntax tree."""

    def __init__(self, header: Path) -> None:
        from pycparser import c_ast, c_generator, c_parser

        self.ast = c_ast
        self.gen = c_generator.CGenerator()
        self.tree = c_parser.CParser().parse(preprocess(header), filename=str(header))
        self.own = header.name
        self.typedefs: dict[str, Any] = {}  # name -> its declarator node
        self.enum_values: dict[str, int] = {}
        self.enums: dict[str, list[tuple[str, int]]] = {}
        self.defined: set[str] = set()  # structs llama.h defines
        self.used_enums: list[str] = []
        self.callback_defs: dict[str, str] = {}
        self.used_callbacks: list[str] = []
        self.mod = Module(defines=defines(header))

    # ---- types ------------------------------------------------------------------------

    def const(self, expr: Any) -> int:
        a = self.ast
        if isinstance(expr, a.Constant):
            return int(expr.value.rstrip("uUlL"), 0)
        if isinstance(expr, a.ID):
            return self.enum_values[expr.name]
        if isinstance(expr, a.UnaryOp) and expr.op == "-":
            return -self.const(expr.expr)
        if isinstance(expr, a.BinaryOp):
            x, y = self.const(expr.left), self.const(expr.right)
            return {"<<": x << y, "|": x | y, "+": x + y, "-": x - y, "*": x * y}[expr.op]
        raise ValueError(f"constant {self.gen.visit(expr)}")

    def enum(self, node: Any) -> None:
        values, nxt = [], 0
        for item in node.values.enumerators:
            nxt = self.const(item.value) if item.value is not None else nxt
            self.enum_values[item.name] = nxt
            values.append((item.name, nxt))
            nxt += 1
        self.enums[node.name] = values

    def use_enum(self, name: str | None) -> str:
        if name and name in self.enums and name not in self.used_enums:
            self.used_enums.append(name)
        return "ctypes.c_int"

    def named(self, name: str) -> str:
        """The ctypes expression for a typedef name."""
        if name in PRIMITIVES:
            return PRIMITIVES[name]
        if name in ("llama_token", "llama_pos", "llama_seq_id", "llama_state_seq_flags"):
            return name
        if name in POINTER_TYPEDEFS:
            return POINTER_TYPEDEFS[name]
        if name in self.callback_defs:
            if name not in self.used_callbacks:
                self.used_callbacks.append(name)
            return name
        return self.ctype(self.typedefs[name])

    def ctype(self, node: Any) -> str:
        a = self.ast
        if isinstance(node, a.TypeDecl):
            inner = node.type
            if isinstance(inner, a.IdentifierType):
                return self.named(" ".join(inner.names))
            if isinstance(inner, a.Enum):
                return self.use_enum(inner.name)
            if isinstance(inner, a.Struct | a.Union):
                return str(inner.name)
        if isinstance(node, a.ArrayDecl):
            return f"{self.ctype(node.type)} * {self.const(node.dim)}"
        if isinstance(node, a.PtrDecl):
            target = node.type
            if isinstance(target, a.FuncDecl):
                return self.callback(target)
            if isinstance(target, a.TypeDecl):
                inner = target.type
                if isinstance(inner, a.IdentifierType):
                    name = " ".join(inner.names)
                    if name == "char":
                        return "ctypes.c_char_p"
                    if name == "llama_token":
                        return "llama_token_p"
                if isinstance(inner, a.Struct):
                    if inner.name in STRUCT_POINTERS:
                        return STRUCT_POINTERS[inner.name]
                    if inner.name in OPAQUE:
                        return OPAQUE[inner.name] + "_ctypes"
                    if inner.name in self.defined:
                        return f"ctypes.POINTER({inner.name})"
                    return "ctypes.c_void_p"  # a struct llama.h keeps opaque: an address
            pointee = self.ctype(target)
            if pointee == "None" or (pointee.isidentifier() and pointee not in self.known(pointee)):
                return "ctypes.c_void_p"  # void *, or a struct outside llama.h (FILE): an address
            return f"ctypes.POINTER({pointee})"
        raise ValueError(f"type {self.gen.visit(node)}")

    def known(self, name: str) -> set[str]:
        """Names the module defines (a pointer to anything else is an address)."""
        return {*self.defined, "llama_pos", "llama_seq_id", "llama_state_seq_flags"}

    def params(self, fn: Any) -> list[Any]:
        args = fn.args
        if args is None:
            return []
        out = list(args.params)
        if len(out) == 1 and out[0].name is None and self.ctype(out[0].type) == "None":
            return []  # (void)
        return out

    def callback(self, fn: Any) -> str:
        ret = self.ctype(fn.type)
        if ret.startswith("ctypes.POINTER") or ret == "ctypes.c_char_p" or ret.endswith("_p"):
            ret = "ctypes.c_void_p"  # ctypes callbacks return pointers as addresses
        elif not ret.startswith("ctypes.") and ret not in self.defined and ret != "None":
            ret = "ctypes.c_void_p"  # a ggml struct by value: not callable from ctypes
        args = [self.ctype(p.type) for p in self.params(fn)]
        return f"ctypes.CFUNCTYPE({', '.join([ret, *args])})"

    def struct(self, node: Any, typedef: str | None = None) -> None:
        a = self.ast
        name = node.name or typedef
        fields: list[tuple[str, str]] = []
        anonymous: list[str] = []
        by_value: set[str] = set()
        for decl in node.decls:
            if decl.name is None and isinstance(decl.type, a.Union):
                # llama-cpp-python names the anonymous union "value"; both spellings work.
                union = f"{name}_value"
                members = [(d.name, self.ctype(d.type)) for d in decl.type.decls]
                self.mod.structs.append(Struct(union, "ctypes.Union", members, [], set()))
                fields.append(("value", union))
                anonymous.append("value")
                by_value.add(union)
                continue
            t = self.ctype(decl.type)
            if isinstance(decl.type, a.TypeDecl) and isinstance(decl.type.type, a.Struct):
                by_value.add(t)
            fields.append((decl.name, t))
        self.mod.structs.append(Struct(str(name), "ctypes.Structure", fields, anonymous, by_value))

    # ---- the walk ---------------------------------------------------------------------

    def run(self) -> Module:
        a = self.ast
        # Structs first known by name, so pointers to later definitions resolve.
        for ext in self.tree.ext:
            t = getattr(ext, "type", None)
            if isinstance(t, a.TypeDecl):
                t = t.type
            if isinstance(t, a.Struct) and t.decls is not None and self.is_own(ext):
                self.defined.add(t.name or ext.name)
        for ext in self.tree.ext:
            own = self.is_own(ext)
            t = ext.type
            if isinstance(ext, a.Typedef):
                self.typedefs[ext.name] = t
                inner = t.type if isinstance(t, a.TypeDecl) else None
                if isinstance(inner, a.Enum) and inner.values is not None:
                    inner.name = inner.name or ext.name
                    self.enum(inner)
                elif isinstance(inner, a.Struct) and inner.decls is not None and own:
                    self.struct(inner, ext.name)
                elif isinstance(t, a.PtrDecl) and isinstance(t.type, a.FuncDecl):
                    self.callback_defs[ext.name] = self.callback(t.type)
                    if own:
                        self.named(ext.name)
                elif (
                    own
                    and isinstance(t, a.PtrDecl)
                    and self.ctype(t) == "ctypes.c_void_p"
                    and ext.name not in POINTER_TYPEDEFS
                ):
                    self.mod.void_pointers.append(ext.name)
            elif isinstance(ext, a.Decl) and isinstance(t, a.Enum) and t.values is not None:
                self.enum(t)
                if own:
                    self.use_enum(t.name)
            elif isinstance(ext, a.Decl) and isinstance(t, a.Struct) and t.decls is not None:
                if own:
                    self.struct(t)
            elif isinstance(ext, a.Decl) and isinstance(t, a.FuncDecl) and own:
                ret = self.ctype(t.type)
                args = [self.ctype(p.type) for p in self.params(t)]
                proto = " ".join(self.gen.visit(ext).split())
                self.mod.functions.append((ext.name, args, ret, proto))
        self.mod.enums = [(n, self.enums[n]) for n in self.used_enums]
        self.mod.callbacks = {n: self.callback_defs[n] for n in self.used_callbacks}
        return self.mod

    def is_own(self, ext: Any) -> bool:
        coord = getattr(ext, "coord", None)
        return coord is not None and Path(str(coord.file)).name == self.own


def preprocess(header: Path) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in FAKE_LIBC.items():
            (Path(tmp) / name).write_text(text + "\n")
        cmd = ["cc", "-E", "-nostdinc", f"-I{tmp}", f"-I{LLAMA_CPP / 'ggml' / 'include'}"]
        # Without __GNUC__ the headers spell no attributes; bool is C's _Bool.
        cmd += ["-U__GNUC__", "-Dbool=_Bool", str(header)]
        return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def vocab_pre_types() -> list[tuple[str, int]]:
    """``enum llama_vocab_pre_type`` of src/llama-vocab.h (a C++ header, so read with a
    regular expression): llama-cpp-python exports these values too."""
    text = (LLAMA_CPP / "src" / "llama-vocab.h").read_text()
    body = re.search(r"enum llama_vocab_pre_type \{(.*?)\};", text, re.S)
    assert body is not None
    return [(n, int(v)) for n, v in re.findall(r"(LLAMA_VOCAB_PRE_TYPE_\w+)\s*=\s*(\d+)", body[1])]


def defines(header: Path) -> list[tuple[str, str]]:
    out = []
    for line in header.read_text().splitlines():
        m = re.match(r"\s*#define\s+(LLAMA_\w+)\s+([^/]+?)\s*(//.*)?$", line)
        if m and not m.group(1).endswith("_H"):
            out.append((m.group(1), m.group(2).rstrip("uU") if "0x" in m.group(2) else m.group(2)))
    return out


# ---- output -------------------------------------------------------------------------------

PRELUDE = '''\
"""llama-cpp-python's ctypes layer (``llama_cpp.llama_cpp``) over llama_cy's own libllama.

Generated from llama.cpp {build}'s ``include/llama.h`` by ``tools/gen_llama_ctypes.py``:
do not edit. Every function is the C function itself, with llama-cpp-python's argument
and return types; structs are ``ctypes.Structure`` classes whose fields can be written.

These calls are as unguarded as C: a NULL, a closed handle or a bad index passed here
crashes the process, as it does in llama-cpp-python. ``llama_cpp.Llama`` and everything
of llama_cy stays guarded. The library is the one llama_cy's extension modules use, so
``Llama.model`` and ``Llama.ctx`` (addresses) can be passed to these functions.
"""

# ruff: noqa: E501, N801

from __future__ import annotations

import ctypes
from typing import NewType

from llama_cpp import _library

_lib = _library.lib
_function = _library.function
'''


def render(header: Path) -> str:
    mod = Parser(header).run()
    build = "b11434"
    out = [PRELUDE.format(build=build)]
    out.append("# ---- constants (#define) ----\n")
    out += [f"{n} = {v}" for n, v in mod.defines]
    out.append("LLAMA_MAX_DEVICES: int = _lib.llama_max_devices()")
    for name, values in mod.enums:
        out.append(f"\n# enum {name}")
        out += [f"{n} = {v}" for n, v in values]
    out.append("\n# enum llama_vocab_pre_type (src/llama-vocab.h)")
    out += [f"{n} = {v}" for n, v in vocab_pre_types()]
    out.append("\n# ---- scalar and handle types ----\n")
    out += [
        "llama_pos = ctypes.c_int32",
        "llama_token = ctypes.c_int32",
        "llama_token_p = ctypes.POINTER(llama_token)",
        "llama_seq_id = ctypes.c_int32",
        "llama_state_seq_flags = ctypes.c_uint32",
    ]
    for name in [*OPAQUE.values(), *POINTER_TYPEDEFS]:
        out.append(f'{name} = NewType("{name}", int)')
        out.append(f"{name}_ctypes = ctypes.c_void_p")
    out.append("\n# ---- structs (fields below, once every member type exists) ----")
    for s in mod.structs:
        out.append(f"\n\nclass {s.name}({s.base}):\n    pass")
    out.append("\n")
    for struct, alias in STRUCT_POINTERS.items():
        out.append(f"{alias} = ctypes.POINTER({struct})")
    out.append("\n# ---- callback types ----\n")
    out += [f"{n} = {t}" for n, t in mod.callbacks.items()]
    out += [f"{n} = ctypes.c_void_p" for n in mod.void_pointers]
    # llama-cpp-python names each member type of the sampler interface.
    iface = next(s for s in mod.structs if s.name == "llama_sampler_i")
    out += [f"llama_sampler_i_{n} = {t}" for n, t in iface.fields]
    out.append("\n# ---- struct fields ----")
    done: set[str] = set()
    by_name = {s.name: s for s in mod.structs}

    def emit(s: Struct) -> None:
        if s.name in done:
            return
        for dep in sorted(s.by_value):
            if dep in by_name:
                emit(by_name[dep])
        done.add(s.name)
        if s.anonymous:
            out.append(f"{s.name}._anonymous_ = {tuple(s.anonymous)!r}")
        out.append(f"{s.name}._fields_ = [")
        out.extend(f'    ("{n}", {t}),' for n, t in s.fields)
        out.append("]")

    for s in mod.structs:
        emit(s)
    out.append("\n# ---- functions ----")
    for name, args, ret, proto in mod.functions:
        out.append(f"\n# {proto}")
        out.append(f'{name} = _function("{name}", [{", ".join(args)}], {ret})')
    out.append("\n# llama-cpp-python's own names for what llama.h renamed or removed.")
    out.append("from llama_cpp._llama_cpp_aliases import *  # noqa: E402, F403")
    return formatted("\n".join(out) + "\n")


def formatted(text: str) -> str:
    """``text`` as ``ruff format`` writes it (the project's style for checked-in code)."""
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", str(OUT), "-"],
        input=text, capture_output=True, text=True, check=True, cwd=ROOT,
    )  # fmt: skip
    return result.stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="fail if the checked-in file differs")
    args = ap.parse_args()
    text = render(LLAMA_CPP / "include" / "llama.h")
    if args.check:
        if OUT.read_text() != text:
            print(f"{OUT} is out of date: run python tools/gen_llama_ctypes.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
