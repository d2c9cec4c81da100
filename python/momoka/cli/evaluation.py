"""``momoka eval-chunking``: evaluate a chunker alone on an evaluation set."""

from __future__ import annotations

import argparse
import json
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "eval-chunking",
        help="fraction of gold evidence inside one chunk, and chunk lengths, for a chunker",
        description="Chunk every document of a data set and report the fraction of gold evidence "
        "spans that fall wholly inside a single chunk (MC-indexing's chunking-error statistic) "
        "and the chunk length distribution.",
    )
    p.add_argument("--data", required=True, help="data set folder (documents.jsonl, questions.jsonl) or name")
    p.add_argument("--method", default="fixed", help="chunker name (see `momoka chunk --help`)")
    p.add_argument("--size", type=int, default=None, help="chunk size for chunkers that take one")
    p.add_argument("--overlap", type=int, default=None, help="overlap for chunkers that take one")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--out", default=None, help="also save the JSON report to this file")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from ..chunking import get_chunker
    from ..eval import load_dataset
    from ..eval.chunking import evaluate_chunker, format_chunker_report

    params = {}
    if args.size is not None:
        params["size"] = args.size
    if args.overlap is not None:
        params["overlap"] = args.overlap
    chunker = get_chunker(args.method, **params)
    dataset = load_dataset(args.data)
    report = evaluate_chunker(dataset, chunker, progress=sys.stderr.isatty())
    report["method"] = args.method
    report["params"] = params
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2)
    print(json.dumps(report, indent=2) if args.json else format_chunker_report(report))
    return 0
