"""No import cycles in ``momoka``, counting imports inside functions: the import graph is read from the sources
with ``ast`` (nothing is imported).

Which imports count: every ``import`` / ``from ... import`` of a module, at any depth: its top-level statements,
the blocks nested in them (``if`` / ``try`` / ``with`` / ``for`` / ``while``), class bodies, and function bodies.
An import inside a function defers the import to call time (for start-up time, or an optional dependency), but
it does not make a loop between two modules harmless: each still needs the other, and which one finishes loading
first depends on who calls what. Not counted: imports under ``if TYPE_CHECKING:`` (never run).
The graph of imports that run when a module is imported (no function bodies) is read as well
(``deferred=False``): ``test_the_graph_agrees_with_python`` checks it against what Python loads.

Where an import points:

* ``import a.b.c`` is an edge to ``a.b.c``; ``from a.b import c`` is an edge to ``a.b.c`` when that is a module
  (a ``.py`` file, a package, or the compiled ``momoka._core``, which has no source and so imports nothing),
  and to ``a.b`` (its ``__init__``) otherwise. Relative imports are resolved against the importing module.
* Importing ``a.b.c`` also runs the ``__init__`` of the packages ``a`` and ``a.b``. That is an edge too, except
  to the importer's own enclosing packages: those have always started running before any of their submodules,
  so ``momoka/__init__.py`` importing ``momoka.methods.pipeline``, which does ``from .. import errors``, is no
  cycle (the edge goes to the module ``momoka.errors``, not to ``momoka``).
* Re-exports count: a package ``__init__`` that imports its own submodules imports them, so a submodule that
  takes a re-exported name back from its package (``from . import Name``) closes a cycle; the way out is to
  import the defining module directly.
* A name that a package loads on first use through a module-level ``__getattr__`` (PEP 562), as
  ``momoka.Index`` and the rerankers of ``momoka.models``, is an edge to the module it comes from as well:
  ``from momoka import Index`` at the top of a module runs ``momoka.methods.pipeline``. Counting deferred
  imports, the package itself has an edge to every module its ``__getattr__`` loads.

Not seen: imports by a name computed at run time (the method registry loading its built-in packages by name,
the CLI its sub-command modules: plug-ins that register themselves), and imports done by functions that
module-level code calls (a decorator, say).

The rule enforced: no module imports (directly or through others) a module that imports it back, i.e. every
strongly connected component of the graph is a single module. Only edges inside the package are kept.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

# the momoka the tests import (installed, or the source tree with its built extension): its modules are
# the ones read, and the subprocesses below import it from the same place
PACKAGE_DIR = Path(importlib.util.find_spec("momoka").origin).resolve().parent
# Compiled modules: importable, no .py source, import nothing of the package.
COMPILED = ("_core",)


@dataclass(frozen=True)
class Edge:
    target: str
    path: Path
    line: int
    source: str  # the import statement, as written
    deferred: bool = False  # the import is inside a function: it runs when the function is called


def _modules(pkg_dir: Path, pkg: str, compiled=()) -> dict[str, Path | None]:
    """Dotted module name -> source file (``None`` for compiled modules) of every module under ``pkg_dir``."""
    mods: dict[str, Path | None] = {}
    for path in sorted(pkg_dir.rglob("*.py")):
        rel = path.relative_to(pkg_dir).with_suffix("")
        parts = [pkg, *rel.parts]
        if parts[-1] == "__init__":
            parts.pop()
        mods[".".join(parts)] = path
    for name in compiled:
        mods[f"{pkg}.{name}"] = None
    return mods


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _run_at_import(body: list[ast.stmt], top: bool = True):
    """``(statement, top)`` for the statements that run when a block runs at import time; ``top`` is false in
    class bodies (they run, but bind no module name). Function bodies run at call time: only the ``def``."""
    for node in body:
        yield node, top
        if isinstance(node, ast.ClassDef):
            yield from _run_at_import(node.body, False)
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from _run_at_import(node.body, top)
            yield from _run_at_import(node.orelse, top)
        elif isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            for block in (node.body, *(h.body for h in node.handlers), node.orelse, node.finalbody):
                yield from _run_at_import(block, top)
        elif isinstance(node, (ast.With, ast.AsyncWith, ast.For, ast.AsyncFor, ast.While)):
            yield from _run_at_import(node.body, top)
            yield from _run_at_import(getattr(node, "orelse", []), top)


def _every_statement(body: list[ast.stmt], deferred: bool = False):
    """``(statement, deferred)`` for every statement at any depth (function bodies included, with ``deferred``
    true inside them), except the blocks under ``if TYPE_CHECKING:``."""
    for node in body:
        yield node, deferred
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _every_statement(node.orelse, deferred)
            continue
        inner = deferred or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            for item in getattr(node, field, None) or []:
                # statements, or except handlers / match cases (which hold statements)
                yield from _every_statement([item] if isinstance(item, ast.stmt) else item.body, inner)


def _bound_names(tree: ast.Module) -> set[str]:
    """The names a module binds at import time (what ``from module import name`` finds without ``__getattr__``)."""
    names: set[str] = set()
    for node, top in _run_at_import(tree.body):
        if not top:
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor, ast.With,
                               ast.AsyncWith)):
            targets = getattr(node, "targets", None) or [getattr(node, "target", None)]
            targets += [i.optional_vars for i in getattr(node, "items", [])]
            names.update(n.id for t in targets if t is not None for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


def _parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _resolve_from(mod: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    """The absolute module a ``from ... import`` statement of ``mod`` names."""
    if not node.level:
        return node.module or ""
    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _lazy_names(pkg: str, tree: ast.Module, mods, is_pkg: bool = True) -> dict[str, str] | None:
    """Name -> module for the names a module-level ``__getattr__`` (PEP 562) of a package (or of a plain module:
    ``is_pkg`` false) imports on first use; ``None`` when it has none. Read from the imports in ``__getattr__``
    (``from .m import Name``) and from the module-level ``{"Name": "submodule"}`` dicts it looks names up in."""
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "__getattr__"), None)
    if fn is None:
        return None
    out: dict[str, str] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.ImportFrom):
            frm = _resolve_from(pkg, is_pkg, node)
            out.update({a.name: f"{frm}.{a.name}" if f"{frm}.{a.name}" in mods else frm for a in node.names})
    used = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
    for node in tree.body:
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)
                and any(isinstance(t, ast.Name) and t.id in used for t in node.targets)):
            for k, v in zip(node.value.keys, node.value.values):
                if isinstance(k, ast.Constant) and isinstance(v, ast.Constant) and f"{pkg}.{v.value}" in mods:
                    out[k.value] = f"{pkg}.{v.value}"
    return out


def import_graph(pkg_dir: Path, pkg: str, compiled=(), deferred: bool = False) -> dict[str, list[Edge]]:
    """Module -> the edges of its imports (targets inside ``pkg`` only): those that run when it is imported, and
    with ``deferred`` also those inside its functions (a package's ``__getattr__`` included)."""
    mods = _modules(pkg_dir, pkg, compiled)
    lines = {m: p.read_text(encoding="utf-8").splitlines() for m, p in mods.items() if p is not None}
    trees = {m: ast.parse("\n".join(text), filename=str(mods[m])) for m, text in lines.items()}
    bound = {m: _bound_names(t) for m, t in trees.items()}
    lazy = {m: _lazy_names(m, t, mods, mods[m].name == "__init__.py") for m, t in trees.items()}
    graph: dict[str, list[Edge]] = {m: [] for m in mods}
    for mod, tree in trees.items():
        path = mods[mod]
        if deferred:
            statements = _every_statement(tree.body)
        else:
            statements = ((node, False) for node, _ in _run_at_import(tree.body))
        for node, late in statements:
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                frm = _resolve_from(mod, path.name == "__init__.py", node)
                targets = []
                for a in node.names:
                    if f"{frm}.{a.name}" in mods:
                        targets.append(f"{frm}.{a.name}")
                        continue
                    targets.append(frm)
                    if frm in trees and a.name != "*" and a.name not in bound[frm] and lazy[frm] is not None:
                        # the package's __getattr__ runs now and imports the module that holds the name
                        if a.name not in lazy[frm]:
                            raise ValueError(f"{path}:{node.lineno}: cannot tell which module {frm}.__getattr__ "
                                             f"imports for {a.name!r}")
                        targets.append(lazy[frm][a.name])
            else:
                continue
            src = lines[mod][node.lineno - 1].strip()
            seen = set()
            for t in targets:
                # the named module and the packages whose __init__ runs first (not the importer's own ones)
                for m in [*(p for p in _parents(t) if not mod.startswith(p + ".")), t]:
                    if m in mods and m != mod and m not in seen:
                        seen.add(m)
                        graph[mod].append(Edge(m, path, node.lineno, src, late))
        if deferred and lazy[mod]:
            # what the package's __getattr__ loads by a name looked up in a dict (importlib.import_module)
            fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "__getattr__")
            have = {e.target for e in graph[mod]}
            for target in sorted(set(lazy[mod].values()) - have - {mod}):
                graph[mod].append(Edge(target, path, fn.lineno, lines[mod][fn.lineno - 1].strip(), True))
    return graph


