"""The old import paths of renamed packages still work for one release, with a DeprecationWarning, and give the
new modules' objects (checked by identity, not by the alias's own output)."""

from __future__ import annotations

import importlib
import sys

import pytest


@pytest.mark.parametrize("old,new,sub,target", [
    ("momoka.index", "momoka.store", "store", "store"),
    ("momoka.index", "momoka.store", "_registry", "_kinds"),
    ("momoka.search", "momoka.mcts", "mcts", "tree_search"),
])
def test_old_package_names_warn_and_alias(old, new, sub, target):
    for name in [m for m in sys.modules if m == old or m.startswith(old + ".")]:
        del sys.modules[name]
    with pytest.warns(DeprecationWarning, match=f"{old} is renamed {new}"):
        pkg = importlib.import_module(old)
    assert importlib.import_module(f"{old}.{sub}") is importlib.import_module(f"{new}.{target}")
    new_pkg = importlib.import_module(new)
    for name in new_pkg.__all__:
        assert getattr(pkg, name) is getattr(new_pkg, name)


def test_old_component_registry_name():
    sys.modules.pop("momoka.methods.registry", None)
    with pytest.warns(DeprecationWarning, match="momoka.methods.registry is renamed momoka.registry"):
        old = importlib.import_module("momoka.methods.registry")
    from momoka import registry

    assert old.register is registry.register and old.create is registry.create


def test_old_model_catalogue_name():
    sys.modules.pop("momoka.models.registry", None)
    with pytest.warns(DeprecationWarning, match="momoka.models.registry is renamed momoka.models.catalog"):
        old = importlib.import_module("momoka.models.registry")
    from momoka.models import catalog

    assert old.MODELS is catalog.MODELS and old.DEFAULT_EMBEDDER == catalog.DEFAULT_EMBEDDER


def test_the_package_itself_uses_no_old_name():
    import pathlib

    root = pathlib.Path(importlib.import_module("momoka").__file__).parent
    aliases = {root / "index" / "__init__.py", root / "search" / "__init__.py", root / "models" / "registry.py",
               root / "methods" / "registry.py", root / "_deprecated.py", root / "chunking" / "context.py",
               root / "methods" / "context.py"}
    for p in root.rglob("*.py"):
        if p in aliases:
            continue
        text = p.read_text(encoding="utf-8")
        for old in ("momoka.index", "momoka.search", "from .index", "from ..index", "from ...index",
                    "from ..search", "from ...search", "models.registry", "models import registry",
                    "methods.registry", "methods import registry", "chunking.context", "methods.context",
                    "chunking._engine", "mcts.engine", "from .context import", "from ..context import"):
            assert old not in text.replace("from .indexer", "").replace("from .index_writer", ""), (p, old)


@pytest.mark.parametrize("old,new", [("momoka.chunking.context", "momoka.chunking.headers"),
                                     ("momoka.methods.context", "momoka.methods.corpus")])
def test_former_module_paths_hand_out_the_renamed_modules_objects(old, new):
    # renamed so that "context" names one thing (what a reader answers from); the documented old paths still
    # import, without a warning, and give the very objects of the new module
    old_mod, new_mod = importlib.import_module(old), importlib.import_module(new)
    assert old_mod.__all__ and set(old_mod.__all__) <= set(vars(new_mod))
    for name in old_mod.__all__:
        assert getattr(old_mod, name) is getattr(new_mod, name), name
