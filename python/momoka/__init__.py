"""momoka: a native-core engine for retrieval over long documents.

The public API is re-exported here; see the README for a tour.
"""

from __future__ import annotations

from . import errors
from ._core import __version__ as _core_version  # noqa: F401  (fails early if the build is broken)

__version__ = "0.1.0"

from .index import Index  # noqa: E402

__all__ = ["errors", "__version__", "Index"]