def strongly_connected(graph: dict[str, list[Edge]]) -> list[list[str]]:
    """Tarjan's strongly connected components (iterative), each sorted; every node appears in one."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, edges = work[-1]
            for e in edges:
                w = e.target
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(graph[w])))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    out.append(sorted(comp))
    return out


def cycles_report(graph: dict[str, list[Edge]], root: Path) -> str:
    """Every strongly connected component of more than one module, with one import line per edge inside it."""
    parts = []
    for comp in strongly_connected(graph):
        if len(comp) < 2:
            continue
        members = set(comp)
        lines = [f"import cycle among {len(comp)} modules: {', '.join(comp)}"]
        for mod in comp:
            done = set()
            for e in graph[mod]:
                if e.target in members and e.target not in done:
                    done.add(e.target)
                    where = e.path.relative_to(root).as_posix()
                    late = "  (in a function)" if e.deferred else ""
                    lines.append(f"  {mod} -> {e.target}    {where}:{e.line}: {e.source}{late}")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def test_momoka_has_no_import_cycles():
    """Not even through imports inside functions."""
    graph = import_graph(PACKAGE_DIR, "momoka", COMPILED, deferred=True)
    assert len(graph) > 100 and "momoka.methods.pipeline" in graph  # the package was found
    assert any(e.target == "momoka._core" for edges in graph.values() for e in edges)
    assert sum(e.deferred for edges in graph.values() for e in edges) > 50  # function bodies were read
    report = cycles_report(graph, PACKAGE_DIR.parent)
    assert not report, "\n" + report


def _closure(graph, starts) -> set[str]:
    seen: set[str] = set()
    todo = list(starts)
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo += [e.target for e in graph[m]]
    return seen


@pytest.mark.parametrize("module", ["momoka.methods.jerr", "momoka.methods.pipeline", "momoka.models.reranker",
                                    "momoka.cli"])
def test_the_graph_agrees_with_python(module):
    """What the graph says ``import module`` loads (with its enclosing packages), Python loads: the reader
    invents no edge. (Python may load more: a function called at import time can import, e.g. the registry's
    ``@register`` decorator loading ``momoka.chunking``; such imports are beyond a reading of the source.)"""
    graph = import_graph(PACKAGE_DIR, "momoka", COMPILED)
    env = dict(os.environ, PYTHONPATH=str(PACKAGE_DIR.parent) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", f"import sys, json, {module}\nprint(json.dumps(sorted(sys.modules)))"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    loaded = set(json.loads(out.stdout.strip().splitlines()[-1]))
    predicted = _closure(graph, [module, *_parents(module)])
    assert len(predicted) > 5
    assert sorted(predicted - loaded) == []


# --- the graph reader itself, on small packages written for the test ---------------------------------


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text), encoding="utf-8")
    return root / "pkg"


def _edges(graph, mod) -> set[str]:
    return {e.target for e in graph[mod]}


def test_a_planted_cycle_is_found_with_its_lines(tmp_path):
    pkg = _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/low/__init__.py": "",
        "pkg/low/a.py": "import os\nfrom ..up import b\n",
        "pkg/up/__init__.py": "",
        "pkg/up/b.py": "from pkg.low.c import f\n",
        "pkg/low/c.py": "try:\n    from .a import g\nexcept ImportError:\n    pass\n",
        "pkg/ok.py": "from .low import c\n",
    })
    graph = import_graph(pkg, "pkg")
    assert [c for c in strongly_connected(graph) if len(c) > 1] == [["pkg.low.a", "pkg.low.c", "pkg.up.b"]]
    report = cycles_report(graph, tmp_path)
    assert "pkg.low.a -> pkg.up.b    pkg/low/a.py:2: from ..up import b" in report
    assert "pkg.up.b -> pkg.low.c    pkg/up/b.py:1: from pkg.low.c import f" in report
    assert "pkg.low.c -> pkg.low.a    pkg/low/c.py:2: from .a import g" in report
    assert "pkg.ok" not in report


def test_deferred_and_type_checking_imports_are_no_edges(tmp_path):
    pkg = _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": """
            from typing import TYPE_CHECKING
            import typing
            if TYPE_CHECKING:
                from .b import B
            if typing.TYPE_CHECKING:
                from . import c
            else:
                from . import d
            def f():
                from .b import B
                return B
            class K:
                from . import e
        """,
        "pkg/b.py": "from .a import f\n",
        "pkg/c.py": "from . import a\n",
        "pkg/d.py": "",
        "pkg/e.py": "",
    })
    graph = import_graph(pkg, "pkg")
    assert _edges(graph, "pkg.a") == {"pkg.d", "pkg.e"}
    assert cycles_report(graph, tmp_path) == ""


def test_imports_in_functions_count_when_deferred_is_asked(tmp_path):
    """With ``deferred=True`` an import in a function (at any depth, in a method, under a ``try``) is an edge
    marked deferred, a package's ``__getattr__`` has edges to what it loads, and ``TYPE_CHECKING`` stays out."""
    pkg = _write(tmp_path, {
        "pkg/__init__.py": """
            import importlib
            _LAZY = {"Heavy": "heavy"}
            def __getattr__(name):
                return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        """,
        "pkg/heavy.py": "from . import a\nHeavy = 1\n",
        "pkg/a.py": """
            from typing import TYPE_CHECKING
            if TYPE_CHECKING:
                from .c import C
            class K:
                def m(self):
                    try:
                        from .b import B
                    except ImportError:
                        pass
        """,
        "pkg/b.py": "def f():\n    if True:\n        from .a import K\n",
        "pkg/c.py": "from .a import K\n",
    })
    assert cycles_report(import_graph(pkg, "pkg"), tmp_path) == ""
    graph = import_graph(pkg, "pkg", deferred=True)
    assert _edges(graph, "pkg.a") == {"pkg.b"}
    assert [e.deferred for e in graph["pkg.a"]] == [True]
    assert _edges(graph, "pkg") == {"pkg.heavy"}
    assert [e.deferred for e in graph["pkg.heavy"]] == [False]
    report = cycles_report(graph, tmp_path)
    assert "pkg.a -> pkg.b    pkg/a.py:8: from .b import B  (in a function)" in report
    assert "pkg.b -> pkg.a    pkg/b.py:3: from .a import K  (in a function)" in report
    assert "pkg.c" not in report and "pkg.heavy" not in report


