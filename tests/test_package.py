"""The package imports, the native module is present and the CLI starts."""

import subprocess
import sys

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
