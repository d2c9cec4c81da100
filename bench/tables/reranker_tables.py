"""Rerankers on the shared sets: the default pipeline's candidates reordered by cosine and by UPR.

Run from the repository root (the shared data beside it)::

    PYTHONPATH=python python bench/tables/reranker_tables.py --stores /tmp/momoka-stores --questions 20 --depth 20

For each set, the default pipeline (recursive 100-token chunks, hybrid convex
w=0.6; the stores ``SET-r100`` of ``bench/tables/retrieval_tables.py``, built there when
missing) returns its top ``--depth`` chunks for the first ``--questions``
questions with evidence; they are then kept in that order (``none``), or
reordered by the cosine reranker (the default embedder) or by the
query-likelihood reranker (UPR, the local causal LM, with its passage KV cache,
all questions of a set in one ``score_batch``). Scores: MRR of the first
relevant chunk and span recall, both at the 5,000-character budget (the top
reordered chunks that fit), and ms per question of the reranking alone (wall
and CPU). Prints each set's n and each reranker's MRR margin over the hybrid
order with its paired bootstrap 95 % interval (a set of fewer than 30
questions is flagged as a smoke test). ``--out`` writes the JSON.
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
sys.path.insert(0, str(REPO / "bench" / "tables"))

import retrieval_tables as rt  # noqa: E402
from momoka import Index  # noqa: E402
from momoka.eval import load_dataset, paired_bootstrap  # noqa: E402


def rerank_rows(ds, qs, ix, depth: int, rerankers: dict) -> dict:
    """One row per reranker: the hybrid candidates reordered, scored at the budget."""
    texts = [q.question for q in qs]
    res = ix.corpus.retriever("hybrid", fusion="convex", dense_weight=0.6).retrieve_batch(texts, depth)
    spans = [r.spans() for r in res]
    passages = [[it.text for it in r] for r in res]
    rows = {"none (hybrid order)": rt.score({q.qid: s for q, s in zip(qs, spans)}, qs, ds.evidence_mode)}
    for label, rr in rerankers.items():
        w, c = time.perf_counter(), time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if hasattr(rr, "score_batch"):
                scores = rr.score_batch(texts, passages)
            else:
                scores = [rr.score(q, ps) for q, ps in zip(texts, passages)]
        wall, cpu = time.perf_counter() - w, time.process_time() - c
        order = [sorted(range(len(s)), key=lambda i: (-float(s[i]), i)) for s in scores]
        row = rt.score({q.qid: [sp[i] for i in o] for q, sp, o in zip(qs, spans, order)}, qs, ds.evidence_mode)
        row.update(ms_per_question=1000 * wall / len(qs), cpu_ms_per_question=1000 * cpu / len(qs))
        rows[label] = row
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", default=",".join(rt.SETS))
    ap.add_argument("--questions", type=int, default=20, help="first N questions with evidence per set")
    ap.add_argument("--depth", type=int, default=20, help="candidates reranked per question")
    ap.add_argument("--stores", required=True, help="folder of the SET-r100 stores (built there when missing)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    from momoka.models import CosineReranker, Embedder, QueryLikelihoodReranker

    root = rt.shared_root()
    if root is None:
        return 2
    stores = Path(args.stores)
    report = {"budget": rt.BUDGET, "depth": args.depth, "questions_per_set": args.questions, "sets": {}}
    emb = Embedder.default()
    for name in args.sets.split(","):
        ds = load_dataset(root / name, evidence_mode=rt.MODES.get(name))
        qs = rt.questions_of(ds, args.questions)
        folder = stores / f"{name}-r100"
        if (folder / "manifest.json").exists():
            ix = Index.open(folder)
        else:
            ix = Index.build([d.to_document() for d in ds.documents], store=folder, chunker="recursive", size=100,
                             progress=True)
        try:
            rows = rerank_rows(ds, qs, ix, args.depth,
                               {"cosine": CosineReranker(emb), "UPR (query likelihood)": QueryLikelihoodReranker()})
        finally:
            ix.close()
        report["sets"][name] = {"mode": ds.evidence_mode, "questions": len(qs), "rows": rows}
        print(f"{name}: n = {len(qs)} questions" + (f" (a smoke test: one question is worth up to {1 / len(qs):.2f})"
                                                     if len(qs) < 30 else ""), flush=True)
        base = rows["none (hybrid order)"]["per_question"]
        for label, row in rows.items():
            ms = f" {row['ms_per_question']:.0f} ms/q" if "ms_per_question" in row else ""
            margin = ""
            if label != "none (hybrid order)":
                iv = paired_bootstrap(row["per_question"]["mrr"], base["mrr"])
                margin = f" mrr margin over hybrid order {iv.mean:+.3f} [{iv.low:+.3f}, {iv.high:+.3f}] (95 % paired)"
            print(f"{name:24s} {label:24s} mrr {row['mrr']:.3f} span recall {row['span_recall']:.3f}{ms}{margin}",
                  flush=True)
        if args.out:
            Path(args.out).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
