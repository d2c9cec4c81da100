"""The package imports, the native module is present and the CLI starts."""

import re
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


def _pyproject_version() -> str:
    """``version`` of ``[project]`` in the checkout's ``pyproject.toml``, read as text."""
    text = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text(encoding="utf-8")
    m = re.search(r'^version\s*=\s*"([^"]+)"', text, re.M)
    assert m, "no version in pyproject.toml"
    return m.group(1)


def test_version_literal_matches_pyproject_and_core():
    """The literal in _version.py is pyproject's version, and so is the one CMake compiled into _core."""
    want = _pyproject_version()
    assert momoka.__version__ == want
    assert _core.__version__ == want


def test_no_version_literals_in_the_package():
    """The version is written in pyproject.toml and in _version.py only (no other literal in the sources)."""
    root = Path(momoka.__file__).resolve().parent
    for path in root.rglob("*.py"):
        if path.name == "_version.py" and path.parent == root:
            continue
        text = path.read_text(encoding="utf-8")
        assert "__version__ = \"" not in text, path
        assert "from .. import __version__" not in text or path.parts[-2] == "index", path
