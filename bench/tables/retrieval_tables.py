"""Retrieval at equal context budget on the shared sets: the tables behind the default pipeline.

Run from the repository root (the shared data beside it)::

    PYTHONPATH=python python bench/tables/retrieval_tables.py --stores /tmp/momoka-stores --out bench/results/retrieval.json

Every question searches every document of its set (corpus scope). Each row is
scored at a 5,000-character budget (``momoka.eval.metrics``: the top results
whose total length fits), so a pipeline returning longer chunks gets no free
credit. Rows:

* ``peer`` (P0): the pipeline users build today: LangChain
  ``RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=200)``, the
  same default embedder (all-MiniLM-L6-v2) and exact cosine top-k;
* ``peer ensemble`` (P1): the stronger pipeline many build, LangChain's
  ``EnsembleRetriever``: the same chunks, BM25 (``bm25s``, default tokenizer,
  English stopwords) and the dense ranking, each 20 deep, fused by RRF
  (k = 60, equal weights);
* momoka's recursive chunker at 100/150/200 tokens with dense, BM25 and
  hybrid retrieval under each fusion rule and dense weight of the grid, each chunk
  indexed with its contextual header (``momoka.chunking.headers``), as ``Index.build``
  does by default, and the default once more on a store built with ``headers=False``
  (chunks indexed alone, store ``SET-r100-noheaders``);
* the default without its title links (``links=0``, :mod:`momoka.methods.standard.links`), without
  the query's own title links (``query_links=False``), without the named documents' chunks
  first (``named_documents=0``), without its document prior (``document_weight=0``; and with 1.0) and without
  its query-term coverage re-rank (``coverage=0``), assembled by the default rule;
* the default (hybrid convex w=0.6) with its context assembled
  (``momoka.methods.assemble``: touching hits merged with the whitespace
  between them, a hit widened to its paragraph by the default rule, the first
  hit that does not fit cut to its best run of sentences when that run fills
  half of what is left, other items that do not fit skipped), as ``momoka
  query`` returns it, and under each other rule of ASSEMBLE_RULES (among them
  the default without that cut); with the warm milliseconds per query
  of ``Index.search`` at the budget, with and without assembly (the first
  LATENCY_QUESTIONS questions, one at a time).

The evidence semantics of the two sets whose evidence is not answer
occurrences are given here, as their READMEs state them (DragonBall's
reference sentences and HotpotQA's supporting paragraphs are all needed);
the other sets' mode is inferred by ``load_dataset``. Stores are built once
under ``--stores`` and reused; the peer's vectors are cached there too.
Prints markdown tables, the lead one with the default's margins over P0, P1 and
the default without headers and their paired bootstrap 95 % intervals, then the
top of the ranking (hit, rank-1 coverage, MRR) of the peers and the default;
``--out`` also writes the JSON (per-question figures included).

``--trail`` runs the Momoka-RAG ablation at the same budget instead: fixed
128-token chunks with titles (``T_D``) and Momoka-Map paths (embedding
referee, the paper's other settings), then base (dense), mm (dense over
titled chunks), hybrid, and Trail with its presets (``paper``: Algorithm 1 as
published; ``budget``: mean member scoring, hybrid first stage, flattened to
distinct chunks; ``guarded``: hybrid order, a path node inserted only when it
outscores the next hybrid chunk) and variants (the TRAIL_VARIANTS grid), over
the stored paths (paper settings) and over paths searched again with the paths
preset ``referee`` (in memory; the store is not changed). Its tables give each
set's number of questions in the head and each row's margin in span recall
over base (and each Trail row's over hybrid) with its paired bootstrap 95 %
interval, so a rerun prints the published table as it stands.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

from momoka import Index  # noqa: E402
from momoka.eval import evaluate_retrieval, load_dataset  # noqa: E402
from momoka.eval.datasets import find_shared_data  # noqa: E402
from momoka.methods.base import (DEFAULT_ASSEMBLE_CAP, DEFAULT_ASSEMBLE_EXTRA, DEFAULT_ASSEMBLE_MIN_HITS,  # noqa: E402
                                 DEFAULT_ASSEMBLE_TRIM, DEFAULT_BUDGET)

SETS = ("squad_v1_dev_half_a", "hotpotqa_dev500_long", "dragonball_finance_en", "leval_nq", "leval_qasper")
#: As the sets' READMEs describe their evidence (the others are answer occurrences: "any", inferred).
MODES = {"hotpotqa_dev500_long": "all", "dragonball_finance_en": "all"}
BUDGET = DEFAULT_BUDGET
SIZES = (100, 150, 200)
#: (label, retriever, options)
VARIANTS = [("dense", "dense", {}), ("bm25", "bm25", {}), ("hybrid rrf", "hybrid", {"fusion": "rrf", "dense_weight": 0.5})]
VARIANTS += [(f"hybrid rrf w{w}", "hybrid", {"fusion": "rrf", "dense_weight": w}) for w in (0.6, 0.7)]
VARIANTS += [(f"hybrid convex w{w}", "hybrid", {"fusion": "convex", "dense_weight": w}) for w in (0.5, 0.6, 0.7, 0.8)]
#: The default's query-term coverage weight against others (the default's rows use the retriever's default).
COVERAGE_VARIANTS = [(f"hybrid convex w0.6 coverage {c}", "hybrid", {"fusion": "convex", "dense_weight": 0.6,
                                                                     "coverage": c}) for c in (0.0, 0.8)]
VARIANTS += COVERAGE_VARIANTS
#: The default without its title links (``links=0``), and with the items' links but not the query's.
LINK_VARIANTS = [("hybrid convex w0.6 links 0", "hybrid", {"fusion": "convex", "dense_weight": 0.6, "links": 0}),
                 ("hybrid convex w0.6 no query links", "hybrid", {"fusion": "convex", "dense_weight": 0.6,
                                                                   "query_links": False}),
                 ("hybrid convex w0.6 named documents 0", "hybrid", {"fusion": "convex", "dense_weight": 0.6,
                                                                     "named_documents": 0})]
VARIANTS += LINK_VARIANTS
#: The default without its document prior (``document_weight=0``), and with a stronger one.
DOCUMENT_VARIANTS = [(f"hybrid convex w0.6 document weight {b}", "hybrid",
                      {"fusion": "convex", "dense_weight": 0.6, "document_weight": b}) for b in (0.0, 1.0)]
VARIANTS += DOCUMENT_VARIANTS


#: The Momoka-RAG rows of ``--trail``: (label, retriever, options).
#: ``paths_referee``: the same stores' paths searched again with the paths preset ``referee`` (in memory).
#: The default's variant label, and the other assembly rules tried on it: (label, cap, min_hits, extra, trim).
DEFAULT_VARIANT = "hybrid convex w0.6"
_T = DEFAULT_ASSEMBLE_TRIM
NO_TRIM_RULE = "no trimming"
ASSEMBLE_RULES = [("merge only", 0, 1, 0, _T), ("cap 1000", 1000, 1, 0, _T), ("cap 2500", 2500, 1, 0, _T),
                  ("cap 1000, 2 hits", 1000, 2, 0, _T), ("extra 300", 0, 1, 300, _T),
                  ("cap 2500, 2 hits, extra 300", 2500, 2, 300, _T),
                  (NO_TRIM_RULE, DEFAULT_ASSEMBLE_CAP, DEFAULT_ASSEMBLE_MIN_HITS, DEFAULT_ASSEMBLE_EXTRA, 0)]
LATENCY_QUESTIONS = 50
TRAIL_VARIANTS = [("base", "dense", {}), ("mm", "mm", {}), ("hybrid", "hybrid", {}),
                  ("momoka preset=paper (Algorithm 1)", "trail", {"preset": "paper"}),
                  ("momoka preset=paper, referee paths", "trail", {"preset": "paper", "relation": "paths_referee"}),
                  ("momoka preset=budget", "trail", {"preset": "budget"}),
                  ("momoka preset=budget, mm first stage", "trail", {"preset": "budget", "first_stage": "mm"}),
                  ("momoka preset=guarded", "trail", {"preset": "guarded"}),
                  ("momoka preset=guarded, referee paths", "trail", {"preset": "guarded", "relation": "paths_referee"})]


def shared_root():
    """The shared data folder beside the checkout (None, with a message on stderr, when absent)."""
    root = find_shared_data(REPO)
    if root is None:
        print("no shared data beside the checkout", file=sys.stderr)
    return root


def questions_of(ds, n: int | None):
    qs = [q for q in ds.questions if q.gold]
    return qs if n is None else qs[:n]


def score(results: dict, qs, mode: str) -> dict:
    """The budget figures of one pipeline, with its per-question complete coverage and span recall."""
    rep = evaluate_retrieval(results, qs, ks=(1, 3, 5), mode=mode, budgets=(BUDGET,))
    m = rep.means
    b = f"@{BUDGET}c"
    return {"span_recall": m["span_recall" + b], "complete": m["complete" + b], "recall": m["recall" + b],
            "mrr": m["mrr" + b], "hit": m["hit" + b], "complete@1": m["complete@1"], "returned": m["returned" + b],
            "chars": m["chars" + b], "span_recall@5": m["span_recall@5"],
            "per_question": {**{k: [rep.per_question[q.qid][k + b] for q in qs]
                                for k in ("complete", "span_recall", "mrr", "hit")},
                             "complete@1": [rep.per_question[q.qid]["complete@1"] for q in qs]}}


def rrf_lists(rankings, k: int = 60) -> list:
    """Reciprocal rank fusion with equal weights, as LangChain's ``EnsembleRetriever`` fuses (ties: first seen)."""
    fused: dict = {}
    for ranking in rankings:
        for rank, i in enumerate(ranking, start=1):
            fused[int(i)] = fused.get(int(i), 0.0) + 1.0 / (k + rank)
    return sorted(fused, key=lambda i: -fused[i])


