"""``momoka eval`` (any registered retrievers on a data set) and ``momoka eval-chunking``."""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import ConfigError
from ..methods.base import DEFAULT_BUDGET
from .common import add_chunker_arguments, add_llm_arguments, add_option_argument, add_retriever_argument, \
    apply_llm_arguments, chunker_of, names_epilog, parse_options, say, split_names, write_json

_RAW = argparse.RawDescriptionHelpFormatter


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "eval", help="retrieval metrics of one or more retrievers on an evaluation set", formatter_class=_RAW,
        description="Index a data set once with what the retrievers need (their enrichers and relators), "
        "retrieve for every question with evidence and report recall, precision, MRR, F1, span recall and "
        "hit at k=1,3,5, per returned item and per distinct chunk (momoka.eval metrics). The Momoka-RAG "
        "ablation (paper Table 3) is --retriever base,mm,momoka.",
        epilog=names_epilog("retriever", "chunker", "refiner"))
    p.add_argument("--data", required=True, help="data set folder or name (documents.jsonl, questions.jsonl)")
    add_retriever_argument(p, several=True)
    p.add_argument("--refine", default=None, metavar="NAME",
                   help="also score each retriever's items (those fitting the first budget) refined by this "
                   "refiner, as NAME+REFINER (ets: evidence sentences; options with -o ets.KEY=VALUE)")
    add_chunker_arguments(p)
    p.add_argument("--limit", type=int, default=None, help="only the first N questions with evidence")
    p.add_argument("--group-by", default=None, metavar="FIELD",
                   help="also give the intervals and margins per value of this question field "
                   "(e.g. query_type of DragonBall)")
    p.add_argument("--scope", default="corpus", choices=("corpus", "document"),
                   help="search all documents (corpus, default) or only the question's own document")
    p.add_argument("--documents", default="all", choices=("all", "questions"),
                   help="index every document (all, default) or only those the selected questions refer to")
    p.add_argument("-k", "--ks", default="1,3,5", help="cut-offs (default 1,3,5)")
    p.add_argument("--budget", default=str(DEFAULT_BUDGET), metavar="CHARS[,CHARS]",
                   help=f"character budgets: every metric also over the context that fits (default {DEFAULT_BUDGET}), "
                   "assembled as `momoka query` returns it")
    p.add_argument("--no-assemble", dest="assemble", action="store_false",
                   help="score the longest prefix of the ranking that fits each budget instead of the assembled "
                   "context (touching hits merged, no text twice, items that do not fit skipped)")
    p.add_argument("--no-headers", dest="headers", action="store_false",
                   help="index each chunk's text alone, without its contextual header (the document's title and "
                   "its section or title line; new stores only)")
    p.add_argument("--evidence-mode", default=None, choices=("all", "any"),
                   help="all: every gold span is needed; any: the spans are alternatives (default: the set's "
                   "dataset.json, or 'any' when every span is an answer occurrence; else required)")
    p.add_argument("--store", default=None, help="build (or reuse) the data set's index in this directory")
    add_option_argument(p)
    p.add_argument("--out", default=None, help="save the JSON report to this file (nothing is written otherwise)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--plot", default=None, metavar="FILE.png",
                   help="draw recall@k and precision@k per retriever to this PNG (needs momoka[plot])")
    add_llm_arguments(p)
    p.set_defaults(func=_eval)

    p = sub.add_parser(
        "eval-chunking", help="fraction of gold evidence inside one chunk, and chunk lengths, for a chunker",
        formatter_class=_RAW,
        description="Chunk every document of a data set and report the fraction of gold evidence "
        "spans that fall wholly inside a single chunk (MC-indexing's chunking-error statistic) "
        "and the chunk length distribution.", epilog=names_epilog("chunker"))
    p.add_argument("--data", required=True, help="data set folder (documents.jsonl, questions.jsonl) or name")
    add_chunker_arguments(p, several=True)
    p.add_argument("--overlap", type=int, default=None, help="overlap for chunkers that take one")
    p.add_argument("--no-dense", action="store_true",
                   help="chunk as 'momoka index --no-dense' does: without the default embedder's input limit "
                   "(by default a chunk longer than the embedder reads is split further, as 'momoka index' does)")
    g = p.add_argument_group("MoC chunk quality (--metrics): every chunker at equal mean chunk length")
    g.add_argument("--metrics", default=None, metavar="bc,cs,ds",
                   help="Boundary Clarity, Chunk Stickiness, Dissimilarity on the local causal LM / embedder")
    g.add_argument("--target-chars", type=int, default=400, help="mean chunk length every chunker is sized to")
    g.add_argument("--docs", type=int, default=None, help="only the first N documents (also without --metrics)")
    g.add_argument("--max-chars", type=int, default=None,
                   help="cut each document at a sentence end within N chars (also without --metrics)")
    g.add_argument("--edge-rule", default="reference", choices=("reference", "paper"), help="CS edge rule")
    g.add_argument("-K", type=float, default=0.8, help="CS edge threshold (default 0.8)")
    g.add_argument("--space", default="log", choices=("log", "ppl"), help="BC as a ratio of log-ppl or of ppl")
    g.add_argument("--group-chars", type=int, default=2000,
                   help="CS over runs of consecutive chunks of at most N chars (0: whole documents)")
    g.add_argument("--windows", type=int, default=None, metavar="N",
                   help="BC and CS on N evenly spaced windows of --group-chars per document (whole documents "
                   "stay indexed for retrieval), instead of every run of the document")
    g.add_argument("--budget", type=int, default=None, metavar="CHARS",
                   help="complete coverage of the default retriever at this many characters (default 5000), "
                   "and its correlation with each metric over 3 or more chunkers")
    g.add_argument("--no-metric-cache", action="store_true",
                   help="compute every document's metrics afresh (by default each document's are kept in the "
                   "computed cache as they are done, so a stopped run resumes where it was)")
    g.add_argument("--no-retrieval", action="store_true",
                   help="skip the retrieval columns (dense span recall@1/3/5, the default retriever's coverage)")
    g.add_argument("--evidence-mode", default=None, choices=("all", "any"),
                   help="evidence semantics for the retrieval columns (see momoka eval --help)")
    add_option_argument(p)
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--out", default=None, help="also save the JSON report to this file")
    p.add_argument("--plot", default=None, metavar="FILE.png",
                   help="draw the chunk-length distribution of each chunker to this PNG (needs momoka[plot]; "
                   "not with --metrics)")
    add_llm_arguments(p)
    p.set_defaults(func=_eval_chunking)


