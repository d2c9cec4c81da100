"""Would Momoka-style paths over a kNN graph *across* pages help multi-hop questions over a corpus of pages?

Two measurements on a data set whose questions name their supporting documents (``evidence_multi``, default
``hotpotqa_dev500_pages``), over an index built with the default pipeline (``--store``, reused when it exists):

* **reachability**: for each question with two supporting documents, is one of them among the ``k`` nearest
  neighbours (cosine of the stored vectors, chunks of the same document skipped) of a chunk of the other,
  for k = 4, 8, 16; also counted over the questions the default misses (complete coverage at 2,000 characters);
* **what a path of two adds**: a ranking that follows each of the question's top ``m`` passages of the
  default (``hybrid``) ranking by its nearest passage of another document (at cosine >= ``min``), scored
  by ``momoka eval``'s runner against ``hybrid`` at 2,000 and 5,000 characters (paired intervals).

Run:  PYTHONPATH=python python bench/tables/pages_knn_paths.py --store DIR [--data DIR] [--limit 300]
      [--paths 2:0,1:0,1:0.7] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from momoka import Index
from momoka.eval import load_dataset
from momoka.eval.runner import run_eval
from momoka.methods.standard.retrievers import HybridRetriever, StoreRetriever
from momoka.registry import register

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "hotpotqa_dev500_pages"


class KnnHop(StoreRetriever):
    """The default ranking, each of its top ``m`` passages followed by its nearest passage of another document."""

    name = "knnhop"

    def __init__(self, index, *, m: int = 1, min: float = 0.0, neighbours: int = 12):
        super().__init__(index)
        self.hybrid, self.m, self.min, self.neighbours = HybridRetriever(index), int(m), float(min), int(neighbours)

    def provenance(self) -> dict:
        return {"retriever": self.name, "m": self.m, "min": self.min}

    def rank_batch(self, queries, k, allowed):
        st = self.index.store
        vv = st.vector_view("raw")
        out = []
        for r in self.hybrid.rank_batch(queries, k, allowed):
            order: list[int] = []
            for i, (c, _s) in enumerate(r):
                if c not in order:
                    order.append(c)
                if i < self.m:
                    doc = st.chunks.span(c)[0]
                    for n, sim in vv.search(vv.get([c])[0], self.neighbours):
                        if st.chunks.span(n)[0] != doc and n not in order:
                            if sim >= self.min:
                                order.append(n)
                            break
            score, prev, ranked = dict(r), float("inf"), []
            for c in order:  # an inserted passage takes the score of the one before it
                prev = min(prev, score.get(c, prev))
                ranked.append((c, prev))
            out.append(ranked[:k])
        return out


register("retriever", "knnhop", summary="bench only: default ranking + nearest passage of another document")(
    lambda index, **o: KnnHop(index, **o))


def reachability(store: str, questions: list[dict], missed: set[str]) -> dict:
    ix = Index.open(store)
    st = ix.store
    vv = st.vector_view("raw")
    ids = np.asarray([c for d in st.documents.values() for c in d.chunk_ids], dtype=np.int64)
    X = vv.get(ids)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    doc = np.asarray([st.chunks.span(int(c))[0] for c in ids])
    row = {int(c): i for i, c in enumerate(ids)}
    out = {}
    for k in (4, 8, 16):
        hit = hit_missed = n = 0
        for q in questions:
            docs = sorted({d for d, _, _ in q["evidence_multi"]})
            if len(docs) != 2:
                continue
            n += 1
            A, B = ([row[c] for c in st.documents[d].chunk_ids] for d in docs)
            ok = False
            for src, dst in ((A, B), (B, A)):
                for i in src:
                    s = X @ X[i]
                    s[doc == doc[i]] = -np.inf
                    if set(np.argsort(-s)[:k].tolist()) & set(dst):
                        ok = True
            hit += ok
            hit_missed += ok and q["qid"] in missed
        out[k] = {"pairs": n, "reachable": hit, "missed": len(missed), "reachable_among_missed": hit_missed}
    ix.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--store", required=True)
    ap.add_argument("--limit", type=int, default=300)
    ap.add_argument("--paths", default="2:0,1:0,1:0.7", help="m:min pairs to score")
    ap.add_argument("--out")
    a = ap.parse_args()
    ds = load_dataset(a.data)
    res: dict = {"paths": {}}
    missed: set[str] = set()
    for spec in a.paths.split(","):
        m, mn = spec.split(":")
        rep = run_eval(ds, ["hybrid", "knnhop"], limit=a.limit, budgets=(2000, 5000), store=a.store,
                       keep_per_question=True, options={"knnhop": {"m": int(m), "min": float(mn)}})
        missed = {q for q, v in rep["per_question"]["hybrid"].items() if v["complete@2000c"] < 1}
        mg = rep["margins"]["knnhop"]
        res["paths"][spec] = {b: {x: mg[f"complete@{b}c"][x] for x in ("mean", "low", "high", "n")} for b in (2000, 5000)}
        print(f"m={m} min={mn}: " + "; ".join(
            f"{b}: {mg[f'complete@{b}c']['mean'] * 100:+.1f} [{mg[f'complete@{b}c']['low'] * 100:+.1f}, "
            f"{mg[f'complete@{b}c']['high'] * 100:+.1f}]" for b in (2000, 5000)), flush=True)
    qs = [q for q in (json.loads(x) for x in open(Path(a.data) / "questions.jsonl")) if q.get("evidence_multi")]
    res["reachability"] = reachability(a.store, qs[: a.limit], missed)
    for k, v in res["reachability"].items():
        print(f"k={k}: second page a neighbour {v['reachable']}/{v['pairs']}; among the default's misses "
              f"{v['reachable_among_missed']}/{v['missed']}")
    if a.out:
        Path(a.out).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
