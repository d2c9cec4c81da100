"""JERR graph search: Algorithm 1 (MCTS) on the native engine, and the PageRank variant (Table 4).

Keywords are the query's lower-case words without the BM25 stop words. A
node's reward is the number of keywords among the words of its entity name
and of the attributes of its edges (``METHODS.md`` section 5). The MCTS runs
on :class:`momoka.search.MCTS` with one extra item, a virtual root whose
neighbours are the nodes matching at least one keyword; expansion follows the
graph's neighbours, a simulation scores the tree path then a random walk along
neighbours up to ``depth`` (10) steps and returns the *sum* of the rewards
(eq. 11), backup adds visits and wins, selection is UCB with ``c`` (sqrt 2),
``simulations`` (100); the result is the root's children by win/visit
(``top_children``). PageRank: personalised PageRank (damping 0.85) restarting
at the keyword-matching nodes in proportion to their matches.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ...errors import ConfigError
from ...search import MCTS
from .extract import content_words
from .graph import csr

__all__ = ["NodeGraph", "keywords", "mcts_top_nodes", "pagerank_top_nodes"]


def keywords(query: str) -> set[str]:
    """JERR's query keywords: lower-case words minus stop words."""
    return set(content_words(query))


@dataclass
class NodeGraph:
    """Nodes ``0..n-1`` with their word sets and directed edges (for the search only)."""

    words: list[set[str]]
    edges: list[tuple[int, int]]

    @property
    def n(self) -> int:
        return len(self.words)

    def rewards(self, kw: set[str]) -> np.ndarray:
        """Keyword matches per node."""
        return np.asarray([len(kw & w) for w in self.words], dtype=np.float64)


def mcts_top_nodes(g: NodeGraph, query: str, k: int = 5, *, simulations: int = 100, depth: int = 10,
                   c: float = math.sqrt(2.0), direction: str = "out", seed: int = 0,
                   threads: int | None = 1) -> tuple[list[int], list[float], dict]:
    """Top ``k`` nodes by win/visit after Algorithm 1; returns (nodes, scores, stats)."""
    if direction not in ("out", "both"):
        raise ConfigError(f"direction must be 'out' or 'both', not {direction!r}")
    kw = keywords(query)
    I = g.rewards(kw)
    start = np.flatnonzero(I > 0)
    stats = {"keywords": sorted(kw), "start_nodes": int(start.size)}
    if start.size == 0 or k <= 0:
        return [], [], stats
    n = g.n
    indptr, indices = csr(n, g.edges, direction)
    # the virtual root (item n) points at every keyword-matching node
    indptr = np.concatenate([indptr, [indptr[-1] + start.size]])
    indices = np.concatenate([indices, start.astype(np.int64)])
    m = MCTS(n + 1, roots=[n], iterations=simulations, rollout_len=depth, rollout_return="sum", backup="sum",
             expansion="neighbors", graph=(indptr, indices), c=c, normalize=False, seed=seed, threads=threads)
    m.run_native(np.concatenate([I, [0.0]]), threads=threads)
    top = [int(x) for x in m.top_children(k)[0]]
    t = m.tree(0)
    mean = {int(it): float(mu) for it, mu, par in zip(t["item"], t["mean"], t["parent"]) if par == 0}
    stats["tree_nodes"] = int(len(t["item"]))
    return top, [mean[x] for x in top], stats


def pagerank_top_nodes(g: NodeGraph, query: str, k: int = 5, *, damping: float = 0.85, iterations: int = 50,
                       direction: str = "out") -> tuple[list[int], list[float], dict]:
    """Top ``k`` nodes by personalised PageRank restarting at the keyword-matching nodes."""
    kw = keywords(query)
    I = g.rewards(kw)
    stats = {"keywords": sorted(kw), "start_nodes": int((I > 0).sum())}
    if I.sum() == 0 or k <= 0:
        return [], [], stats
    n = g.n
    indptr, indices = csr(n, g.edges, direction)
    outdeg = np.diff(indptr).astype(np.float64)
    src = np.repeat(np.arange(n), np.diff(indptr))
    p = I / I.sum()
    r = p.copy()
    for _ in range(iterations):
        share = np.where(outdeg > 0, r / np.maximum(outdeg, 1), 0.0)
        nxt = np.zeros(n)
        np.add.at(nxt, indices, share[src])
        dangling = r[outdeg == 0].sum()
        r = damping * (nxt + dangling * p) + (1 - damping) * p
    order = np.lexsort((np.arange(n), -r))[:k]
    return [int(i) for i in order], [float(r[i]) for i in order], stats


def node_words(names: Sequence[str], aliases: Sequence[Sequence[str]], edge_attrs: Sequence[Sequence[str]]) -> list[set[str]]:
    """Per node, the content words of its name, aliases and edge attributes."""
    out = []
    for nm, al, at in zip(names, aliases, edge_attrs):
        w = set(content_words(nm))
        for a in list(al) + list(at):
            w.update(content_words(a))
        out.append(w)
    return out
