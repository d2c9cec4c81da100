"""MC-indexing on the shared sets: chunking error (paper Table 7) and answer-scope recall (Tables 2 and 4).

Run from the repository root (the shared data beside it)::

    PYTHONPATH=python python bench/tables/mcindex_tables.py --out bench/results/mcindex.json
    PYTHONPATH=python python bench/tables/mcindex_tables.py --sets leval_qasper --docs 2 --llm   # LLM views, local model

Per set: the chunking error of FLC-100/200/300 (fixed 100/200/300 whitespace
tokens), FLC within sections and content-aware sections; then the recall of the
answer scope at top 1.5/3/5/10 of FLC-100/200/300, single views (content-aware
chunks ranked by one view), MC-indexing with all views, without each view, and
with RRF, for the dense (default embedder) and BM25 back-ends. Every question
searches only its own document (as the paper restricts retrieval to the one
relevant article). The views' build time per chunk is reported per back-end.
Prints markdown tables; ``--out`` also writes the JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

from momoka.chunking import get_chunker  # noqa: E402
from momoka.eval import load_dataset  # noqa: E402
from momoka.eval.datasets import find_shared_data  # noqa: E402
from momoka.eval.scope import chunking_error, evaluate_scope_recall  # noqa: E402
from momoka import Index  # noqa: E402
from momoka.methods.mcindex import SectionsChunker  # noqa: E402

KS = (1.5, 3, 5, 10)
#: Default subsets: documents (first N) and questions with evidence (first N) per set.
SUBSETS = {"leval_nq": (None, None), "leval_qasper": (None, None), "squad_v1_dev_half_a": (4, 150),
           "hotpotqa_dev500_long": (8, 40)}


def subset(name: str, n_docs: int | None, n_q: int | None):
    ds = load_dataset(find_shared_data(REPO) / name)
    docs = ds.documents if n_docs is None else ds.documents[:n_docs]
    keep = {d.doc_id for d in docs}
    qs = [q for q in ds.questions if q.gold and q.doc_id in keep and all(g[0] in keep for g in q.gold)]
    return ds, docs, (qs if n_q is None else qs[:n_q])


def table7(docs, qs) -> dict:
    out = {}
    for n in (100, 200, 300):
        for label, ch in ((f"FLC-{n}", get_chunker("fixed", size=n)), (f"FLC-{n} within sections",
                                                                      SectionsChunker(max_size=n))):
            spans = {d.doc_id: [(c.start, c.end) for c in ch(d.to_document())] for d in docs}
            out[label] = chunking_error(spans, qs)
    spans = {d.doc_id: [(c.start, c.end) for c in SectionsChunker()(d.to_document())] for d in docs}
    out["content-aware (sections)"] = chunking_error(spans, qs)
    return out


def recall_rows(ix, qs, texts, mode, rows) -> dict:
    out = {}
    for label, name, opts in rows:
        def retrieve(questions, k, name=name, opts=opts):
            res = ix.search_batch([q.question for q in questions], k, name,
                                  per_query_doc_ids=[q.doc_id for q in questions], **opts)
            return [[m.span for m in r.distinct_chunks()] for r in res]
        t0 = time.perf_counter()
        out[label] = evaluate_scope_recall(retrieve, qs, texts, KS, mode)
        out[label]["seconds"] = round(time.perf_counter() - t0, 2)
    return out


def mc_rows(backend: str) -> list:
    r = "dense" if backend == "dense" else "bm25"
    rows = [(f"content: {v}", r, {"view": v}) for v in ("raw", "keywords", "summary")]
    rows.append(("MC-indexing", "mcindex", {"backend": backend}))
    for drop in ("raw", "keywords", "summary"):
        views = [v for v in ("raw", "keywords", "summary") if v != drop]
        rows.append((f"  w/o {drop}", "mcindex", {"backend": backend, "views": views}))
    rows.append(("MC-indexing, RRF", "mcindex", {"backend": backend, "fusion": "rrf"}))
    rows.append(("MC-indexing, union cut to k", "mcindex", {"backend": backend, "truncate": True}))
    return rows


def run_set(name: str, n_docs, n_q, llm: bool) -> dict:
    ds, docs, qs = subset(name, n_docs, n_q)
    texts = {d.doc_id: d.text for d in docs}
    rep = {"set": name, "documents": len(docs), "questions": len(qs), "mode": ds.evidence_mode,
           "table7": table7(docs, qs), "recall": {"dense": {}, "bm25": {}}, "build": {}}
    print(f"{name}: {len(docs)} documents, {len(qs)} questions", file=sys.stderr, flush=True)
    if not llm:
        for n in (100, 200, 300):
            t0 = time.perf_counter()
            ix = Index.build(docs, chunker="fixed", size=n)
            rep["build"][f"FLC-{n}"] = {"chunks": ix.store.n_chunks, "seconds": round(time.perf_counter() - t0, 1)}
            for be in ("dense", "bm25"):
                rep["recall"][be].update(recall_rows(ix, qs, texts, ds.evidence_mode, [(f"FLC-{n}", be, {})]))
            ix.close()
    enrich = [("keywords", {"backend": "llm"}), ("summary", {"backend": "llm"})] if llm else ["keywords", "summary"]
    t0 = time.perf_counter()
    ix = Index.build(docs, chunker="sections", enrich=enrich)
    rep["build"]["MC-indexing"] = {"chunks": ix.store.n_chunks, "seconds": round(time.perf_counter() - t0, 1),
                                   "views": {c["name"]: c.get("settings") for c in ix.corpus.pipeline["enrich"]},
                                   "sources": {v: ix.store.vector_view(v).source for v in ix.store.vector_views}}
    emb = ix.corpus.embedder
    _, over = emb.tokenize([ix.store.chunks.text(c) for c in ix.store.chunks.ids()])
    rep["build"]["MC-indexing"]["raw_over_window"] = int(over)
    for be in ("dense", "bm25"):
        rep["recall"][be].update(recall_rows(ix, qs, texts, ds.evidence_mode, mc_rows(be)))
    ix.close()
    return rep


def markdown(reps: list) -> str:
    lines = ["### Chunking error (share of answer scopes not inside one chunk; lost = in no chunk)", "",
             "| chunking | " + " | ".join(r["set"] for r in reps) + " |", "|---|" + "---|" * len(reps)]
    for label in reps[0]["table7"]:
        cells = []
        for r in reps:
            t = r["table7"][label]
            cells.append(f"{100 * t['error']:.1f}" + (f" (lost {t['lost']})" if t["lost"] else ""))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    for be in ("dense", "bm25"):
        lines += ["", f"### Recall of the answer scope, {be} (x100; top 1.5 / 3 / 5 / 10; returned chunks at 3 and 5)",
                  ""]
        for r in reps:
            lines += [f"**{r['set']}** ({r['documents']} documents, {r['questions']} questions, evidence {r['mode']})",
                      "", "| index | @1.5 | @3 | @5 | @10 | returned@3 | returned@5 |", "|---|---|---|---|---|---|---|"]
            for label, v in r["recall"][be].items():
                lines.append(f"| {label} | " + " | ".join(f"{100 * v[f'recall@{k:g}']:.1f}" for k in KS) +
                             f" | {v['returned@3']:.2f} | {v['returned@5']:.2f} |")
            lines.append("")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", default=",".join(SUBSETS))
    ap.add_argument("--docs", type=int, default=None, help="first N documents of every set (default: per set)")
    ap.add_argument("--questions", type=int, default=None, help="first N questions with evidence")
    ap.add_argument("--llm", action="store_true", help="LLM views (momoka.llm.client_from_env); no FLC rows")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    warnings.simplefilter("ignore")
    reps = []
    for name in a.sets.split(","):
        nd, nq = SUBSETS.get(name, (None, None))
        reps.append(run_set(name, a.docs if a.docs is not None else nd,
                            a.questions if a.questions is not None else nq, a.llm))
        if a.out:
            Path(a.out).parent.mkdir(parents=True, exist_ok=True)
            Path(a.out).write_text(json.dumps(reps, indent=1, default=str))
    print(markdown(reps))


if __name__ == "__main__":
    main()
