"""The repository's shape: no import cycle anywhere (``llama_cy``, compat's ``llama_cpp``,
``bench/``, ``tools/``, ``support/`` and the tests; every import counts: ``TYPE_CHECKING``
blocks and imports inside functions too), compat built on llama_cy's public names only,
``bench/`` apart from the tests, and no module grown past the size one reader can hold."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "llama_cy"
COMPAT = ROOT / "compat" / "llama_cpp"
#: Packages, by the folder their name is imported from.
PACKAGES = {"llama_cy": ROOT, "llama_cpp": ROOT / "compat"}
#: Folders of scripts run with their folder (and support/) on sys.path.
SCRIPTS = ("bench", "tools", "support", "tests")

#: The modules allowed past the limit: llama-cpp-python's ``Llama`` is one class.
LONG_OK = {"llama_cy/llama.py", "compat/llama_cpp/llama.py"}
#: Extension modules past the limit, each the binding of one C object's API
#: (``llama_context``, ``llama_sampler``) as one cdef class: Cython keeps an extension
#: type's methods in its one .pyx, and an ``include`` or a chain of base classes would
#: divide one object's API by length, not by job. They shrink as a responsibility with a
#: C object of its own leaves (``_bitmap.pyx`` left ``_mtmd.pyx``); the list only shrinks.
LONG_PYX = {"llama_cy/_context.pyx", "llama_cy/_sampler.pyx"}
MAX_LINES = 700
#: The modules the issue that split them named: they stay well under the limit.
SPLIT = ["llama_cy/server/app.py", "bench/run.py"]  # cli.py and server/flags.py are gone


def _name(path: Path) -> str:
    """The dotted name a file is imported by: a package's module, or a script folder's
    (``bench.run``), whose plain imports find the folder's own modules first."""
    for package, base in PACKAGES.items():
        if path.is_relative_to(base / package):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            return ".".join(parts)
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def _modules() -> dict[str, Path]:
    """Every module, by dotted name (``.py``, ``.pyx`` and ``.pyi``: a compiled module's
    stub says what it imports at the Python level)."""
    out: dict[str, Path] = {}
    folders = [base / package for package, base in PACKAGES.items()]
    folders += [ROOT / folder for folder in SCRIPTS]
    for folder in folders:
        for path in sorted(folder.rglob("*.py*")):
            if path.suffix not in (".py", ".pyx", ".pyi") or "data" in path.parts:
                continue
            name = _name(path)
            # A .pyx and its .pyi are one module: the source says more.
            if name not in out or path.suffix == ".pyx":
                out[name] = path
    return out


# A .pyx's Python-level import statement, up to the end of its first line.
_PYX_IMPORT = re.compile(
    r"^[ \t]*(?:from[ \t]+[\w.]+[ \t]+import(?!.*cimport)|import[ \t])[^\n]*", re.M
)


def _tree(path: Path) -> ast.Module:
    text = path.read_text()
    if path.suffix == ".pyx":  # Python-level imports only; cimports are C declarations
        lines = [m.group(0).strip().rstrip("(\\ ").rstrip(",") for m in _PYX_IMPORT.finditer(text)]
        # A name list that goes on past the first line: the module is what counts.
        text = "\n".join(line + " _" if line.endswith(" import") else line for line in lines)
    return ast.parse(text)


