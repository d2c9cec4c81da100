"""Offline ``ask`` on SQuAD: quoted evidence against the local generator, on the same questions and passages.

Indexes the documents of a data set (default ``squad_v1_dev_half_a``) with the
default chunker and embedder (or reuses ``--store``), retrieves for each
question with ``hybrid`` at the default budget (5,000 characters), and gives
the same passages to

* the ``evidence`` reader: hit = the top quoted sentence contains a gold answer
  (SQuAD-normalised containment, :func:`momoka.eval.metrics.contains_answer`);
  also within its top 3 sentences;
* the ``local`` reader (SmolLM2-135M, or the model ``MOMOKA_LLM_LOCAL_MODEL`` names; greedy,
  128 tokens at most, no response cache, answer style ``--style``, default ``short``): exact match and
  token F1 (:mod:`momoka.eval.metrics`), the same containment of a gold answer in its answer, and the share
  of answers saying the passages do not hold the answer (``Answer.no_answer``), on the first
  ``--gen-limit`` questions (the generator takes seconds per question on a CPU).

``--wrong-article`` retrieves each question's passages from the other documents only (never its own
article), so the answer is missing from the passages (the share where it is not is printed as the
ceiling): the ``no_answer`` share then measures how often the reader says so.

Also printed: the share of questions whose passages contain a gold answer at
all (the ceiling of both). Each figure is a mean over n questions with a 95 %
percentile-bootstrap interval (2,000 resamples).

Run:  PYTHONPATH=python python bench/tables/ask_tables.py [--limit 300] [--gen-limit 30] [--style short|sentence]
      [--wrong-article] [--store DIR] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _fmt(name: str, values: list[float]) -> str:
    from momoka.eval import bootstrap_mean

    iv = bootstrap_mean(values)
    return f"{name:<58} {100 * iv.mean:6.1f} %   [{100 * iv.low:5.1f}, {100 * iv.high:5.1f}]   n={iv.n}"


def main() -> int:
    from momoka import Index
    from momoka.eval import load_dataset
    from momoka.eval.datasets import find_shared_data
    from momoka.eval.metrics import contains_answer, exact_match, token_f1
    from momoka.llm.local import LocalClient
    from momoka.methods.base import DEFAULT_BUDGET
    from momoka.methods.standard import EvidenceReader, LLMReader

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=None, help="data set directory (default: ../shared/data/squad_v1_dev_half_a)")
    ap.add_argument("--limit", type=int, default=300, help="questions (default 300)")
    ap.add_argument("--gen-limit", type=int, default=30, help="questions the local generator answers (default 30)")
    ap.add_argument("--budget", type=int, default=DEFAULT_BUDGET, help=f"context characters (default {DEFAULT_BUDGET})")
    ap.add_argument("--retriever", default="hybrid", help="retriever (default hybrid)")
    ap.add_argument("--style", default="short", choices=("short", "sentence"),
                    help="the local reader's answer style (default short)")
    ap.add_argument("--wrong-article", action="store_true",
                    help="retrieve each question's passages from the other documents only")
    ap.add_argument("--store", type=Path, default=None, help="store to reuse or build (default: a temporary one)")
    ap.add_argument("--out", type=Path, default=None, help="write per-question records and the summary as JSON")
    a = ap.parse_args()

    data = Path(a.data) if a.data else (find_shared_data(REPO) or Path("../shared/data")) / "squad_v1_dev_half_a"
    ds = load_dataset(data)
    questions = [q for q in ds.questions if q.answers][: a.limit]
    with tempfile.TemporaryDirectory(prefix="momoka-ask-tables-") as tmp:
        store = a.store or Path(tmp) / "squad.store"
        t0 = time.perf_counter()
        ix = Index.open(store) if (store / "manifest.json").exists() else Index.build(ds.documents, store=store)
        print(f"store: {len(ix)} documents ({time.perf_counter() - t0:.1f} s to open or build); "
              f"{len(questions)} questions; retriever {a.retriever}, budget {a.budget} characters")
        evidence = EvidenceReader(ix.corpus.embedder, max_context_chars=a.budget)
        gen = (LLMReader(LocalClient(cache=False, progress=False), max_context_chars=a.budget, style=a.style)
               if a.gen_limit else None)
        doc_ids = sorted({d.doc_id for d in ds.documents})
        recs = []
        gen_wall = gen_cpu = 0.0
        for i, q in enumerate(questions):
            others = [d for d in doc_ids if d != q.doc_id] if a.wrong_article else None
            res = ix.search(q.question, retriever=a.retriever, budget=a.budget, doc_ids=others)
            ans = evidence.answer(q.question, res)
            rec = {"qid": q.qid, "question": q.question, "answers": list(q.answers),
                   "in_context": contains_answer(" ".join(c.text for c in ans.context), q.answers),
                   "evidence": ans.text, "evidence_span": [ans.citations[0].doc_id, ans.citations[0].start,
                                                           ans.citations[0].end],
                   "hit1": contains_answer(ans.citations[0].text, q.answers),
                   "hit3": float(any(contains_answer(c.text, q.answers) for c in ans.citations[:3]))}
            if gen is not None and i < a.gen_limit:
                w, c = time.perf_counter(), time.process_time()
                g = gen.answer(q.question, res)
                gen_wall += time.perf_counter() - w
                gen_cpu += time.process_time() - c
                rec.update({"generated": g.text, "em": exact_match(g.text, q.answers), "f1": token_f1(g.text, q.answers),
                            "gen_contains": contains_answer(g.text, q.answers), "no_answer": float(g.no_answer)})
                print(f"  generator {i + 1}/{min(a.gen_limit, len(questions))}: {gen_wall / (i + 1):.1f} s wall, "
                      f"{gen_cpu / (i + 1):.1f} s CPU per question", flush=True)
            recs.append(rec)
        ix.close()

    print()
    print(f"{'':<58} {'mean':>8}   {'95 % CI':<16} n")
    print(_fmt("evidence: top sentence contains a gold answer", [r["hit1"] for r in recs]))
    print(_fmt("evidence: one of the top 3 sentences contains one", [r["hit3"] for r in recs]))
    print(_fmt("passages given (the ceiling) contain a gold answer", [r["in_context"] for r in recs]))
    g = [r for r in recs if "em" in r]
    if g:
        print(f"-- on the first {len(g)} questions (the generator's):")
        print(_fmt("evidence: top sentence contains a gold answer", [r["hit1"] for r in g]))
        print(_fmt(f"local generator ({gen.llm.model}): exact match", [r["em"] for r in g]))
        print(_fmt("local generator: token F1", [r["f1"] for r in g]))
        print(_fmt("local generator: answer contains a gold answer", [r["gen_contains"] for r in g]))
        print(_fmt("local generator: says the passages lack the answer", [r["no_answer"] for r in g]))
        for label, keep in (("  ... where the passages contain a gold answer", True), ("  ... where they do not", False)):
            part = [r["no_answer"] for r in g if bool(r["in_context"]) is keep]
            if part:
                print(_fmt(label, part))
        print(f"generator ({gen.llm.model}, style {a.style}{', wrong article' if a.wrong_article else ''}) time: {gen_wall / len(g):.2f} s wall, {gen_cpu / len(g):.2f} s CPU per question "
              f"(load average {os.getloadavg()[0]:.2f})")
    if a.out:
        a.out.write_text(json.dumps({"records": recs, "data": str(data), "budget": a.budget,
                                     "retriever": a.retriever, "style": a.style, "wrong_article": a.wrong_article}, indent=1, ensure_ascii=False) + "\n")
        print(f"saved {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