def peer_rows(ds, qs, mode: str, cache: Path, embedder) -> dict:
    """The two peers on LangChain's recursive splitter (1000/200) and the same embedder.

    ``peer`` (P0): exact cosine top 20. ``peer ensemble`` (P1): LangChain's
    ``EnsembleRetriever`` of BM25 (bm25s, its default tokenizer and English
    stopwords) and that dense ranking, each 20 deep, fused by reciprocal rank
    fusion (k = 60, equal weights). Both are cut at the budget by the scorer.
    """
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    splitter = RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=200, add_start_index=True)
    spans, texts = [], []
    for d in ds.documents:
        for c in splitter.create_documents([d.text]):
            s = c.metadata["start_index"]
            spans.append((d.doc_id, s, s + len(c.page_content)))
            texts.append(c.page_content)
    f = cache / f"peer-{ds.name}.npy"
    if f.exists() and np.load(f, mmap_mode="r").shape[0] == len(texts):
        vecs = np.load(f)
    else:
        vecs = embedder.embed(texts, progress=True)
        np.save(f, vecs)
    vecs = vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
    q = np.asarray(embedder.embed([x.question for x in qs]), dtype=np.float32)
    q = q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)
    sims = q @ vecs.T
    depth = min(20, len(texts))
    top = np.argsort(-sims, axis=1)[:, :depth]
    results = {x.qid: [[spans[i]] for i in row] for x, row in zip(qs, top)}
    p0 = score(results, qs, mode)
    p0["chunks"] = len(texts)
    import bm25s

    bm = bm25s.BM25()
    bm.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    q_tokens = bm25s.tokenize([x.question for x in qs], stopwords="en", return_ids=False, show_progress=False)
    lexical, _ = bm.retrieve(q_tokens, k=depth, show_progress=False)
    fused = {x.qid: [[spans[i]] for i in rrf_lists([lex, dense])] for x, lex, dense in zip(qs, lexical, top)}
    p1 = score(fused, qs, mode)
    p1["chunks"] = len(texts)
    return {"peer": p0, "peer ensemble": p1}


