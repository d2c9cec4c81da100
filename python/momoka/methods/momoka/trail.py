"""Momoka-Trail: the query-time retriever of Momoka-RAG (paper section 3.2, Algorithm 1).

For a query, the retriever

1. fetches the ``2K`` best chunks with a first-stage retriever (dense by default);
2. expands each retrieved chunk ``c`` with its Momoka-Map path ``P_c`` into the
   candidates ``c``, ``c + join(P_c)``, every node ``p`` of ``P_c`` and every pair
   ``c + p`` (METHODS.md 3, item 8), deduplicated by their ordered tuple of
   member chunks (the first occurrence is kept);
3. scores every candidate with the reranker in **one** batch and returns the
   top ``K``.

A candidate is a *composite* when it joins more than one chunk. Its reranking
text is the document title ``T_D`` (when known and enabled), then the members'
texts, all separated by ``"\\n\\n"``. ``T_D`` is written once, before the first
member: it is not repeated for the other members (the paper stores it in front
of every chunk, so a plain concatenation would repeat it). The title is used for
scoring only; a result's spans point at the exact document text of each member.

Every result is a :class:`~momoka.methods.base.Result` whose items list the
member chunks they join, each with its exact span, so evaluation and callers see
exactly which text was returned; an item's provenance gives its ``kind``
(``chunk``, ``full_path``, ``node``, ``pair``), its ``source`` chunk and whether
the reranker saw it ``truncated`` at its input limit (counted per call in
``last_stats`` and over all calls in ``TrailRetriever.truncated``).

How a composite is scored (``scoring``): ``"joint"`` (the paper) has the
reranker score the joined text, which a 256-token reranker sees cut at its
limit; ``"max"`` and ``"mean"`` score every member chunk alone (title first, as
for a single chunk: never truncated for chunks within the limit) and take the
best or the mean member score, so a composite ranks by what it holds rather
than by its truncated head. With ``dedup=True`` an item is kept only when it
adds a chunk the items above it do not already return, so the variants of the
best chunk (its path, its pairs) do not crowd the top K. With
``flatten=True`` the ranked candidates are returned as their distinct member
chunks, one item each, in the order they first appear (each scored as the
candidate that brought it), so a budget is filled with chunks the paths
brought forward rather than with long composites.

Guarded expansion (``guard=True``): the first stage's ranking is kept, and a
path node is inserted right after the chunk whose path brought it only when
the reranker scores it (alone, title first) above the next first-stage chunk
it would push down the list; so an expansion spends budget only on a partner
the reranker prefers to what the base ranking would have returned next. The
result is flat (one chunk per item; provenance ``kind`` is ``chunk`` for a
first-stage chunk and ``node`` for an inserted partner).

Presets: ``preset="paper"`` (default: joint scoring, composites, the paper's
first stage) reproduces Algorithm 1; ``preset="budget"`` is ``scoring="mean",
flatten=True, first_stage="hybrid"``; ``preset="guarded"`` is ``guard=True,
first_stage="hybrid"``, the variant that does best at an equal context budget
in the README's ablation. Options given explicitly override the preset.

Paths come from the store's ordered relation ``paths`` (the ``paths`` relator)
or from any mapping ``chunk_id -> sequence of chunk ids``. A store without paths
raises :class:`~momoka.errors.PathsMissingError`.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..._validate import check_int
from ...errors import ConfigError, PathsMissingError
from ..base import Item, Result
from ..standard.retrievers import check_k
from .map import PATH_SEPARATOR as SEPARATOR
from .map import TITLE_KEY

__all__ = [
    "SEPARATOR",
    "Candidate",
    "TrailRetriever",
    "build_candidates",
    "candidate_text",
]

#: How composites are scored (see the module doc).
SCORINGS = ("joint", "max", "mean")
#: Named settings (see the module doc).
PRESETS = {"paper": {"scoring": "joint", "flatten": False, "first_stage": "auto", "guard": False},
           "budget": {"scoring": "mean", "flatten": True, "first_stage": "hybrid", "guard": False},
           "guarded": {"scoring": "mean", "flatten": True, "first_stage": "hybrid", "guard": True}}

#: Manifest ``extra`` key under which the path settings are recorded.
MANIFEST_KEY = "momoka_map"


# --------------------------------------------------------------------------- candidates


@dataclass(frozen=True)
class Candidate:
    """One candidate of the expanded pool: its ordered member chunk ids and how it was formed.

    ``kind`` is ``"chunk"`` (the retrieved chunk alone), ``"full_path"`` (the chunk
    joined with its whole path), ``"node"`` (one path node alone) or ``"pair"``
    (the chunk joined with one node). ``source`` is the retrieved chunk it came from.
    """

    members: tuple[int, ...]
    kind: str
    source: int


def build_candidates(initial: Sequence[int], path_of: Callable[[int], Sequence[int]]) -> list[Candidate]:
    """The expanded candidate pool of Algorithm 1 for the retrieved chunks ``initial`` (in rank order).

    For each retrieved chunk ``c`` with path ``P = path_of(c)`` (the chunk itself and
    repeats are dropped from ``P``), the candidates are, in this order: ``(c,)``,
    ``(c, *P)`` when ``P`` is not empty, then for each node ``p`` of ``P``: ``(p,)`` and
    ``(c, p)``. Candidates with the same ordered member tuple are kept once (the first
    occurrence, so a one-node path gives ``(c, p)`` as ``"full_path"``).
    """
    seen: set[tuple[int, ...]] = set()
    out: list[Candidate] = []

    def push(members: tuple[int, ...], kind: str, src: int) -> None:
        if members not in seen:
            seen.add(members)
            out.append(Candidate(members, kind, src))

    for c in initial:
        c = int(c)
        path = [int(p) for p in dict.fromkeys(int(x) for x in path_of(c)) if int(p) != c]
        push((c,), "chunk", c)
        if path:
            push((c, *path), "full_path", c)
        for p in path:
            push((p,), "node", c)
            push((c, p), "pair", c)
    return out


def candidate_text(texts: Sequence[str], title: str | None = None, sep: str = SEPARATOR) -> str:
    """The reranking text of a candidate: ``title`` (once, when given) then the member texts, joined by ``sep``."""
    parts = ([title] if title and title.strip() else []) + list(texts)
    return sep.join(parts)


# --------------------------------------------------------------------------- the retriever


def _limit_checker(reranker: Any) -> Callable[[str, list[str]], list[bool]] | None:
    """A function telling which passages exceed the reranker's input limit (None if unknown)."""
    tok = getattr(reranker, "tokenizer", None)
    max_len = getattr(reranker, "max_length", None)
    pair = tok is not None
    if tok is None:
        emb = getattr(reranker, "embedder", None)
        tok = getattr(emb, "tokenizer", None)
        max_len = getattr(emb, "max_length", None)
    if tok is not None and max_len:

        # Count tokens on a private copy: the reranker's (or embedder's) own tokenizer
        # must keep truncating, or its next call feeds the model more than it takes.
        from tokenizers import Tokenizer  # start-up: tokenizers

        tok = Tokenizer.from_str(tok.to_str())
        tok.no_truncation()
        tok.no_padding()

        special = 3 if pair else 2  # [CLS] a [SEP] (b [SEP])
        seen: dict[str, bool] = {}

        def over(query: str, text: str) -> bool | None:
            # Bounds first: every whitespace-separated word is at least one token, and no
            # token covers less than one byte; only texts in between are tokenised.
            extra = (len(query.split()), len(query.encode("utf-8"))) if pair else (0, 0)
            if len(text.split()) + extra[0] + special > max_len:
                return True
            if len(text.encode("utf-8")) + extra[1] + special <= max_len:
                return False
            return None if pair else seen.get(text)

        def check(query: str, texts: list[str]) -> list[bool]:
            verdicts = [over(query, t) for t in texts]
            todo = [i for i, v in enumerate(verdicts) if v is None]
            if todo:
                if pair:
                    encs = tok.encode_batch([(query, texts[i]) for i in todo], add_special_tokens=True)
                else:
                    encs = tok.encode_batch([texts[i] for i in todo], add_special_tokens=True)
                for i, e in zip(todo, encs):
                    verdicts[i] = len(e.ids) > max_len
                    if not pair and len(seen) < 100_000:
                        seen[texts[i]] = verdicts[i]
            return [bool(v) for v in verdicts]

        return check
    max_chars = getattr(reranker, "max_passage_chars", None)
    if max_chars:
        return lambda query, texts: [len(t) > max_chars for t in texts]
    return None


