"""The classic chunkers by name: registered as components (:mod:`momoka.registry`), and :func:`get_chunker`.

The CLI (``momoka chunk --method NAME --size N``) and the index build use
these names. ``size`` is accepted by every chunker: it is the chunk size of
``fixed``/``recursive``/``paragraph``, ``max_size`` of ``structure`` and the
number of sentences ``n`` of ``sentence``.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

from ..errors import ConfigError
from ..registry import create, register
from .base import Chunker, ClassicChunker
from .fixed import FixedChunker
from .paragraph import ParagraphChunker
from .recursive import RecursiveChunker
from .sentence import SentenceChunker
from .structure import StructureChunker

_CLASSIC: dict[str, type[ClassicChunker]] = {
    "fixed": FixedChunker,
    "sentence": SentenceChunker,
    "paragraph": ParagraphChunker,
    "recursive": RecursiveChunker,
    "structure": StructureChunker,
}

# Parameter each chunker reads the generic ``size`` into.
_SIZE_ALIAS = {"structure": "max_size", "sentence": "n"}


def _factory(name: str, cls: type[ClassicChunker]) -> Callable[..., ClassicChunker]:
    """Build ``cls`` from options: None values left at the default, ``size`` read into the chunker's own size
    parameter, an unknown parameter a ConfigError naming those it takes."""
    def make(**params: Any) -> ClassicChunker:
        params = {k: v for k, v in params.items() if v is not None}
        alias = _SIZE_ALIAS.get(name)
        if alias and "size" in params:
            if alias in params:
                raise ConfigError(f"give either size or {alias} for chunker {name!r}, not both")
            params[alias] = params.pop("size")
        accepted = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
        unknown = sorted(set(params) - set(accepted))
        if unknown:
            import difflib  # start-up: difflib, only for an option that is not there

            close = sorted({c for u in unknown for c in difflib.get_close_matches(u, accepted, n=3, cutoff=0.6)})
            hint = f"; did you mean {' or '.join(close)}?" if close else ""
            raise ConfigError(f"chunker {name!r} does not take {', '.join(unknown)}{hint} (it takes {', '.join(accepted)})")
        return cls(**params)

    return make


for _name, _cls in _CLASSIC.items():
    register("chunker", _name, summary=((_cls.__doc__ or "").strip().splitlines() or [""])[0])(_factory(_name, _cls))


def available_chunkers() -> list[str]:
    """The classic chunkers' names (the registry's :func:`~momoka.registry.available` ``("chunker")`` lists the
    method packages' chunkers too)."""
    return list(_CLASSIC)


def chunker_summaries() -> list[tuple[str, str]]:
    """``(name, first line of the chunker's docstring)`` for every classic chunker."""
    return [(n, ((c.__doc__ or "").strip().splitlines() or [""])[0]) for n, c in _CLASSIC.items()]


def get_chunker(name: str, **params: Any) -> Chunker:
    """Build the chunker called ``name`` with ``params`` (any registered chunker: the classic ones here, the
    method packages' such as ``ppl`` or ``sections``).

    Parameters set to None are left at the chunker's default. Raises
    :class:`momoka.errors.ConfigError` for an unknown name, an unknown
    parameter or a bad value.
    """
    return create("chunker", name, **params)
