"""Old import paths kept for one release: a package or module that warns and hands out the new one.

``momoka.index`` is :mod:`momoka.store`, ``momoka.search`` is :mod:`momoka.mcts` and
``momoka.models.registry`` is :mod:`momoka.models.catalog`. Importing the old name (or one of its
submodules) gives a :class:`DeprecationWarning` and the new module's objects.
"""

from __future__ import annotations

import importlib
import sys
import warnings


def alias(old: str, new: str, submodules: dict[str, str] | None = None) -> None:
    """Make the module ``old`` (being imported) hand out the module ``new``'s names, and ``old.SUB`` the module
    ``new.TARGET`` for each ``SUB: TARGET`` of ``submodules``."""
    warnings.warn(f"{old} is renamed {new}; the old name goes in the next release", DeprecationWarning,
                  stacklevel=3)
    here = sys.modules[old]
    target = importlib.import_module(new)
    for name in getattr(target, "__all__", [n for n in vars(target) if not n.startswith("_")]):
        setattr(here, name, getattr(target, name))
    here.__getattr__ = lambda name: getattr(target, name)  # anything else the new module has
    for sub, mod in (submodules or {}).items():
        m = importlib.import_module(f"{new}.{mod}")
        sys.modules[f"{old}.{sub}"] = m
        setattr(here, sub, m)
