"""Okapi BM25 over the native inverted index (:class:`momoka._core.BM25Index`).

Scoring (``idf="okapi"``, the default) is rank_bm25's ``BM25Okapi``::

    score(q, d) = sum over query tokens t (repeats counted) of
        idf(t) * tf(t, d) * (k1 + 1) / (tf(t, d) + k1 * (1 - b + b * |d| / avgdl))
    idf(t) = ln(N - df(t) + 0.5) - ln(df(t) + 0.5), and a negative idf is
             replaced by epsilon * (mean idf over the vocabulary)

so, given the same tokens, scores equal rank_bm25's to floating-point
rounding. ``idf="lucene"`` uses ``ln(1 + (N - df + 0.5) / (df + 0.5))``.
N, df and avgdl count live documents only: they follow every add/delete.

Tokenisation (native, on the str's own storage): lowercased maximal runs of
letters and digits of any script; Thai/Lao/Khmer/Myanmar/Tibetan characters
are one token each; fullwidth ASCII is folded; optionally English stopwords
are dropped and ASCII words Porter-stemmed. A run of CJK characters
(ideographs, kana, bopomofo) is cut by the tokeniser rule version
(``tokenizer_version``, recorded in the index and its files):

* 2 (the default of a new index): each character and the overlapping bigram
  it starts with the next one ("中文分词" -> "中", "中文", "文", "文分", "分",
  "分词", "词"), as Lucene's CJKBigramFilter does with unigrams kept;
* 1 (every index written before versions existed): one token per character.

Every other token is the same under both rules, so English text indexes and
ranks exactly as before. An index read from a file keeps the rule it was
built with, and its queries are tokenised by that rule.

Before tokenising, every text indexed and every query is folded by
:func:`fold_compatibility` (in Python, only where a text is not already in
NFKC form): a letter, mark or decimal digit with a compatibility or
canonical-singleton decomposition becomes its NFKC form (the ligature
U+FB01 "ﬁ" becomes "fi", "ſ" "s", the math letter "𝐀" "A", "µ" "μ"),
then the text is composed (NFC, so "e" + U+0301 matches "é"). Symbols,
punctuation and other numbers keep their form ("™", "²", "½" stay
separators, as before), and ASCII text is never changed, so its tokens are
the native tokeniser's. The stored text and its offsets are not touched:
only the tokens see the folded text.
"""

from __future__ import annotations

import functools
import math
import os
import re
import unicodedata
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from .. import _core
from ..errors import ConfigError, EmptyInputError, InputError, StoreError
from ._io import check_native_write

#: A short English stopword list (function words only).
ENGLISH_STOPWORDS: tuple[str, ...] = tuple(
    ["a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "could", "did", "do", "does", "doing", "down", "during", "each", "few", "for", "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers", "herself", "him", "himself", "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself", "just", "me", "more", "most", "my", "myself", "no", "nor", "not", "of", "off", "on", "once", "only", "or", "other", "our", "ours", "ourselves", "out", "over", "own", "same", "she", "should", "so", "some", "such", "than", "that", "the", "their", "theirs", "them", "themselves", "then", "there", "these", "they", "this", "those", "through", "to", "too", "under", "until", "up", "very", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours", "yourself", "yourselves", "s", "t"]
)


def _stopwords(stopwords) -> list[str]:
    if stopwords is None or stopwords is False:
        return []
    if isinstance(stopwords, str):
        if stopwords == "english":
            return list(ENGLISH_STOPWORDS)
        raise ConfigError(f"stopwords must be None, 'english' or a list of words, not {stopwords!r}")
    words = list(stopwords)
    if not all(isinstance(w, str) for w in words):
        raise ConfigError("stopwords must be strings")
    return [w.lower() for w in words]


_NON_ASCII = re.compile(r"[^\x00-\x7f]")


@functools.lru_cache(maxsize=8192)
def _fold_char(c: str) -> str:
    cat = unicodedata.category(c)
    if cat[0] in "LM" or cat == "Nd":
        return unicodedata.normalize("NFKC", c)
    return c


