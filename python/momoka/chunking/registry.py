"""Chunkers by name: :func:`get_chunker` and :func:`available_chunkers`.

The CLI (``momoka chunk --method NAME --size N``) and the index build use
these names. ``size`` is accepted by every chunker: it is the chunk size of
``fixed``/``recursive``/``paragraph``, ``max_size`` of ``structure`` and the
number of sentences ``n`` of ``sentence``.
"""

from __future__ import annotations

import inspect
from typing import Any

from ..errors import ConfigError
from .chunkers import (
    Chunker,
    FixedChunker,
    ParagraphChunker,
    RecursiveChunker,
    SentenceChunker,
    StructureChunker,
)

_REGISTRY: dict[str, type[Chunker]] = {
    "fixed": FixedChunker,
    "sentence": SentenceChunker,
    "paragraph": ParagraphChunker,
    "recursive": RecursiveChunker,
    "structure": StructureChunker,
}

# Parameter each chunker reads the generic ``size`` into.
_SIZE_ALIAS = {"structure": "max_size", "sentence": "n"}


def available_chunkers() -> list[str]:
    """Names accepted by :func:`get_chunker`."""
    return list(_REGISTRY)


def chunker_summaries() -> list[tuple[str, str]]:
    """``(name, first line of the chunker's docstring)`` for every chunker."""
    return [(n, ((c.__doc__ or "").strip().splitlines() or [""])[0]) for n, c in _REGISTRY.items()]


def get_chunker(name: str, **params: Any) -> Chunker:
    """Build the chunker called ``name`` with ``params``.

    Parameters set to None are left at the chunker's default. Raises
    :class:`momoka.errors.ConfigError` for an unknown name, an unknown
    parameter or a bad value.
    """
    if name not in _REGISTRY:
        raise ConfigError(f"unknown chunker {name!r}; available: {', '.join(_REGISTRY)}")
    cls = _REGISTRY[name]
    params = {k: v for k, v in params.items() if v is not None}
    alias = _SIZE_ALIAS.get(name)
    if alias and "size" in params:
        if alias in params:
            raise ConfigError(f"give either size or {alias} for chunker {name!r}, not both")
        params[alias] = params.pop("size")
    accepted = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        raise ConfigError(
            f"chunker {name!r} does not take {', '.join(unknown)}; it takes {', '.join(accepted)}"
        )
    return cls(**params)
