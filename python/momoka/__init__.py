"""momoka: a native-core engine for retrieval over long documents.

The public API is re-exported here; see the README for a tour.
"""

from __future__ import annotations

from . import _core  # noqa: F401  (fails early if the build is broken)
from . import errors
from ._version import __version__

from .methods.pipeline import Index  # noqa: E402

__all__ = ["errors", "__version__", "Index"]
