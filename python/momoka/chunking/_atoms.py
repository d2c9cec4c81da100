"""What the chunkers measure in tokens: :class:`Atoms` (where tokens start in a text, and how many) and the
:class:`TokenSource` that makes them from a tokenizer (the sources are in :mod:`momoka.chunking._tokens` and
:mod:`momoka.chunking._hf_tokens`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Atoms:
    """Where tokens start in a text, and how many start there.

    ``starts`` is sorted, int64. ``weights`` is None when every atom is one
    token. ``cum[k]`` is the number of tokens starting before atom ``k``
    (length ``len(starts) + 1``). ``lead`` (None: none) holds, per atom, the
    tokens to add when that atom is the first of a span: a text's first word
    may encode to another count than the same word after whitespace.
    """

    starts: np.ndarray
    weights: np.ndarray | None
    lead: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.weights is None:
            self.cum = np.arange(self.starts.size + 1, dtype=np.int64)
        else:
            self.cum = np.zeros(self.starts.size + 1, dtype=np.int64)
            np.cumsum(self.weights, out=self.cum[1:])
        if self.lead is not None and not self.lead.any():
            self.lead = None

    def tokens_before(self, positions: np.ndarray) -> np.ndarray:
        """Number of tokens that start before each position."""
        return self.cum[np.searchsorted(self.starts, positions, side="left")]

    def lead_at(self, positions: np.ndarray) -> np.ndarray:
        """The lead of the first atom at or after each position (0 past the last atom, or without leads)."""
        positions = np.asarray(positions, dtype=np.int64)
        if self.lead is None:
            return np.zeros(positions.shape, dtype=np.int64)
        lead = np.append(self.lead, 0)
        return lead[np.searchsorted(self.starts, positions, side="left")]

    def measure(self, s: np.ndarray, e: np.ndarray) -> np.ndarray:
        """Tokens of each span [s, e) as the packer counts them (its first atom with its lead)."""
        t = self.tokens_before(e) - self.tokens_before(s)
        return np.where(t > 0, t + self.lead_at(s), 0)


class TokenSource:
    """Adapter turning a tokenizer into :class:`Atoms` for a text."""

    name = "tokens"

    def atoms(self, text: str) -> Atoms:  # pragma: no cover - interface
        raise NotImplementedError

    def count(self, text: str) -> int:
        """Tokens in ``text`` as this source counts them."""
        a = self.atoms(text)
        return int(a.cum[-1])
