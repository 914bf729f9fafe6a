"""The package's shape: no import cycle among ``llama_cy``'s modules (every import counts:
``TYPE_CHECKING`` blocks and imports inside functions too), and no Python module grown
past the size one reader can hold."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "llama_cy"

#: The one module allowed past the limit: llama-cpp-python's ``Llama`` is one class.
LONG_OK = {"llama_cy/llama.py"}
MAX_LINES = 700
#: The modules the issue that split them named: they stay well under the limit.
SPLIT = ["llama_cy/server/app.py", "bench/run.py"]  # cli.py and server/flags.py are gone


def _modules() -> dict[str, Path]:
    """Every module of the package, by dotted name (``.py``, ``.pyx`` and ``.pyi``: a
    compiled module's stub says what it imports at the Python level)."""
    out: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py*")):
        if path.suffix not in (".py", ".pyx", ".pyi"):
            continue
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        name = ".".join(parts)
        # A .pyx and its .pyi are one module: the source says more.
        if name not in out or path.suffix == ".pyx":
            out[name] = path
    return out


# A .pyx's Python-level import statement, up to the end of its first line.
_PYX_IMPORT = re.compile(
    r"^[ \t]*(?:from[ \t]+[\w.]+[ \t]+import(?!.*cimport)|import[ \t])[^\n]*", re.M
)


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules that ``name`` imports, anywhere in its file."""
    text = path.read_text()
    if path.suffix == ".pyx":  # Python-level imports only; cimports are C declarations
        lines = [m.group(0).strip().rstrip("(\\ ").rstrip(",") for m in _PYX_IMPORT.finditer(text)]
        # A name list that goes on past the first line: the module is what counts.
        text = "\n".join(line + " _" if line.endswith(" import") else line for line in lines)
    tree = ast.parse(text)
    package = name if path.stem == "__init__" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            # ``from pkg import mod`` imports the module; ``from mod import name`` the module.
            targets = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names
            ]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_import_graph_is_read() -> None:
    graph = _graph()
    # The reader finds imports of every kind: plain, from-module, from-package, relative.
    assert "llama_cy.server.engine" in graph["llama_cy.server.app"]
    assert "llama_cy._model" in graph["llama_cy.llama"]
    assert "llama_cy.errors" in graph["llama_cy._model"]  # a .pyx's Python-level import


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_no_import_cycle() -> None:
    cycles = _cycles(_graph())
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


@pytest.mark.parametrize(
    "path",
    sorted(
        str(p.relative_to(ROOT))
        for folder in ("llama_cy", "bench")
        for p in (ROOT / folder).rglob("*.py")
    ),
)
def test_module_size(path: str) -> None:
    n = len((ROOT / path).read_text().splitlines())
    limit = 400 if path in SPLIT else MAX_LINES
    if path in LONG_OK:
        return
    assert n <= limit, f"{path} has {n} lines (at most {limit})"


def test_the_modules_that_did_several_jobs_are_gone() -> None:
    """cli.py became the cli package (a module per subcommand) and server/flags.py the
    flags package (one table for every subcommand)."""
    assert not (PACKAGE / "cli.py").exists()
    assert not (PACKAGE / "server" / "flags.py").exists()
    assert (PACKAGE / "cli" / "__init__.py").is_file()
    assert (PACKAGE / "flags" / "table.py").is_file()


def test_every_source_file_is_installed() -> None:
    """meson.build lists the package's files by hand: a new module left off it would be
    missing from the wheel while the checkout's tests still import it."""
    build = re.sub(r"#[^\n]*", "", (PACKAGE / "meson.build").read_text())
    listed = set(re.findall(r"'([^'\n]+)'", build))
    kinds = (".py", ".pyi", ".pxd", ".html", ".jinja")
    files = [
        p.relative_to(PACKAGE).as_posix()
        for p in PACKAGE.rglob("*")
        if p.suffix in kinds and not p.relative_to(PACKAGE).as_posix().startswith("include/")
    ]
    assert files
    missing = sorted(f for f in files if f not in listed)
    assert not missing, f"not in llama_cy/meson.build's install_sources: {missing}"