def momoka_rows(ds, qs, mode: str, size: int, stores: Path, variants, trail: bool = False,
                headers: bool = True, embedder: str | None = None) -> dict:
    folder = stores / (f"{ds.name}-fixed128-paths" if trail else f"{ds.name}-r{size}" + ("" if headers else "-noheaders")
                       + (f"-{embedder}" if embedder else ""))
    t0 = time.perf_counter()
    if (folder / "manifest.json").exists():
        ix = Index.open(folder)
    elif trail:
        ix = Index.build([d.to_document() for d in ds.documents], store=folder, chunker="fixed", size=128,
                         enrich=["title"], relate=[("paths", {"referee": "embedding", "preset": "paper"})], progress=True,
                         headers=False)  # the paper's base: chunks embedded alone (mm adds T_D)
    else:
        ix = Index.build([d.to_document() for d in ds.documents], store=folder, chunker="recursive", size=size,
                         progress=True, headers=headers, embedder=embedder or "default")
    built = time.perf_counter() - t0
    if any(o.get("relation") == "paths_referee" for _, _, o in variants):
        from momoka.methods.momoka import PathRelator

        PathRelator(referee="embedding", preset="referee", relation="paths_referee").relate(ix, list(ix.store.documents))
    texts = [q.question for q in qs]
    out = {}
    try:
        for label, name, opts in variants:
            t1 = time.perf_counter()
            res = ix.corpus.retriever(name, **opts).retrieve_batch(texts, ix.corpus.depth_for(BUDGET))
            dt = (time.perf_counter() - t1) / len(qs)
            row = score({q.qid: r.spans() for q, r in zip(qs, res)}, qs, mode)
            row["ms_per_question"] = 1000 * dt
            out[label] = row
            if not trail and label == DEFAULT_VARIANT:
                out.update(assembled_rows(ix, qs, mode, res, row))
            elif not trail and label in {v[0] for v in COVERAGE_VARIANTS + LINK_VARIANTS + DOCUMENT_VARIANTS}:  # the default rule
                fitted = [r.fit(BUDGET, keep_first=False, assemble=ix.corpus.assembler()) for r in res]
                out[f"{label} assembled"] = score({q.qid: r.spans() for q, r in zip(qs, fitted)}, qs, mode)
        out["_store"] = {"chunks": ix.store.n_chunks, "open_or_build_seconds": built}
    finally:
        ix.close()
    return out