def fold_compatibility(text: str) -> str:
    """``text`` as search sees it: compatibility letters, marks and digits folded (NFKC of each), then
    composed (NFC); see the module docstring. ASCII and NFKC-normal text comes back unchanged (the same
    object)."""
    if text.isascii() or unicodedata.is_normalized("NFKC", text):
        return text
    return unicodedata.normalize("NFC", _NON_ASCII.sub(lambda m: _fold_char(m.group()), text))


#: Tokeniser rule versions: 1, CJK characters one token each; 2, CJK characters and their overlapping bigrams.
TOKENIZER_VERSIONS = (1, 2)
#: The rule a new index uses.
TOKENIZER_VERSION = 2


def _version(v) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v not in TOKENIZER_VERSIONS:
        raise ConfigError(f"tokenizer_version must be one of {TOKENIZER_VERSIONS} (1: CJK characters one token "
                          f"each; 2: CJK characters and character bigrams), not {v!r}")
    return v


def tokenize(text: str, *, lowercase: bool = True, stem: bool = False, stopwords=None,
             tokenizer_version: int = TOKENIZER_VERSION) -> list[str]:
    """Tokenise ``text`` exactly as :class:`BM25` does (:func:`fold_compatibility`, then the native
    tokeniser of rule ``tokenizer_version``; see the module docstring)."""
    if not isinstance(text, str):
        raise InputError(f"text must be str, got {type(text).__name__}")
    return _core.bm25_tokenize(fold_compatibility(text), lowercase, stem, _stopwords(stopwords),
                               _version(tokenizer_version))


