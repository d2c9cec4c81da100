"""JERR graph search: Algorithm 1 (MCTS, appendix B) as written, its virtual-root variant, and PageRank (Table 4).

Keywords are the query's lower-case words without the BM25 stop words. A
node's reward is the number of keywords among the words of its entity name,
its aliases and the attributes of its edges (``METHODS.md`` section 5).

``variant="paper"`` (the default) is Algorithm 1 line by line, in Python over
the node graph (:func:`alg1_search`):

* the root holds one start node ``S[0]``: the node matching most keywords
  (ties: the lowest node index, i.e. the entity seen first);
* selection descends while the node has children, to the child of highest
  ``UCB = W/N + c * sqrt(ln N(parent) / N)`` (eqs. 7-9: the win/visit ratio
  plus the exploration term; ``c=0`` is line 6's plain win/visit), unvisited
  children first, ties to the lowest node index;
* expansion gives a childless node its graph neighbours that are not yet in
  the tree (eq. 10), in node order; "neighbours in G" are taken both ways
  along the DAG's edges by default (``direction="both"``): along out-edges
  only, the best-matching node is often a sink (entities named last have no
  out-edge) and the search then returns nothing;
* simulation moves to the best child of the expanded node, then walks at most
  ``depth`` (10) nodes, adding each node's keyword matches (eq. 11); outside
  the tree a node has no win/visit statistics, so the walk's "best child" is
  the graph neighbour with most keyword matches not yet on the root-to-walk
  path (ties: lowest index), and it stops at a node without one;
* backpropagation adds one visit and the score to the simulated node and every
  ancestor up to the root (eqs. 12-13);
* the result is the root's visited children by win/visit (ties: more visits,
  then lowest index), top ``k`` (line 35). The start node itself is not a result.

``variant="virtual-root"`` is the earlier search on the native engine
(:class:`momoka.mcts.MCTS`): a virtual root whose children are *all* nodes
matching a keyword, rollouts that sum the rewards of the whole tree path
(root side first) and then of a *random* neighbour walk, UCB with the same
``c``, out-edges only by default; the result is again the root's children by win/visit.

PageRank: personalised PageRank (damping 0.85) restarting at the
keyword-matching nodes in proportion to their matches.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..._validate import check_choice, check_float, check_int
from ...mcts import MCTS
from .extract import content_words
from .graph import csr

__all__ = ["Alg1Tree", "DIRECTION", "NodeGraph", "VARIANTS", "alg1_search", "keywords", "mcts_top_nodes", "neighbour_lists",
           "pagerank_top_nodes", "start_node"]


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


VARIANTS = ("paper", "virtual-root")
#: each variant's default expansion direction
DIRECTION = {"paper": "both", "virtual-root": "out"}


@dataclass
class Alg1Tree:
    """The search tree of one :func:`alg1_search` run; tree node 0 is the root.

    ``item[t]``: the graph node of tree node ``t``; ``parent[t]`` (-1 for the
    root); ``visits[t]`` and ``wins[t]``: N and W (eqs. 12-13).
    """

    item: list[int]
    parent: list[int]
    visits: list[int]
    wins: list[float]

    def ranked_children(self) -> list[int]:
        """The root's visited children (tree nodes) by win/visit, then more visits, then lower graph node."""
        kids = [t for t in range(1, len(self.item)) if self.parent[t] == 0 and self.visits[t] > 0]
        return sorted(kids, key=lambda t: (-self.wins[t] / self.visits[t], -self.visits[t], self.item[t]))


def start_node(rewards: Sequence[float]) -> int:
    """Algorithm 1's start node ``S[0]``: the node matching most keywords (ties: lowest index); -1 if none matches."""
    best = -1
    for v, r in enumerate(rewards):
        if r > 0 and (best < 0 or r > rewards[best]):
            best = v
    return best


