"""Optional extras: import a package an optional feature needs, or say how to install it.

``require("matplotlib", "plot", "momoka eval --plot")`` returns the module, or
raises :class:`MissingExtraError` (a :class:`~momoka.errors.ConfigError` and an
:class:`ImportError`) whose message gives the pip command that installs it.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from .errors import ConfigError

__all__ = ["MissingExtraError", "require"]


class MissingExtraError(ConfigError, ImportError):
    """An optional dependency is not installed; the message says which extra installs it."""


def require(module: str, extra: str, what: str, package: str | None = None) -> ModuleType:
    """Import ``module`` or raise :class:`MissingExtraError` naming ``pip install "momoka[extra]"``.

    ``what`` names the feature that needs it; ``package`` the PyPI name
    (default: ``module``'s top-level name).
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        pkg = package or module.split(".")[0]
        raise MissingExtraError(
            f"{what} needs {pkg}, which is not installed: pip install \"momoka[{extra}]\" "
            f"(from a checkout: pip install \".[{extra}]\")") from exc
