"""ETS's offline form over a whole corpus: evidence-conditioned, iterative retrieval of passages.

A multi-hop question ("Where is the company that Sachin Warrier worked for headquartered?") needs a
second passage that only the first one names. The ETS paper finds evidence by a tree search whose
policy writes the next piece of evidence given the question *and the evidence chosen so far*, kept to
the best paths by an early-terminating beam. :class:`HopsRetriever` does this with the index's own
parts, over whole passages of the corpus (the ``ets`` refiner does it over sentences):

* **policy** (the expansion of a path): the question **reformulated by the path** (:func:`reformulate`:
  the question followed by the path's passages, as multi-hop dense retrieval and IRCoT do, less the words
  the question already holds), ranked by the ``hybrid`` retriever over
  the whole store. The reformulated text names what the first passage names, so the hybrid retriever's
  title links (:mod:`momoka.methods.standard.links`) place the pages it names by title (the bridge
  entities) right after its best item, and its fusion finds passages that share the path's terms. A
  passage already on the path is skipped (another passage of its document is not: in a long document
  the second hop is often a few paragraphs on); the ``expansion`` best others are the node's
  children, each with its score normalised by the best one of that ranking (in (0, 1]).
* **value** of a path: the sum of its steps' normalised scores (the root's step: the question's own
  hybrid ranking), so a path's value grows with each hop; :func:`.beam.run_beam` keeps the ``beam``
  best paths at each depth, up to ``hops`` passages.
* **early termination**: a path stops growing when its passages already hold every content term of
  the question (:func:`momoka.methods.grounding.content_terms`) *and* it has at least two passages: a
  comparison question answered by two named pages needs no third.

The result lists the passages of the paths in the order of their value (a path's passages in path
order, each passage once), then the rest of the question's own hybrid ranking: budget-aware through
the assembler as every ranking (``Result.fit``). Cost: one hybrid ranking for the question and one for
each expanded path, batched per depth (one embedding call).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..._validate import check_int
from ...registry import register
from ...store.store import RAW_VIEW
from ..grounding import content_terms
from ..standard.retrievers import HybridRetriever, StoreRetriever

__all__ = ["HopsRetriever", "reformulate", "DEFAULT_BEAM", "DEFAULT_EXPANSION", "DEFAULT_HOPS"]

#: Paths kept at each depth.
DEFAULT_BEAM = 3
#: Children of a path (its best next passages).
DEFAULT_EXPANSION = 2
#: Passages on a path at most.
DEFAULT_HOPS = 2
#: Words of the path a reformulated query keeps at most (the embedder reads 256 tokens of it).
PATH_WORDS = 120


class HopsRetriever(StoreRetriever):
    """Multi-hop passage retrieval as ETS's beam over an evidence-conditioned policy (module doc).

    Args:
        index: the :class:`momoka.Index` (needs the raw BM25 view; vectors when present).
        beam: paths kept at each depth.
        expansion: children of each path.
        hops: the most passages on a path (1: the hybrid ranking itself).
        **hybrid: options of the ``hybrid`` retriever that ranks the question and each reformulation.
    """

    name = "ets"

    def __init__(self, index: Any, *, beam: int = DEFAULT_BEAM, expansion: int = DEFAULT_EXPANSION,
                 hops: int = DEFAULT_HOPS, **hybrid: Any):
        super().__init__(index)
        self.beam = check_int(beam, "ets: beam", minimum=1)
        self.expansion = check_int(expansion, "ets: expansion", minimum=1)
        self.hops = check_int(hops, "ets: hops", minimum=1)
        self.hybrid = HybridRetriever(index, **hybrid)

    def provenance(self) -> dict:
        return {"retriever": self.name, "beam": self.beam, "expansion": self.expansion, "hops": self.hops,
                "hybrid": self.hybrid.provenance()}

    def rank_batch(self, queries, k, allowed):
        chunks = self.index.store.chunks
        text_of = chunks.text
        depth = max(k, self.expansion)
        first = self.hybrid.rank_batch(queries, depth, allowed)
        # per query: the frontier of paths (tuples of chunk ids), each path's value and the paths seen
        value: list[dict[tuple[int, ...], float]] = []
        frontier: list[list[tuple[int, ...]]] = []
        for r in first:
            top = r[0][1] if r and r[0][1] > 0 else 1.0
            v = {(c,): s / top for c, s in r[:self.expansion]}
            value.append(v)
            frontier.append(list(v))
        known = [content_terms(q) for q in queries]
        for _ in range(1, self.hops):
            todo, refs = [], []
            for qi, paths in enumerate(frontier):
                for p in paths:
                    texts = [text_of(c) for c in p]
                    held = content_terms(" ".join(texts))
                    if known[qi] <= held:  # early termination: the path holds every term of the question
                        continue
                    todo.append((qi, p))
                    refs.append(reformulate(queries[qi], texts, known[qi], held))
            if not todo:
                break
            ranked = self.hybrid.rank_batch(refs, depth + self.hops * 4, [allowed[qi] for qi, _ in todo])
            grown: list[list[tuple[int, ...]]] = [[] for _ in queries]
            seen: list[set[tuple[int, ...]]] = [set() for _ in queries]  # evidence sets reached at this depth
            for (qi, p), r in zip(todo, ranked):
                kids = [(c, s) for c, s in r if c not in p][:self.expansion]
                if not kids:
                    continue
                top = kids[0][1] if kids[0][1] > 0 else 1.0
                for c, s in kids:
                    path = p + (c,)
                    key = tuple(sorted(path))
                    if key in seen[qi]:
                        continue
                    seen[qi].add(key)
                    value[qi][path] = value[qi][p] + s / top
                    grown[qi].append(path)
            frontier = [sorted(g, key=lambda p, qi=qi: -value[qi][p])[:self.beam] for qi, g in enumerate(grown)]
        out = []
        for qi, r in enumerate(first):
            # each passage of the first ranking, followed by the rest of the best path that starts with it
            best: dict[int, tuple[int, ...]] = {}
            for p in sorted(value[qi], key=lambda p: (-value[qi][p], len(p))):
                best.setdefault(p[0], p)
            order: list[int] = []
            for c, _ in r:
                order.extend(x for x in best.get(c, (c,)) if x not in order)
            score = dict(r)
            ranked, prev = [], float("inf")
            for c in order:  # a passage a path brings in takes the score of the passage before it
                prev = min(prev, score.get(c, prev))
                ranked.append((c, prev))
            out.append(ranked[:k])
        return out



def reformulate(question: str, path: Sequence[str], terms: set[str] | None = None,
                held: set[str] | None = None) -> str:
    """The query of a path, as the ETS offline policy reads it: what the question asks that the path has not
    covered yet, then what the path adds. The question's words whose content terms the path does not hold,
    followed by the path's words whose content terms the question does not hold (the bridge entities among
    them, the first PATH_WORDS), each in order; a word without content terms (a stop word) stays. The words the two share are
    dropped: repeated, they would favour passages like the first one over the one it leads to.
    ``terms`` and ``held``: the question's and the path's content terms, when known."""
    terms = content_terms(question) if terms is None else terms
    words = " ".join(path).split()
    held = content_terms(" ".join(words)) if held is None else held
    asked_words = question.split()
    of = {w: content_terms(w) for w in set(words).union(asked_words)}  # each distinct word analysed once
    asked = [w for w in asked_words if not of[w] & held]
    added = [w for w in words if not of[w] & terms][:PATH_WORDS]
    return " ".join(asked + added)


@register("retriever", "ets", summary="ETS over the corpus: evidence-conditioned multi-hop passage retrieval, "
          "the question reformulated by each path ranked by hybrid, beam over paths (options beam, expansion, "
          "hops, and hybrid's)", needs=lambda o: (f"bm25/{o.get('bm25_view', RAW_VIEW)}",))
def _ets(index: Any, **options: Any) -> HopsRetriever:
    return HopsRetriever(index, **options)