def alg1_search(neighbours: Sequence[Sequence[int]], rewards: Sequence[float], start: int, *,
                simulations: int = 100, depth: int = 10, c: float = math.sqrt(2.0)) -> Alg1Tree:
    """Algorithm 1 from ``start`` over a graph given as sorted neighbour lists; see the module docstring.

    ``rewards[v]``: keyword matches of node ``v``. Deterministic: no random choice is made.
    """
    item, parent, visits, wins = [start], [-1], [0], [0.0]
    children: list[list[int]] = [[]]
    in_tree = {start}

    def best_child(t: int) -> int:
        best, best_u = -1, 0.0
        for ch in children[t]:  # in node order
            if visits[ch] == 0:
                return ch
            u = wins[ch] / visits[ch] + c * math.sqrt(math.log(visits[t]) / visits[ch])
            if best < 0 or u > best_u:
                best, best_u = ch, u
        return best

    for _ in range(simulations):
        n = 0
        while children[n]:  # selection
            n = best_child(n)
        for v in neighbours[item[n]]:  # expansion (eq. 10): neighbours not yet in the tree
            if v not in in_tree:
                in_tree.add(v)
                item.append(v)
                parent.append(n)
                visits.append(0)
                wins.append(0.0)
                children.append([])
                children[n].append(len(item) - 1)
        if children[n]:
            n = best_child(n)
        on_path = set()
        t = n
        while t >= 0:
            on_path.add(item[t])
            t = parent[t]
        v, score = item[n], 0.0
        for _d in range(depth):  # simulation (eq. 11)
            score += rewards[v]
            nxt = -1
            for u in neighbours[v]:
                if u not in on_path and (nxt < 0 or rewards[u] > rewards[nxt]):
                    nxt = u
            if nxt < 0:
                break
            on_path.add(nxt)
            v = nxt
        while n >= 0:  # backpropagation (eqs. 12-13)
            visits[n] += 1
            wins[n] += score
            n = parent[n]
    return Alg1Tree(item, parent, visits, wins)


def neighbour_lists(g: NodeGraph, direction: str = "out") -> list[list[int]]:
    """Sorted, distinct neighbours of every node (out-edges, or both ways with ``direction="both"``)."""
    indptr, indices = csr(g.n, g.edges, direction)
    return [sorted({int(x) for x in indices[indptr[v]:indptr[v + 1]]}) for v in range(g.n)]


def mcts_top_nodes(g: NodeGraph, query: str, k: int = 5, *, variant: str = "paper", simulations: int = 100,
                   depth: int = 10, c: float = math.sqrt(2.0), direction: str | None = None, seed: int = 0,
                   threads: int | None = 1) -> tuple[list[int], list[float], dict]:
    """Top ``k`` nodes by win/visit after Algorithm 1 (``variant="paper"``) or the virtual-root variant.

    ``direction``: ``"out"`` or ``"both"``; None: the variant's default (:data:`DIRECTION`). Returns
    (nodes, win/visit scores, stats); ``seed`` and ``threads`` only matter to ``"virtual-root"`` (the
    paper's search draws nothing at random).
    """
    variant = check_choice(variant, "variant", VARIANTS)
    direction = DIRECTION[variant] if direction is None else check_choice(direction, "direction", ("out", "both"))
    simulations = check_int(simulations, "simulations", minimum=0)
    depth = check_int(depth, "depth", minimum=1)
    c = check_float(c, "c", minimum=0.0)
    kw = keywords(query)
    I = g.rewards(kw)
    start = np.flatnonzero(I > 0)
    stats = {"keywords": sorted(kw), "variant": variant, "direction": direction, "start_nodes": int(start.size)}
    if start.size == 0 or k <= 0:
        return [], [], stats
    if variant == "paper":
        s0 = start_node(I.tolist())
        tree = alg1_search(neighbour_lists(g, direction), I.tolist(), s0, simulations=simulations, depth=depth, c=c)
        top = tree.ranked_children()[:k]
        stats.update({"start_nodes": 1, "start_node": s0, "tree_nodes": len(tree.item)})
        return [tree.item[t] for t in top], [tree.wins[t] / tree.visits[t] for t in top], stats
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
