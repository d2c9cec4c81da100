"""Momoka-Map: semantic paths between the chunks of each document (Momoka-RAG section 3.1).

For every chunk c_i of a document, one Monte Carlo tree search over the other
chunks of the same document finds a path P_i of chunks that complete c_i. The
searches run on the native engine (:class:`momoka.mcts.MCTS`) with the
paper's settings: 100 iterations, rollout 5, UCT (eq. 3) with the step
reward of eq. 4 ``r = I(c_i, c) + alpha/(|p_i - p| + gamma) + beta/(|s_i - s| + delta)``
(alpha=3, beta=2, gamma=delta=1), random expansion, rollout mean (eq. 5),
best path by visit count. ``I`` comes from a referee
(:mod:`momoka.methods.momoka.referees`); ``reward="path"`` judges a candidate
against the whole path so far (eq. 7, Figure 5).

What the paper leaves open is settled as in METHODS.md section 3 and recorded
with the index: r is normalised by ``1 + alpha/gamma + beta/delta`` and
C = sqrt(2); ties of the visit count go to the higher mean reward, then the
lower chunk index; the best path stops at a node without children and is
capped at ``path_cap`` (default: the rollout length).

Long documents. With more candidate chunks than iterations the paper's
procedure never grows past depth 1 (every root child has one visit), so the
tie-breaks decide. ``long_docs`` picks a remedy applied to documents with
more than ``iterations + 1`` chunks: ``"window"`` (the default preset's: a candidate window: roots
are searched in blocks of ``window`` consecutive chunks, each block over the
chunks within ``window`` positions of it, so a root's candidates lie within
``2 * window`` positions and number at most ``3 * window - 1``), ``"widening"`` (progressive
widening ``(1, 0.5)``), ``"scale"`` (iterations grow with the chunk count up
to ``max_iterations``), or None (the paper's procedure as is). A search without a
remedy on such documents warns once per builder, with the count of roots whose
one-chunk path the tie-break picked (each document's record counts them too: ``tie_break_roots``).

Referee-respecting paths (``preset="referee"``, the default). Under the paper's weights
the structural prior is worth up to ``alpha/gamma + beta/delta = 5`` against
the referee's 1, so an adjacent chunk the referee rejects (reward
``0 + 3/2 + 2/2 = 2.5``) beats a chunk three positions away that it accepts
(``1 + 3/4 + 2/4 = 2.25``): the referee only decides between chunks at the
same distance. ``prior_weight=w`` rescales alpha and beta by
``w / (alpha/gamma + beta/delta)``, so the whole prior is worth at most ``w``
(0.5 in the preset): any chunk the referee accepts outranks every chunk it
rejects, and the prior only orders chunks of equal verdict (nearer first).
Short documents: with ``n - 1 <= rollout`` other chunks a rollout of the
paper's length visits every chunk, and its mean reward (eq. 5) is the same
whatever the order, so every root child gets the same value and the
referee has no effect at all. ``short_docs="rollout"`` caps the rollout
length at ``max(1, (n - 1) // 3)`` per document (the stored path cap is
unchanged), so a rollout covers at most a third of the candidates and a
child's own reward decides its value; it changes nothing for documents of
``3 * rollout + 1`` chunks or more. Long documents: with more chunks than
iterations every root child is visited once and the mean of its rollout
decides, in which the random tail steps weigh as much as the child itself (a
tail that happens to hit the partner scores like the partner): the preset
uses the ``window`` remedy (measured on 120 and 300 planted chunks: partner
first in 88-89 % of roots, against 21-25 % without it). ``preset="referee"``
(the default) sets ``prior_weight=0.5, short_docs="rollout", long_docs="window"``;
``preset="paper"`` keeps the paper's procedure (``prior_weight``, ``short_docs`` and
``long_docs`` None); explicit options (None included) win over the preset.
``tests/methods/momoka/test_momoka_map_referee.py`` measures both on planted partners.

Cost bounds. In pair mode the referee is asked at most once per (root,
candidate) pair, and a root's search scores at most ``iterations * rollout``
steps, so a document of n chunks costs at most ``n * min(n - 1, iterations *
rollout)`` referee answers and ``O(n * iterations * rollout)`` engine work:
linear in n for long documents. With ``long_docs="window"`` the pairs per root
are also bounded by ``3 * window - 1`` (and the engines hold ``3 * window`` items). The embedding referee runs natively on a
sparse similarity matrix holding at most ``max_edges`` entries per chunk
(``O(n * max_edges)`` memory).

Storage: the ``paths`` relator (:mod:`momoka.methods.momoka.components`)
runs this builder on the documents added to an index and stores P_i as the
ordered relation ``paths`` (chunk ids), the per-document search record in the
document metadata ``momoka_map`` and every setting in the manifest.

The builder is put together from its settings (:mod:`momoka.methods.momoka.map_settings`: presets, checks,
the recorded settings), this module's runner (the engine set-up per document and window block, the joint
ask/tell loop) and its cost model (:mod:`momoka.methods.momoka.map_cost`).
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import ConfigError, InputError
from ...progress import Progress
from ...stats import stats_dict
from .referees import (
    PPL_SECONDS_PER_PAIR,
    EmbeddingReferee,
    LLMReferee,
    PerplexityReferee,
    default_referee,
    make_referee,
)
from .map_cost import MapCostModel
from .map_settings import (  # noqa: F401  (the record names and presets, public here)
    DOC_RECORD_KEY,
    LONG_DOC_REMEDIES,
    PATH_SEPARATOR,
    PRESETS,
    SHORT_DOC_REMEDIES,
    TITLE_KEY,
    TITLE_SOURCE_KEY,
    MapSettings,
    MapStats,
)


def _span(seconds: float) -> str:
    """A duration in words for a warning: seconds, minutes or hours."""
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.0f} s"


def window_graph(n: int, window: int) -> tuple[np.ndarray, np.ndarray]:
    """CSR ``(indptr, indices)``: each item's neighbours are the items within ``window`` positions."""
    indptr = [0]
    indices: list[int] = []
    for i in range(n):
        nb = [j for j in range(max(0, i - window), min(n, i + window + 1)) if j != i]
        indices.extend(nb)
        indptr.append(len(indices))
    return np.asarray(indptr, np.int64), np.asarray(indices, np.int64)