class BM25:
    """An Okapi BM25 index with in-place add and delete.

    Documents get integer ids 0, 1, 2, ... in the order they are added;
    deleting leaves a tombstone, so ids never change. Search runs natively
    with the GIL released; :meth:`search_batch` spreads queries over threads.

    Args:
        k1, b: BM25 term-frequency saturation and length normalisation.
        epsilon: floor of negative idf values, as a fraction of the mean idf
            (``idf="okapi"`` only).
        idf: ``"okapi"`` (rank_bm25's BM25Okapi, default) or ``"lucene"``.
        stem: Porter-stem ASCII words.
        stopwords: None, ``"english"`` or a list of words to drop.
        lowercase: fold case before matching.
        tokenizer_version: how runs of CJK characters are cut (module docstring): 2 (default),
            each character and the overlapping character bigrams; 1, one token per character
            (the rule of indexes written before versions existed).
    """

    def __init__(
        self,
        k1: float = 1.5,
        b: float = 0.75,
        epsilon: float = 0.25,
        idf: str = "okapi",
        *,
        stem: bool = False,
        stopwords: Iterable[str] | str | None = None,
        lowercase: bool = True,
        tokenizer_version: int = TOKENIZER_VERSION,
        _native=None,
    ):
        if _native is not None:
            self._ix = _native
            return
        version = _version(tokenizer_version)
        try:
            self._ix = _core.BM25Index(float(k1), float(b), float(epsilon), str(idf), bool(lowercase), bool(stem),
                                       _stopwords(stopwords), version)
        except (ValueError, TypeError) as exc:
            raise ConfigError(str(exc)) from None

    # -- properties --------------------------------------------------------

    @property
    def params(self) -> dict:
        """The scoring and tokeniser parameters (JSON-serialisable)."""
        ix = self._ix
        return {"k1": ix.k1, "b": ix.b, "epsilon": ix.epsilon, "idf": ix.idf, "stem": ix.stem,
                "lowercase": ix.lowercase, "stopwords": ix.stopwords, "tokenizer_version": ix.version}

    @property
    def n_docs(self) -> int:
        """Number of live (not deleted) documents."""
        return self._ix.n_docs

    @property
    def n_slots(self) -> int:
        """Number of ids ever given (live + deleted)."""
        return self._ix.n_slots

    @property
    def vocab_size(self) -> int:
        """Number of distinct terms in live documents."""
        return self._ix.vocab_size

    def __len__(self) -> int:
        return self._ix.n_docs

    def is_alive(self, doc: int) -> bool:
        """True when ``doc`` was added and not deleted."""
        return 0 <= doc < self._ix.n_slots and self._ix.alive(doc)

    def doc_freq(self, term: str) -> int:
        """Number of live documents containing the (already tokenised) ``term``."""
        return self._ix.doc_freq(term)

    def term_weight(self, term: str) -> float:
        """How rare the (already tokenised) ``term`` is: ``ln(1 + (N - df + 0.5) / (df + 0.5))`` over live
        documents (Lucene's idf, positive for every term, unlike okapi's), the weight query-term coverage
        (:func:`~momoka.methods.standard.coverage.cover_terms`) and context assembly's trimming give it."""
        n, df = self._ix.n_docs, self._ix.doc_freq(term)
        return math.log(1.0 + (n - df + 0.5) / (df + 0.5))

    def tokenize(self, text: str) -> list[str]:
        """Tokens of ``text`` under this index's settings."""
        if not isinstance(text, str):
            raise InputError(f"text must be str, got {type(text).__name__}")
        return self._ix.tokenize(fold_compatibility(text))

    def holds(self, ids: Sequence[int], terms: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Which of the (already tokenised) ``terms`` each document of ``ids`` holds, read from the postings
        natively (no text is tokenised): ``(held, n_terms)``, ``held`` a bool array of shape
        ``(len(ids), len(terms))`` (False for every term of an unknown or deleted id) and ``n_terms`` each
        document's number of distinct terms (int64; 0 for an unknown or deleted id).

        ``held[i, j]`` is ``terms[j] in set(tokens of document ids[i])``, so query-term coverage
        (:func:`~momoka.methods.standard.coverage.cover_terms`) needs no per-candidate tokenising.
        """
        ids = [int(i) for i in ids]
        terms = list(terms)
        if not all(isinstance(t, str) for t in terms):
            raise InputError("terms must be strings")
        held, n_terms = self._ix.holds(ids, terms)
        return held.view(bool), n_terms.astype(np.int64)

    # -- changes -----------------------------------------------------------

    def add(self, texts: Sequence[str], n_threads: int = 0) -> np.ndarray:
        """Add documents; returns their ids (int64). Tokenises over threads."""
        texts = list(texts)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise InputError(f"document {i} must be str, got {type(t).__name__}")
        return self._ix.add([fold_compatibility(t) for t in texts], int(n_threads))

    def add_tokens(self, docs: Sequence[Sequence[str]]) -> np.ndarray:
        """Add pre-tokenised documents (lists of str, used as they are)."""
        return self._ix.add_tokens([list(d) for d in docs])

    def delete(self, ids: Iterable[int]) -> int:
        """Delete documents by id (postings are removed in place).

        Raises :class:`InputError` when an id is unknown or already deleted
        (nothing is deleted then).
        """
        ids = [int(i) for i in ids]
        bad = [i for i in ids if not self.is_alive(i)]
        if bad:
            raise InputError(f"unknown or already deleted BM25 document id(s): {bad[:10]}")
        if len(set(ids)) != len(ids):
            raise InputError("duplicate ids in delete")
        return self._ix.remove(ids)

    def append(self, other: BM25) -> np.ndarray:
        """Append another index's documents after this one's; returns their new ids (int64).

        ``other``'s id ``d`` becomes ``n_slots + d`` here (``n_slots`` before
        the call), and its deleted ids stay deleted. The result is exactly
        the index that adding this index's documents and then ``other``'s, in
        order, with the same deletions, would have built: the same vocabulary
        order, statistics and postings, so scores and rankings are identical
        bit for bit. ``other`` is left unchanged.

        Raises :class:`InputError` when ``other`` is not a :class:`BM25` or is
        this index, and :class:`ConfigError` when the scoring parameters
        (k1, b, epsilon, idf) or tokeniser settings (lowercase, stem,
        stopwords, tokenizer_version) differ.
        """
        if not isinstance(other, BM25):
            raise InputError(f"can only append a BM25 index, not {type(other).__name__}")
        if other is self or other._ix is self._ix:
            raise InputError("cannot append a BM25 index to itself")
        mine, theirs = self.params, other.params
        diff = [k for k in mine if mine[k] != theirs[k]]
        if diff:
            raise ConfigError("cannot append a BM25 index with different settings: "
                              + ", ".join(f"{k} {mine[k]!r} != {theirs[k]!r}" for k in diff))
        try:
            return self._ix.append(other._ix)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    # -- queries -----------------------------------------------------------

    @staticmethod
    def _check_query(query) -> None:
        if not isinstance(query, str):
            raise InputError(f"query must be str, got {type(query).__name__}")
        if not query.strip():
            raise EmptyInputError("query is empty")

    def _mask(self, mask):
        if mask is None:
            return None
        m = np.asarray(mask, dtype=bool)
        if m.ndim != 1:
            raise InputError("mask must be 1-d (one flag per document id)")
        return m.astype(np.uint8)

    def get_scores(self, query: str) -> np.ndarray:
        """Score of every id for ``query`` (0 for deleted ids), like rank_bm25's ``get_scores``."""
        self._check_query(query)
        return self._ix.get_scores(fold_compatibility(query))

    def search(self, query: str, k: int = 10, mask=None) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` ``(ids, scores)``, best first (ties: lower id first).

        Only documents sharing at least one token with the query are
        returned, so fewer than ``k`` may come back. ``mask`` (bool per id)
        restricts the candidates. Raises :class:`EmptyInputError` for an
        empty query.
        """
        self._check_query(query)
        if k < 1:
            raise ConfigError("k must be >= 1")
        return self._ix.search(fold_compatibility(query), int(k), self._mask(mask))

    def search_tokens(self, tokens: Sequence[str], k: int = 10, mask=None) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`search` with a pre-tokenised query."""
        if k < 1:
            raise ConfigError("k must be >= 1")
        return self._ix.search_tokens(list(tokens), int(k), self._mask(mask))

    def search_batch(self, queries: Sequence[str], k: int = 10, n_threads: int = 0,
                     mask=None) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` for many queries over threads: ``(ids, scores)`` of shape
        ``(len(queries), k)``; missing places hold id -1 and score 0."""
        queries = list(queries)
        for q in queries:
            self._check_query(q)
        if k < 1:
            raise ConfigError("k must be >= 1")
        return self._ix.search_batch([fold_compatibility(q) for q in queries], int(k), int(n_threads),
                                     self._mask(mask))

    # -- persistence ---------------------------------------------------------

    def to_bytes(self) -> bytes:
        """The whole index (postings, lengths, parameters, tokeniser) as bytes."""
        return self._ix.to_bytes()

    @classmethod
    def from_bytes(cls, data: bytes) -> BM25:
        """Restore an index from :meth:`to_bytes`; :class:`StoreError` if the bytes are not one."""
        try:
            return cls(_native=_core.BM25Index.from_bytes(bytes(data)))
        except (RuntimeError, ValueError) as exc:
            raise StoreError(f"invalid BM25 index: {exc}") from None

    def save(self, path: str | os.PathLike) -> None:
        """Write the index to ``path`` (atomically: a temporary file, then rename)."""
        path = os.fspath(path)
        tmp = f"{path}.tmp-{os.getpid()}"
        try:
            self._ix.save(tmp)
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except RuntimeError as exc:
            check_native_write(Path(tmp))  # a full disk: OSError ENOSPC, not "write failed"
            raise StoreError(str(exc)) from None
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    @classmethod
    def load(cls, path: str | os.PathLike) -> BM25:
        """Read an index written by :meth:`save`."""
        try:
            return cls(_native=_core.BM25Index.load(os.fspath(path)))
        except RuntimeError as exc:
            raise StoreError(f"{os.fspath(path)}: {exc}") from None

    def __getstate__(self):
        return {"data": self.to_bytes()}

    def __setstate__(self, state):
        self._ix = _core.BM25Index.from_bytes(state["data"])

    def __repr__(self) -> str:
        return f"BM25(n_docs={self.n_docs}, vocab={self.vocab_size}, k1={self._ix.k1}, b={self._ix.b})"