def _resolve(target: str, name: str, modules: dict[str, Path]) -> str | None:
    """The module an import of ``target`` from module ``name`` loads: a script folder's
    own module, then support/'s (on the path of bench/, the tests and the device check),
    then a package's."""
    folder = name.split(".")[0]
    candidates = [target]
    if folder in SCRIPTS:
        candidates = [f"{folder}.{target}", f"support.{target}", target]
    for candidate in candidates:
        while candidate and candidate not in modules:
            candidate = candidate.rpartition(".")[0]
        if candidate:
            return candidate
    return None


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules ``name`` imports, anywhere in its file."""
    return {m for m, _ in _import_names(name, path, modules)}


def _import_names(name: str, path: Path, modules: dict[str, Path]) -> set[tuple[str, str]]:
    """(module, what was imported: its full dotted name) for each import in the file."""
    tree = _tree(path)
    package = name if path.stem == "__init__" else name.rpartition(".")[0]
    found: set[tuple[str, str]] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            targets = [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for target in targets:
            module = _resolve(target, name, modules)
            if module is not None and module != name:
                found.add((module, target))
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
    assert "llama_cpp.llama_cpp" in graph["llama_cpp._logger"]  # compat's, relative
    assert "llama_cy" in graph["llama_cpp.llama"]
    assert "bench.common" in graph["bench.run"]  # a script folder's own module
    assert "support.tiny_model" in graph["bench.common"]
    assert "support.tiny_model" in graph["tests.conftest"]


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_no_import_cycle() -> None:
    cycles = _cycles(_graph())
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def _compat_modules() -> dict[str, Path]:
    return {n: p for n, p in _modules().items() if n.split(".")[0] == "llama_cpp"}


def _private(dotted: str) -> bool:
    return any(part.startswith("_") for part in dotted.split(".")[1:])


def test_compat_imports_only_public_llama_cy_names() -> None:
    """compat is a layer on llama_cy's public surface: no underscored module or name, and
    not the command line (``llama_cy.cli``): its server is made from ServerSettings."""
    modules = _modules()
    private, cli = [], set()
    for name, path in _compat_modules().items():
        for module, target in _import_names(name, path, modules):
            if not target.startswith("llama_cy"):
                continue
            if _private(target) or _private(module):
                private.append(f"{name}: {target}")
            if target.startswith("llama_cy.cli") or module.startswith("llama_cy.cli"):
                cli.add(name)
    assert not private, f"compat imports private llama_cy names: {private}"
    assert not cli, f"compat modules on llama_cy.cli: {sorted(cli)}"


def _underscored(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute):
        attr = node.attr
        if attr.startswith("_") and not attr.startswith("__"):
            return attr
    return None


def _llama_cy_private_attributes() -> set[str]:
    """The underscored attribute and method names llama_cy's classes define."""
    names: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            attr = _underscored(node)
            if attr and isinstance(node.ctx, ast.Store):  # type: ignore[attr-defined]
                names.add(attr)
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        names.add(item.name)
                    targets = item.targets if isinstance(item, ast.Assign) else []
                    if isinstance(item, ast.AnnAssign):
                        targets = [item.target]
                    names.update(t.id for t in targets if isinstance(t, ast.Name))
    for path in PACKAGE.glob("*.pyx"):
        methods = re.findall(r"^\s+c?p?def\s+(?:\w+\s+)*?(_\w+)\s*\(", path.read_text(), re.M)
        names.update(methods)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def _compat_private_uses(trees: dict[str, ast.Module], theirs: set[str]) -> list[str]:
    """compat's uses of llama_cy's private attributes (``theirs``): any of them inside a
    compat class built on a llama_cy class, and elsewhere one compat does not define."""
    ours: set[str] = set()
    for tree in trees.values():
        for node in ast.walk(tree):
            attr = _underscored(node)
            if attr and isinstance(node.ctx, ast.Store):  # type: ignore[attr-defined]
                ours.add(attr)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                ours.add(node.name)
    found = []
    for name, tree in trees.items():
        on_llama_cy: set[int] = set()
        for cls in ast.walk(tree):
            if isinstance(cls, ast.ClassDef) and any(
                ast.unparse(b).startswith("llama_cy.") for b in cls.bases
            ):
                for item in cls.body:
                    if isinstance(item, (ast.Assign, ast.AnnAssign)):
                        targets = item.targets if isinstance(item, ast.Assign) else [item.target]
                        found += [
                            f"{name}.{cls.name}: {t.id}"
                            for t in targets
                            if isinstance(t, ast.Name) and t.id in theirs
                        ]
                on_llama_cy.update(id(n) for n in ast.walk(cls))
        for node in ast.walk(tree):
            attr = _underscored(node)
            if attr in theirs and (id(node) in on_llama_cy or attr not in ours):
                found.append(f"{name}: .{attr} (line {node.lineno})")  # type: ignore[attr-defined]
    return found


def test_compat_uses_no_private_attribute_of_llama_cy() -> None:
    trees = {n: ast.parse(p.read_text()) for n, p in _compat_modules().items()}
    found = _compat_private_uses(trees, _llama_cy_private_attributes())
    assert not found, "compat reaches into llama_cy's private attributes:\n" + "\n".join(found)


def test_the_private_attribute_check_finds_what_it_should() -> None:
    """What compat did before it had Llama.sequence and KVSequence.cut is found; a
    compat class's own private attribute is not."""
    theirs = _llama_cy_private_attributes()
    assert {"_seq", "_model", "_setup"} <= theirs
    sub = ast.parse(
        "class Llama(llama_cy.Llama):\n"
        "    _context_type = object\n"
        "    def f(self):\n"
        "        return self._seq\n"
        "def g(llm):\n"
        "    return llm.sequence._pos(0)\n"
        "class Own:\n"
        "    def __init__(self):\n"
        "        self._model = None\n"
        "    def h(self):\n"
        "        return self._model\n"
    )
    found = _compat_private_uses({"m": sub}, theirs | {"_context_type"})
    assert found == ["m.Llama: _context_type", "m: ._seq (line 4)", "m: ._pos (line 6)"]


def test_bench_does_not_import_the_tests() -> None:
    """bench/ and the tests share support/; bench/ neither imports a test module nor
    puts tests/ on its path."""
    graph = _graph()
    found = sorted(
        f"{name} -> {m}"
        for name, imports in graph.items()
        if name.startswith(("bench.", "tools.", "support."))
        for m in imports
        if m.startswith("tests.")
    )
    assert not found, found
    paths = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "bench").rglob("*.py")
        if re.search(r"""["/]tests["/]""", p.read_text()) and "sys.path" in p.read_text()
    ]
    assert not paths, f"bench/ modules that put tests/ on sys.path: {paths}"


@pytest.mark.parametrize(
    "path",
    sorted(
        str(p.relative_to(ROOT))
        for folder in ("llama_cy", "bench", "support", "compat/llama_cpp")
        for pattern in ("*.py", "*.pyx")
        for p in (ROOT / folder).rglob(pattern)
    ),
)
def test_module_size(path: str) -> None:
    """A symptom check, not the aim: a module past it does several jobs."""
    n = len((ROOT / path).read_text().splitlines())
    limit = 400 if path in SPLIT else MAX_LINES
    if path in LONG_OK or path in LONG_PYX:
        return
    if path == "compat/llama_cpp/llama_cpp.py":
        return  # generated from llama.h: one line per C declaration
    assert n <= limit, f"{path} has {n} lines (at most {limit})"


def test_the_long_extension_types_are_still_long() -> None:
    """LONG_PYX names only what is still past the limit: an entry that a split brought
    under it comes off the list."""
    done = [p for p in LONG_PYX if len((ROOT / p).read_text().splitlines()) <= MAX_LINES]
    assert not done, f"under the limit now; take them off LONG_PYX: {done}"


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