def topm_graph(vectors: np.ndarray, m: int, block: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    """CSR ``(indptr, indices)``: each item's ``m`` most cosine-similar other items (ties: lower index)."""
    v = np.asarray(vectors, dtype=np.float32)
    v = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
    n = len(v)
    k = min(m, n - 1)
    indptr = np.arange(n + 1, dtype=np.int64) * k
    out = np.zeros((n, k), np.int64)
    for s in range(0, n, block):
        sim = v[s : s + block] @ v.T
        rows = np.arange(s, min(s + block, n))
        sim[rows - s, rows] = -np.inf
        # stable: sort by (-sim, index)
        order = np.argsort(-sim, axis=1, kind="stable")[:, :k]
        out[s : s + len(rows)] = order
    return indptr, out.reshape(-1)


class MomokaMap(MapSettings, MapCostModel):
    """Momoka-Map: semantic paths P_i for the chunks of each document.

    Args:
        referee: ``"embedding"`` (cosine of the chunk embeddings, native; the offline default),
            ``"llm"`` (the paper's judge; the default when ``MOMOKA_LLM_BASE_URL``
            is set), ``"ppl"`` (local perplexity referee: seconds per pair, so a run
            warns first with its estimated pairs and time), or any batch callable ``pairs -> values``.
        threshold: threshold of a named ``ppl``/``embedding`` referee (None: its default).
        reward: ``"pair"`` (eq. 4) or ``"path"`` (eq. 7, Figure 5 prompt).
        iterations, rollout: MCTS iterations and rollout length (paper: 100, 5).
        alpha, beta, gamma, delta: the structural prior of eq. 4 (paper: 3, 2, 1, 1).
        c: UCT exploration constant (default sqrt(2); rewards are normalised).
        normalize: divide r by ``1 + alpha/gamma + beta/delta``.
        expansion: ``"random"`` (the paper) or ``"topm"`` (appendix H: expand
            among the ``top_m`` chunks most similar to the current node by
            embedding cosine; the chunks already on the path are skipped).
        top_m: size of the appendix-H candidate pool (paper: 5).
        long_docs: remedy for documents with more than ``iterations + 1``
            chunks: None, ``"window"`` (the default preset's), ``"widening"`` or ``"scale"`` (module docstring).
        window: candidate window (positions each side) of ``long_docs="window"``.
        scale, max_iterations: ``long_docs="scale"`` runs
            ``min(max_iterations, max(iterations, ceil(scale * (n - 1))))`` iterations.
        path_cap: longest stored path (default: ``rollout``).
        preset: ``"referee"`` (the default: ``prior_weight=0.5, short_docs="rollout",
            long_docs="window"``) or ``"paper"`` (the paper's prior, rollouts and depth-1 paths on
            documents of more than ``iterations + 1`` chunks, with a warning then); see the module
            docstring. ``prior_weight``, ``short_docs`` and ``long_docs`` given explicitly (None
            included) win over the preset.
        prior_weight: None (alpha, beta as given) or ``w > 0``: alpha and beta rescaled
            so that the structural prior is worth at most ``w`` (the referee's verdict is worth 1).
        short_docs: None or ``"rollout"``: rollouts of at most ``max(1, (n - 1) // 3)`` steps
            in a document of ``n`` chunks.
        structure: ``"auto"`` (p := s when every chunk has the same paragraph,
            as for chunkers that ignore paragraphs), ``"paragraph"`` or ``"sentence"`` (p := s).
        llm: LLM client for the LLM referee (default ``client_from_env()``).
        embedder: embedder for the appendix-H prior (default: the embedding
            referee's, else ``Embedder.default()``).
        parallel: trajectories per search and wave (virtual loss); 1 = sequential MCTS.
        batch_size: most reward requests asked per engine and round.
        seed: base seed (root i of every document draws from its own stream).
        threads: native threads (None: the engine's default).
        progress: progress of the referee answers on stderr, out of the expected count of
            :meth:`estimate` (default: the :class:`momoka.progress.Progress` rules).
    """

    name = "momoka-map"

    # ------------------------------------------------------------------ parts

    @property
    def referee(self):
        """The referee callable (built on first use)."""
        if self._referee is None:
            spec = self._referee_spec or default_referee()
            if spec == "llm":
                self._referee = LLMReferee(self.llm, mode=self.reward)
            else:
                self._referee = make_referee(spec, mode=self.reward, llm=self._llm, embedder=self._embedder,
                                             threshold=self.threshold)
        return self._referee

    def use_embedder(self, embedder: Any) -> None:
        """Use ``embedder`` for the embedding referee and the appendix-H prior.

        Call it before the first search (the referee is built then); the
        ``paths`` relator passes the index's embedder so stored vectors are reused.
        """
        if self._referee is not None and isinstance(self._referee, EmbeddingReferee):
            raise ConfigError("use_embedder must be called before the first search")
        self._embedder = embedder

    @property
    def llm(self):
        """The LLM client for the LLM referee (``client_from_env()`` by default)."""
        if self._llm is None:
            from ...llm import client_from_env  # start-up: momoka.llm

            self._llm = client_from_env()
        return self._llm

    @property
    def referee_name(self) -> str:
        """``"llm"``, ``"ppl"``, ``"embedding"`` or the class name of a custom referee (builds nothing)."""
        if self._referee is not None:
            return getattr(self._referee, "name", type(self._referee).__name__)
        return self._referee_spec or default_referee()

    def _embed(self, texts: list[str]) -> np.ndarray:
        ref = self.referee
        if isinstance(ref, EmbeddingReferee):
            return ref.embed(texts)
        if self._embedder is None:
            from ...models import Embedder  # start-up: momoka.models

            self._embedder = Embedder.default()
        return np.asarray(self._embedder.embed(texts), dtype=np.float32)

    # ------------------------------------------------------------------ paths

    def _engine_kwargs(self, chunks: Sequence[Any], vectors: np.ndarray | None) -> tuple[dict, dict]:
        """Engine settings for one document (or one window block of it) and the search record."""
        n = len(chunks)
        sent = np.asarray([int(c.sentence) for c in chunks], dtype=np.int64)
        para = np.asarray([int(c.paragraph) for c in chunks], dtype=np.int64)
        p_is_s = self.structure == "sentence" or (self.structure == "auto" and len(set(para.tolist())) == 1)
        if p_is_s:
            para = sent
        iters = self.iterations
        alpha, beta = self._prior()
        kw: dict = dict(iterations=iters, rollout_len=self.rollout_for(n), c=self.c, reward=self.reward,
                        paragraph=para, sentence=sent, alpha=alpha, beta=beta, gamma=self.gamma,
                        delta=self.delta, normalize=self.normalize, path_cap=self.path_cap, seed=self.seed,
                        parallel=self.parallel)
        if self.threads is not None:
            kw["threads"] = self.threads
        record: dict = {"n_chunks": n, "p_is_s": p_is_s, "remedy": None, "rollout": kw["rollout_len"]}
        long = n - 1 > self.iterations
        if self.expansion == "topm":
            kw["expansion"] = "neighbors"
            kw["graph"] = topm_graph(vectors, self.top_m)
            record["expansion"] = f"top{self.top_m}"
        if long and self.long_docs is not None:
            record["remedy"] = self.long_docs
            if self.long_docs == "widening":
                kw["widening"] = (1.0, 0.5)
            elif self.long_docs == "scale":
                kw["iterations"] = min(self.max_iterations, max(iters, math.ceil(self.scale * (n - 1))))
            elif self.long_docs == "window" and self.expansion != "topm":
                record["window"] = self.window
        record["iterations"] = kw["iterations"]
        return kw, record

    def _blocks(self, n: int, record: dict) -> list[tuple[int, int, int, int]]:
        """``(lo, hi, r0, r1)``: engines over items ``[lo, hi)`` searching roots ``[r0, r1)``.

        One block for the whole document, except with the window remedy: roots in
        blocks of ``window`` consecutive chunks, each searching the chunks within
        ``window`` positions of its block (so a root's candidates lie within
        ``2 * window`` positions of it, at most ``3 * window`` of them).
        """
        if record.get("window") is None:
            return [(0, n, 0, n)]
        w = self.window
        return [(max(0, r0 - w), min(n, r0 + 2 * w), r0, min(n, r0 + w)) for r0 in range(0, n, w)]

    def paths_for_chunks(self, chunks: Sequence[Any], *, vectors: np.ndarray | None = None) -> list[list[int]]:
        """P_i for each chunk of ONE document: lists of chunk positions (root excluded).

        ``chunks`` are :class:`momoka.text.Chunk` objects (``text``, ``paragraph``,
        ``sentence``) in document order. ``vectors`` (optional) are their
        embeddings, used by the embedding referee and the appendix-H prior.
        A one-chunk document gets ``[[]]``.
        """
        return self.paths_for_documents([chunks], vectors=None if vectors is None else [vectors])[0][0]

    def paths_for_documents(
        self, chunk_lists: Sequence[Sequence[Any]], *, vectors: Sequence[np.ndarray | None] | None = None
    ) -> tuple[list[list[list[int]]], list[dict]]:
        """Paths for several documents (searched together, so referee calls are batched across them).

        Returns ``(paths, records)``: ``paths[d][i]`` is P_i of chunk ``i`` of
        document ``d`` (positions within the document), ``records[d]`` the
        search record (chunk count, iterations, remedy, requests).
        """
        from ...mcts import MCTS  # start-up: momoka.mcts

        t0 = time.monotonic()
        ref = self.referee
        lists = [list(cs) for cs in chunk_lists]
        if vectors is not None and len(vectors) != len(lists):
            raise InputError("one vector array (or None) per document is needed")
        out: list[list[list[int]]] = [[[] for _ in cs] for cs in lists]
        records: list[dict] = [{} for _ in lists]
        jobs: list[tuple[int, Any, list[str], int, int, int]] = []  # (doc, engine, texts, lo, r0, r1)
        tie_break: list[int] = []  # long documents searched without a remedy
        native = isinstance(ref, EmbeddingReferee) and self.reward == "pair"
        for d, cs in enumerate(lists):
            for c in cs:
                if not hasattr(c, "text") or not hasattr(c, "paragraph") or not hasattr(c, "sentence"):
                    raise InputError("chunks must have text, paragraph and sentence (momoka.text.Chunk)")
            n = len(cs)
            self.stats.documents += 1
            self.stats.chunks += n
            if n <= 1:
                records[d] = {"n_chunks": n, "requests": 0, "note": "fewer than two chunks: no paths"}
                self.stats.single_chunk_documents += 1
                continue
            texts = [c.text for c in cs]
            v = None if vectors is None else vectors[d]
            if v is None and (native or self.expansion == "topm"):
                v = self._embed(texts)
            if v is not None:
                v = np.asarray(v, dtype=np.float32)
                if v.ndim != 2 or v.shape[0] != n:
                    raise InputError(f"document {d}: vectors of shape {v.shape} for {n} chunks")
            _, rec = self._engine_kwargs(cs, v)
            if n - 1 > self.iterations:
                self.stats.long_documents += 1
                if self.long_docs is None and self.expansion == "random":
                    tie_break.append(d)  # every root child is visited at most once: the tie-break picks the path
            rec["requests"] = 0
            records[d] = rec
            for lo, hi, r0, r1 in self._blocks(n, rec):
                kw, _ = self._engine_kwargs(cs[lo:hi], None if v is None else v[lo:hi])
                if rec.get("window") is not None:
                    kw["iterations"] = rec["iterations"]  # the block is short; keep the document's setting
                e = MCTS(hi - lo, roots=list(range(r0 - lo, r1 - lo)), **kw)
                if native:
                    data, indices, indptr = ref.matrix(v[lo:hi])
                    e.run_native((data, indices, indptr), threads=self.threads)
                    rec["requests"] += len(data)
                    rec["native"] = True
                    self.stats.native_matrix_entries += len(data)
                    for k, p in enumerate(e.paths()):
                        out[d][r0 + k] = [lo + int(x) for x in p.tolist()]
                else:
                    jobs.append((d, e, texts[lo:hi], lo, r0, r1))
            if native:
                self.stats.native_documents += 1
        searched = sorted({j[0] for j in jobs})
        est = self.estimate(searched, [lists[d] for d in searched]) if jobs else None
        if isinstance(ref, PerplexityReferee):
            self._warn_slow_referee(est)
        self._ask_tell(jobs, records, [getattr(cs[0], "doc_id", d) if cs else d for d, cs in enumerate(lists)],
                       None if est is None else est["referee_calls_expected"])
        self.fallbacks.check()
        for d, e, _, lo, r0, _ in jobs:
            for k, p in enumerate(e.paths()):
                out[d][r0 + k] = [lo + int(x) for x in p.tolist()]
        for d in tie_break:
            records[d]["tie_break_roots"] = sum(len(p) == 1 for p in out[d])
        if tie_break:
            self._warn_tie_break([records[d] for d in tie_break], len(lists))
        for ps in out:
            for p in ps:
                self.stats.path_lengths[len(p)] = self.stats.path_lengths.get(len(p), 0) + 1
        self.stats.seconds += time.monotonic() - t0
        return out, records

    def _warn_slow_referee(self, est: dict | None) -> None:
        """Before a perplexity-referee run: the pairs it will judge and the time that takes (a warning)."""
        if est is None or not est["referee_calls_expected"]:
            return
        n, lo, hi = est["referee_calls_expected"], *PPL_SECONDS_PER_PAIR
        warnings.warn(
            f"momoka map: the perplexity referee (ppl) will judge about {n:,} chunk pairs (at most "
            f"{est['referee_calls_max']:,}) of {est['documents']} document(s): about {_span(n * lo)} to "
            f"{_span(n * hi)} at {lo:g}-{hi:g} s per pair on the local model; the embedding referee (the offline "
            "default: paths.referee=embedding) takes seconds", UserWarning, stacklevel=3)

    def _warn_tie_break(self, records: list[dict], searched: int) -> None:
        """Long documents searched without a remedy: one warning per builder, with the counts of this search."""
        if self._tie_break_warned:
            return
        self._tie_break_warned = True
        roots = sum(r["tie_break_roots"] for r in records)
        total = sum(r["n_chunks"] for r in records)
        warnings.warn(
            f"momoka map: {len(records)} of the {searched} document(s) of this search have more than iterations + 1 "
            f"({self.iterations + 1}) chunks and were searched without a long-document remedy (long_docs=None, "
            f"preset={self.preset!r}): {roots} of their {total} roots got a one-chunk path that the tie-break "
            "picked among candidates visited once each (shown for the first such search only; every such "
            "document's momoka_map record counts them: tie_break_roots); long_docs='window' (the default preset "
            "'referee') searches them deeper",
            UserWarning, stacklevel=3)

    def _ask_tell(self, pending: list, records: list[dict], doc_ids: list, expected: int | None = None) -> None:
        """One joint ask/tell loop over the engines of several documents (``doc_ids``: for :attr:`fallbacks`;
        ``expected``: the referee answers expected, the progress total)."""
        ref = self.referee
        live = list(pending)
        if not live:
            return
        with Progress("momoka map: referee answers", total=expected, unit="answers",
                      enabled=self.progress) as pr:
            self._ask_tell_loop(ref, live, records, pr, doc_ids)

    def _ask_tell_loop(self, ref: Any, live: list, records: list[dict], pr: Any, doc_ids: list) -> None:
        judged = isinstance(ref, LLMReferee)  # malformed verdicts (scored 0) follow the fallback rule
        while live:
            batch_pairs: list[tuple[str, str]] = []
            items: list = []  # per pair: [[context chunk positions], candidate position] in its document
            parts = []
            for d, e, texts, lo, *_ in live:
                if e.done:
                    continue
                req = e.ask(self.batch_size)
                if len(req) == 0:
                    continue
                if self.reward == "pair":
                    pairs = [(texts[r], texts[c]) for r, c in req.pairs()]
                    if judged:
                        items += [[[lo + int(r)], lo + int(c)] for r, c in req.pairs()]
                else:
                    pairs = [(PATH_SEPARATOR.join(texts[i] for i in p.tolist()), texts[c])
                             for p, c in zip(req.paths, req.cand.tolist())]
                    if judged:
                        items += [[[lo + int(i) for i in p.tolist()], lo + int(c)]
                                  for p, c in zip(req.paths, req.cand.tolist())]
                parts.append((d, e, req, len(batch_pairs), len(pairs)))
                batch_pairs.extend(pairs)
            if not parts:
                if any(not x[1].done for x in live):  # pragma: no cover - engine invariant
                    raise RuntimeError("MCTS engines stalled without requests")
                break
            try:
                values = np.asarray(ref(batch_pairs), dtype=np.float64)
            except BaseException:
                for _, e, req, _, _ in parts:
                    e.release(req.ids)
                raise
            if values.shape != (len(batch_pairs),):
                for _, e, req, _, _ in parts:
                    e.release(req.ids)
                raise InputError(f"the referee returned {values.shape} values for {len(batch_pairs)} pairs")
            for d, e, req, s, k in parts:
                e.tell(values[s : s + k], req.ids)
                records[d]["requests"] += k
                if judged:
                    self.fallbacks.ask(doc_ids[d], k)
            if judged:
                owner = [d for d, _, _, _, k in parts for _ in range(k)]
                for j, raw in ref.last_malformed:
                    self.fallbacks.fail(doc_ids[owner[j]], items[j], raw)
                if self.fallbacks.asked >= 8:  # a server answering garbage is found early
                    self.fallbacks.check()
            self.stats.referee_requests += len(batch_pairs)
            self.stats.referee_batches += 1
            live = [x for x in live if not x[1].done]
            pr.update(len(batch_pairs), documents_searching=len({x[0] for x in live}))

    # ------------------------------------------------------------------ record

    def describe(self) -> dict:
        """Settings and counts (the ``paths`` relator records them in the store manifest)."""
        d = self.settings()
        d["stats"] = self.stats.to_dict()
        ref = self._referee
        if ref is not None and hasattr(ref, "stats"):
            d["referee_stats"] = stats_dict(ref.stats)
        return d
