"""ETS without a language model: a sentence-level policy over the whole store and a coverage value.

The paper's policy is a trained LM that writes the next evidence sentence given
the question and the sentences written so far. :class:`OfflinePolicy` ranks the
next sentence from the same two inputs with the index's own retrieval parts, as
multi-hop dense retrieval does: the question is **reformulated by the path**,

    r = question + " " + the path's sentences (in the order chosen)

A node's candidates are the sentences of the first stage's chunks and of the
``chunks`` best chunks the store's ``hybrid`` retriever returns for ``r`` (dense
and BM25 over the whole store, not only the first stage's chunks), less those
on the path and those whose content terms all occur in the question or the
path (they add nothing: a heading that repeats the question, a sentence that
repeats the path). Each candidate ``s`` is scored by

* the embedder's cosine of ``r`` (query form) and ``s``;
* BM25 of the path's **new query terms** against the candidate sentences
  (:class:`momoka.store.bm25.BM25`, stemmed, English stop words dropped, idf over
  the candidates): the content terms in the question or in the path but not in
  both, i.e. what the question asks that the path has not covered yet, and the
  bridge entities the path brought in. At the root that is the question's terms;

fused as the hybrid retriever fuses (:func:`momoka.methods.standard.fusion.convex`:
``dense_weight`` x min-max normalised cosine + the rest x normalised BM25;
default 0.3, chosen on the first 60 HotpotQA questions, ``docs/ets.md``). A
second hop that shares nothing with the question but a bridge entity named by
the first sentence is found this way: the entity is in ``r`` and in the BM25
terms.

The value of an evidence set E (:class:`CoverageValue`) is

    value(E) = coverage_weight x coverage(q, E) + (1 - coverage_weight) x max over s in E of cos(q, s)

where coverage is the share of the question's content terms (BM25's analyser,
English stop words dropped, Porter stems: :func:`momoka.methods.grounding.content_terms`)
that E contains. The value never falls when a sentence is added, and rises only
when the sentence covers more of the question (or is closer to it); the beam
keeps the best path of any depth, and a tie goes to the shorter path, so a
sentence stays on the chosen path only when it adds to the value.

The beam and its choice of the best path are ETS's (:func:`.beam.run_beam`).
Early termination is complete here: a sentence is identified as a whole, no
token is decoded.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..._validate import check_float, check_int
from ...errors import ConfigError, InputError
from ...store.bm25 import BM25
from ...text import span_sentences
from ..grounding import content_terms
from ..standard.fusion import convex
from .beam import BeamResult, SearchStats, run_beam

__all__ = ["CoverageValue", "OfflinePolicy", "Span", "reformulate"]

#: A candidate sentence: ``(doc_id, start, end)`` (sorted spans are in document order).
Span = tuple[str, int, int]
#: Sentence vectors kept across searches before the cache is emptied.
CACHE_SIZE = 200_000


def reformulate(question: str, path_texts: Sequence[str]) -> str:
    """The query of a node: the question followed by the path's sentences, whitespace-normalised."""
    return " ".join(" ".join([question, *path_texts]).split())


