"""python/momoka/_core.pyi describes exactly what the native module exposes."""

import ast
from pathlib import Path

import momoka
from momoka import _core

STUB = Path(momoka.__file__).with_name("_core.pyi")


def _stub_tree() -> ast.Module:
    return ast.parse(STUB.read_text(encoding="utf-8"))


def _public(names) -> set[str]:
    return {n for n in names if not n.startswith("_")}


def test_stub_and_marker_ship_beside_the_package():
    assert STUB.is_file()
    assert STUB.with_name("py.typed").is_file()


def test_module_names_match_the_stub():
    tree = _stub_tree()
    stubbed = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            stubbed.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            stubbed.add(node.target.id)
    assert _public(stubbed) == _public(dir(_core))
    assert "__version__" in stubbed


def test_class_members_match_the_stub():
    for node in _stub_tree().body:
        if not isinstance(node, ast.ClassDef):
            continue
        cls = getattr(_core, node.name)
        if issubclass(cls, BaseException):
            continue
        stubbed = set()
        for item in node.body:
            if isinstance(item, ast.FunctionDef):
                stubbed.add(item.name)
            elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                stubbed.add(item.target.id)
        own = {n for n in vars(cls) if not n.startswith("_")}
        assert _public(stubbed) == own, node.name
