"""The Chinese set's tables: the default with each embedder, the LangChain peers with the same embedder, MoC's chunkers.

Rows (all scored by ``momoka.eval`` at the same character budget over the same first questions):

* ``default e5`` / ``default minilm``: the default pipeline (recursive chunker, contextual headers, hybrid,
  assembled) on a store embedded by ``multilingual-e5-small`` (what the language-aware default picks for
  Chinese) and by ``minilm-l6-v2-int8`` (the English default); stores ``SET-e5`` and ``SET-minilm`` under
  ``--stores``, built once and reused;
* ``P0 e5``: LangChain's ``RecursiveCharacterTextSplitter(1000, 200)``, the same e5 embedder with its
  ``query: `` / ``passage: `` prefixes, exact cosine top 20;
* ``P1 e5 TOK``: LangChain's ``EnsembleRetriever`` over those chunks: ``bm25s`` with the tokeniser TOK and
  that dense ranking, each 20 deep, fused by RRF (k = 60, equal weights), as ``retrieval_tables.py`` builds P1
  for the English sets. Tokenisers: ``bm25s`` (its default regex, English stopwords: a run of Chinese
  characters is one token), ``cjk`` (momoka's BM25 rule 2: each CJK character and each bigram, the rest as
  momoka's BM25 tokenises it), ``jieba`` / ``jieba_search`` (``jieba.lcut`` / ``lcut_for_search`` words,
  the rest by the same native rule); ``bm25 TOK``: that BM25 ranking alone;
* ``CHUNKER`` (``--chunkers ppl,msp,...``): the default pipeline with that chunker (its own default size) on
  store ``SET-CHUNKER`` embedded by e5; the chunkers that need a causal LM use the local one
  (``$MOMOKA_LLM_LOCAL_MODEL``, default SmolLM2-135M).

``--documents questions`` indexes only the documents the selected questions refer to (a smaller pool, for
the chunkers too slow over every document; the store names get ``-qdocs``); ``--sample N`` adds N other
documents drawn with ``--seed`` (``-qdocsN``). Prints every row's complete coverage, span recall, MRR and hit
at the budget with its 95 % interval and its margin over ``--ref`` with the paired interval; ``--out`` writes
the JSON with per-question figures.

Usage::

    python bench/tables/zh_tables.py --data ../shared/data/crud_rag_qa --stores STORES --rows default,p1 \\
        [--limit 300] [--budget 5000] [--tok bm25s,cjk,jieba,jieba_search] [--out FILE]
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

E5 = "multilingual-e5-small"
MINILM = "minilm-l6-v2-int8"
TOKS = ("bm25s", "cjk", "jieba", "jieba_search")
METRICS = ("complete", "span_recall", "mrr", "hit")


@functools.lru_cache(maxsize=65536)
def _is_cjk(ch: str) -> bool:
    from momoka import _core

    return len(_core.bm25_tokenize(ch + ch, True, False, [], 2)) == 3


def tokenizer(name: str):
    """text -> tokens for P1's bm25s (None: bm25s's own ``tokenize`` with English stopwords)."""
    if name == "bm25s":
        return None
    from momoka import _core
    from momoka.store.bm25 import ENGLISH_STOPWORDS, fold_compatibility

    stop = list(ENGLISH_STOPWORDS)
    if name == "cjk":
        return lambda text: _core.bm25_tokenize(fold_compatibility(text), True, True, stop, 2)
    import jieba  # the bench extra

    jieba.setLogLevel(60)
    cut = jieba.lcut if name == "jieba" else jieba.lcut_for_search

    def segmented(text: str) -> list[str]:
        out: list[str] = []
        for w in cut(fold_compatibility(text)):
            if w and all(_is_cjk(c) for c in w):
                out.append(w)
            else:
                out.extend(_core.bm25_tokenize(w, True, True, stop, 1))
        return out
    return segmented


def per_question_rows(rows: dict, qids: list, budget: int) -> dict:
    return {m: [float(rows[q][f"{m}@{budget}c"]) for q in qids] for m in METRICS}


def summary(per: dict) -> dict:
    from momoka.eval.intervals import bootstrap_mean

    return {m: {"mean": float(np.mean(v)), "interval": bootstrap_mean(v).to_dict()} for m, v in per.items()}


def default_row(ds, qs_limit: int, budget: int, store: Path, embedder: str, chunker: str = "recursive",
                documents: str = "all", log=print) -> tuple[dict, dict]:
    from momoka.eval.runner import run_eval

    t0 = time.perf_counter()
    rep = run_eval(ds, ["hybrid"], limit=qs_limit, budgets=(budget,), store=str(store), embedder=embedder,
                   chunker=chunker, documents=documents, keep_per_question=True, progress=False, log=log)
    info = {"n_chunks": rep["n_chunks"], "embedder": rep["embedder"], "chunker": rep["chunker"],
            "n_documents": rep["n_documents"], "index_seconds": rep["index_seconds"],
            "seconds": round(time.perf_counter() - t0, 1)}
    return rep["per_question"]["hybrid"], info


def peer_rows(ds, qs, budget: int, cache: Path, toks, documents, log=print) -> dict:
    """P0 and P1 (one per tokeniser) with e5, and each tokeniser's BM25 alone: per row its per-question dict."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    from momoka.eval import evaluate_retrieval
    from momoka.methods.sources import load_embedder
    from retrieval_tables import rrf_lists

    splitter = RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=200, add_start_index=True)
    spans, texts = [], []
    for d in documents:
        for c in splitter.create_documents([d.text]):
            s = c.metadata["start_index"]
            spans.append((d.doc_id, s, s + len(c.page_content)))
            texts.append(c.page_content)
    emb = load_embedder(E5)
    f = cache / f"peer-{ds.name}-{len(documents)}docs-{E5}.npy"
    t0 = time.perf_counter()
    if f.exists() and np.load(f, mmap_mode="r").shape[0] == len(texts):
        vecs = np.load(f)
    else:
        vecs = np.asarray(emb.embed(texts, progress=True), dtype=np.float32)  # passage: prefix
        np.save(f, vecs)
    log(f"peer: {len(texts)} chunks, vectors in {time.perf_counter() - t0:.0f}s")
    vecs = vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
    q = np.asarray(emb.embed_query([x.question for x in qs]), dtype=np.float32)  # query: prefix
    q = q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)
    depth = min(20, len(texts))
    top = np.argsort(-(q @ vecs.T), axis=1)[:, :depth]

    def scored(results):
        rep = evaluate_retrieval(results, qs, ks=(1, 3, 5), mode=ds.require_evidence_mode(), budgets=(budget,))
        return {x.qid: rep.per_question[x.qid] for x in qs}

    out = {"P0 e5": scored({x.qid: [[spans[i]] for i in row] for x, row in zip(qs, top)}), "_chunks": len(texts)}
    import bm25s

    for name in toks:
        tok = tokenizer(name)
        t0 = time.perf_counter()
        bm = bm25s.BM25()
        if tok is None:
            bm.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
            q_tokens = bm25s.tokenize([x.question for x in qs], stopwords="en", return_ids=False, show_progress=False)
        else:
            bm.index([tok(t) for t in texts], show_progress=False)
            q_tokens = [tok(x.question) or ["\x00"] for x in qs]
        lexical, _ = bm.retrieve(q_tokens, k=depth, show_progress=False)
        out[f"bm25 {name}"] = scored({x.qid: [[spans[i]] for i in lex] for x, lex in zip(qs, lexical)})
        out[f"P1 e5 {name}"] = scored({x.qid: [[spans[i]] for i in rrf_lists([lex, dense])]
                                       for x, lex, dense in zip(qs, lexical, top)})
        log(f"P1 {name}: {time.perf_counter() - t0:.0f}s")
    return out