def assembled_rows(ix, qs, mode: str, res: list, plain: dict) -> dict:
    """The default's rankings ``res`` assembled at each cap (scored strictly within the budget), and the warm
    ms per query of ``Index.search`` with and without assembly."""
    out = {}
    rules = [("", DEFAULT_ASSEMBLE_CAP, DEFAULT_ASSEMBLE_MIN_HITS, DEFAULT_ASSEMBLE_EXTRA, DEFAULT_ASSEMBLE_TRIM)] + \
        [(f" {label}", c, h, x, t) for label, c, h, x, t in ASSEMBLE_RULES]
    for label, cap, min_hits, extra, trim in rules:
        asm = ix.corpus.assembler(cap, min_hits=min_hits, extra=extra, trim=trim)
        t = time.perf_counter()
        fitted = [r.fit(BUDGET, keep_first=False, assemble=asm) for r in res]
        dt = (time.perf_counter() - t) / len(qs)
        row = score({q.qid: r.spans() for q, r in zip(qs, fitted)}, qs, mode)
        row["ms_per_question"] = plain["ms_per_question"] + 1000 * dt
        row["assembled"] = {k: float(np.mean([r.stats[f"assembled_{k}"] for r in fitted]))
                            for k in ("widened", "merged", "trimmed", "skipped")}
        out[f"{DEFAULT_VARIANT} assembled{label}"] = row
    lat = {}
    for on in (False, True):
        ix.search(qs[0].question, budget=BUDGET, assemble=on)  # warm
        times = []
        for q in qs[:LATENCY_QUESTIONS]:
            t = time.perf_counter()
            ix.search(q.question, budget=BUDGET, assemble=on)
            times.append(1000 * (time.perf_counter() - t))
        lat["assembled" if on else "prefix"] = {"median": float(np.median(times)), "mean": float(np.mean(times)),
                                                "n": len(times)}
    out[f"{DEFAULT_VARIANT} assembled"]["search_ms"] = lat
    return out


