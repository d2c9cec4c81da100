"""Fixtures of the MCTS tests: the plain-Python reference (``tests/_oracles/mcts.py``)."""

from __future__ import annotations

import pytest

from _oracles import mcts as reference


@pytest.fixture(scope="session")
def ref():
    """The reference module (``ReferenceMCTS``, ``SplitMix64``)."""
    return reference