class OfflinePolicy:
    """The next evidence sentence ranked by the question reformulated with the path (module docstring).

    Args:
        corpus: the index as a retriever sees it (:class:`momoka.methods.corpus.Corpus`); its store
            needs a vector view (the embedder) and a BM25 view.
        chunks: chunks the ``hybrid`` retriever returns per reformulated query.
        dense_weight: the cosine's share of the fused score, in [0, 1].
    """

    def __init__(self, corpus: Any, *, chunks: int = 10, dense_weight: float = 0.3):
        if corpus is None or getattr(corpus, "embedder", None) is None:
            raise ConfigError("ets: the offline policy needs an index with vectors (an embedder); "
                              "use -o ets.policy=lm on a BM25-only store")
        self.corpus = corpus
        self.chunks = check_int(chunks, "ets: chunks", minimum=1)
        self.dense_weight = check_float(dense_weight, "ets: dense_weight", minimum=0.0, maximum=1.0)
        self._vectors: dict[str, np.ndarray] = {}
        self._sentences: dict[int, list[tuple[str, int, int, str]]] = {}
        self._retriever = None

    # ------------------------------------------------------------ shared parts
    def vectors(self, texts: Sequence[str]) -> np.ndarray:
        """L2-normalised embedder vectors of sentences (cached by text)."""
        todo = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        if todo:
            if len(self._vectors) + len(todo) > CACHE_SIZE:
                self._vectors.clear()
            v = np.asarray(self.corpus.embedder.embed(todo), dtype=np.float32)
            v /= np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
            self._vectors.update(zip(todo, v))
        dim = next(iter(self._vectors.values())).shape[0] if self._vectors else 0
        return np.stack([self._vectors[t] for t in texts]) if texts else np.zeros((0, dim), dtype=np.float32)

    def query_vector(self, query: str) -> np.ndarray:
        """The query's vector (the embedder's query form), L2-normalised."""
        v = np.asarray(self.corpus.embed_queries([query]), dtype=np.float32)[0]
        return v / max(float(np.linalg.norm(v)), 1e-12)

    def chunk_sentences(self, chunk_id: int) -> list[tuple[str, int, int, str]]:
        """``(doc_id, start, end, text)`` of a stored chunk's sentences (cached)."""
        out = self._sentences.get(chunk_id)
        if out is None:
            out = self._sentences[chunk_id] = span_sentences([self.corpus.member(chunk_id)])
        return out

    def retrieve(self, query: str) -> list[int]:
        """The chunk ids the ``hybrid`` retriever ranks best for ``query`` (whole store)."""
        if self._retriever is None:
            self._retriever = self.corpus.retriever("hybrid")
        return [m.chunk_id for it in self._retriever.retrieve(query, self.chunks) for m in it.members]

    # --------------------------------------------------------------- expansion
    def candidates(self, query: str, base: Sequence[int]) -> tuple[list[Span], list[str], dict[Span, int]]:
        """The sentences of the chunks ``base`` and those retrieved for ``query``: spans, texts, chunk of each."""
        spans: list[Span] = []
        texts: list[str] = []
        chunk_of: dict[Span, int] = {}
        for cid in dict.fromkeys([*base, *self.retrieve(query)]):
            for d, s, e, t in self.chunk_sentences(int(cid)):
                if (d, s, e) not in chunk_of:
                    chunk_of[(d, s, e)] = int(cid)
                    spans.append((d, s, e))
                    texts.append(t)
        return spans, texts, chunk_of

    def scores(self, query: str, terms: Sequence[str], texts: Sequence[str]) -> np.ndarray:
        """Fused score of each text: convex fusion of the cosine to ``query`` and BM25 of the content terms
        ``terms`` (stemmed, idf over ``texts``).

        A text sharing no term has no BM25 score (0 after normalisation), as in the hybrid retriever."""
        if not texts:
            return np.zeros(0, dtype=np.float64)
        cos = self.vectors(texts) @ self.query_vector(query)
        dense_rank = [(i, float(c)) for i, c in enumerate(cos)]
        sparse_rank: list[tuple[int, float]] = []
        if terms:
            bm = BM25(stem=True, stopwords="english")
            bm.add(list(texts))
            ids, sc = bm.search_tokens(list(terms), len(texts))
            sparse_rank = [(int(i), float(v)) for i, v in zip(ids, sc) if v > 0]
        fused = dict(convex([dense_rank, sparse_rank], len(texts),
                            weights=(self.dense_weight, 1.0 - self.dense_weight)))
        return np.asarray([fused.get(i, 0.0) for i in range(len(texts))], dtype=np.float64)

    def expand(self, question: str, path: Sequence[str], exclude: set, base: Sequence[int],
               n: int) -> list[tuple[Span, float, str, int]]:
        """The ``n`` best next sentences after ``path`` (texts, order chosen), best first, none in ``exclude``:
        ``(span, score, text, chunk_id)``; ties keep the earlier candidate."""
        query = reformulate(question, path)
        spans, texts, chunk_of = self.candidates(query, base)
        q_terms, p_terms = content_terms(question), content_terms(" ".join(path))
        known = q_terms | p_terms
        keep = [i for i, sp in enumerate(spans) if sp not in exclude and not content_terms(texts[i]) <= known]
        sc = self.scores(query, sorted(q_terms ^ p_terms), [texts[i] for i in keep])
        order = np.argsort(-sc, kind="stable")[:n]
        return [(spans[keep[j]], float(sc[j]), texts[keep[j]], chunk_of[spans[keep[j]]]) for j in order]

    # ------------------------------------------------------------------ search
    def search(self, question: str, base: Sequence[int], value: Callable[[str, list[str]], float], *,
               expansion: int = 3, beam: int = 3, max_depth: int = 5,
               progress: bool | None = None) -> tuple[BeamResult, dict[Span, tuple[str, int]]]:
        """ETS's beam over this policy: the best evidence set for ``question`` and every sentence seen.

        ``base``: the chunk ids of the first stage (their sentences are candidates at every node).
        Returns the :class:`.beam.BeamResult` (its path: spans, document order) and
        ``{span: (text, chunk_id)}`` of the sentences expanded.
        """
        if not isinstance(question, str) or not question.strip():
            raise InputError("ets needs a non-empty question")
        expansion, beam, max_depth = (check_int(v, f"ets: {name}", minimum=1) for name, v in (
            ("expansion", expansion), ("beam", beam), ("max_depth", max_depth)))
        stats = SearchStats()
        seen: dict[Span, tuple[str, int]] = {}

        def children(path: tuple, texts: tuple) -> list[tuple[Span, tuple]]:
            t = time.perf_counter()
            out = []
            for sp, _score, text, cid in self.expand(question, texts, set(path), base, expansion):
                seen[sp] = (text, cid)
                out.append((sp, texts + (text,)))
            stats.policy_runs += 1
            stats.sentences_decoded += len(out)
            stats.seconds_policy += time.perf_counter() - t
            return out

        found = run_beam((), children, lambda ev: value(question, [seen[sp][0] for sp in ev]), stats=stats,
                         beam=beam, max_depth=max_depth, planned_expansion=expansion, progress=progress)
        return found, seen


