"""Fixtures shared by the method tests: the real default embedder (skipped when not installed)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def embedder():
    """The default embedder (minilm-l6-v2-int8)."""
    from momoka.errors import ModelNotInstalledError

    try:
        from momoka.models import Embedder

        return Embedder.default()
    except ModelNotInstalledError as exc:
        pytest.skip(f"embedder unavailable: {exc}")
