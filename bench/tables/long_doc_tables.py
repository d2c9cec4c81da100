"""Long, structured documents at equal budget: structure-aware chunking and MC-indexing against the default.

Run from the repository root (the shared data beside it)::

    PYTHONPATH=python python bench/tables/long_doc_tables.py --stores /tmp/momoka-long --out long.json

Every pipeline fills the same 5,000-character budget (``Index.search_batch(budget=...)``, assembled
as ``momoka query`` returns it) and is scored by complete coverage of the gold evidence (partial span
recall beside it), every question over every document of its set (corpus scope), with the paired
bootstrap 95 % interval of each pipeline's margin over the default (recursive 100 + hybrid) on the
same questions. Rows:

* the default: ``recursive`` at 100 tokens, ``hybrid``;
* ``structure`` (sections packed to the chunker's default size) and ``sections`` (one chunk per
  smallest section, MC-indexing's content-aware chunks), each with ``hybrid``;
* MC-indexing as its paper runs it: ``sections`` with the offline ``keywords`` and ``summary`` views,
  the ``mcindex`` retriever (top k' per view, united) with the dense and with the BM25 back-end;
* MoC's ``ppl`` chunker (θ = 0.2 nats, dynamic merge to 400 characters, as docs/moc.md's example; and
  with its own defaults, θ = 0 and no merge) and ``msp`` chunker (``mode="pair"``, merge to 400
  characters), each with ``hybrid``. Both run the local causal LM over every document: ``ppl``
  scores every token once (its log-probs are cached, so a rerun is free), ``msp`` runs one prompt
  per sentence boundary (about 4x the document's tokens).

``--rows`` picks rows by store key (the default row always runs) and ``--max-docs N`` restricts a set
to its first N documents and the questions whose evidence lies in them, for the slow rows.

``--merge`` adds the rows of this run to the ``--out`` file already there, after checking that the
default row, re-run here, scores every question as the stored one does (else it stops: the rows
would not be paired with the stored default).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python"))

from momoka import Index  # noqa: E402
from momoka.eval import evaluate_retrieval, load_dataset, paired_bootstrap  # noqa: E402
from momoka.eval.datasets import Dataset, find_shared_data  # noqa: E402
from momoka.methods.base import DEFAULT_BUDGET  # noqa: E402

SETS = ("leval_qasper", "leval_nq")
#: (label, store key, chunker, chunker params, enrichers, retriever, retriever options)
PIPELINES = [
    ("default: recursive 100, hybrid", "r100", "recursive", {"size": 100}, [], "hybrid", {}),
    ("structure, hybrid", "structure", "structure", {}, [], "hybrid", {}),
    ("sections, hybrid", "sections-views", "sections", {}, ["keywords", "summary"], "hybrid", {}),
    ("MC-indexing: sections + keywords + summary views, mcindex dense", "sections-views", "sections", {},
     ["keywords", "summary"], "mcindex", {"backend": "dense"}),
    ("MC-indexing, mcindex BM25", "sections-views", "sections", {}, ["keywords", "summary"], "mcindex",
     {"backend": "bm25"}),
    ("MoC ppl (θ 0.2, merge to 400 chars), hybrid", "ppl", "ppl", {"size": 400, "threshold": 0.2}, [], "hybrid", {}),
    ("MoC ppl (its defaults: θ 0, no merge), hybrid", "ppl-defaults", "ppl", {}, [], "hybrid", {}),
    ("MoC msp (pair mode, merge to 400 chars), hybrid", "msp", "msp", {"size": 400, "mode": "pair"}, [], "hybrid",
     {}),
]


def restrict(ds, max_docs: int | None):
    """``ds`` cut to its first ``max_docs`` documents and the questions whose evidence lies only in them."""
    if max_docs is None:
        return ds
    docs = ds.documents[:max_docs]
    keep = {d.doc_id for d in docs}
    qs = [q for q in ds.questions if q.gold and all(g[0] in keep for g in q.gold)]
    return Dataset(f"{ds.name} (first {len(docs)} documents)", ds.path, docs, qs, ds.evidence_mode,
                   ds.evidence_mode_source)


def build(ds, stores: Path, key: str, chunker: str, params: dict, enrich: list) -> Index:
    folder = stores / f"{ds.name}-{key}".replace(" ", "_").replace("(", "").replace(")", "")
    if (folder / "manifest.json").exists():
        return Index.open(folder)
    return Index.build([d.to_document() for d in ds.documents], store=folder, chunker=chunker, enrich=enrich,
                       progress=True, **params)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--questions", type=int, default=300, help="first N questions with evidence per set")
    ap.add_argument("--stores", required=True, help="folder for the stores (built once, then reused)")
    ap.add_argument("--rows", default=None,
                    help="comma-separated store keys of the rows to run (r100, structure, sections-views, ppl, ppl-defaults, msp); "
                         "the default row (r100) always runs; default: all")
    ap.add_argument("--max-docs", type=int, default=None,
                    help="only the first N documents of each set and the questions whose evidence lies in them")
    ap.add_argument("--out", default=None, help="JSON report to write")
    ap.add_argument("--merge", action="store_true",
                    help="add this run's rows to the --out report already there (the re-run default row must "
                         "score every question as the stored one does)")
    args = ap.parse_args(argv)
    keys = None if args.rows is None else set(args.rows.split(",")) | {PIPELINES[0][1]}
    unknown = (keys or set()) - {p[1] for p in PIPELINES}
    if unknown:
        print(f"unknown row keys: {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    if args.merge and not (args.out and Path(args.out).is_file()):
        print("--merge needs an existing --out report", file=sys.stderr)
        return 2
    root = find_shared_data(REPO)
    if root is None:
        print("no shared data beside the checkout", file=sys.stderr)
        return 2
    stores = Path(args.stores)
    stores.mkdir(parents=True, exist_ok=True)
    report: dict = {"budget": DEFAULT_BUDGET, "sets": {}}
    if args.merge:
        report = json.loads(Path(args.out).read_text())
    b = f"@{DEFAULT_BUDGET}c"
    for name in args.sets.split(","):
        ds = restrict(load_dataset(root / name), args.max_docs)
        qs = [q for q in ds.questions if q.gold][: args.questions]
        rows: dict = {}
        for label, key, chunker, params, enrich, retriever, opts in PIPELINES:
            if keys is not None and key not in keys:
                continue
            t0 = time.perf_counter()
            ix = build(ds, stores, key, chunker, params, enrich)
            built = time.perf_counter() - t0
            try:
                t1 = time.perf_counter()
                # as momoka eval scores: the ranking read deep enough, assembled at the budget, strictly (an
                # item longer than the whole budget is not kept first)
                ranked = ix.search_batch([q.question for q in qs], ix.corpus.depth_for(DEFAULT_BUDGET), retriever, **opts)
                asm = ix.corpus.assembler()
                res = [r.fit(DEFAULT_BUDGET, keep_first=False, assemble=asm) for r in ranked]
                ms = 1000 * (time.perf_counter() - t1) / len(qs)
                spans = {q.qid: r.spans() for q, r in zip(qs, ranked)}
                rep = evaluate_retrieval(spans, qs, ks=(1,), mode=ds.evidence_mode, budgets=(DEFAULT_BUDGET,),
                                         budget_results={DEFAULT_BUDGET: {q.qid: r.spans() for q, r in zip(qs, res)}})
                m, bb = rep.means, b
                rows[label] = {"complete": m["complete" + bb], "span_recall": m["span_recall" + bb],
                               "chars": m["chars" + bb], "items": m["returned" + bb], "ms_per_question": ms,
                               "chunks": ix.store.n_chunks, "build_or_open_seconds": built,
                               "per_question": [rep.per_question[q.qid]["complete" + bb] for q in qs]}
            finally:
                ix.close()
            print(f"{name}: {label}: complete {rows[label]['complete']:.3f}", file=sys.stderr, flush=True)
        base = rows[PIPELINES[0][0]]["per_question"]
        for row in rows.values():
            row["margin"] = paired_bootstrap(row["per_question"], base).to_dict()
        old = report["sets"].get(ds.name)
        if args.merge and old is not None:
            if old["rows"][PIPELINES[0][0]]["per_question"] != base:
                print(f"{ds.name}: the re-run default row differs from the stored one; not merged (write the "
                      "rows to another --out)", file=sys.stderr)
                return 2
            rows = {**old["rows"], **{k: v for k, v in rows.items() if k != PIPELINES[0][0]}}
        report["sets"][ds.name] = {"questions": len(qs), "mode": ds.evidence_mode, "rows": rows}
        if args.out:
            Path(args.out).write_text(json.dumps(report, indent=2))
    print(markdown(report))
    return 0


def markdown(report: dict) -> str:
    sets = list(report["sets"])
    head = "| pipeline | " + " | ".join(f"{n} ({report['sets'][n]['questions']} q)" for n in sets) + " |"
    lines = [f"complete coverage at {report['budget']:,} characters (partial span recall); margin over the default "
             "in points with its paired bootstrap 95 % interval", "", head, "|---" * (len(sets) + 1) + "|"]
    for label, *_ in PIPELINES:
        if not any(label in report["sets"][n]["rows"] for n in sets):
            continue
        cells = []
        for n in sets:
            r = report["sets"][n]["rows"].get(label)
            if r is None:
                cells.append("not run")
                continue
            mg = r["margin"]
            cells.append(f"{r['complete']:.3f} ({r['span_recall']:.3f}); {100 * mg['mean']:+.1f} "
                         f"[{100 * mg['low']:+.1f}, {100 * mg['high']:+.1f}]; {r['chars']:.0f} chars")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
