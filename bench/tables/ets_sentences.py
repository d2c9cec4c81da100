"""Evidence-sentence recall, precision and F1 of the offline ETS refiner against the default's own sentences.

Run from the repository root (the shared data beside it; the stores of ``retrieval_tables.py``)::

    PYTHONPATH=python python bench/tables/ets_sentences.py --stores /tmp/momoka-stores --out ets_sentences.json

For each question (corpus scope) the default pipeline (``hybrid``, recursive 100 with contextual
headers, the store ``SET-r100`` that ``bench/tables/retrieval_tables.py`` builds) returns its assembled
context at 5,000 characters. Then, at the same evidence volume per question:

* ``ets``: the sentences the offline ETS refiner selects (``policy=offline``, its defaults, the
  sentences alone: ``budget=None``), searched over the whole store as the refiner does;
* ``dense@k`` / ``bm25@k``: the k sentences of the default's context with the highest embedder
  cosine / BM25 score (BM25 over those sentences), k = the number ETS selected;
* ``dense@chars``: the context's sentences by cosine while their characters fit those ETS selected.

Gold units: DragonBall's reference sentences (``evidence``, every one needed), HotpotQA's located
supporting-fact sentences (``evidence_sentences``, the 53 questions of its source B; all needed) and
SQuAD's answer sentences (``evidence_sentences``, any). A selected sentence hits a gold unit when both
are in the same document and overlap by at least half the shorter. Recall: share of gold units hit
(mode any: 1 when one is); precision: share of selected sentences hitting one; F1 per question. Prints
each set's n, the means, and ETS's margin over ``dense@k`` in F1 with its paired bootstrap 95 %
interval; ``--out`` writes the JSON with per-question records.
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
sys.path.insert(0, str(REPO / "bench" / "tables"))

from momoka import Index  # noqa: E402
from momoka.eval import load_dataset, paired_bootstrap  # noqa: E402
from momoka.eval.datasets import find_shared_data  # noqa: E402
from momoka.methods.base import DEFAULT_BUDGET  # noqa: E402
from momoka.methods.ets import candidate_sentences  # noqa: E402
from momoka.registry import create  # noqa: E402
from momoka.store.bm25 import BM25  # noqa: E402
from ets_tables import top_matched  # noqa: E402

#: set -> (where the gold sentences are, evidence mode)
SETS = {"dragonball_finance_en": ("evidence", "all"), "hotpotqa_dev500_long": ("evidence_sentences", "all"),
        "squad_v1_dev_half_a": ("evidence_sentences", "any")}
METHODS = ("ets", "dense@k", "bm25@k", "dense@chars")


def gold_units(q, field: str) -> list[tuple[str, int, int]]:
    """The question's gold sentences as ``(doc_id, start, end)``."""
    if field == "evidence":
        return [tuple(g) if len(g) == 3 else (q.doc_id, *g) for g in q.gold]
    return [(q.doc_id, int(s), int(e)) for s, e in q.extra.get(field) or []]


def hits(sel: tuple, unit: tuple) -> bool:
    """Same document and an overlap of at least half the shorter span."""
    if sel[0] != unit[0]:
        return False
    ov = min(sel[2], unit[2]) - max(sel[1], unit[1])
    return ov > 0 and ov >= 0.5 * min(sel[2] - sel[1], unit[2] - unit[1])


def score_selection(spans: list[tuple], gold: list[tuple], mode: str) -> dict:
    """Recall, precision and F1 of the selected sentence spans against the gold units."""
    hit_units = [any(hits(s, g) for s in spans) for g in gold]
    recall = float(np.mean(hit_units)) if mode == "all" else float(any(hit_units))
    precision = float(np.mean([any(hits(s, g) for g in gold) for s in spans])) if spans else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"recall": recall, "precision": precision, "f1": f1, "n": len(spans),
            "chars": sum(e - s for _, s, e in spans)}


