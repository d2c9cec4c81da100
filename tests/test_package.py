"""The package imports, the native module is present and the CLI starts."""

import importlib.metadata
import subprocess
import sys
from pathlib import Path

import momoka
from momoka import _core, errors


def test_native_module_loaded():
    assert _core.__file__.endswith((".so", ".pyd"))
    assert isinstance(_core.__version__, str)


def test_errors_share_a_base():
    for name in dir(errors):
        obj = getattr(errors, name)
        if isinstance(obj, type) and issubclass(obj, Exception) and obj.__module__ == errors.__name__:
            assert issubclass(obj, errors.MomokaError)


def test_cli_version():
    out = subprocess.run([sys.executable, "-m", "momoka", "--version"], capture_output=True, text=True)
    assert out.returncode == 0
    assert momoka.__version__ in out.stdout


def _installed_here() -> bool:
    """True when the imported momoka is the installed distribution's copy."""
    try:
        dist = importlib.metadata.distribution("momoka")
    except importlib.metadata.PackageNotFoundError:
        return False
    init = [f for f in dist.files or () if f.name == "__init__.py" and f.parent.as_posix() == "momoka"]
    if not init:
        return True  # editable install
    return Path(dist.locate_file(init[0])).resolve() == Path(momoka.__file__).resolve()


def test_version_has_one_source():
    """Installed: the package metadata; an in-place build: the version compiled into _core
    (which CMake takes from pyproject.toml as well)."""
    if _installed_here():
        assert momoka.__version__ == importlib.metadata.version("momoka")
    else:
        assert momoka.__version__ == _core.__version__


def test_no_version_literals_in_the_package():
    """The version is written in pyproject.toml only, never as a literal in the sources."""
    root = Path(momoka.__file__).resolve().parent
    for path in root.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert "__version__ = \"" not in text, path
        assert "from .. import __version__" not in text or path.parts[-2] == "index", path