class TrailRetriever:
    """Momoka-Trail retriever (Algorithm 1) over a :class:`momoka.Index`.

    Args:
        index: the index (its store gives chunks, titles and, by default, paths).
        reranker: anything with ``score(query, passages) -> array`` (a
            :mod:`momoka.models` reranker); default: cosine with the index's embedder.
        first_stage: a registered retriever name (default ``"auto"``: ``mm`` when
            the store has the ``titled`` view, else ``dense``), or a callable
            ``(query, n) -> ranked chunk ids or items``.
        paths: ``chunk_id -> path (chunk ids)`` mapping or callable; default: the
            store's relation ``relation``.
        relation: the relation holding the paths (default ``"paths"``).
        titles: prepend ``T_D`` for reranking (True, default), or not (False), or a
            mapping ``doc_id -> title``.
        expand: factor of the first stage depth (``expand * k``; the paper's 2).
        scoring: ``"joint"`` (the paper), ``"max"`` or ``"mean"`` (see the module doc).
        dedup: drop items that add no chunk beyond the items ranked above them.
        flatten: return the distinct member chunks of the ranked candidates, one item each.
        guard: guarded expansion (see the module doc): keep the first stage's order and insert a
            path node only when the reranker scores it above the next first-stage chunk.
        preset: ``"paper"``, ``"budget"`` or ``"guarded"`` (see the module doc); explicit options win.

    Raises:
        PathsMissingError: the store has no paths and none were given.
    """

    name = "trail"
    requires = {"enrich": ["title"], "relate": ["paths"]}

    def __init__(self, index: Any, *, reranker: Any = None, first_stage: str | Callable | None = None,
                 paths: Mapping[int, Sequence[int]] | Callable[[int], Sequence[int]] | None = None,
                 relation: str = "paths", titles: bool | Mapping[str, str] = True, expand: int = 2,
                 sep: str = SEPARATOR, scoring: str | None = None, dedup: bool = False, flatten: bool | None = None,
                 preset: str = "paper", guard: bool | None = None):
        if preset not in PRESETS:
            raise ConfigError(f"trail: preset must be one of {', '.join(PRESETS)}, not {preset!r}")
        defaults = PRESETS[preset]
        scoring = defaults["scoring"] if scoring is None else scoring
        flatten = defaults["flatten"] if flatten is None else flatten
        first_stage = defaults["first_stage"] if first_stage is None else first_stage
        guard = defaults["guard"] if guard is None else guard
        if not isinstance(guard, bool):
            raise ConfigError(f"trail: guard must be True or False, not {guard!r}")
        self.guard = guard
        if scoring not in SCORINGS:
            raise ConfigError(f"trail: scoring must be one of {', '.join(SCORINGS)}, not {scoring!r}")
        self.preset, self.scoring, self.dedup, self.flatten = preset, scoring, bool(dedup), bool(flatten)
        self.index = index
        self.store = index.store
        if paths is None:
            if not self.store.has_relation(relation):
                where = f" at {self.store.path}" if self.store.path else ""
                raise PathsMissingError(
                    f"the store{where} has no Momoka-Map paths (relation {relation!r}): the trail retriever needs "
                    "them; build the index with them (`momoka index ... --enrich title --relate paths`, or "
                    "Index.build(..., enrich=['title'], relate=['paths']))")
            rel = self.store.relation(relation)
            self._path_of: Callable[[int], Sequence[int]] = lambda c: rel.get(int(c)).tolist()
        elif callable(paths):
            self._path_of = paths
        else:
            mp = {int(k): list(v) for k, v in paths.items()}
            self._path_of = lambda c: mp.get(int(c), [])
        if first_stage == "auto":
            first_stage = "mm" if self.store.has_vector_view("titled") else "dense"
        if isinstance(first_stage, str):
            self._first = index.retriever(first_stage)
        elif callable(first_stage):
            self._first = first_stage
        else:
            raise ConfigError(f"first_stage must be a retriever name or a callable, not {first_stage!r}")
        self.first_stage = first_stage if isinstance(first_stage, str) else getattr(first_stage, "__name__", "callable")
        self.expand = check_int(expand, "expand", minimum=1)
        self.sep = sep
        self.titles = titles
        self._reranker = reranker
        self._checker = None
        self.truncated = 0  # composites truncated by the reranker, all calls
        self.last_stats: dict[str, Any] = {}

    @property
    def reranker(self):
        """The reranker (default: cosine similarity with the index's embedder)."""
        if self._reranker is None:
            from ...models import CosineReranker  # start-up: momoka.models

            emb = self.index.embedder
            if emb is None:
                raise ConfigError("this index has no embedder: pass a reranker to the trail retriever")
            self._reranker = CosineReranker(emb)
        return self._reranker

    def title(self, doc_id: str) -> str | None:
        """The title ``T_D`` used for reranking chunks of ``doc_id`` (None when titles are off)."""
        if self.titles is False:
            return None
        if isinstance(self.titles, Mapping):
            return self.titles.get(doc_id)
        d = self.store.documents.get(doc_id)
        if d is None:
            return None
        return d.metadata.get(TITLE_KEY) or d.title or None

    def path(self, chunk_id: int) -> list[int]:
        """The stored path of a chunk (store chunk ids, root excluded)."""
        return [int(p) for p in self._path_of(int(chunk_id))]

    # ------------------------------------------------------------------ first stage

    def _initial(self, queries: list[str], n: int, doc_ids: Any, per_query: Any) -> list[list[int]]:
        if not hasattr(self._first, "retrieve_batch"):
            if doc_ids is not None or per_query is not None:
                raise ConfigError("a callable first stage cannot filter by document")
            out = []
            for q in queries:
                got = self._first(q, n)
                out.append([int(getattr(h, "chunk_id", h)) for h in list(got)[:n]])
            return out
        kw = {"doc_ids": doc_ids} if per_query is None else {"per_query_doc_ids": per_query}
        return [[it.chunk_id for it in res] for res in self._first.retrieve_batch(queries, n, **kw)]

    # ------------------------------------------------------------------ query

    def retrieve(self, query: str, k: int = 5, *, doc_ids: Iterable[str] | str | None = None) -> Result:
        """The ``k`` best candidates for ``query`` (see the module doc), best first."""
        return self.retrieve_batch([query], k, doc_ids=doc_ids)[0]

    def retrieve_batch(self, queries: Sequence[str], k: int = 5, *, doc_ids: Iterable[str] | str | None = None,
                       per_query_doc_ids: Sequence[Any] | None = None) -> list[Result]:
        """:meth:`retrieve` for many queries (the first stage runs as one batch).

        ``last_stats`` then holds per-call totals: ``candidates``, ``composites``,
        ``truncated`` (composites over the reranker's limit) and ``seconds``.
        """
        queries = self.index.check_queries(queries)
        k = check_k(k)
        t0 = time.perf_counter()
        initial = self._initial(queries, self.expand * k, doc_ids, per_query_doc_ids)
        reranker = self.reranker
        if self._checker is None:
            self._checker = _limit_checker(reranker) or (lambda q, ts: [False] * len(ts))
        stats = {"queries": len(queries), "candidates": 0, "composites": 0, "truncated": 0}
        out: list[Result] = []
        for q, init in zip(queries, initial):
            if self.guard:
                items, n_scored = self._guarded(reranker, q, init, k)
                stats["candidates"] += n_scored
                out.append(Result(q, items, self.name, {"candidates": n_scored, "composites": 0, "truncated": 0}))
                continue
            cands = build_candidates(init, self.path)
            members = [tuple(self.index.member(c) for c in cand.members) for cand in cands]
            comp = [i for i, c in enumerate(cands) if len(c.members) > 1]
            if self.scoring == "joint":
                scores, trunc = self._joint_scores(reranker, q, members, comp)
            else:
                scores, trunc = self._member_scores(reranker, q, members), set()
            stats["candidates"] += len(cands)
            stats["composites"] += len(comp)
            stats["truncated"] += len(trunc)
            order = sorted(range(len(cands)), key=lambda i: (-scores[i], i))
            if self.flatten:
                items = self._flattened(order, cands, members, scores, trunc, k)
            else:
                order = self._diverse(order, cands, k) if self.dedup else order[:k]
                items = tuple(Item(members[i], float(scores[i]), rank, self._prov(cands[i], i in trunc),
                                   self.index.title(members[i][0].doc_id)) for rank, i in enumerate(order, 1))
            out.append(Result(q, items, self.name, {"candidates": len(cands), "composites": len(comp),
                                                    "truncated": len(trunc)}))
        self.truncated += stats["truncated"]
        stats["seconds"] = time.perf_counter() - t0
        self.last_stats = stats
        return out

    # ------------------------------------------------------------------ scoring

    def _joint_scores(self, reranker: Any, q: str, members: list, comp: list[int]) -> tuple[np.ndarray, set]:
        """The paper's scoring: the reranker on each candidate's joined text; which composites it truncated."""
        texts = [candidate_text([m.text for m in ms], self.title(ms[0].doc_id), self.sep) for ms in members]
        with warnings.catch_warnings():  # truncation is counted here, per composite
            warnings.filterwarnings("ignore", message=".*truncat")
            scores = np.asarray(reranker.score(q, texts), dtype=np.float64) if texts else np.zeros(0)
        over = self._checker(q, [texts[i] for i in comp])
        return scores, {i for i, o in zip(comp, over) if o}

    def _chunk_scores(self, reranker: Any, q: str, chunks: Sequence[Any]) -> dict[int, float]:
        """The reranker's score of each distinct chunk (``Member``) alone, title first, in one call."""
        by_id = {m.chunk_id: m for m in chunks}
        ids = list(by_id)
        texts = [candidate_text([by_id[c].text], self.title(by_id[c].doc_id), self.sep) for c in ids]
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*truncat")
            got = np.asarray(reranker.score(q, texts), dtype=np.float64) if texts else np.zeros(0)
        return dict(zip(ids, got.tolist()))

    def _member_scores(self, reranker: Any, q: str, members: list) -> np.ndarray:
        """Each distinct member chunk scored alone (title first), combined per candidate by max or mean."""
        score_of = self._chunk_scores(reranker, q, [m for ms in members for m in ms])
        combine = max if self.scoring == "max" else (lambda xs: sum(xs) / len(xs))
        return np.asarray([combine([score_of[m.chunk_id] for m in ms]) for ms in members], dtype=np.float64)

    def _prov(self, cand: Candidate, truncated: bool, **extra: Any) -> dict:
        return {"retriever": self.name, "kind": cand.kind, "source": cand.source, "truncated": truncated,
                "first_stage": self.first_stage, "scoring": self.scoring, "preset": self.preset, **extra}

    def _flattened(self, order: list[int], cands: list[Candidate], members: list, scores: np.ndarray,
                   trunc: set, k: int) -> tuple[Item, ...]:
        """The distinct member chunks of the ranked candidates, one item each, first ``k``."""
        seen: set[int] = set()
        out: list[Item] = []
        for i in order:
            for m in members[i]:
                if m.chunk_id in seen:
                    continue
                seen.add(m.chunk_id)
                out.append(Item((m,), float(scores[i]), len(out) + 1,
                                self._prov(cands[i], i in trunc, flattened=True),
                                self.index.title(m.doc_id)))
                if len(out) == k:
                    return tuple(out)
        return tuple(out)

    def _guarded(self, reranker: Any, q: str, init: list[int], k: int) -> tuple[tuple[Item, ...], int]:
        """Guarded expansion: the first stage's order, a path node inserted only when it outscores the next base chunk.

        Returns the first ``k`` items and the number of chunks scored.
        """
        init = list(dict.fromkeys(int(c) for c in init))
        paths = {c: [p for p in dict.fromkeys(self.path(c)) if p != c] for c in init}
        ids = list(dict.fromkeys(init + [p for c in init for p in paths[c]]))
        member = {c: self.index.member(c) for c in ids}
        score = self._chunk_scores(reranker, q, [member[c] for c in ids])
        seen: set[int] = set()
        out: list[Item] = []

        def emit(c: int, kind: str, source: int) -> None:
            seen.add(c)
            m = member[c]
            out.append(Item((m,), float(score[c]), len(out) + 1,
                            self._prov(Candidate((c,), kind, source), False, flattened=True, guarded=True),
                            self.index.title(m.doc_id)))

        for i, c in enumerate(init):
            if len(out) == k:
                break
            if c in seen:
                continue
            emit(c, "chunk", c)
            nxt = next((b for b in init[i + 1:] if b not in seen), None)
            bar = -np.inf if nxt is None else score[nxt]
            for p in paths[c]:
                if len(out) == k:
                    break
                if p not in seen and score[p] > bar:
                    emit(p, "node", c)
        return tuple(out), len(ids)

    @staticmethod
    def _diverse(order: list[int], cands: list[Candidate], k: int) -> list[int]:
        """The first ``k`` candidates of ``order`` that each add a chunk not returned above them."""
        seen: set[int] = set()
        out: list[int] = []
        for i in order:
            new = set(cands[i].members) - seen
            if not new:
                continue
            seen |= new
            out.append(i)
            if len(out) == k:
                break
        return out
