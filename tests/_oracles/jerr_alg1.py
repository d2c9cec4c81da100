"""Plain-Python transcription of JERR's Algorithm 1 (papers/003, appendix B), line by line.

Written from the paper's pseudo-code and appendix B's equations, with tree
nodes as objects (state, parent, children, visits, wins) as the pseudo-code
speaks of them. Where the paper leaves a gap the reference takes the
decisions that ``docs/jerr.md`` states:

* ``S[0]``: the graph node matching most keywords, ties to the lowest index;
* "best child" in the tree (lines 6 and 17): the highest UCB (eq. 8) with
  Q = wins / visits (eq. 7), a never-visited child first, ties to the
  earliest child;
* expansion (line 13, eq. 10): the graph neighbours not yet in the tree, in
  node order;
* "best child" of the simulation walk (line 23), which is outside the tree:
  the graph neighbour with most keyword matches that is not yet on the
  root-to-walk path, ties to the lowest index; the walk stops where there is
  none (line 24);
* backpropagation (lines 30-33) starts at the node the simulation started from;
* line 35: the root's visited children by wins / visits, ties to more visits,
  then the lower graph node.
"""

from __future__ import annotations

import math


class TreeNode:
    def __init__(self, state, parent=None):
        self.state = state
        self.parent = parent
        self.children = []
        self.visits = 0
        self.wins = 0.0

    def ucb(self, kappa):
        if self.visits == 0:
            return math.inf
        return self.wins / self.visits + kappa * math.sqrt(math.log(self.parent.visits) / self.visits)

    def best_child(self, kappa):
        best = None
        for ch in self.children:
            if best is None or ch.ucb(kappa) > best.ucb(kappa):
                best = ch
        return best


def matches(K, words):
    return len(K & words)


def ref_alg1(adjacency, node_words, K, N=100, depth=10, kappa=math.sqrt(2.0)):
    """Returns (root TreeNode, every TreeNode in creation order, ranked root children).

    ``adjacency[v]``: the neighbours of graph node v; ``node_words[v]``: its word set; ``K``: keyword set.
    """
    score_of = [matches(K, w) for w in node_words]
    S = [v for v in sorted(range(len(node_words)), key=lambda v: (-score_of[v], v)) if score_of[v] > 0]
    if not S:
        return None, [], []
    R = TreeNode(S[0])  # line 1
    every = [R]
    states_in_tree = {R.state}
    for _i in range(N):  # line 3
        n = R  # line 4
        while n.children:  # line 5
            n = n.best_child(kappa)  # line 6
            if not n.children:  # line 7
                break
        if not n.children:  # line 12
            for v in sorted(set(adjacency[n.state])):  # line 13, eq. 10
                if v not in states_in_tree:
                    child = TreeNode(v, n)
                    n.children.append(child)
                    every.append(child)
                    states_in_tree.add(v)
        if n.children:  # line 16
            n = n.best_child(kappa)  # line 17
        score = 0  # line 19
        path = set()
        a = n
        while a is not None:
            path.add(a.state)
            a = a.parent
        g = n.state
        for _d in range(depth):  # line 20
            score += score_of[g]  # line 22
            options = [u for u in sorted(set(adjacency[g])) if u not in path]
            if not options:  # line 24
                break
            g = max(options, key=lambda u: (score_of[u], -u))  # line 23
            path.add(g)
        while n is not None:  # line 30
            n.visits += 1  # line 31
            n.wins += score
            n = n.parent  # line 32
    visited = [c for c in R.children if c.visits > 0]
    ranked = sorted(visited, key=lambda c: (-c.wins / c.visits, -c.visits, c.state))  # line 35
    return R, every, ranked
