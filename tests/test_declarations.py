"""The raw layer mirrors llama.cpp's C headers: every exported, non-deprecated function
of each header is declared in the matching ``llama_cy/_c/*.pxd``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PXD_DIR = Path(__file__).resolve().parent.parent / "llama_cy" / "_c"

HEADERS = {
    "include/llama.h": "llama.pxd",
    "ggml/include/ggml.h": "ggml.pxd",
    "ggml/include/ggml-alloc.h": "ggml_alloc.pxd",
    "ggml/include/ggml-backend.h": "ggml_backend.pxd",
    "ggml/include/ggml-cpu.h": "ggml_cpu.pxd",
    "ggml/include/ggml-opt.h": "ggml_opt.pxd",
    "ggml/include/gguf.h": "gguf.pxd",
    "tools/mtmd/mtmd.h": "mtmd.pxd",
    "tools/mtmd/mtmd-helper.h": "mtmd_helper.pxd",
}
EXPORT = re.compile(r"\b(?:LLAMA_API|GGML_API|GGML_BACKEND_API|MTMD_API)\b")
NAME = re.compile(r"\b([A-Za-z_]\w*)\s*\(")


def c_only(text: str) -> str:
    """The text without its ``#ifdef __cplusplus`` sections (C++ API, not C)."""
    kept, depth, skip_from = [], 0, None
    for line in text.splitlines():
        directive = line.strip()
        if directive.startswith("#if"):
            depth += 1
            if skip_from is None and "__cplusplus" in directive:
                skip_from = depth
        elif directive.startswith("#endif"):
            if skip_from == depth:
                skip_from = None
                depth -= 1
                continue
            depth -= 1
        if skip_from is None:
            kept.append(line)
    return "\n".join(kept)


def exported_functions(header: str) -> set[str]:
    """Names of the C functions a header exports, leaving out deprecated ones."""
    text = re.sub(r"//[^\n]*|/\*.*?\*/", " ", header, flags=re.S)
    text = re.sub(r"^\s*#.*$", " ", c_only(text), flags=re.M)
    names = set()
    # A declaration ends at ';'; struct bodies break nothing since they hold no export macro.
    for stmt in re.split(r"[;{}]", text):
        m = EXPORT.search(stmt)
        if m is None or "DEPRECATED" in stmt:
            continue
        name = NAME.search(stmt, m.end())
        if name is not None:
            names.add(name.group(1))
    return names


def declared_functions(pxd: str) -> set[str]:
    """C names of the functions a pxd declares; ``py_name "c_name"(...)`` counts as c_name."""
    text = re.sub(r"#[^\n]*", " ", pxd)
    return set(NAME.findall(text)) | set(re.findall(r'"(\w+)"\s*\(', text))


@pytest.mark.parametrize("header", sorted(HEADERS))
def test_every_exported_function_is_declared(llama_cpp_source: Path, header: str) -> None:
    exported = exported_functions((llama_cpp_source / header).read_text())
    assert len(exported) > 5, f"parsed too few functions from {header}: the parser is broken"
    pxd = HEADERS[header]
    missing = sorted(exported - declared_functions((PXD_DIR / pxd).read_text()))
    assert not missing, f"{header}: {len(missing)} functions missing from {pxd}: {missing}"


def test_parser_sees_deprecated_and_plain_declarations() -> None:
    header = """
    LLAMA_API int32_t llama_plain(const struct llama_model * model);
    DEPRECATED(LLAMA_API int32_t llama_old(void), "use llama_plain instead");
    // LLAMA_API void llama_commented(void);
    #ifdef __cplusplus
    LLAMA_API std::string llama_cpp_only(void);
    #endif
    GGML_API struct ggml_tensor * ggml_multi_line(
            struct ggml_context * ctx,
            struct ggml_tensor  * a);
    """
    assert exported_functions(header) == {"llama_plain", "ggml_multi_line"}
    assert "llama_plain" not in declared_functions("    # llama_plain(x)\n")
    assert declared_functions('    int py_name "llama_plain"(int x)\n') >= {"llama_plain"}