NO_LINKS_ROW = "r100 hybrid convex w0.6 links 0 assembled"
NO_QUERY_LINKS_ROW = "r100 hybrid convex w0.6 no query links assembled"
NO_NAMED_ROW = "r100 hybrid convex w0.6 named documents 0 assembled"
NO_DOCUMENT_ROW = "r100 hybrid convex w0.6 document weight 0.0 assembled"
#: The lead table's rows: (label, row label here).
README_ROWS = [("P0: LangChain recursive 1000/200 + MiniLM cosine", "peer"),
               ("P1: LangChain ensemble, BM25 + dense, RRF", "peer ensemble"),
               (f"**momoka default: recursive 100, contextual headers, hybrid convex w=0.6, assembled (widened to the paragraph when it adds "
                f"at most {DEFAULT_ASSEMBLE_EXTRA} characters, or spans at most {DEFAULT_ASSEMBLE_CAP:,} and holds "
                f"{DEFAULT_ASSEMBLE_MIN_HITS} hits; the first hit that does not fit cut to its best sentences)**",
                "r100 hybrid convex w0.6 assembled"),
               ("the same without contextual headers (chunks indexed alone)", "r100 no headers hybrid convex w0.6 assembled"),
               ("the same without title links (`-o hybrid.links=0`)", NO_LINKS_ROW),
               ("the same without the query's title links (`-o hybrid.query_links=false`)", NO_QUERY_LINKS_ROW),
               ("the same without the named documents' own chunks first (`-o hybrid.named_documents=0`)", NO_NAMED_ROW),
               ("the same without the document prior (`-o hybrid.document_weight=0`)", NO_DOCUMENT_ROW),
               ("the same with a stronger document prior (`-o hybrid.document_weight=1`)",
                "r100 hybrid convex w0.6 document weight 1.0 assembled"),
               ("the same without the coverage re-rank (`-o hybrid.coverage=0`)", "r100 hybrid convex w0.6 coverage 0.0 assembled"),
               ("recursive 100, hybrid convex w=0.6, prefix (no assembly)", "r100 hybrid convex w0.6"),
               *[(f"recursive 100, hybrid convex w=0.6, assembled: {label}", f"r100 hybrid convex w0.6 assembled {label}")
                 for label, *_ in ASSEMBLE_RULES],
               ("recursive 100, dense", "r100 dense"), ("recursive 100, BM25", "r100 bm25"),
               ("recursive 100, hybrid RRF", "r100 hybrid rrf"),
               ("recursive 100, hybrid convex w=0.5", "r100 hybrid convex w0.5"),
               ("recursive 100, hybrid convex w=0.7", "r100 hybrid convex w0.7"),
               ("recursive 200, hybrid RRF (the previous default)", "r200 hybrid rrf"),
               ("recursive 200, hybrid convex w=0.6", "r200 hybrid convex w0.6")]
DEFAULT_ROW = "r100 hybrid convex w0.6 assembled"
PREFIX_ROW = "r100 hybrid convex w0.6"
NO_HEADERS_ROW = "r100 no headers hybrid convex w0.6 assembled"


