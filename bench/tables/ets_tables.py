"""ETS evidence sentences against BM25 and dense top sentences at matched volume; early termination; beam sweep.

Run from the repository root (the shared data beside it)::

    PYTHONPATH=python python bench/tables/ets_tables.py --limit 8 --out bench/results/ets.json

For each question (of the sets with sentence-level gold) the candidates are
the sentences of the question's own document; ETS searches the top ``--n`` of
them by the embedder (``candidate_sentences``) with the local LM as policy
and the local reader's likelihood of its own answer as value
(``ETSRefiner.search``). Against it, at the same evidence volume per question:

* ``dense@k`` / ``bm25@k``: the k sentences of the document with the highest
  embedder cosine / BM25 score, k = the number of sentences ETS returned;
* ``dense@chars`` / ``bm25@chars``: sentences in score order while their
  characters fit in the characters ETS returned (at least one);
* ``gold``: the sentences that hit a gold unit (the reader with perfect
  evidence: how far the reader, not the retrieval, limits EM/F1).

Gold: HotpotQA's ``evidence_sentences`` (supporting facts, all needed),
SQuAD's ``evidence_sentences`` (the answer's sentence, any), Qasper's
``evidence`` (answer occurrences, any). A returned sentence hits a gold unit
when they overlap by at least half the shorter of the two. Recall: share of
gold units hit (mode any: 1 when one is); precision: share of returned
sentences that hit a gold unit. EM/F1: the local reader's answer given the
evidence in document order (ETS App. D answering prompt).

Early termination (paper Figure 4): the same searches again with it switched
off; the selections are identical by construction (checked), the value calls
are answered from the first run's cache, so the policy's decoding is what is
compared: tokens decoded and seconds. The beam sweep (paper Table 2) runs
B1 = B2 in ``--sweep`` on ``--sweep-limit`` HotpotQA questions at depth
``--sweep-depth``, sharing one value cache per question.

Prints markdown tables; ``--out`` writes the JSON (rewritten after every
question, so a long run keeps what it finished).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

from momoka.eval import load_dataset  # noqa: E402
from momoka.eval.datasets import find_shared_data  # noqa: E402
from momoka.eval.metrics import exact_match, token_f1  # noqa: E402
from momoka.store.bm25 import BM25  # noqa: E402
from momoka.methods.ets import Reader, candidate_sentences  # noqa: E402
from momoka.methods.ets.refiner import ETSRefiner  # noqa: E402

#: set -> (where the gold sentences are, evidence mode)
SETS = {"hotpotqa_dev500_long": ("evidence_sentences", "all"), "squad_v1_dev_half_a": ("evidence_sentences", "any"),
        "leval_qasper": ("evidence", "any")}


def gold_units(q, field: str) -> list[tuple[int, int]]:
    """The question's gold spans (own document) as ``(start, end)``."""
    if field == "evidence":
        return [(s, e) for d, s, e in q.gold if d == q.doc_id]
    return [tuple(x) for x in q.extra.get(field) or []]


def hits(sel: tuple[int, int], unit: tuple[int, int]) -> bool:
    """Overlap of at least half the shorter span."""
    ov = min(sel[1], unit[1]) - max(sel[0], unit[0])
    return ov > 0 and ov >= 0.5 * min(sel[1] - sel[0], unit[1] - unit[0])


def score_selection(spans: list[tuple[int, int]], gold: list[tuple[int, int]], mode: str) -> dict:
    """Recall and precision of the selected sentence spans against the gold units."""
    hit_units = [any(hits(s, g) for s in spans) for g in gold]
    recall = float(np.mean(hit_units)) if mode == "all" else float(any(hit_units))
    precision = float(np.mean([any(hits(s, g) for g in gold) for s in spans])) if spans else 0.0
    return {"recall": recall, "precision": precision, "n": len(spans), "chars": sum(e - s for s, e in spans)}


def top_matched(order: list[int], sents: list, k: int, chars: int) -> tuple[list[int], list[int]]:
    """The first ``k`` of ``order``, and the longest prefix of ``order`` fitting ``chars`` (at least one)."""
    by_k = sorted(order[:k])
    by_c, total = [], 0
    for i in order:
        n = sents[i].end - sents[i].start
        if by_c and total + n > chars:
            break
        by_c.append(i)
        total += n
    return by_k, sorted(by_c)


def gold_selection(sents: list, gold: list[tuple[int, int]]) -> list[int]:
    """The sentences that hit a gold unit: what the reader gets with perfect evidence retrieval."""
    return [i for i, x in enumerate(sents) if any(hits((x.start, x.end), g) for g in gold)]