def main(argv=None) -> int:
    from momoka.eval import load_dataset
    from momoka.eval.intervals import paired_bootstrap

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--stores", required=True, help="folder for the stores and the peer's cached vectors")
    ap.add_argument("--rows", default="default,p1", help="default, minilm, p1 (comma-separated)")
    ap.add_argument("--chunkers", default="", help="MoC chunkers to add (ppl, msp, meta, moc), on e5")
    ap.add_argument("--tok", default=",".join(TOKS), help="P1's bm25s tokenisers")
    ap.add_argument("--limit", type=int, default=300)
    ap.add_argument("--budget", type=int, default=5000)
    ap.add_argument("--documents", choices=("all", "questions"), default="all")
    ap.add_argument("--sample", type=int, default=0, help="with --documents questions: add N other documents")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ref", default="default e5", help="the row the margins are over")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    stores = Path(a.stores)
    stores.mkdir(parents=True, exist_ok=True)
    ds = load_dataset(a.data)
    qs = [q for q in ds.questions if q.gold][:a.limit]
    qids = [q.qid for q in qs]
    suffix, documents, docs_arg = "", ds.documents, "all"
    if a.documents == "questions":
        want = {g[0] for q in qs for g in q.gold} | {q.doc_id for q in qs}
        others = sorted(d.doc_id for d in ds.documents if d.doc_id not in want)
        want |= set(random.Random(a.seed).sample(others, min(a.sample, len(others))))
        documents = [d for d in ds.documents if d.doc_id in want]
        suffix = f"-qdocs{a.sample or ''}"
        if a.sample:  # run_eval's "questions" pool has no sample: give it the sub-corpus as its data set
            ds.documents = documents
        else:
            docs_arg = "questions"
    rows: dict[str, dict] = {}
    info: dict[str, dict] = {}
    wanted = [r for r in a.rows.split(",") if r]
    if "default" in wanted:
        rows["default e5"], info["default e5"] = default_row(ds, a.limit, a.budget, stores / f"{ds.name}{suffix}-e5",
                                                             E5, documents=docs_arg)
    if "minilm" in wanted:
        rows["default minilm"], info["default minilm"] = default_row(
            ds, a.limit, a.budget, stores / f"{ds.name}{suffix}-minilm", MINILM, documents=docs_arg)
    for ch in [c for c in a.chunkers.split(",") if c]:
        rows[ch], info[ch] = default_row(ds, a.limit, a.budget, stores / f"{ds.name}{suffix}-{ch}", E5, chunker=ch,
                                         documents=docs_arg)
    if "p1" in wanted:
        peers = peer_rows(ds, qs, a.budget, stores, [t for t in a.tok.split(",") if t], documents)
        info["peers"] = {"chunks": peers.pop("_chunks")}
        rows.update(peers)
    per = {name: per_question_rows(r, qids, a.budget) for name, r in rows.items()}
    report = {"data": str(a.data), "n_questions": len(qs), "n_documents": len(documents), "budget": a.budget,
              "documents": a.documents, "sample": a.sample, "seed": a.seed, "info": info, "rows": {}}
    ref = per.get(a.ref)
    print(f"{ds.name}: {len(qs)} questions, {len(documents)} documents, {a.budget} characters")
    for name, p in per.items():
        row = {"means": summary(p), "per_question": p}
        if ref is not None and name != a.ref:
            row["margin_over_ref"] = {m: paired_bootstrap(p[m], ref[m]).to_dict() for m in METRICS}
        report["rows"][name] = row
        s = row["means"]
        line = f"| {name} | " + " | ".join(
            f"{s[m]['mean']:.3f}" + (f" [{s[m]['interval']['low']:.3f}, {s[m]['interval']['high']:.3f}]"
                                     if m == "complete" else "") for m in METRICS)
        if "margin_over_ref" in row:
            iv = row["margin_over_ref"]["complete"]
            line += f" | {100 * iv['mean']:+.1f} [{100 * iv['low']:+.1f}, {100 * iv['high']:+.1f}]"
        print(line + " |", flush=True)
    report["ref"] = a.ref
    if a.out:
        Path(a.out).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