def run_set(name: str, ix, qs, field: str, mode: str, limit: int | None, hybrid: dict) -> list[dict]:
    refiner = create("refiner", "ets", embedder=ix.corpus.embedder, corpus=ix.corpus, policy="offline", budget=None)
    retriever = ix.corpus.retriever("hybrid", **hybrid)
    asm = ix.corpus.assembler()
    depth = ix.corpus.depth_for(DEFAULT_BUDGET)
    out = []
    for q in qs[:limit]:
        gold = gold_units(q, field)
        ctx = retriever.retrieve(q.question, depth).fit(DEFAULT_BUDGET, assemble=asm)
        t = time.perf_counter()
        refined = refiner.refine(q.question, ctx)
        wall = time.perf_counter() - t
        ets = [(m.doc_id, m.start, m.end) for it in refined for m in it.members]
        sents = candidate_sentences(q.question, result=ctx, embedder=ix.corpus.embedder, n=10 ** 9)
        k, chars = len(ets), sum(e - s for _, s, e in ets)
        dense = sorted(range(len(sents)), key=lambda i: (-sents[i].score, i))
        bm = BM25(stem=True, stopwords="english")
        bm.add([s.text for s in sents])
        bm_scores = bm.get_scores(q.question) if sents else np.zeros(0)
        bm25 = sorted(range(len(sents)), key=lambda i: (-float(bm_scores[i]), i))
        _, by_chars = top_matched(dense, sents, k, chars)
        sel = {"ets": ets, "dense@k": [sents[i].span for i in dense[:k]], "bm25@k": [sents[i].span for i in bm25[:k]],
               "dense@chars": [sents[i].span for i in by_chars]}
        out.append({"qid": q.qid, "gold": gold, "context_sentences": len(sents), "ets_seconds": wall,
                    "methods": {m: {**score_selection(s, gold, mode), "spans": s} for m, s in sel.items()}})
    return out


def markdown(report: dict) -> str:
    sets = list(report["sets"])
    head = "| method | " + " | ".join(f"{n} ({len(report['sets'][n])} q)" for n in sets) + " |"
    lines = ["evidence sentences at ETS's volume: recall / precision / F1 (mean over questions)", "", head,
             "|---" * (len(sets) + 1) + "|"]
    for m in METHODS:
        cells = []
        for n in sets:
            recs = report["sets"][n]
            cells.append(" / ".join(f"{np.mean([r['methods'][m][x] for r in recs]):.3f}"
                                    for x in ("recall", "precision", "f1")))
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    for ref in ("dense@k", "bm25@k"):
        cells = []
        for n in sets:
            recs = report["sets"][n]
            iv = paired_bootstrap([r["methods"]["ets"]["f1"] for r in recs], [r["methods"][ref]["f1"] for r in recs])
            cells.append(f"{100 * iv.mean:+.1f} [{100 * iv.low:+.1f}, {100 * iv.high:+.1f}]")
        lines.append(f"| ets minus {ref}, F1 (points, 95 % paired interval) | " + " | ".join(cells) + " |")
    cells = []
    for n in sets:
        recs = report["sets"][n]
        cells.append(f"{np.mean([r['methods']['ets']['n'] for r in recs]):.1f} / "
                     f"{np.mean([r['methods']['ets']['chars'] for r in recs]):.0f} / "
                     f"{1000 * np.mean([r['ets_seconds'] for r in recs]):.0f}")
    lines.append("| ETS sentences / characters / ms per question | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--stores", required=True, help="the stores of retrieval_tables.py (SET-r100)")
    ap.add_argument("--limit", type=int, default=300, help="first N questions with gold sentences per set")
    ap.add_argument("--coverage", type=float, default=None,
                    help="the first stage's query-term coverage weight (default: the hybrid retriever's)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    hybrid = {} if args.coverage is None else {"coverage": args.coverage}
    root = find_shared_data(REPO)
    if root is None:
        print("no shared data beside the checkout", file=sys.stderr)
        return 2
    report = {"budget": DEFAULT_BUDGET, "hybrid": hybrid, "sets": {}}
    for name in args.sets.split(","):
        field, mode = SETS[name]
        ds = load_dataset(root / name, evidence_mode=mode)
        qs = [q for q in ds.questions if q.gold and gold_units(q, field)]
        folder = Path(args.stores) / f"{name}-r100"
        if not (folder / "manifest.json").exists():
            print(f"{name}: no store at {folder}; run retrieval_tables.py first", file=sys.stderr)
            return 2
        with Index.open(folder) as ix:
            report["sets"][name] = run_set(name, ix, qs, field, mode, args.limit, hybrid)
        print(f"{name}: {len(report['sets'][name])} questions", file=sys.stderr, flush=True)
        if args.out:
            Path(args.out).write_text(json.dumps(report))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