def add_gold(report: dict, *, emb, reader, data: Path) -> None:
    """Add the ``gold`` row (reader given the gold sentences) to a report made without it."""
    for name, recs in report["sets"].items():
        field, mode = SETS[name]
        ds = load_dataset(data / name)
        by_id = {q.qid: q for q in ds.questions}
        for rec in recs:
            if "gold" in rec["methods"]:
                continue
            q = by_id[rec["qid"]]
            doc = ds.document(q.doc_id).to_document()
            sents = candidate_sentences(q.question, documents=[doc], embedder=emb, n=10 ** 9)
            idx = gold_selection(sents, gold_units(q, field))
            spans = [(sents[i].start, sents[i].end) for i in idx]
            rec["methods"]["gold"] = {**score_selection(spans, gold_units(q, field), mode),
                                      **answer_scores(CachedValue(reader), q.question, [sents[i].text for i in idx],
                                                      q.answers), "spans": spans}


class CachedValue:
    """The reader's answer and likelihood per evidence set of one question (shared by every search of it)."""

    def __init__(self, reader: Reader):
        self.reader = reader
        self.memo: dict = {}
        self.seconds = 0.0

    def answer(self, question: str, evidence: list[str]) -> tuple[str, float]:
        key = (question, tuple(evidence))
        if key not in self.memo:
            t = time.perf_counter()
            self.memo[key] = self.reader.answer_with_likelihood(question, evidence)
            self.seconds += time.perf_counter() - t
        return self.memo[key]

    def __call__(self, question: str, evidence: list[str]) -> float:
        return self.answer(question, evidence)[1]


def answer_scores(value: CachedValue, question: str, texts: list[str], answers) -> dict:
    a = value.answer(question, texts)[0] if texts else ""
    return {"answer": a, "em": exact_match(a, list(answers)), "f1": token_f1(a, list(answers))}


def run_question(q, doc, field: str, mode: str, *, emb, lm, reader, args, et_off: bool) -> dict:
    """Every method on one question; returns the per-question record."""
    allsents = candidate_sentences(q.question, documents=[doc], embedder=emb, n=10 ** 9)
    gold = gold_units(q, field)
    scores = np.asarray([s.score for s in allsents])
    dense_order = [int(i) for i in np.argsort(-scores, kind="stable")]
    cand_idx = sorted(dense_order[:args.n])
    cands = [allsents[i] for i in cand_idx]
    bm = BM25()
    bm.add([s.text for s in allsents])
    bm_order = [int(i) for i in np.argsort(-bm.get_scores(q.question), kind="stable")]
    value = CachedValue(reader)
    ref = ETSRefiner(embedder=emb, n=args.n, expansion=args.beam, beam=args.beam, max_depth=args.depth,
                     value=value, lm=lm)
    t = time.perf_counter()
    found = ref.search(q.question, [c.text for c in cands])
    wall = time.perf_counter() - t
    ets = [cand_idx[i] for i in found.path]
    k = len(ets)
    chars = sum(allsents[i].end - allsents[i].start for i in ets)
    rec = {"qid": q.qid, "n_sentences": len(allsents), "n_candidates": len(cands), "gold": gold,
           "answers": list(q.answers), "methods": {}, "ets_stats": found.stats.to_dict(), "ets_wall": wall}
    sel = {"ets": ets}
    sel["dense@k"], sel["dense@chars"] = top_matched(dense_order, allsents, k, chars)
    sel["bm25@k"], sel["bm25@chars"] = top_matched(bm_order, allsents, k, chars)
    sel["gold"] = gold_selection(allsents, gold)
    for name, idx in sel.items():
        spans = [(allsents[i].start, allsents[i].end) for i in idx]
        texts = [allsents[i].text for i in idx]
        rec["methods"][name] = {**score_selection(spans, gold, mode), **answer_scores(value, q.question, texts,
                                                                                       q.answers), "spans": spans}
    if et_off:
        t = time.perf_counter()
        off = ref.search(q.question, [c.text for c in cands], early_termination=False)
        rec["et_off_stats"] = off.stats.to_dict()
        rec["et_off_wall"] = time.perf_counter() - t
        rec["et_same_path"] = off.path == found.path
    return rec


