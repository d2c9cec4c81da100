"""Fixtures of the MCTS tests: the plain-Python reference (``_reference.py``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("mcts_reference", Path(__file__).with_name("_reference.py"))
reference = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(reference)


@pytest.fixture(scope="session")
def ref():
    """The reference module (``ReferenceMCTS``, ``SplitMix64``)."""
    return reference