class CoverageValue:
    """``value(question, evidence_texts)``: coverage of the question's content terms and similarity.

    ``value = coverage_weight x coverage + (1 - coverage_weight) x max cos(question, sentence)`` (module
    docstring); ``vectors`` embeds sentences (L2-normalised), ``query_vector`` the question. An empty
    evidence set is worth 0.
    """

    def __init__(self, vectors: Callable[[Sequence[str]], np.ndarray], query_vector: Callable[[str], np.ndarray],
                 *, coverage_weight: float = 0.5):
        self.vectors, self.query_vector = vectors, query_vector
        self.coverage_weight = check_float(coverage_weight, "ets: coverage_weight", minimum=0.0, maximum=1.0)
        self._q: tuple[str, np.ndarray, set] | None = None

    def __call__(self, question: str, evidence: Sequence[str]) -> float:
        if not evidence:
            return 0.0
        if self._q is None or self._q[0] != question:
            self._q = (question, self.query_vector(question), content_terms(question))
        _, qv, terms = self._q
        got = content_terms(" ".join(evidence))
        coverage = len(terms & got) / len(terms) if terms else 0.0
        sim = float(np.max(self.vectors(list(evidence)) @ qv))
        return self.coverage_weight * coverage + (1.0 - self.coverage_weight) * sim
