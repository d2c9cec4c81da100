"""momoka: a native-core engine for retrieval over long documents.

The public API is re-exported here; see the README for a tour. ``Index`` is
imported on first use (``momoka.Index`` or ``from momoka import Index``), so
``import momoka`` itself stays cheap for the command line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import _core  # noqa: F401  (fails early if the build is broken)
from . import errors
from ._version import __version__

if TYPE_CHECKING:
    from .methods.pipeline import Index

__all__ = ["errors", "__version__", "Index"]


def __getattr__(name: str) -> Any:
    if name == "Index":
        from .methods.pipeline import Index  # start-up: momoka.methods.pipeline (numpy, the store) off `import momoka`

        globals()["Index"] = Index
        return Index
    raise AttributeError(f"module 'momoka' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | {"Index"})
