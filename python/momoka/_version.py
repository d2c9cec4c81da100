"""momoka's version, written in one place: ``pyproject.toml``.

An installed momoka reads it from its package metadata. An in-place
development build (the sources on ``PYTHONPATH``, not installed) reads the
version the native module was compiled with, which CMake takes from the same
``pyproject.toml``. A leaf module, so subpackages can import it without
reaching up into ``momoka/__init__``.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

__all__ = ["__version__"]


def _installed_version() -> str | None:
    """The metadata version when the installed distribution is the copy being imported."""
    try:
        dist = metadata.distribution("momoka")
    except metadata.PackageNotFoundError:
        return None
    here = Path(__file__).resolve().parent
    for f in dist.files or ():
        if f.name == "__init__.py" and f.parent.as_posix() == "momoka":
            # A regular install: its metadata describes this tree only if it is this tree.
            return dist.version if Path(dist.locate_file(f)).resolve().parent == here else None
    return dist.version  # an editable install (a path hook into this tree)


def _version() -> str:
    v = _installed_version()
    if v is not None:
        return v
    from ._core import __version__ as core_version

    return str(core_version)


__version__ = _version()
