"""Plain pure-Python MCTS written from the papers, used as the test oracle.

Momoka-RAG section 3 (UCT eq. 3, random expansion without repeating an item
on the path, rollout with a step reward per step, eq. 4 / eq. 7, mean return
eq. 5, cumulative backpropagation, best path by visits), ETS eq. 1 / eq. 3
(running-mean backup, top-M expansion, and the "scored" expansion: per node, the
top M items off the path by a score of (path, item), ties to the lower item) and JERR (search on a graph, summed
return). Decisions the papers leave open follow momoka's documented rules
(docs/search.md): SplitMix64 per root, how a uniform pick is drawn, tie-breaks,
waves of `parallel` trajectories with virtual loss.

Deliberately simple: one object per node, Python lists and sets, no caching.
"""

from __future__ import annotations

import math

MASK = (1 << 64) - 1


class SplitMix64:
    def __init__(self, seed, root):
        self.state = (seed ^ (((root + 1) * 0xD1B54A32D192ED03) & MASK)) & MASK

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def below(self, n):
        return self.next() % n


class Node:
    def __init__(self, item, parent, depth):
        self.item = item
        self.parent = parent
        self.depth = depth
        self.children = []
        self.visits = 0
        self.value = 0.0  # cumulative R ("sum") or running mean V ("mean")
        self.vl = 0
        self.ncand = 0

    def path(self):
        out = []
        node = self
        while node is not None:
            out.append(node.item)
            node = node.parent
        return out[::-1]


