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


#: Options that let a built-in enricher or relator run here without a model or an LLM endpoint (the others run
#: with their defaults, which fall back to offline work when no endpoint is set).
OFFLINE_OPTIONS = {"paths": {"referee": "embedding"}, "jerr": {"backend": "offline"}}


def builtin_components(kind: str) -> list[str]:
    """The names of ``kind`` that momoka itself registers (not the toys a test registers), from the registry, so
    that a component added to momoka is tested without editing the test."""
    from momoka import registry

    return [n for n in registry.available(kind, aliases=False)
            if registry.entry(kind, n).factory.__module__.startswith("momoka.")]


def offline_spec(name: str):
    """``name``, or ``(name, options)`` where :data:`OFFLINE_OPTIONS` has options for it."""
    return (name, OFFLINE_OPTIONS[name]) if name in OFFLINE_OPTIONS else name