def test_from_package_import_name_or_module(tmp_path):
    """``from pkg import sub`` goes to the submodule; ``from pkg import Name`` to the package's ``__init__``,
    and so do the ``__init__`` files that run before a submodule, except the importer's own packages."""
    pkg = _write(tmp_path, {
        "pkg/__init__.py": "from .sub.m import Name\nfrom . import errors\n",
        "pkg/errors.py": "",
        "pkg/sub/__init__.py": "from .m import Name\n",
        "pkg/sub/m.py": "from .. import errors\nfrom .. import _core\nName = 1\n",
        "pkg/sub/n.py": "from . import Name\n",
        "pkg/other.py": "import pkg.sub.n\n",
    })
    graph = import_graph(pkg, "pkg", compiled=("_core",))
    assert _edges(graph, "pkg.sub.m") == {"pkg.errors", "pkg._core"}  # not pkg: its own enclosing package
    assert _edges(graph, "pkg._core") == set()
    assert _edges(graph, "pkg.sub.n") == {"pkg.sub"}  # a re-exported name: the __init__
    assert _edges(graph, "pkg.other") == {"pkg.sub", "pkg.sub.n"}  # pkg.sub's __init__ runs first
    assert _edges(graph, "pkg") == {"pkg.sub", "pkg.sub.m", "pkg.errors"}
    # pkg.sub re-exports from m, n takes the name back from pkg.sub: no cycle (m does not import n)
    assert cycles_report(graph, tmp_path) == ""
    (pkg / "sub" / "m.py").write_text("from . import n\nName = 1\n", encoding="utf-8")
    report = cycles_report(import_graph(pkg, "pkg", compiled=("_core",)), tmp_path)
    assert "pkg.sub, pkg.sub.m, pkg.sub.n" in report


