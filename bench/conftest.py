"""Shared benchmark fixtures.

``shared_data`` locates the real benchmark sets in ``../shared/data`` (beside
the repository, or wherever ``MOMOKA_SHARED_DATA`` points) and skips the test
cleanly when they are absent.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path | None:
    env = os.environ.get("MOMOKA_SHARED_DATA")
    candidates = [Path(env)] if env else []
    candidates.append(REPO_ROOT.parent / "shared" / "data")
    for c in candidates:
        if c.is_dir():
            return c
    return None


@pytest.fixture(scope="session")
def shared_data() -> Path:
    d = shared_data_dir()
    if d is None:
        pytest.skip("../shared/data is not available")
    return d
