"""momoka's version.

A literal, so ``import momoka`` (and ``momoka --help``) never reads package
metadata (``importlib.metadata`` costs about 60 ms at start-up). It must equal
``version`` in ``pyproject.toml``, from which CMake also stamps the native
module: ``tests/test_package.py`` checks both. A leaf module, so subpackages can
import it without reaching up into ``momoka/__init__``.
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