def test_names_a_package_imports_on_first_use(tmp_path):
    """``from pkg import Name`` where ``pkg`` binds no ``Name`` but has a module-level ``__getattr__`` runs it:
    an edge to the module it imports the name from, read from its imports or from a name -> submodule dict."""
    pkg = _write(tmp_path, {
        "pkg/__init__.py": """
            import importlib
            from . import light
            _LAZY = {"Heavy": "heavy"}
            def __getattr__(name):
                if name == "Big":
                    from .deep.big import Big
                    return Big
                return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        """,
        "pkg/light.py": "X = 1\n",
        "pkg/heavy.py": "Heavy = 1\n",
        "pkg/deep/__init__.py": "",
        "pkg/deep/big.py": "Big = 1\n",
        "pkg/user.py": "from pkg import Heavy, light\nfrom . import Big\n",
    })
    graph = import_graph(pkg, "pkg")
    assert _edges(graph, "pkg.user") == {"pkg", "pkg.heavy", "pkg.light", "pkg.deep", "pkg.deep.big"}
    (pkg / "bad.py").write_text("from . import Unknown\n", encoding="utf-8")
    with pytest.raises(ValueError, match="Unknown"):
        import_graph(pkg, "pkg")


def test_names_a_plain_module_imports_on_first_use(tmp_path):
    """A module-level ``__getattr__`` of a module that is not a package resolves its relative imports from the
    module's own package (``from ..other.m import Name`` in ``pkg/sub/mod.py`` is ``pkg.other.m``)."""
    pkg = _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/sub/__init__.py": "",
        "pkg/sub/mod.py": """
            def __getattr__(name):
                if name == "Name":
                    from ..other.m import Name
                    return Name
                raise AttributeError(name)
        """,
        "pkg/other/__init__.py": "",
        "pkg/other/m.py": "Name = 1\n",
        "pkg/user.py": "from .sub.mod import Name\n",
    })
    graph = import_graph(pkg, "pkg")
    assert _edges(graph, "pkg.user") == {"pkg.sub", "pkg.sub.mod", "pkg.other", "pkg.other.m"}
    assert cycles_report(import_graph(pkg, "pkg", deferred=True), tmp_path) == ""
    assert {"pkg.other", "pkg.other.m"} <= _edges(import_graph(pkg, "pkg", deferred=True), "pkg.sub.mod")