def run_sweep(q, doc, *, emb, lm, reader, args) -> dict:
    """B1 = B2 = b for each b of the sweep on one question (one value cache)."""
    field, mode = SETS["hotpotqa_dev500_long"]
    cands = candidate_sentences(q.question, documents=[doc], embedder=emb, n=args.n)
    gold = gold_units(q, field)
    value = CachedValue(reader)
    out = {"qid": q.qid, "runs": {}}
    for b in args.sweep:
        ref = ETSRefiner(embedder=emb, n=args.n, expansion=b, beam=b, max_depth=args.sweep_depth, value=value, lm=lm)
        v0 = value.seconds
        t = time.perf_counter()
        found = ref.search(q.question, [c.text for c in cands])
        spans = [(cands[i].start, cands[i].end) for i in found.path]
        out["runs"][str(b)] = {**score_selection(spans, gold, mode),
                               **answer_scores(value, q.question, [cands[i].text for i in found.path], q.answers),
                               "wall": time.perf_counter() - t, "new_value_seconds": value.seconds - v0,
                               "stats": found.stats.to_dict()}
    return out


def _smoke(n: int) -> str:
    """How a table on ``n`` questions is printed: three decimals from 30 questions, else two and a smoke-test note."""
    return "" if n >= 30 else f" (a smoke test: one question is worth up to {1 / n:.2f}; two decimals, no interval)"