class ReferenceMCTS:
    """One search from `root`. `I(context, cand)`: context is the root item
    (pair mode) or the tuple of the path before cand (path mode)."""

    def __init__(self, n, root, I, *, iterations=100, rollout_len=5, rollout_scope="path", c=math.sqrt(2), backup="sum",
                 rollout_return="mean", expansion="random", prior=None, top_m=3, neighbors=None,
                 reward="pair", paragraph=None, sentence=None, alpha=3.0, beta=2.0, gamma=1.0, delta=1.0,
                 normalize=True, widening=None, parallel=1, max_depth=None, seed=0, score=None):
        self.n, self.root_item, self.I = n, root, I
        self.iterations, self.L, self.c = iterations, rollout_len, c
        self.scope = rollout_scope
        self.backup, self.ret, self.expansion = backup, rollout_return, expansion
        self.top_m, self.neighbors, self.reward = top_m, neighbors, reward
        self.paragraph, self.sentence = paragraph, sentence
        self.alpha, self.beta, self.gamma, self.delta = alpha, beta, gamma, delta
        self.widening, self.parallel, self.max_depth = widening, parallel, max_depth
        if prior is not None:
            self.order = sorted(range(n), key=lambda i: (-prior[i], i))
        self.r_max = 1.0
        if paragraph is not None and normalize:
            self.r_max = 1.0 + alpha / gamma + beta / delta
        self.rng = SplitMix64(seed, root)
        self.nodes = []
        self.root = self.new_node(root, None)
        self.calls = []  # (context, cand) of every reward evaluation, in order
        self.score = score  # expansion="scored": score(path tuple, cand)
        self.score_calls = []  # (path tuple, cand) of every expansion score, in order

    # -- candidates
    def scored_candidates(self, node):
        """The node's kept top M, computed (and its scores recorded) the first time it is needed."""
        if getattr(node, "kept", None) is None:
            path = tuple(node.path())
            free = [u for u in range(self.n) if u not in path]
            for u in free:
                self.score_calls.append((path, u))
            node.kept = sorted(free, key=lambda u: (-self.score(path, u), u))[: self.top_m]
        return node.kept

    def candidates(self, item, on_path):
        if self.expansion == "scored":  # only the count is known before the scores
            return [None] * min(self.top_m, self.n - len(on_path))
        if self.expansion == "random":
            return [i for i in range(self.n) if i not in on_path]
        if self.expansion == "topm":
            return [i for i in self.order if i not in on_path][: self.top_m]
        return sorted({j for j in self.neighbors[item] if j not in on_path and j != item})

    def new_node(self, item, parent):
        node = Node(item, parent, 0 if parent is None else parent.depth + 1)
        node.ncand = len(self.candidates(item, set(node.path())))
        if parent is not None:
            parent.children.append(node)
        self.nodes.append(node)
        return node

    def uniform_excluding(self, excluded):
        free = self.n - len(excluded)
        if free <= 0:
            return None
        if 2 * free >= self.n:
            while True:
                u = self.rng.below(self.n)
                if u not in excluded:
                    return u
        k = self.rng.below(free)
        return [i for i in range(self.n) if i not in excluded][k]

    def pick_from(self, items):
        if not items:
            return None
        return items[self.rng.below(len(items))]

    def expandable(self, node):
        if self.max_depth is not None and node.depth >= self.max_depth:
            return False
        if len(node.children) >= node.ncand:
            return False
        if self.widening is not None:
            k, a = self.widening
            limit = max(1.0, math.ceil(k * max(node.visits, 1) ** a))
            if len(node.children) >= limit:
                return False
        return True

    def mean(self, node):
        if node.visits == 0:
            return 0.0
        return node.value / node.visits if self.backup == "sum" else node.value

    def uct_child(self, node):
        unvisited = [ch for ch in node.children if ch.visits + ch.vl == 0]
        if unvisited:
            return min(unvisited, key=lambda ch: ch.item)
        n_parent = node.visits + node.vl
        best, best_u = None, None
        for ch in node.children:
            ne = ch.visits + ch.vl
            if ch.vl == 0:
                m = self.mean(ch)
            else:
                m = (ch.value if self.backup == "sum" else ch.value * ch.visits) / ne
            u = m + self.c * math.sqrt(math.log(n_parent) / ne)  # eq. 3 / ETS eq. 1
            if best is None or u > best_u or (u == best_u and ch.item < best.item):
                best, best_u = ch, u
        return best

    def step_reward(self, context, cand):
        self.calls.append((context, cand))
        r = self.I(context, cand)
        if self.paragraph is not None:
            p, s, root = self.paragraph, self.sentence, self.root_item
            r += self.alpha / (abs(p[root] - p[cand]) + self.gamma)
            r += self.beta / (abs(s[root] - s[cand]) + self.delta)
        return r / self.r_max

    def trajectory(self):
        node = self.root
        while not self.expandable(node) and node.children:
            node = self.uct_child(node)
        on_path = node.path()
        if self.expandable(node):
            child_items = {ch.item for ch in node.children}
            if self.expansion == "random":
                item = self.uniform_excluding(set(on_path) | child_items)
            elif self.expansion == "topm":
                item = self.candidates(node.item, set(on_path))[len(node.children)]
            elif self.expansion == "scored":
                item = self.scored_candidates(node)[len(node.children)]
            else:
                item = self.pick_from(self.candidates(node.item, set(on_path) | child_items))
            node = self.new_node(item, node)
        elif node is self.root:
            return None
        # rollout: the leaf, then random items by the same policy, up to L steps
        path = node.path()
        steps = []
        if self.scope == "path":  # every node on the path below the root is scored
            steps = [(tuple(path[:k]), path[k]) for k in range(1, len(path) - 1)]
        steps.append((tuple(path[:-1]), path[-1]))
        used = list(path)
        cur = path[-1]
        while len(steps) < self.L:
            if self.expansion in ("random", "scored"):
                nxt = self.uniform_excluding(set(used))
            elif self.expansion == "topm":
                nxt = self.pick_from(self.candidates(cur, set(used)))
            else:
                nxt = self.pick_from(self.candidates(cur, set(used)))
            if nxt is None:
                break
            steps.append((tuple(used), nxt))
            used.append(nxt)
            cur = nxt
        return node, steps

    def run(self):
        done = 0
        if self.root.ncand == 0 or (self.max_depth == 0):
            return self
        while done < self.iterations:
            wave = []
            for _ in range(min(self.parallel, self.iterations - done)):
                t = self.trajectory()
                if t is None:
                    break
                node = t[0]
                while node is not None:
                    node.vl += 1
                    node = node.parent
                wave.append(t)
            if not wave:
                break
            for leaf, steps in wave:
                rewards = []
                for prefix, cand in steps:
                    context = self.root_item if self.reward == "pair" else prefix
                    rewards.append(self.step_reward(context, cand))
                if self.ret == "mean":
                    R = sum(rewards) / len(rewards)  # eq. 5
                elif self.ret == "sum":
                    R = sum(rewards)
                else:
                    R = rewards[-1]
                node = leaf
                while node is not None:
                    node.vl -= 1
                    node.visits += 1
                    if self.backup == "sum":
                        node.value += R
                    else:
                        node.value += (R - node.value) / node.visits  # ETS eq. 3
                    node = node.parent
                done += 1
        return self

    def best_path(self, cap):
        out, node = [], self.root
        while len(out) < cap:
            kids = [ch for ch in node.children if ch.visits > 0]
            if not kids:
                break
            node = min(kids, key=lambda ch: (-ch.visits, -self.mean(ch), ch.item))
            out.append(node.item)
        return out

    def top_children(self, k):
        kids = [ch for ch in self.root.children if ch.visits > 0]
        kids.sort(key=lambda ch: (-self.mean(ch), -ch.visits, ch.item))
        return [ch.item for ch in kids[:k]]


def compare(engine, refs, cap):
    """Assert that ``engine``'s tree of each root equals the reference search ``refs[i]`` node for node
    (item, parent, visits, value), with the same best path (``cap`` deep) and top children."""
    import numpy as np

    for i, r in enumerate(refs):
        t = engine.tree(i)
        assert t["item"].tolist() == [nd.item for nd in r.nodes]
        ids = {id(nd): k for k, nd in enumerate(r.nodes)}
        assert t["parent"].tolist() == [-1 if nd.parent is None else ids[id(nd.parent)] for nd in r.nodes]
        assert t["visits"].tolist() == [nd.visits for nd in r.nodes]
        np.testing.assert_allclose(t["value"], [nd.value for nd in r.nodes], rtol=1e-12, atol=1e-12)
        assert engine.paths()[i].tolist() == r.best_path(cap)
        assert engine.top_children(3)[i].tolist() == r.top_children(3)
