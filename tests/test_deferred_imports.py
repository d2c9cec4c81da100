"""Every import inside a function of ``momoka`` says why it is not at module level.

An import inside a function runs at call time. That is wanted for an optional dependency (the extras of
``pyproject.toml``: ray, langchain, llama-index, plot) and for start-up time (numpy, onnxruntime, aiohttp,
the LLM and model stacks, a sub-command's own modules: what ``momoka --help`` and a BM25 query need not
load); anything else belongs at module level. Each such import carries a comment on its line, or on the
line above, starting with one of the reasons below and naming what it defers::

    from ..llm import prompts  # start-up: momoka.llm
    import ray  # optional: ray

The sources are read with ``ast`` (nothing is imported); imports under ``if TYPE_CHECKING:`` never run and
need no comment.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import textwrap
from pathlib import Path

PACKAGE_DIR = Path(importlib.util.find_spec("momoka").origin).resolve().parent
REASONS = ("optional", "start-up", "cycle", "lazy")
_REASON = re.compile(r"#\s*(?:%s):\s*\S" % "|".join(map(re.escape, REASONS)))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def deferred_imports(tree: ast.AST, in_function: bool = False):
    """The ``import`` statements inside function bodies (at any depth), not under ``if TYPE_CHECKING:``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for item in node.orelse:
                yield from deferred_imports(ast.Module(body=[item], type_ignores=[]), in_function)
            continue
        if in_function and isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        yield from deferred_imports(node, in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)))


def uncommented(source: str) -> list[tuple[int, str]]:
    """``(line, statement)`` of each deferred import of ``source`` without a reason on its line or the one above
    (for a statement over several lines: on any of its lines)."""
    lines = source.splitlines()
    out = []
    for node in deferred_imports(ast.parse(source)):
        around = lines[max(node.lineno - 2, 0): node.end_lineno]
        above = around[0] if node.lineno > 1 else ""
        if not (any(_REASON.search(line) for line in around[1 if node.lineno > 1 else 0:])
                or (above.lstrip().startswith("#") and _REASON.search(above))):
            out.append((node.lineno, lines[node.lineno - 1].strip()))
    return out


def test_every_import_in_a_function_says_why():
    offenders = []
    files = sorted(PACKAGE_DIR.rglob("*.py"))
    assert len(files) > 100
    counted = 0
    for path in files:
        source = path.read_text(encoding="utf-8")
        counted += sum(1 for _ in deferred_imports(ast.parse(source)))
        rel = path.relative_to(PACKAGE_DIR.parent).as_posix()
        offenders += [f"{rel}:{line}: {stmt}" for line, stmt in uncommented(source)]
    assert counted > 50  # function bodies were read
    assert not offenders, (
        f"{len(offenders)} imports inside functions without a reason (move them to module level, or add "
        f"'# optional: <extra>', '# start-up: <what it keeps off start-up>', '# cycle: <module>' or "
        f"'# lazy: <reason>' on the line or the line above):\n" + "\n".join(offenders))


def test_the_check_finds_an_import_without_a_reason():
    source = textwrap.dedent("""
        import os
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            from .a import A
        def f():
            if TYPE_CHECKING:
                from .b import B
            import json
            from . import c  # start-up: c
            # optional: ray
            import ray
            from .d import (  # lazy: d is loaded by the rare command
                x,
                y,
            )
            import numpy  # numpy is heavy
            class K:
                def m(self):
                    from .e import E  # cycle:
            return json
        class C:
            from . import g
            async def h(self):
                import zlib  # start-up: zlib
    """)
    assert uncommented(source) == [(9, "import json"), (17, "import numpy  # numpy is heavy"),
                                   (20, "from .e import E  # cycle:")]
