"""``momoka ets annotate``: ETS MCTS annotation of an evaluation set, exported as policy/value training paths (JSONL)."""

from __future__ import annotations

import argparse
import json
import sys

from .common import deprecated_alias


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``ets`` command (sub-command ``annotate``)."""
    p = sub.add_parser("ets", help="ETS evidence tree search: MCTS annotation (training paths)",
                       description="ETS (evidence sentences found by tree search). See docs/ets.md.")
    ets_sub = p.add_subparsers(dest="ets_command", metavar="SUBCOMMAND")
    a = ets_sub.add_parser(
        "annotate", help="build MCTS evidence trees for a set's questions and append their paths to a JSONL file",
        description="For each question: the top-N sentences of its document by the embedder, an MCTS over them "
        "(UCT w, expansion by reader likelihood keeping the top M, reward 1 if the reader answers correctly else "
        "the likelihood of the gold answer, running-mean backup), and every visited path written as one JSON line "
        "(policy prompt and target, per-step value targets, correct/incorrect). Resumable: finished questions "
        "(listed in OUT.done) are skipped on a rerun.")
    a.add_argument("--data", required=True, help="evaluation set folder or name (documents.jsonl, questions.jsonl)")
    a.add_argument("--out", required=True, help="JSONL file the paths are appended to")
    a.add_argument("--limit", type=int, default=None, help="the first N questions of the set")
    a.add_argument("--reader", default="local",
                   help="'local' (the default causal LM) or the URL of an OpenAI-compatible server that returns "
                   "prompt log-probs")
    a.add_argument("--llm-model", "--model", dest="model", default=None, action=deprecated_alias("--model"),
                   help="model name at --reader URL (default: $MOMOKA_LLM_MODEL; --model is a deprecated alias)")
    a.add_argument("--n", type=int, default=30, help="candidate sentences per question (default 30)")
    a.add_argument("--top-m", type=int, default=3, help="children kept per expansion (default 3)")
    a.add_argument("--iterations", type=int, default=20, help="MCTS simulations per question (default 20)")
    a.add_argument("--max-depth", type=int, default=5, help="most evidence sentences per path (default 5)")
    a.add_argument("--c", type=float, default=1.4, help="UCT exploration weight (default 1.4)")
    a.add_argument("--correctness", default="em_or_f1", choices=["em", "f1", "em_or_f1"],
                   help="what counts as a correct answer (default: normalised EM or F1 >= --f1-threshold)")
    a.add_argument("--f1-threshold", type=float, default=0.8, help="F1 that counts as correct (default 0.8)")
    a.add_argument("--seed", type=int, default=0, help="seed of the search (default 0)")
    a.set_defaults(func=_annotate)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _annotate(args: argparse.Namespace) -> int:
    from ..eval.datasets import resolve_dataset_path  # start-up: momoka.eval.datasets
    from ..methods.ets.annotate import AnnotationConfig, annotate_dataset  # start-up: momoka.methods.ets.annotate
    from ..methods.ets.reader import Reader  # start-up: momoka.methods.ets.reader

    resolve_dataset_path(args.data)  # a bad set fails before the model loads

    cfg = AnnotationConfig(n=args.n, top_m=args.top_m, iterations=args.iterations, max_depth=args.max_depth,
                           c=args.c, correctness=args.correctness, f1_threshold=args.f1_threshold,
                           seed=args.seed).check()
    reader = Reader.from_spec(args.reader, **({"model": args.model} if args.model else {}))
    s = annotate_dataset(args.data, args.out, limit=args.limit, reader=reader, config=cfg)
    per_q = s["seconds"] / s["questions"] if s["questions"] else 0.0
    print(f"{s['questions']} questions annotated ({s['skipped']} already done or without answer): "
          f"{s['paths']} paths, {s['correct']} correct, {s['incorrect']} incorrect, "
          f"{per_q:.1f} s per question -> {args.out}", file=sys.stderr)
    print(json.dumps(s))
    return 0
