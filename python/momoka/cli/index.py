"""``momoka index``, ``momoka query``, ``momoka eval`` and ``momoka quickstart``."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "index",
        help="chunk, embed and index documents into a store directory",
        description="Index files or directories (.txt, .md, .html) into a store. On an existing store the "
        "documents are added (a document already there is an error).",
    )
    p.add_argument("paths", nargs="+", help="files or directories to index")
    p.add_argument("--store", required=True, help="store directory (created if missing)")
    p.add_argument("--chunker", default=None, help="chunker name (default: recursive; new stores only)")
    p.add_argument("--size", type=int, default=None, help="chunk size for the chunker (default 200 tokens)")
    p.add_argument("--no-dense", action="store_true", help="BM25 only: no embedder, no vectors")
    p.add_argument("--float16", action="store_true", help="store vectors as float16")
    p.add_argument("--overwrite", action="store_true", help="replace an existing store")
    p.set_defaults(func=_index)

    p = sub.add_parser("query", help="search a store", description="Print the best chunks for a question.")
    p.add_argument("store", help="store directory")
    p.add_argument("question", help="the query")
    p.add_argument("-k", type=int, default=5, help="number of chunks (default 5)")
    p.add_argument("--method", default="hybrid", choices=("dense", "bm25", "hybrid"), help="retrieval method")
    p.add_argument("--doc", action="append", default=None, help="restrict to this doc id (repeatable)")
    p.add_argument("--json", action="store_true", help="print hits as JSON")
    p.set_defaults(func=_query)

    p = sub.add_parser(
        "eval",
        help="retrieval baselines (dense / bm25 / hybrid) on an evaluation set",
        description="Index every document of a data set, retrieve for every question and report "
        "recall, precision, MRR, F1, span recall and hit at k=1,3,5 (momoka.eval metrics).",
    )
    p.add_argument("--data", required=True, help="data set folder or name (documents.jsonl, questions.jsonl)")
    p.add_argument("--method", default="hybrid", help="dense, bm25, hybrid, or a comma-separated list; or base, mm, momoka (Momoka-RAG ablation)")
    p.add_argument("--chunker", default="recursive", help="chunker name (default recursive)")
    p.add_argument("--size", type=int, default=None, help="chunk size (default 200 tokens for recursive)")
    p.add_argument("--limit", type=int, default=None, help="only the first N questions")
    p.add_argument("--scope", default="corpus", choices=("corpus", "document"),
                   help="search all documents (corpus, default) or only the question's own document")
    p.add_argument("--store", default=None, help="reuse / save the data set's index in this directory")
    p.add_argument("--out", default=None, help="JSON report path (default eval-<set>-<method>.json)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    from ..methods.momoka.ablation import add_eval_arguments

    add_eval_arguments(p)  # the Momoka-RAG ablation: --method base,mm,momoka
    p.set_defaults(func=_eval)

    p = sub.add_parser(
        "quickstart",
        help="index a bundled example document and answer a question about it",
        description="Index momoka's bundled example document (installing the default embedder on first "
        "use) and print the chunks that answer a question about it.",
    )
    p.add_argument("question", nargs="?", default=None, help="your own question about the example")
    p.add_argument("--store", default=None, help="where to keep the example store (default: a temporary folder)")
    p.add_argument("-k", type=int, default=3, help="number of chunks (default 3)")
    p.set_defaults(func=_quickstart)


def _say(msg: str) -> None:
    print(f"momoka: {msg}", file=sys.stderr, flush=True)


def _index(args: argparse.Namespace) -> int:
    from ..index import Index
    from ..index.store import MANIFEST

    store = Path(args.store)
    t0 = time.monotonic()
    if (store / MANIFEST).exists() and not args.overwrite:
        if args.chunker or args.size:
            _say("note: --chunker/--size apply to new stores; this store keeps its own chunker")
        ix = Index.open(store, writable=True)
        added = ix.add(args.paths)
        ix.save()
    else:
        ix = Index.build(args.paths, store=store, chunker=args.chunker or "recursive", size=args.size,
                         embedder=None if args.no_dense else "default",
                         vector_dtype="float16" if args.float16 else "float32", overwrite=args.overwrite)
        added = ix.doc_ids
    n_chunks = sum(len(ix.store.documents[d].chunk_ids) for d in added)
    print(f"indexed {len(added)} document(s), {n_chunks} chunk(s) into {store} "
          f"({len(ix)} documents in the store) in {time.monotonic() - t0:.1f}s")
    ix.close()
    return 0


def _print_hits(hits, as_json: bool) -> None:
    if as_json:
        print(json.dumps([h.to_dict() for h in hits], ensure_ascii=False, indent=2))
        return
    if not hits:
        print("no matching chunks")
    for h in hits:
        sec = " > ".join(h.section)
        head = f"#{h.rank}  score {h.score:.4f}  {h.doc_id} [{h.start}:{h.end}]"
        if sec:
            head += f"  § {sec}"
        print(head)
        text = " ".join(h.text.split())
        print("    " + (text if len(text) <= 400 else text[:400] + " ..."))


def _query(args: argparse.Namespace) -> int:
    from ..index import Index

    ix = Index.open(args.store)
    hits = ix.search(args.question, k=args.k, method=args.method, doc_ids=args.doc)
    _print_hits(hits, args.json)
    return 0


def _eval(args: argparse.Namespace) -> int:
    from ..errors import ConfigError
    from ..eval import evaluate_retrieval, load_dataset
    from ..index import METHODS, Index
    from ..index.store import MANIFEST

    methods = [m.strip() for m in args.method.split(",") if m.strip()]
    from ..methods.momoka.ablation import VARIANTS, eval_command

    if methods and all(m in VARIANTS for m in methods):  # the Momoka-RAG ablation (paper Table 3)
        return eval_command(args, methods)
    bad = [m for m in methods if m not in METHODS]
    if bad or not methods:
        raise ConfigError(f"--method takes {', '.join(METHODS)} or {', '.join(VARIANTS)} (comma-separated, "
                          f"not mixed), not {args.method!r}")
    ds = load_dataset(args.data, limit=args.limit)
    questions = [q for q in ds.questions if q.gold]
    if not questions:
        from ..errors import DatasetError

        raise DatasetError(f"{ds.name} has no questions with gold evidence; retrieval metrics cannot be computed")
    need_dense = any(m != "bm25" for m in methods)
    t0 = time.monotonic()
    if args.store and (Path(args.store) / MANIFEST).exists():
        ix = Index.open(args.store)
        missing = {d.doc_id for d in ds.documents} - set(ix.doc_ids)
        if missing:
            raise ConfigError(f"store {args.store} lacks {len(missing)} document(s) of {ds.name}; use another --store")
    else:
        ix = Index.build(ds.documents, store=args.store, chunker=args.chunker, size=args.size,
                         embedder="default" if need_dense else None)
    t_index = time.monotonic() - t0
    _say(f"{ds.name}: {len(ds.documents)} documents, {ix.store.n_chunks} chunks, {len(questions)} questions "
         f"with evidence (index {t_index:.1f}s)")
    chunker = ix.store.manifest.get("chunker")
    reports = {}
    for method in methods:
        t1 = time.monotonic()
        per_doc = [q.doc_id for q in questions] if args.scope == "document" else None
        hits = ix.search_batch([q.question for q in questions], k=5, method=method, per_query_doc_ids=per_doc)
        t_q = time.monotonic() - t1
        results = {q.qid: [[h.span] for h in hs] for q, hs in zip(questions, hits)}
        rep = evaluate_retrieval(results, ds.questions, ks=(1, 3, 5), mode=ds.evidence_mode)
        d = rep.to_dict()
        d.update({"data": ds.name, "method": method, "scope": args.scope, "chunker": chunker, "n_chunks": ix.store.n_chunks,
                  "embedder": ix.store.embedder_info, "evidence_mode": ds.evidence_mode,
                  "index_seconds": round(t_index, 2), "query_seconds": round(t_q, 2),
                  "command": "momoka " + " ".join(sys.argv[1:]) if sys.argv else None})
        reports[method] = d
        if not args.json:
            print(f"\n{ds.name} - {method}, scope {args.scope} ({rep.n_questions} questions, evidence mode {ds.evidence_mode}, "
                  f"{ix.store.n_chunks} chunks)")
            print(rep.table())
        out = args.out or f"eval-{ds.name}-{method}{'-doc' if args.scope == 'document' else ''}.json"
        if len(methods) > 1 and args.out:
            out = str(Path(args.out).with_suffix("")) + f"-{method}.json"
        with open(out, "w", encoding="utf-8") as f:
            json.dump(d, f, indent=2)
        _say(f"saved {out}")
    if args.json:
        print(json.dumps(reports if len(reports) > 1 else next(iter(reports.values())), indent=2))
    ix.close()
    return 0


def _quickstart(args: argparse.Namespace) -> int:
    import tempfile

    from ..examples import QUICKSTART_DOCUMENT, QUICKSTART_QUESTION
    from ..index import Index
    from ..index.store import MANIFEST

    question = args.question or QUICKSTART_QUESTION
    tmp = None
    if args.store:
        store = Path(args.store)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="momoka-quickstart-")
        store = Path(tmp.name) / "store"
    try:
        if (store / MANIFEST).exists():
            ix = Index.open(store)
        else:
            _say(f"indexing the example document {QUICKSTART_DOCUMENT.name} (the default embedder is "
                 "installed on first use)")
            ix = Index.build([QUICKSTART_DOCUMENT], store=store, chunker="structure")
            ix.close()
        print(f"document: {QUICKSTART_DOCUMENT}")
        print(f"question: {question}\n")
        _print_hits(ix.search(question, k=args.k, method="hybrid"), False)
        print("\nnext: momoka index YOUR_FILES --store my.store && momoka query my.store \"your question\"")
    finally:
        if tmp is not None:
            tmp.cleanup()
    return 0
