"""Tries over strings or token-id sequences, and unique-prefix lengths (ETS early termination)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Union

import numpy as np

from .. import _core
from ..errors import ConfigError, KernelInputError
from ._common import native_call

__all__ = ["Trie", "unique_prefix_lengths"]

Key = Union[str, Sequence[int], np.ndarray]
_STR, _SEQ = 0, 1


def _kind_of(key: object) -> int:
    if isinstance(key, str):
        return _STR
    if isinstance(key, (bytes, bytearray)):
        raise KernelInputError("key: bytes are not keys; pass a str or a sequence of token ids")
    return _SEQ


class Trie:
    """A trie over str keys (code points) or token-id sequences (ints in [0, 2**32)).

    One trie holds one kind of key; mixing kinds raises
    :class:`KernelInputError`. Keys are reported back as str, or as tuples of
    ints for token sequences. Batch calls release the GIL: do not insert from
    two threads at once.

    >>> t = Trie(["car", "cart", "cat"])
    >>> t.keys_with_prefix("car")
    ['car', 'cart']
    >>> t.longest_common_prefix("cargo"), t.longest_prefix("cartoon")
    (3, 'cart')
    """

    def __init__(self, keys: Iterable[Key] | None = None):
        self._native = _core.Trie()
        self._kind: int | None = None
        if keys is not None:
            self.insert_many(keys)

    def _check(self, key: object) -> int:
        kind = _kind_of(key)
        if self._kind is not None and kind != self._kind:
            want = "str" if self._kind == _STR else "token-id sequence"
            raise KernelInputError(f"this Trie holds {want} keys, got {type(key).__name__}")
        return kind

    def insert(self, key: Key) -> bool:
        """Insert a key; True when it was new."""
        kind = self._check(key)
        fresh, _ = native_call(self._native.insert, key)
        self._kind = kind
        return bool(fresh)

    def insert_many(self, keys: Iterable[Key]) -> int:
        """Insert many keys; returns how many were new."""
        items = keys if isinstance(keys, list) else list(keys)
        if not items:
            return 0
        kind = self._check(items[0])
        fresh, _ = native_call(self._native.insert_many, items)
        self._kind = kind
        return int(fresh)

    def __len__(self) -> int:
        return int(len(self._native))

    def __contains__(self, key: object) -> bool:
        if self._kind is not None and _kind_of(key) != self._kind:
            return False
        if self._kind is None:
            return False
        found, _ = native_call(self._native.contains, key)
        return bool(found)

    def contains_many(self, keys: Iterable[Key]) -> np.ndarray:
        """Exact membership of many keys as a bool array."""
        items = keys if isinstance(keys, list) else list(keys)
        if self._kind is None:
            return np.zeros(len(items), dtype=bool)
        return native_call(self._native.contains_many, items, self._kind)

    def count_prefix(self, prefix: Key) -> int:
        """Number of keys that start with ``prefix``."""
        if self._kind is None:
            return 0
        self._check(prefix)
        return int(native_call(self._native.count_prefix, prefix))

    def keys_with_prefix(self, prefix: Key, limit: int | None = None) -> list:
        """Keys that start with ``prefix``, in code-point / token-id order (at most ``limit``)."""
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise ConfigError(f"limit must be None or an int >= 0, got {limit!r}")
        if self._kind is None:
            return []
        self._check(prefix)
        lim = (1 << 62) if limit is None else limit
        return native_call(self._native.keys_with_prefix, prefix, lim, self._kind)

    def longest_common_prefix(self, query: Key) -> int:
        """Length of the longest prefix of ``query`` shared with some key."""
        if self._kind is None:
            return 0
        self._check(query)
        return int(native_call(self._native.longest_common_prefix, query))

    def longest_prefix(self, query: Key) -> Key | None:
        """The longest key that is a prefix of ``query`` (``None`` if there is none)."""
        if self._kind is None:
            return None
        self._check(query)
        n = int(native_call(self._native.longest_prefix_key, query))
        if n < 0:
            return None
        return query[:n] if self._kind == _STR else tuple(int(x) for x in list(query)[:n])


def unique_prefix_lengths(sequences: Iterable[Key]) -> np.ndarray:
    """For each sequence, the shortest prefix length no other sequence of the set shares.

    This is where ETS's early-terminating beam search can stop decoding: once
    the generated prefix is that long, it identifies one candidate. A sequence
    that is a prefix of another (or appears twice) reports its full length; in
    a set of one, the empty prefix (0) already identifies it. Accepts str or
    token-id sequences (not mixed); returns an int64 array.

    >>> unique_prefix_lengths(["apple", "apricot", "banana", "app"]).tolist()
    [4, 3, 1, 3]
    """
    if isinstance(sequences, str):
        raise KernelInputError("sequences: expected a sequence of keys, got a single str (wrap it in a list)")
    items = list(sequences)
    for i, s in enumerate(items):
        if isinstance(s, (bytes, bytearray)):
            raise KernelInputError(f"sequences[{i}]: bytes are not sequences; pass str or token ids")
    return native_call(_core.unique_prefix_lengths, items)
