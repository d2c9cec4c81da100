"""Near-duplicate and exact-duplicate detection: SimHash, permuted-table search, Bloom filter."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import numpy as np

from .. import _core
from .._validate import check_int
from ..errors import BloomFormatError, ConfigError, KernelInputError
from ._common import check_str, check_threads, native_call, str_list

__all__ = ["simhash", "feature_hash", "hamming", "near_duplicates", "BloomFilter"]


def feature_hash(feature: str) -> int:
    """The 64-bit hash SimHash uses for one feature string.

    A feature is a word n-gram (words lower-cased in ASCII, joined by one
    space) or a character n-gram. The hash is FNV-1a over code points followed
    by the SplitMix64 finaliser; use it to build ``weights`` or to check
    fingerprints independently.
    """
    check_str("feature", feature)
    return int(_core.feature_hash(feature))


def simhash(
    texts: Iterable[str],
    ngram: int = 3,
    tokenizer: Literal["word", "char", "word+char"] = "word",
    weights: Mapping[str, float] | None = None,
    threads: int | None = None,
) -> np.ndarray:
    """64-bit SimHash fingerprints of many texts, as a ``uint64`` array.

    ``tokenizer="word"``: features are n-grams of ``ngram`` consecutive words
    (runs of ASCII letters/digits/underscore or non-ASCII non-punctuation
    characters, ASCII lower-cased). ``tokenizer="char"``: n-grams of
    ``ngram`` characters of the text with whitespace runs collapsed to one
    space and ASCII lower-cased. ``tokenizer="word+char"``: the word unigrams
    and the character ``ngram``-grams together in one fingerprint (JERR's
    entity names). A text with fewer units than ``ngram`` has
    one feature (all of them); a text without any has fingerprint 0.
    ``weights`` maps feature strings to weights (default 1.0 each), e.g. IDF.
    ``threads``: ``None`` spreads the texts over every core.
    """
    ngram = check_int(ngram, "ngram", minimum=1)
    if tokenizer not in ("word", "char", "word+char"):
        raise ConfigError(f"tokenizer must be 'word', 'char' or 'word+char', got {tokenizer!r}")
    wmap = None
    if weights is not None:
        wmap = {}
        for f, w in weights.items():
            check_str("weights key", f)
            if not isinstance(w, (int, float, np.floating, np.integer)) or isinstance(w, bool) or not math.isfinite(w):
                raise ConfigError(f"weights[{f!r}] must be a finite number, got {w!r}")
            wmap[int(_core.feature_hash(f))] = float(w)
    return native_call(_core.simhash, str_list("texts", texts), tokenizer, int(ngram), wmap, check_threads(threads))


def hamming(a: int | np.ndarray, b: int | np.ndarray) -> int | np.ndarray:
    """Number of differing bits between 64-bit fingerprints (scalars or arrays)."""
    x = np.bitwise_xor(np.asarray(a, dtype=np.uint64), np.asarray(b, dtype=np.uint64))
    counts = np.unpackbits(np.atleast_1d(x).view(np.uint8)).reshape(-1, 64).sum(axis=1)
    return int(counts[0]) if x.ndim == 0 else counts.astype(np.int64).reshape(x.shape)


def _hash_array(hashes: Any) -> np.ndarray:
    if isinstance(hashes, np.ndarray):
        arr = hashes
    else:
        items = list(hashes)
        for i, h in enumerate(items):
            if isinstance(h, bool) or not isinstance(h, (int, np.integer)):
                raise KernelInputError(f"hashes[{i}]: expected an int fingerprint, got {type(h).__name__}")
            if not 0 <= int(h) < 2**64:
                raise KernelInputError(f"hashes[{i}]: fingerprint {h} is not in [0, 2**64)")
        arr = np.array([int(h) for h in items], dtype=np.uint64)
    if arr.ndim != 1:
        raise KernelInputError(f"hashes: expected a 1-D array, got shape {arr.shape}")
    if arr.dtype.kind not in "iu":
        raise KernelInputError(f"hashes: expected integer fingerprints, got dtype {arr.dtype}")
    if len(arr) >= 2**32:
        raise KernelInputError("hashes: at most 2**32 - 1 fingerprints")
    return np.ascontiguousarray(arr.astype(np.uint64, copy=False))


def near_duplicates(
    hashes: Iterable[int] | np.ndarray,
    max_hamming: int = 3,
    output: Literal["pairs", "clusters"] = "pairs",
) -> np.ndarray:
    """Fingerprints within ``max_hamming`` differing bits, found without comparing all pairs.

    The 64 bits are split into ``max_hamming + 1`` blocks; two fingerprints
    within the distance agree on a whole block, so the items are grouped by
    each block value (one permuted table per block) and only items in the
    same group are compared. Near linear for the small distances SimHash is
    used with (the cost grows with ``max_hamming``; up to 63 is accepted).

    ``output="pairs"``: int64 array (P, 2) of index pairs ``i < j``, sorted.
    ``output="clusters"``: int64 labels, one per item, the smallest index of
    its connected component in the near-duplicate graph.
    int64 arrays are read as the same 64 bits (two's complement).
    """
    max_hamming = check_int(max_hamming, "max_hamming", minimum=0, maximum=63)
    arr = _hash_array(hashes)
    if output == "pairs":
        return _core.near_duplicate_pairs(arr, int(max_hamming))
    if output == "clusters":
        return _core.near_duplicate_clusters(arr, int(max_hamming))
    raise ConfigError(f"output must be 'pairs' or 'clusters', got {output!r}")


class BloomFilter:
    """A Bloom filter over str, bytes and int keys, serialisable to bytes.

    Sized for ``capacity`` keys at ``false_positive_rate``: ``m = -n ln p /
    (ln 2)^2`` bits and ``k = round(m / n ln 2)`` probes from one 64-bit key
    hash (enhanced double hashing). A str and its UTF-8 bytes are different
    keys; ints must fit in 64 bits (numpy integer arrays are taken whole).
    Batch calls release the GIL: do not add from two threads at once.

    >>> bf = BloomFilter(1000, 0.01)
    >>> bf.add("apple")
    True
    >>> "apple" in bf, "pear" in bf
    (True, False)
    """

    def __init__(self, capacity: int, false_positive_rate: float = 0.01):
        capacity = check_int(capacity, "capacity", minimum=1)
        p = false_positive_rate
        if isinstance(p, bool) or not isinstance(p, (int, float)) or math.isnan(p) or not 0 < p < 1:
            raise ConfigError(f"false_positive_rate must be in (0, 1), got {p!r}")
        self._native = _core.BloomFilter(int(capacity), float(p))

    @classmethod
    def _wrap(cls, native: Any) -> BloomFilter:
        obj = cls.__new__(cls)
        obj._native = native
        return obj

    @property
    def capacity(self) -> int:
        """Number of keys the filter was sized for."""
        return int(self._native.capacity)

    @property
    def false_positive_rate(self) -> float:
        """Target false-positive rate at capacity."""
        return float(self._native.false_positive_rate)

    @property
    def bits(self) -> int:
        """Size of the bit array."""
        return int(self._native.bits)

    @property
    def hashes(self) -> int:
        """Number of probes per key."""
        return int(self._native.hashes)

    def __len__(self) -> int:
        """Number of adds that set at least one new bit (distinct keys, up to false positives)."""
        return int(self._native.count)

    def add(self, key: str | bytes | int) -> bool:
        """Add a key; True when it was certainly not present before."""
        return bool(native_call(self._native.add, key))

    def __contains__(self, key: object) -> bool:
        return bool(native_call(self._native.contains, key))

    def contains(self, key: str | bytes | int) -> bool:
        """True when the key may have been added (false positives at about the target rate)."""
        return bool(native_call(self._native.contains, key))

    def add_many(self, keys: Iterable[str | bytes | int] | np.ndarray) -> int:
        """Add many keys; returns how many were certainly new."""
        return int(native_call(self._native.add_many, _keys(keys)))

    def contains_many(self, keys: Iterable[str | bytes | int] | np.ndarray) -> np.ndarray:
        """Membership of many keys as a bool array."""
        return native_call(self._native.contains_many, _keys(keys))

    def to_bytes(self) -> bytes:
        """Serialise (header with the parameters, then the bit array; little-endian)."""
        return bytes(self._native.to_bytes())

    @classmethod
    def from_bytes(cls, data: bytes) -> BloomFilter:
        """Load a filter written by :meth:`to_bytes`; :class:`BloomFormatError` on anything else."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise BloomFormatError(f"from_bytes: expected bytes, got {type(data).__name__}")
        try:
            return cls._wrap(_core.BloomFilter.from_bytes(bytes(data)))
        except ValueError as exc:
            raise BloomFormatError(str(exc)) from exc

    def __repr__(self) -> str:
        return (
            f"BloomFilter(capacity={self.capacity}, false_positive_rate={self.false_positive_rate}, "
            f"bits={self.bits}, hashes={self.hashes}, count={len(self)})"
        )


def _keys(keys: Any) -> Any:
    if isinstance(keys, (str, bytes)):
        raise KernelInputError("keys: expected a sequence of keys, got a single str/bytes (wrap it in a list)")
    if isinstance(keys, np.ndarray):
        if keys.ndim != 1:
            raise KernelInputError(f"keys: expected a 1-D array, got shape {keys.shape}")
        if keys.dtype.kind == "f":
            raise KernelInputError(f"keys: float arrays are not keys (dtype {keys.dtype})")
        return keys
    if isinstance(keys, (list, tuple)):
        return keys
    return list(keys)
