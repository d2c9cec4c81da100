"""JERR reading: QuALITY accuracy and HotpotQA / L-Eval NQ answer F1, JERR vs BM25 / dense top-k, one budget.

For each data set the first ``--questions`` questions (document scope: each
question searches its own document) are answered by the ``jerr`` reader
(App. A.5 prompt for QuALITY's multiple choice, A.6 otherwise) from k = 5
items of each retriever; every retriever's context is cut to the same
``--budget`` characters (JERR's nodes + synopses count inside it). The graphs
are built offline (``--backend offline``) or with the LLM (``--backend llm``).
Token costs are what the LLM client reports. With ``MOMOKA_LLM_BASE_URL`` (and
``MOMOKA_LLM_MODEL`` / ``MOMOKA_LLM_API_KEY``) set, the reader (and an ``llm``
graph back-end) use that endpoint instead of the local model.

Each retriever's row gives n and the 95 % bootstrap interval of its score; the
margins of ``jerr`` over the others come with their paired bootstrap interval
(a question with no result scores 0). Fewer than 30 questions is a smoke test.

Run: PYTHONPATH=python python bench/tables/jerr_qa.py --data quality_leval --questions 20
"""

from __future__ import annotations

import argparse
import json
import time

from momoka import Index
from momoka.eval import bootstrap_mean, paired_bootstrap
from momoka.eval.datasets import load_dataset
from momoka.eval.metrics import token_f1
from momoka.llm import client_from_env
from momoka.methods.jerr import JerrReader, JerrRelator


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--questions", type=int, default=20)
    ap.add_argument("--retrievers", default="jerr,jerr-pagerank,bm25,dense")
    ap.add_argument("--budget", type=int, default=3000, help="context characters per question")
    ap.add_argument("-k", type=int, default=5)
    ap.add_argument("--backend", default="offline", choices=("offline", "llm"))
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    ds = load_dataset(a.data)
    qs = ds.questions[: a.questions]
    docs = sorted({q.doc_id for q in qs})
    llm = client_from_env()
    rel = JerrRelator(a.backend, llm=llm if a.backend == "llm" else None)
    t0 = time.perf_counter()
    ix = Index.build([ds.document(d).to_document() for d in docs], relate=[rel], progress=True)
    build_s = time.perf_counter() - t0
    graph = {k: v for k, v in rel.describe()["stats"].items()}
    reader = JerrReader(llm, max_context_chars=a.budget, max_tokens=48)
    rows, per_q = {}, {}
    for name in a.retrievers.split(","):
        rname, opts = ("jerr", {"method": "pagerank"}) if name == "jerr-pagerank" else (name, {})
        score, ptok, ctok, ctx_chars, t1 = 0.0, 0, 0, 0, time.perf_counter()
        empty, scores = 0, []
        for q in qs:
            res = ix.search(q.question, k=a.k, retriever=rname, doc_ids=q.doc_id, **opts)
            empty += len(res) == 0
            before = llm.accounting.total
            b_p, b_c = before.prompt_tokens, before.completion_tokens
            if len(res) == 0:
                scores.append(0.0)
                continue
            if q.extra.get("options"):
                idx, _ = reader.answer_choice(q.question, q.extra["options"], res)
                scores.append(float(idx == q.extra["label"]))
            else:
                ans = reader.answer(q.question, res)
                scores.append(token_f1(ans.text, q.answers))
            score += scores[-1]
            ctx_chars += sum(len(c.text) for c in reader.context(res)) + len(reader._pre)
            after = llm.accounting.total
            ptok += after.prompt_tokens - b_p
            ctok += after.completion_tokens - b_c
        n = len(qs)
        rows[name] = {"metric": "accuracy" if qs[0].extra.get("options") else "answer_f1", "score": round(score / n, 4),
                      "questions": n, "no_result": empty, "context_chars_per_q": round(ctx_chars / n),
                      "prompt_tokens_per_q": round(ptok / n, 1), "completion_tokens_per_q": round(ctok / n, 1),
                      "seconds": round(time.perf_counter() - t1, 1),
                      "interval": bootstrap_mean(scores).to_dict(), "per_question": scores}
        per_q[name] = scores
        print(name, json.dumps({k: v for k, v in rows[name].items() if k != "per_question"}), flush=True)
    n = len(qs)
    print(f"\nn = {n} questions" + (f" (a smoke test: one question is worth up to {1 / n:.2f})" if n < 30 else ""))
    for name, scores in per_q.items():
        iv = bootstrap_mean(scores)
        print(f"{name:16s} {iv.mean:.3f} [{iv.low:.3f}, {iv.high:.3f}] (95 % bootstrap, n = {n})")
    if "jerr" in per_q:
        for name, scores in per_q.items():
            if name != "jerr":
                iv = paired_bootstrap(per_q["jerr"], scores)
                print(f"jerr minus {name:11s} {iv.mean:+.3f} [{iv.low:+.3f}, {iv.high:+.3f}] (95 % paired, n = {n})")
    rep = {"data": a.data, "documents": len(docs), "questions": len(qs), "model": getattr(llm, "model", None),
           "graph_backend": a.backend, "build_seconds": round(build_s, 1), "graph": graph, "results": rows}
    print(json.dumps(rep, indent=1))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(rep, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
