"""Every momoka.models module imports alone in a fresh interpreter (no import cycle)."""

import pkgutil
import subprocess
import sys

import pytest

import momoka.models

MODULES = sorted(f"momoka.models.{m.name}" for m in pkgutil.iter_modules(momoka.models.__path__))


def test_modules_found():
    assert {"momoka.models.embedder", "momoka.models.catalog", "momoka.models.installer"} <= set(MODULES)


@pytest.mark.parametrize("module", MODULES)
def test_cold_import(module):
    out = subprocess.run(
        [sys.executable, "-c", f"import {module}"], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr


def _module_level_imports(module: str) -> set[str]:
    """The momoka.models modules that ``module`` imports at module level (not inside functions)."""
    import ast
    import importlib.util

    spec = importlib.util.find_spec(module)
    tree = ast.parse(open(spec.origin, encoding="utf-8").read())
    out = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                out.add(f"momoka.models.{node.module.split('.')[0]}")
            else:
                out.update(f"momoka.models.{a.name}" for a in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("momoka.models."):
            out.add(".".join(node.module.split(".")[:3]))
    return out & set(MODULES)


def test_module_level_imports_point_one_way():
    """The module-level imports among momoka.models modules form no cycle."""
    graph = {m: _module_level_imports(m) for m in MODULES}
    done: set[str] = set()

    def visit(m: str, stack: tuple[str, ...]) -> None:
        assert m not in stack, " -> ".join(stack + (m,))
        if m in done:
            return
        for dep in graph[m]:
            visit(dep, stack + (m,))
        done.add(m)

    for m in MODULES:
        visit(m, ())
    assert "momoka.models.installer" not in graph["momoka.models.catalog"]
    assert "momoka.models.onnx_embedder" in graph["momoka.models.installer"]
    assert "momoka.models.installer" not in graph["momoka.models.onnx_embedder"]
