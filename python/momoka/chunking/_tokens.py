"""Token counting for the chunkers.

A chunker measured in tokens needs, for a whole document, the positions where
tokens start and how many tokens start there ("atoms"). Three sources are
supported, all turned into atoms by :func:`resolve_tokenizer`:

* the default :class:`WhitespaceTokenizer` (a token is a maximal run of
  non-whitespace characters, as ``str.split()`` defines it, except that each
  character of a script written without spaces -- CJK ideographs, kana, Thai,
  Lao, Khmer, Myanmar, Tibetan -- is a token by itself), found by the
  native kernels (``momoka._core.chunk_word_starts`` / ``chunk_word_ids``);
* a ``tokenizers.Tokenizer``: see :mod:`momoka.chunking._hf_tokens` (distinct
  words counted, chunks kept within the limit when re-encoded);
* any callable ``str -> int`` (a count) or ``str -> sequence`` (a token list):
  it is called once per distinct whitespace word (whole runs: a tokenizer
  counts CJK text its own way) and a span counts the sum of
  its words' counts (exact for word-level tokenizers, a close estimate for
  sub-word tokenizers whose tokens may cross spaces).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable

import numpy as np

from .. import _core
from ..errors import ConfigError
from ._atoms import Atoms, TokenSource
from ._hf_tokens import HFSource


def word_spans(text: str) -> np.ndarray:
    """``(N, 2)`` int64 array of the (start, end) offsets of the words of ``text``.

    A word is a maximal run of non-whitespace characters (``str.isspace``), so
    the words are those of ``text.split()``, in order, except that each
    character of a script written without spaces (CJK ideographs, kana, Thai,
    ...) is a word by itself: Chinese and Japanese are measured in characters.
    """
    starts, ends, _, _ = _core.chunk_word_ids(text, True)
    return np.stack([starts, ends], axis=1)


class WhitespaceTokenizer:
    """The default tokenizer: a token is a maximal run of non-whitespace characters (one per
    character in scripts written without spaces, see :func:`word_spans`).

    ``tok(text)`` returns the number of tokens (``len(text.split())`` for spaced scripts);
    :meth:`spans` returns their ``(start, end)`` offsets as an ``(N, 2)`` array.
    """

    name = "whitespace"

    def __call__(self, text: str) -> int:
        return len(_core.chunk_word_starts(text, True))

    def spans(self, text: str) -> np.ndarray:
        """``(N, 2)`` int64 array of token offsets in ``text``."""
        return word_spans(text)

    def __repr__(self) -> str:
        return "WhitespaceTokenizer()"


class _WhitespaceSource(TokenSource):
    name = "whitespace"

    def __init__(self, tok: WhitespaceTokenizer | None = None):
        self.tokenizer = tok or WhitespaceTokenizer()

    def atoms(self, text: str) -> Atoms:
        return Atoms(_core.chunk_word_starts(text, True), None)

    def count(self, text: str) -> int:
        return self.tokenizer(text)


def _word_atoms(text: str, count_unique: Callable[[list[str]], list[int]]) -> Atoms:
    """Word starts weighted by each word's token count, counting each distinct word once."""
    starts, ends, ids, first = _core.chunk_word_ids(text)
    fs, fe = starts[first].tolist(), ends[first].tolist()
    uniq = [text[a:b] for a, b in zip(fs, fe)]
    counts = np.asarray(count_unique(uniq), dtype=np.int64).reshape(-1)
    return Atoms(starts, counts[ids] if ids.size else np.zeros(0, dtype=np.int64))


class _CallableSource(TokenSource):
    """Any callable ``str -> int`` or ``str -> sequence of tokens``."""

    name = "callable"

    def __init__(self, fn: Callable[[str], Any]):
        self.fn = fn

    def _one(self, text: str) -> int:
        out = self.fn(text)
        if isinstance(out, (bool, np.bool_, str, bytes)):
            raise ConfigError(
                f"tokenizer callable returned a {type(out).__name__}; expected an int or a sequence of tokens"
            )
        if isinstance(out, Mapping):  # e.g. a transformers tokenizer's BatchEncoding
            if "input_ids" not in out:
                raise ConfigError("tokenizer callable returned a mapping without 'input_ids'")
            out = out["input_ids"]
        if isinstance(out, (int, np.integer)):
            if out < 0:
                raise ConfigError(f"tokenizer callable returned a negative count ({out})")
            return int(out)
        try:
            return len(out)
        except TypeError:
            raise ConfigError(
                f"tokenizer callable returned {type(out).__name__}; expected an int or a sequence of tokens"
            ) from None

    def _count_unique(self, words: list[str]) -> list[int]:
        return [self._one(w) for w in words]

    def atoms(self, text: str) -> Atoms:
        return _word_atoms(text, self._count_unique)

    def count(self, text: str) -> int:
        return self._one(text)


def _is_hf_tokenizer(obj: Any) -> bool:
    try:
        import tokenizers  # start-up: tokenizers
    except ImportError:
        return False
    return isinstance(obj, tokenizers.Tokenizer)


def resolve_tokenizer(tokenizer: Any) -> TokenSource:
    """Turn ``None`` (whitespace), a ``tokenizers.Tokenizer`` or a callable into a :class:`TokenSource`."""
    if tokenizer is None or isinstance(tokenizer, WhitespaceTokenizer):
        return _WhitespaceSource(tokenizer)
    if isinstance(tokenizer, TokenSource):
        return tokenizer
    if _is_hf_tokenizer(tokenizer):
        return HFSource(tokenizer)
    if callable(tokenizer):
        return _CallableSource(tokenizer)
    encode = getattr(tokenizer, "encode_ordinary", None) or getattr(tokenizer, "encode", None)
    if callable(encode):  # e.g. a tiktoken Encoding: count the tokens it returns
        return _CallableSource(encode)
    raise ConfigError(
        f"tokenizer must be a tokenizers.Tokenizer, a callable str -> int / str -> list, "
        f"or an object with an encode(str) method, "
        f"not {type(tokenizer).__name__}"
    )
