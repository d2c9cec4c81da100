"""momoka: a native-core engine for retrieval over long documents.

The public API is re-exported here; see the README for a tour. ``Index`` is
imported on first use (``momoka.Index`` or ``from momoka import Index``), so
``import momoka`` itself stays cheap for the command line.

Importing momoka sets ``ORT_DISABLE_TELEMETRY=1`` unless it is set already: onnxruntime's official builds
otherwise create ``~/.cache/Microsoft/DeveloperTools/.onnxruntime/`` (a device id and an events database) as
soon as onnxruntime is imported, outside ``$MOMOKA_HOME``. onnxruntime reads the variable once, when it is
first imported, so a program that imports onnxruntime before momoka sets it itself.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

# before anything imports onnxruntime (see the module docstring); an explicit setting is kept
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

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
