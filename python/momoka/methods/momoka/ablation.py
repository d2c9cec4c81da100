"""The Momoka-RAG ablation (paper Table 3): ``base`` vs ``mm`` vs ``momoka`` on one evaluation set.

* ``base``: the chunker alone; chunks embedded as they are; dense top-K.
* ``mm``: Momoka-Map metadata: the title ``T_D`` is prepended to every chunk for
  embedding (never to the chunk text); dense top-K.
* ``momoka``: the ``mm`` index plus Momoka-Map paths and the Trail retriever
  (:class:`~momoka.methods.momoka.trail.TrailRetriever`: 2K dense, path expansion,
  one reranking batch with ``T_D`` prepended, top K).

Metrics (:func:`momoka.eval.evaluate_retrieval`) at K = 1, 3, 5 and the paper's
eq. 6 sums, two ways:

* per returned item: a composite counts as relevant when any member is
  (Precision@K = relevant items / K; Recall@K: gold units touched by any member);
* per distinct chunk: the members of the returned items are flattened in rank
  order, repeats dropped, and the list cut at K
  (:func:`~momoka.methods.momoka.trail.distinct_chunk_items`), so each chunk a
  reader gets counts once and a composite cannot count as one relevant "item"
  while it hands over several chunks. For ``base`` and ``mm`` both views agree.

Paths come from :class:`momoka.methods.momoka.map.MomokaMap` when that module is
installed, with the referee asked for (the embedding referee by default here, see
:func:`run_ablation`), and otherwise from the same procedure run here on the
native engine with the embedding referee (cosine above ``threshold``, at most 64
neighbours per chunk, eq. 4 with the paper's alpha, beta, gamma, delta, 100
iterations, rollout 5, C = sqrt(2) on normalised rewards, best path by visits).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import ConfigError, DatasetError, InputError
from .trail import TrailRetriever, distinct_chunk_items, write_store_paths

__all__ = ["VARIANTS", "Corpus", "ablation_table", "add_eval_arguments", "attach_paths", "compute_paths",
           "eval_command", "run_ablation"]

#: The three rows of the paper's Table 3.
VARIANTS = ("base", "mm", "momoka")
#: Separator between the title and the chunk text for embedding (as Momoka-Map's ``with_title``).
TITLE_SEP = "\n"


def _say(msg: str, progress: bool) -> None:
    if progress:
        print(msg, file=sys.stderr, flush=True)


class _Vectors:
    """Embeddings of texts, each distinct text embedded once (shared by the variants)."""

    def __init__(self, embedder: Any, batch: int = 128):
        self.embedder = embedder
        self.batch = batch
        self._v: dict[str, np.ndarray] = {}
        self.seconds = 0.0

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        import warnings

        miss = list(dict.fromkeys(t for t in texts if t not in self._v))
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for i in range(0, len(miss), self.batch):
                part = miss[i : i + self.batch]
                for t, v in zip(part, np.asarray(self.embedder.embed(part), dtype=np.float32)):
                    self._v[t] = v
        self.seconds += time.perf_counter() - t0
        if not texts:
            return np.zeros((0, self.embedder.dim), np.float32)
        return np.stack([self._v[t] for t in texts])


class Corpus:
    """Documents of a set, chunked once, with the embeddings shared by the three variants.

    ``documents``: objects with ``doc_id``, ``title``, ``text`` (eval ``DocRecord``s or
    :class:`momoka.text.Document`); ``chunker``: a callable ``document -> chunks``;
    ``titles``: doc_id -> T_D (default: each document's own title).
    """

    def __init__(self, documents: Sequence[Any], chunker: Any, embedder: Any,
                 titles: dict[str, str | None] | None = None):
        self.documents = []
        for d in documents:
            self.documents.append(d.to_document() if hasattr(d, "to_document") else d)
        if not self.documents:
            raise InputError("no documents")
        self.chunks = [list(chunker(d)) for d in self.documents]
        for d, cs in zip(self.documents, self.chunks):
            if not cs:
                raise InputError(f"document {d.doc_id!r} produced no chunks")
        self.embedder = embedder
        self.vectors = _Vectors(embedder)
        self.titles = titles if titles is not None else {d.doc_id: (d.title or None) for d in self.documents}
        self.chunker_info = {"name": getattr(chunker, "name", type(chunker).__name__),
                             "params": dict(chunker._params()) if hasattr(chunker, "_params") else {}}

    @property
    def n_chunks(self) -> int:
        return sum(len(cs) for cs in self.chunks)

    def raw_vectors(self) -> list[np.ndarray]:
        """Per document, the embeddings of its chunk texts."""
        return [self.vectors([c.text for c in cs]) for cs in self.chunks]

    def index(self, with_titles: bool):
        """An in-memory :class:`momoka.index.Index` of the corpus (chunks embedded with ``T_D`` or not)."""
        from ...index import Index, Store
        from ...index.api import embedder_info

        store = Store.create(None, embedder=embedder_info(self.embedder), chunker=self.chunker_info)
        vecs = []
        for d, cs in zip(self.documents, self.chunks):
            t = self.titles.get(d.doc_id) if with_titles else None
            vecs.append(self.vectors([f"{t}{TITLE_SEP}{c.text}" if t else c.text for c in cs]))
        meta = [{"doc_id": d.doc_id, "title": d.title, "source": getattr(d, "source", None), "length": len(d.text)}
                for d in self.documents]
        store.add(meta, self.chunks, vecs)
        return Index(store, embedder=self.embedder)


# --------------------------------------------------------------------------- paths


def compute_paths(corpus: Corpus, *, referee: str = "embedding", iterations: int = 100, rollout: int = 5,
                  threshold: float = 0.5, seed: int = 0, **map_options: Any) -> tuple[list[list[list[int]]], dict]:
    """Paths for every document of ``corpus`` and a record of how they were made.

    The paths come from :class:`~momoka.methods.momoka.map.MomokaMap` (the one
    path builder), with ``referee`` passed on; the embedding referee reuses the
    corpus's vectors so nothing is embedded twice. ``map_options`` go to
    ``MomokaMap`` (e.g. ``alpha=0, beta=0`` to switch off the structural prior).
    """
    from .map import MomokaMap
    from .referees import EmbeddingReferee

    t0 = time.perf_counter()
    kw: dict[str, Any] = {"iterations": iterations, "rollout": rollout, "seed": seed, "title": "document",
                          "progress": False, **map_options}
    if referee == "embedding":
        mapper = MomokaMap(EmbeddingReferee(corpus.embedder, threshold=threshold), **kw)
        raw = corpus.raw_vectors()
    else:
        mapper = MomokaMap(referee, **kw)
        raw = None
    paths, _records = mapper.paths_for_documents(corpus.chunks, vectors=raw)
    how = {"builder": "MomokaMap", "settings": _jsonable(mapper.settings())}
    lens = [len(p) for ps in paths for p in ps]
    how["seconds"] = round(time.perf_counter() - t0, 3)
    how["mean_path_len"] = float(np.mean(lens)) if lens else 0.0
    return paths, how


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (str, int, float, bool)) or x is None:
        return x
    return str(x)


def attach_paths(index: Any, corpus: Corpus, paths: list[list[list[int]]], settings: dict) -> None:
    """Write per-document paths (positions) into the index's store as store ids via :func:`write_store_paths`."""
    st = index.store
    by_id: dict[int, list[int]] = {}
    for d, ps in zip(corpus.documents, paths):
        ids = st.documents[d.doc_id].chunk_ids
        for i, p in enumerate(ps):
            by_id[ids[i]] = [ids[j] for j in p]
    titles = {d.doc_id: corpus.titles.get(d.doc_id) for d in corpus.documents if corpus.titles.get(d.doc_id)}
    write_store_paths(st, by_id, settings, titles)


# --------------------------------------------------------------------------- the run


def run_ablation(dataset: Any, *, chunker: Any = "fixed", size: int = 128, variants: Sequence[str] = VARIANTS,
                 ks: Sequence[int] = (1, 3, 5), limit: int | None = None, referee: str = "embedding",
                 threshold: float = 0.5, iterations: int = 100, rollout: int = 5, seed: int = 0,
                 reranker: Any = None, embedder: Any = None, corpus: Corpus | None = None,
                 doc_scope: str = "all", progress: bool = True) -> dict:
    """Run the ablation on one evaluation set and return a JSON-serialisable report.

    Args:
        dataset: a :class:`momoka.eval.Dataset` or its folder / name.
        chunker: a chunker name (with ``size``) or a chunker object.
        variants: any of ``"base"``, ``"mm"``, ``"momoka"``.
        limit: only the first ``limit`` questions with evidence (all documents stay indexed).
        referee: the Momoka-Map referee for the paths (``"embedding"`` by default here:
            see docs/momoka_trail.md for why), ``threshold`` its cosine threshold.
        iterations, rollout, seed: MCTS settings for the paths.
        reranker: the Trail reranker (default: cosine with the embedder).
        embedder: default :meth:`momoka.models.Embedder.default`.
        corpus: a prepared :class:`Corpus` (reuses chunks and embeddings).
        doc_scope: ``"all"`` (every document of the set is indexed, the default) or
            ``"questions"`` (only the documents the selected questions refer to: a
            smaller distractor pool, for big sets under a time budget).

    The report holds, per variant, ``item`` and ``chunk`` metric dicts
    (``means`` per K, eq. 6 ``sums``), the latency per question and, for ``momoka``,
    candidate, composite and truncation counts and the path record.
    """
    from ...eval import evaluate_retrieval, load_dataset

    bad = [v for v in variants if v not in VARIANTS]
    if bad or not variants:
        raise ConfigError(f"variants must be among {', '.join(VARIANTS)}, not {list(variants)!r}")
    ds = dataset if hasattr(dataset, "questions") else load_dataset(dataset)
    questions = [q for q in ds.questions if q.gold]
    if limit is not None:
        questions = questions[:limit]
    if not questions:
        raise DatasetError(f"{ds.name}: no question has evidence spans; retrieval metrics need them")
    if doc_scope not in ("all", "questions"):
        raise ConfigError(f"doc_scope must be 'all' or 'questions', not {doc_scope!r}")
    ks = tuple(int(k) for k in ks)
    kmax = max(ks)
    documents = ds.documents
    if doc_scope == "questions":
        want = {g[0] for q in questions for g in q.gold} | {q.doc_id for q in questions}
        documents = [d for d in ds.documents if d.doc_id in want]
    if corpus is None:
        if embedder is None:
            from ...models import Embedder

            embedder = Embedder.default()
        if isinstance(chunker, str):
            from ...chunking import get_chunker

            chunker = get_chunker(chunker, size=size)
        t0 = time.perf_counter()
        corpus = Corpus(documents, chunker, embedder)
        _say(f"{ds.name}: {len(corpus.documents)} documents, {corpus.n_chunks} chunks "
             f"({time.perf_counter() - t0:.1f}s), {len(questions)} questions", progress)
    qtexts = [q.question for q in questions]
    report: dict[str, Any] = {"data": ds.name, "evidence_mode": ds.evidence_mode, "n_questions": len(questions),
                              "limit": limit, "doc_scope": doc_scope, "n_documents": len(corpus.documents),
                              "ks": list(ks), "chunker": corpus.chunker_info,
                              "n_chunks": corpus.n_chunks, "embedder": getattr(corpus.embedder, "model_id", None),
                              "variants": {}}
    indexes: dict[bool, Any] = {}

    def span_of_store(st):
        return lambda cid: (st.chunks[cid]["doc_id"], int(st.chunks[cid]["start"]), int(st.chunks[cid]["end"]))

    for variant in variants:
        with_titles = variant != "base"
        t0 = time.perf_counter()
        if with_titles not in indexes:
            indexes[with_titles] = corpus.index(with_titles)
        ix = indexes[with_titles]
        t_index = time.perf_counter() - t0
        row: dict[str, Any] = {"index_seconds": round(t_index, 2)}
        if variant in ("base", "mm"):
            t1 = time.perf_counter()
            hits = ix.search_batch(qtexts, k=kmax, method="dense")
            dt = time.perf_counter() - t1
            items = {q.qid: [[h.span] for h in hs] for q, hs in zip(questions, hits)}
            chunk_items = items
        else:
            paths, how = compute_paths(corpus, referee=referee, iterations=iterations, rollout=rollout,
                                       threshold=threshold, seed=seed)
            attach_paths(ix, corpus, paths, how)
            row["paths"] = how
            _say(f"  paths: {how['seconds']}s, mean length {how['mean_path_len']:.2f}", progress)
            tr = TrailRetriever(ix, reranker=reranker)
            t1 = time.perf_counter()
            res = tr.retrieve_batch(qtexts, k=kmax)
            dt = time.perf_counter() - t1
            span_of = span_of_store(ix.store)
            items = {q.qid: [list(r.spans) for r in rs] for q, rs in zip(questions, res)}
            chunk_items = {q.qid: distinct_chunk_items(rs, kmax, span_of) for q, rs in zip(questions, res)}
            st = tr.last_stats
            kinds: dict[str, int] = {}
            for rs in res:
                for r in rs:
                    kinds[r.kind] = kinds.get(r.kind, 0) + 1
            row.update({"candidates_per_question": st["candidates"] / len(questions),
                        "composites": st["composites"], "truncated_composites": st["truncated"],
                        "returned_kinds": kinds,
                        "reranker": getattr(tr.reranker, "name", type(tr.reranker).__name__)})
        rep_item = evaluate_retrieval(items, questions, ks=ks, mode=ds.evidence_mode)
        rep_chunk = evaluate_retrieval(chunk_items, questions, ks=ks, mode=ds.evidence_mode)
        row["item"] = rep_item.to_dict()
        row["chunk"] = rep_chunk.to_dict()
        row["seconds_per_question"] = dt / len(questions)
        report["variants"][variant] = row
        _say(f"  {variant}: recall sum {rep_item.sums['recall']:.3f}  precision sum "
             f"{rep_item.sums['precision']:.3f}  ({dt / len(questions) * 1000:.1f} ms/question)", progress)
    return report


def ablation_table(reports: Sequence[dict], metrics: Sequence[str] = ("recall", "precision", "mrr", "f1",
                                                                     "span_recall")) -> str:
    """A Markdown table of one or more :func:`run_ablation` reports.

    Rows: set, variant and view (``item`` / ``chunk``); columns: each metric's eq. 6
    sum (x100, as the paper prints Recall and Precision; MRR and F1 stay as sums of
    fractions like the paper's) and the per-K values of recall.
    """
    head = ["set", "chunker", "method", "view"] + [f"{m} (sum)" for m in metrics] + ["R@1", "R@3", "R@5", "ms/q"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for rep in reports:
        ch = rep["chunker"]["name"]
        for variant, row in rep["variants"].items():
            views = ("item", "chunk") if variant == "momoka" else ("item",)
            for view in views:
                d = row[view]
                cells = [rep["data"], ch, variant, view if variant == "momoka" else "item = chunk"]
                for m in metrics:
                    s = d["sums"][m]
                    cells.append(f"{100 * s:.2f}" if m in ("recall", "precision", "span_recall") else f"{s:.3f}")
                cells += [f"{d['means'].get(f'recall@{k}', float('nan')):.3f}" for k in (1, 3, 5)]
                cells.append(f"{1000 * row['seconds_per_question']:.1f}")
                lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# --------------------------------------------------------------------------- CLI


def add_eval_arguments(p: Any) -> None:
    """The options ``momoka eval --method base|mm|momoka`` adds to the ``eval`` sub-command."""
    p.add_argument("--referee", default="embedding",
                   help="Momoka-Map referee for the paths of --method momoka: embedding (default here), ppl, llm")
    p.add_argument("--threshold", type=float, default=0.5, help="cosine threshold of the embedding referee (0.5)")
    p.add_argument("--iterations", type=int, default=100, help="MCTS iterations per chunk (paper: 100)")
    p.add_argument("--rollout", type=int, default=5, help="MCTS rollout length (paper: 5)")
    p.add_argument("--seed", type=int, default=0, help="MCTS seed (0)")
    p.add_argument("--doc-scope", default="all", choices=("all", "questions"),
                   help="index every document (all) or only those the selected questions refer to")


def eval_command(args: Any, methods: Sequence[str]) -> int:
    """``momoka eval --method base,mm,momoka``: run :func:`run_ablation`, print the table, save JSON."""
    import json
    from pathlib import Path

    from ...eval import load_dataset

    if getattr(args, "store", None):
        raise ConfigError("--store is not used by --method base/mm/momoka (the ablation builds its indexes in memory)")
    if getattr(args, "scope", "corpus") != "corpus":
        raise ConfigError("--scope document is not supported by --method base/mm/momoka; use --doc-scope")
    ds = load_dataset(args.data)
    size = args.size if args.size is not None else 128
    rep = run_ablation(ds, chunker=args.chunker, size=size, variants=methods, limit=args.limit,
                       referee=getattr(args, "referee", "embedding"), threshold=getattr(args, "threshold", 0.5),
                       iterations=getattr(args, "iterations", 100), rollout=getattr(args, "rollout", 5),
                       seed=getattr(args, "seed", 0), doc_scope=getattr(args, "doc_scope", "all"), progress=True)
    rep["command"] = "momoka " + " ".join(sys.argv[1:]) if sys.argv else None
    out = args.out or f"eval-{ds.name}-{'-'.join(methods)}.json"
    Path(out).write_text(json.dumps(rep, indent=2), encoding="utf-8")
    if args.json:
        print(json.dumps(rep, indent=2))
    else:
        print(ablation_table([rep]))
    print(f"saved {out}", file=sys.stderr)
    return 0