def _eval(args: argparse.Namespace) -> int:
    from ..eval.runner import format_report, run_eval  # start-up: momoka.eval.runner
    from ..methods.pipeline import DEFAULT_RETRIEVER  # start-up: momoka.methods.pipeline

    apply_llm_arguments(args)
    retrievers = split_names(args.retriever) or [DEFAULT_RETRIEVER]
    try:
        ks = [int(k) for k in args.ks.split(",") if k.strip()]
    except ValueError:
        raise ConfigError(f"--ks takes comma-separated integers, not {args.ks!r}") from None
    if not ks or min(ks) < 1:
        raise ConfigError(f"--ks takes positive integers, not {args.ks!r}")
    try:
        budgets = [int(b) for b in args.budget.split(",") if b.strip()]
    except ValueError:
        raise ConfigError(f"--budget takes comma-separated character counts, not {args.budget!r}") from None
    if budgets and min(budgets) < 1:
        raise ConfigError(f"--budget takes positive character counts, not {args.budget!r}")
    if args.plot:
        _require_plot()
    opts = parse_options(args.option)
    chunker_opts = opts.pop(chunker_of(args), {})
    report = run_eval(args.data, retrievers, chunker=chunker_of(args), size=args.size, ks=ks, limit=args.limit,
                      scope=args.scope, documents=args.documents, store=args.store, options=opts,
                      chunker_options=chunker_opts, budgets=budgets, evidence_mode=args.evidence_mode, log=say,
                      assemble=args.assemble, headers=args.headers,
                      refine=args.refine, group_by=args.group_by)
    report["command"] = "momoka " + " ".join(sys.argv[1:]) if sys.argv else None
    if args.out:
        write_json(args.out, report)
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    if args.plot:
        from ..eval.plots import plot_eval  # start-up: momoka.eval.plots

        plot_eval(report, args.plot)
        say(f"plot written to {args.plot}")
    return 0


