"""Shared benchmark fixtures.

``shared_data`` locates the real benchmark sets in ``../shared/data`` (beside
the repository, or wherever ``MOMOKA_SHARED_DATA`` points) and skips the test
cleanly when they are absent.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from momoka.eval.datasets import find_shared_data

REPO_ROOT = Path(__file__).resolve().parents[1]

try:
    import pytest_benchmark  # noqa: F401  (provides the `benchmark` fixture)
except ImportError:

    @pytest.fixture
    def benchmark():
        """Stands in for pytest-benchmark's fixture when the `bench` extra is not installed."""
        pytest.skip("pytest-benchmark is not installed (pip install momoka[bench])")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    d = find_shared_data(REPO_ROOT)
    if d is None:
        pytest.skip("../shared/data is not available")
    return d