def tables(report: dict) -> str:
    """Markdown tables of a report: n in each caption; fewer than 30 questions get two decimals and a smoke-test
    note, 30 or more three decimals and the paired interval of ETS's recall margin over dense@k."""
    from momoka.eval import paired_bootstrap

    lines = []
    methods = ["ets", "dense@k", "bm25@k", "dense@chars", "bm25@chars", "gold"]
    for name, recs in report.get("sets", {}).items():
        if not recs:
            continue
        d = 3 if len(recs) >= 30 else 2
        lines += [f"\n{name}: {len(recs)} questions, N = {report['n']}, B1 = B2 = {report['beam']}, depth <= "
                  f"{report['depth']}{_smoke(len(recs))}", "", "| evidence | sentences | chars | recall | precision | EM | F1 |",
                  "|---|---|---|---|---|---|---|"]
        for m in methods:
            rows = [r["methods"][m] for r in recs if m in r["methods"]]
            if len(rows) < len(recs):
                continue
            cells = [np.mean([x[c] for x in rows]) for c in ("n", "chars", "recall", "precision", "em", "f1")]
            lines.append(f"| {m} | {cells[0]:.2f} | {cells[1]:.0f} | " + " | ".join(f"{c:.{d}f}" for c in cells[2:])
                         + " |")
        if len(recs) >= 30 and all("ets" in r["methods"] and "dense@k" in r["methods"] for r in recs):
            iv = paired_bootstrap([r["methods"]["ets"]["recall"] for r in recs],
                                  [r["methods"]["dense@k"]["recall"] for r in recs])
            lines.append(f"\nets minus dense@k, recall: {iv.mean:+.3f} [{iv.low:+.3f}, {iv.high:+.3f}] "
                         f"(95 % paired bootstrap, n = {iv.n})")
    offs = [r for recs in report.get("sets", {}).values() for r in recs if "et_off_stats" in r]
    if offs:
        on_t = [r["ets_stats"]["tokens_generated"] for r in offs]
        off_t = [r["et_off_stats"]["tokens_generated"] for r in offs]
        on_s = [r["ets_stats"]["seconds_policy"] for r in offs]
        off_s = [r["et_off_stats"]["seconds_policy"] for r in offs]
        root = [r["ets_stats"]["seconds_root"] for r in offs]
        val = [r["ets_stats"]["seconds_value"] for r in offs]
        same = sum(r["et_same_path"] for r in offs)
        lines += [f"\nEarly termination: {len(offs)} questions, same selection in {same}", "",
                  "| decoding | tokens decoded / q | policy decode s / q | prompt s / q | value s / q | total s / q |",
                  "|---|---|---|---|---|---|"]
        for lab, t, s in (("early-terminating", on_t, on_s), ("whole sentences", off_t, off_s)):
            lines.append(f"| {lab} | {np.mean(t):.1f} | {np.mean(s):.1f} | {np.mean(root):.1f} | {np.mean(val):.1f} | "
                         f"{np.mean(s) + np.mean(root) + np.mean(val):.1f} |")
        lines.append(f"\ntokens decoded: x{np.mean(off_t) / np.mean(on_t):.1f} without early termination; "
                     f"policy decode seconds: x{np.mean(off_s) / max(np.mean(on_s), 1e-9):.2f}")
    sw = report.get("sweep") or []
    if sw:
        d = 3 if len(sw) >= 30 else 2
        lines += [f"\nBeam sweep (HotpotQA, {len(sw)} questions, depth <= {report['sweep_depth']}){_smoke(len(sw))}", "",
                  "| B1 = B2 | recall | precision | sentences | EM | F1 | value calls / q | tokens decoded / q |",
                  "|---|---|---|---|---|---|---|---|"]
        for b in report["sweep_sizes"]:
            rows = [r["runs"][str(b)] for r in sw]
            lines.append(f"| {b} | " + " | ".join(f"{np.mean([x[c] for x in rows]):.{d}f}"
                                                  for c in ("recall", "precision", "n", "em", "f1")) +
                         f" | {np.mean([x['stats']['value_calls'] for x in rows]):.1f} | "
                         f"{np.mean([x['stats']['tokens_generated'] for x in rows]):.1f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", default=",".join(SETS), help="comma-separated set names")
    ap.add_argument("--limit", type=int, default=8, help="questions per set (with sentence gold)")
    ap.add_argument("--n", type=int, default=30, help="candidates after the embedder pre-filter")
    ap.add_argument("--beam", type=int, default=3, help="B1 = B2 of the main table")
    ap.add_argument("--depth", type=int, default=5, help="largest evidence set")
    ap.add_argument("--max-tokens", type=int, default=32, help="longest reader answer")
    ap.add_argument("--et-off", default="hotpotqa_dev500_long", help="sets also searched without early termination")
    ap.add_argument("--sweep", default="1,2,4,8", help="B1 = B2 values of the sweep ('' to skip)")
    ap.add_argument("--sweep-limit", type=int, default=3)
    ap.add_argument("--sweep-depth", type=int, default=2)
    ap.add_argument("--out", default=None)
    ap.add_argument("--add-gold", default=None, metavar="JSON",
                    help="only add the gold-sentence row to this report (made before the row existed) and print")
    args = ap.parse_args()
    args.sweep = [int(x) for x in args.sweep.split(",") if x.strip()]
    from momoka.models import Embedder, default_causal_lm

    data = find_shared_data(REPO)
    if data is None:
        sys.exit("the shared data folder is not beside the repository")
    emb, lm = Embedder.default(), default_causal_lm()
    if args.add_gold:
        report = json.loads(Path(args.add_gold).read_text())
        add_gold(report, emb=emb, reader=Reader(lm, max_tokens=report["max_tokens"]), data=data)
        Path(args.add_gold).write_text(json.dumps(report, indent=1))
        print(tables(report))
        return
    reader = Reader(lm, max_tokens=args.max_tokens)
    report = {"n": args.n, "beam": args.beam, "depth": args.depth, "limit": args.limit, "max_tokens": args.max_tokens,
              "sweep_sizes": args.sweep, "sweep_depth": args.sweep_depth, "load_start": os.getloadavg(),
              "sets": {}, "sweep": []}

    def save() -> None:
        if args.out:
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(json.dumps(report, indent=1))

    t0 = time.perf_counter()
    for name in [s for s in args.sets.split(",") if s]:
        field, mode = SETS[name]
        ds = load_dataset(data / name)
        qs = [q for q in ds.questions if gold_units(q, field)][:args.limit]
        report["sets"][name] = []
        for q in qs:
            rec = run_question(q, ds.document(q.doc_id).to_document(), field, mode, emb=emb, lm=lm, reader=reader,
                               args=args, et_off=name in args.et_off.split(","))
            report["sets"][name].append(rec)
            print(f"{name} {q.qid}: ets {rec['methods']['ets']['recall']:.2f}/{rec['methods']['ets']['precision']:.2f}"
                  f" {rec['ets_wall']:.0f}s ({time.perf_counter() - t0:.0f}s total)", file=sys.stderr, flush=True)
            save()
    if args.sweep:
        ds = load_dataset(data / "hotpotqa_dev500_long")
        qs = [q for q in ds.questions if gold_units(q, "evidence_sentences")][:args.sweep_limit]
        for q in qs:
            report["sweep"].append(run_sweep(q, ds.document(q.doc_id).to_document(), emb=emb, lm=lm, reader=reader,
                                             args=args))
            print(f"sweep {q.qid} ({time.perf_counter() - t0:.0f}s total)", file=sys.stderr, flush=True)
            save()
    report["load_end"] = os.getloadavg()
    report["seconds"] = time.perf_counter() - t0
    save()
    print(tables(report))


if __name__ == "__main__":
    main()