def _require_plot() -> None:
    """Fail before any work when --plot is asked for without matplotlib."""
    from .._extras import require  # start-up: momoka._extras

    require("matplotlib", "plot", "--plot")


def _eval_chunking(args: argparse.Namespace) -> int:
    from ..eval import load_dataset  # start-up: momoka.eval

    apply_llm_arguments(args)
    if args.metrics is not None:
        if args.plot:
            raise ConfigError("--plot draws the chunk lengths of the plain mode; run it without --metrics")
        return _eval_chunk_quality(args)
    from ..eval.chunk_compare import fallback_summary, row_name, subset  # start-up: momoka.eval.chunk_compare
    from ..eval.chunking import evaluate_chunker, format_chunker_report  # start-up: momoka.eval.chunking
    from ..methods.pipeline import chunker_params  # start-up: momoka.methods.pipeline
    from ..methods.sources import load_embedder, resolve_chunker  # start-up: momoka.methods.sources

    if args.plot:
        _require_plot()
    names = split_names([chunker_of(args)])
    emb = None if args.no_dense else load_embedder()  # the index's default embedder sets the input limit
    params = {n: chunker_params(n, args.size, {"overlap": args.overlap}, embedder=emb) for n in names}
    chunkers = {n: resolve_chunker(n, params[n], emb)[0] for n in names}
    dataset = load_dataset(args.data)
    if args.docs is not None or args.max_chars is not None:
        dataset = subset(dataset, docs=args.docs, max_chars=args.max_chars)
    reports = {}
    for name, chunker in chunkers.items():
        reports[name] = evaluate_chunker(dataset, chunker, keep_lengths=bool(args.plot))
        reports[name]["chunker"] = name
        reports[name]["params"] = params[name]
        fb = fallback_summary(chunker)
        if fb is not None:
            reports[name]["fallbacks"] = fb
    if args.plot:
        from ..eval.plots import plot_chunk_lengths  # start-up: momoka.eval.plots

        plot_chunk_lengths(reports, args.plot)
        for rep in reports.values():
            del rep["char_lengths"]
    report = reports[names[0]] if len(names) == 1 else {"chunkers": reports}
    if args.out:
        write_json(args.out, report)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print("\n\n".join(f"chunker {row_name(n, r.get('fallbacks'))}\n" + format_chunker_report(r)
                          for n, r in reports.items()))
    if args.plot:
        say(f"plot written to {args.plot}")
    return 0


def _eval_chunk_quality(args: argparse.Namespace) -> int:
    from ..eval import load_dataset  # start-up: momoka.eval
    from ..eval.chunk_compare import compare_chunkers, format_comparison, subset  # start-up: momoka.eval.chunk_compare
    from ..methods.base import DEFAULT_BUDGET  # start-up: momoka.methods.base
    from .. import registry  # start-up: momoka.registry (dataclasses)

    names = split_names([chunker_of(args)])
    for n in names:
        if n not in registry.available("chunker"):
            raise ConfigError(f"unknown chunker {n!r}; available: {', '.join(registry.available('chunker'))}")
    metrics = split_names([args.metrics])
    ds = subset(load_dataset(args.data, evidence_mode=args.evidence_mode), docs=args.docs, max_chars=args.max_chars)
    report = compare_chunkers(ds, names, metrics=metrics, target_chars=args.target_chars, K=args.K,
                              edge_rule=args.edge_rule, space=args.space, group_chars=args.group_chars or None,
                              retrieval=not args.no_retrieval, options=parse_options(args.option), log=say,
                              windows=args.windows, budget=args.budget or DEFAULT_BUDGET,
                              cache=not args.no_metric_cache)
    report["max_chars"] = args.max_chars
    report["command"] = "momoka " + " ".join(sys.argv[1:]) if sys.argv else None
    if args.out:
        write_json(args.out, report)
    print(json.dumps(report, indent=2) if args.json else format_comparison(report))
    return 0