def readme_table(report: dict) -> str:
    """The lead table: complete coverage at the budget (partial in brackets), and the default's margins over
    P0 and P1 in points with their paired bootstrap 95 % intervals."""
    sets = list(report["sets"])
    head = "| pipeline | " + set_header(report, sets) + " |"
    lines = [f"complete coverage at {BUDGET:,} characters (partial span recall in brackets)", "",
             head, "|---" * (len(sets) + 1) + "|"]
    for label, key in README_ROWS:
        cells = []
        for n in sets:
            row = report["sets"][n]["rows"].get(key)
            cells.append("" if row is None else f"{row['complete']:.3f} ({row['span_recall']:.3f})")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    for peer, name in (("peer", "P0"), ("peer ensemble", "P1"), (NO_HEADERS_ROW, "no headers"),
                       (NO_LINKS_ROW, "no title links"), (NO_QUERY_LINKS_ROW, "no query title links"),
                       (NO_NAMED_ROW, "no named documents"), (NO_DOCUMENT_ROW, "no document prior"),
                       ("r100 hybrid convex w0.6 coverage 0.0 assembled", "no coverage"),
                       (f"{DEFAULT_ROW} {NO_TRIM_RULE}", "no trimming"), (PREFIX_ROW, "the prefix fit")):
        cells = [margin_cell(report["sets"][n]["rows"], DEFAULT_ROW, peer, "complete") for n in sets]
        lines.append(f"| default minus {name}, complete (points, 95 % paired interval) | " + " | ".join(cells) + " |")
    for key, what in (("search_ms", "ms per query, warm, Index.search at the budget: prefix / assembled (median)"),):
        cells = []
        for n in sets:
            lat = (report["sets"][n]["rows"].get(DEFAULT_ROW) or {}).get(key)
            cells.append(f"{lat['prefix']['median']:.1f} / {lat['assembled']['median']:.1f}" if lat else "")
        lines.append(f"| {what} | " + " | ".join(cells) + " |")
    lines += ["", f"the top of the ranking at {BUDGET:,} characters: hit (any evidence returned) / rank-1 coverage (the "
              "first item covers the evidence completely) / MRR of the first item that covers any evidence", "",
              head, "|---" * (len(sets) + 1) + "|"]
    for label, key in (("P0", "peer"), ("P1", "peer ensemble"), ("momoka default", DEFAULT_ROW),
                       ("momoka default, no headers", NO_HEADERS_ROW), ("momoka default, no title links", NO_LINKS_ROW)):
        cells = []
        for n in sets:
            row = report["sets"][n]["rows"].get(key)
            cells.append("" if row is None or "hit" not in row else
                         f"{row['hit']:.3f} / {row['complete@1']:.3f} / {row['mrr']:.3f}")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    for metric, what in (("complete@1", "rank-1 coverage"), ("mrr", "MRR")):
        cells = [margin_cell(report["sets"][n]["rows"], DEFAULT_ROW, "peer ensemble", metric) for n in sets]
        lines.append(f"| default minus P1, {what} (points, 95 % paired interval) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def set_header(report: dict, sets) -> str:
    """The table head: each set with its number of questions."""
    return " | ".join(f"{n} ({report['sets'][n]['questions']} q)" for n in sets)


def margin_cell(rows: dict, label: str, ref: str, metric: str) -> str:
    """Row ``label``'s margin over row ``ref`` in points of ``metric``, with its paired bootstrap 95 % interval over
    the same questions ("" where either row or its per-question figures are missing)."""
    from momoka.eval import paired_bootstrap

    a, b = (rows.get(label) or {}).get("per_question", {}), (rows.get(ref) or {}).get("per_question", {})
    if metric not in a or metric not in b:
        return ""
    iv = paired_bootstrap(a[metric], b[metric])
    return f"{100 * iv.mean:+.1f} [{100 * iv.low:+.1f}, {100 * iv.high:+.1f}]"


def margin_rows(report: dict, labels, ref: str, metric: str) -> list[str]:
    """Markdown rows: each row's margin over ``ref`` in points of ``metric`` (:func:`margin_cell`)."""
    lines = []
    for label in labels:
        if label == ref:
            continue
        cells = [margin_cell(report["sets"][n]["rows"], label, ref, metric) for n in report["sets"]]
        lines.append(f"| {label} minus {ref} | " + " | ".join(cells) + " |")
    return lines


def markdown(report: dict, trail_variants=None) -> str:
    sets = list(report["sets"])
    lines = [f"span recall at {BUDGET:,} characters (complete coverage in brackets); corpus scope; "
             "n questions per set in the head", "",
             "| pipeline | " + set_header(report, sets) + " |", "|---" * (len(sets) + 1) + "|"]
    labels = [v[0] for v in trail_variants] if trail_variants else \
        ["peer", "peer ensemble"] + [f"r{s} {v[0]}" for s in report["sizes"] for v in VARIANTS] + \
        [f"r{s} {DEFAULT_VARIANT} assembled{suffix}" for s in report["sizes"]
         for suffix in [""] + [f" {label}" for label, *_ in ASSEMBLE_RULES]]
    for label in labels:
        cells = []
        for name in sets:
            row = report["sets"][name]["rows"].get(label)
            cells.append("" if row is None else f"{row['span_recall']:.3f} ({row['complete']:.3f})")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    if trail_variants:
        lines += ["", f"margins in span recall at {BUDGET:,} characters, points, with the paired bootstrap 95 % interval "
                  "over the same questions", "", "| margin in span recall (points, 95 % paired interval) | "
                  + set_header(report, sets) + " |",
                  "|---" * (len(sets) + 1) + "|"]
        lines += margin_rows(report, labels, "base", "span_recall")
        lines += margin_rows(report, [v for v in labels if v.startswith("momoka")], "hybrid", "span_recall")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--questions", type=int, default=300, help="first N questions with evidence per set")
    ap.add_argument("--stores", required=True, help="folder for the stores and the peer's cached vectors")
    ap.add_argument("--out", default=None)
    ap.add_argument("--trail", action="store_true", help="the Momoka-RAG ablation instead (see the module doc)")
    ap.add_argument("--embedder", default=None, metavar="ID",
                    help="momoka's stores embedded by this registered model (stores SET-r100-ID; the peers keep the "
                    "default model), e.g. minilm-l6-v2-int8-fused")
    args = ap.parse_args(argv)
    from momoka.models import Embedder

    root = shared_root()
    if root is None:
        return 2
    stores = Path(args.stores)
    stores.mkdir(parents=True, exist_ok=True)
    sizes = [int(s) for s in args.sizes.split(",")]
    embedder = Embedder.default()
    report = {"budget": BUDGET, "sizes": sizes, "questions_per_set": args.questions, "sets": {}}
    for name in args.sets.split(","):
        ds = load_dataset(root / name, evidence_mode=MODES.get(name))
        qs = questions_of(ds, args.questions)
        if args.trail:
            rows = momoka_rows(ds, qs, ds.evidence_mode, 128, stores, TRAIL_VARIANTS, trail=True)
            info = rows.pop("_store")
            report["sets"][name] = {"mode": ds.evidence_mode, "questions": len(qs), "store": info, "rows": rows}
            _save(report, args.out)
            continue
        rows = peer_rows(ds, qs, ds.evidence_mode, stores, embedder)
        for size in sizes:
            got = momoka_rows(ds, qs, ds.evidence_mode, size, stores, VARIANTS, embedder=args.embedder)
            store_info = got.pop("_store")
            rows.update({f"r{size} {k}": v for k, v in got.items()})
            rows[f"r{size} {VARIANTS[0][0]}"]["store"] = store_info
        if 100 in sizes:  # the default without contextual headers: chunks indexed alone
            got = momoka_rows(ds, qs, ds.evidence_mode, 100, stores, [v for v in VARIANTS if v[0] == DEFAULT_VARIANT],
                              headers=False, embedder=args.embedder)
            got.pop("_store")
            rows.update({f"r100 no headers {k}": v for k, v in got.items()})
        report["sets"][name] = {"mode": ds.evidence_mode, "questions": len(qs), "documents": len(ds.documents),
                                "rows": rows}
        print(f"{name}: peer {rows['peer']['complete']:.3f}, ensemble {rows['peer ensemble']['complete']:.3f} "
              "complete", file=sys.stderr, flush=True)
        _save(report, args.out)
    print(markdown(report, TRAIL_VARIANTS if args.trail else None))
    if not args.trail:
        print("\n" + readme_table(report))
    return 0


def _save(report: dict, out: str | None) -> None:
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        # compact: the per-question figures of every row make an indented file several times larger
        Path(out).write_text(json.dumps(report, separators=(",", ":")))


if __name__ == "__main__":
    raise SystemExit(main())
