"""CLI of the methods: ``momoka index --method momoka`` (Momoka-Map: titles, LLM chunking, MCTS paths).

The Momoka-Map options are added to the ``index`` command (registered by
``momoka.cli.index``); without ``--method momoka`` that command runs as before.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    """Add the methods' options to the existing commands."""
    index = sub.choices.get("index")
    if index is not None:
        _extend_index(index)


def _extend_index(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("Momoka-Map (with --method momoka)")
    g.add_argument("--method", default="plain", choices=("plain", "momoka"),
                   help="momoka: add global titles and MCTS semantic paths (Momoka-RAG) to the store")
    g.add_argument("--referee", default=None, choices=("ppl", "llm", "embedding"),
                   help="who judges 'does chunk B complete chunk A' (default: llm when an endpoint is "
                        "configured, else ppl, the local perplexity referee)")
    g.add_argument("--threshold", type=float, default=None, help="referee threshold (ppl edge / cosine)")
    g.add_argument("--reward", default="pair", choices=("pair", "path"), help="eq. 4 (pair) or eq. 7 (path)")
    g.add_argument("--iterations", type=int, default=100, help="MCTS iterations per chunk (default 100)")
    g.add_argument("--rollout", type=int, default=5, help="rollout length (default 5)")
    g.add_argument("--expansion", default="random", choices=("random", "topm"),
                   help="random (paper) or topm (appendix H: top-5 most similar chunks)")
    g.add_argument("--long-docs", default="none", choices=("none", "window", "widening", "scale"),
                   help="remedy for documents with more chunks than iterations (default none: the paper's)")
    g.add_argument("--window", type=int, default=32, help="candidate window of --long-docs window")
    g.add_argument("--title", default="auto", choices=("auto", "llm", "prefer-document", "document", "none"),
                   help="global title T_D (auto: LLM when an endpoint is configured, else the document's own)")
    g.add_argument("--llm-chunking", action="store_true", help="chunk with the paper's LLM chunker (Figure 3)")
    g.add_argument("--estimate", action="store_true",
                   help="print the expected referee calls and tokens for these documents, build nothing")
    g.add_argument("--seed", type=int, default=0, help="MCTS seed")
    g.add_argument("--llm-url", default=None, help="OpenAI-compatible API root for titles/referee/chunking "
                                                 "(default $MOMOKA_LLM_BASE_URL)")
    g.add_argument("--llm-model", default=None, help="model name at --llm-url (default $MOMOKA_LLM_MODEL)")
    plain = p.get_default("func")

    def run(args: argparse.Namespace) -> int:
        if args.method != "momoka":
            return plain(args)
        return _index_momoka(args)

    p.set_defaults(func=run)


def _say(msg: str) -> None:
    print(f"momoka: {msg}", file=sys.stderr, flush=True)


def _llm(args):
    import os

    url = args.llm_url or os.environ.get("MOMOKA_LLM_BASE_URL")
    if not url:
        return None
    from ..llm import OpenAIClient

    return OpenAIClient(args.llm_model, base_url=url)


def _map(args, llm):
    from ..errors import ConfigError
    from ..methods.momoka import MomokaMap

    if args.referee == "llm" and llm is None:
        raise ConfigError("--referee llm needs an endpoint: --llm-url URL or MOMOKA_LLM_BASE_URL")
    referee = args.referee or ("llm" if llm is not None else "ppl")
    if args.threshold is not None and referee != "llm":
        from ..methods.momoka import make_referee

        referee = make_referee(referee, threshold=args.threshold)
    return MomokaMap(referee=referee, reward=args.reward, iterations=args.iterations, rollout=args.rollout,
                     expansion=args.expansion, long_docs=None if args.long_docs == "none" else args.long_docs,
                     window=args.window, title=args.title, llm=llm, seed=args.seed)


def _chunker(args, llm):
    from ..errors import ConfigError

    if args.llm_chunking:
        if llm is None:
            raise ConfigError("--llm-chunking needs an endpoint: --llm-url URL or MOMOKA_LLM_BASE_URL")
        from ..methods.momoka import LLMChunker

        if args.chunker:
            raise ConfigError("give either --chunker or --llm-chunking")
        return LLMChunker(llm)
    return args.chunker or "recursive"


def _index_momoka(args: argparse.Namespace) -> int:
    from ..index import Index
    from ..index.api import _expand_paths, _resolve_chunker, _to_document
    from ..index.store import MANIFEST

    llm = _llm(args)
    mm = _map(args, llm)
    store = Path(args.store)
    t0 = time.monotonic()
    if args.estimate:
        docs = [_to_document(x) for x in _expand_paths(args.paths)]
        chunker = _chunker(args, llm)
        if isinstance(chunker, str):
            params = {"size": args.size} if args.size else ({"size": 200} if chunker == "recursive" else {})
            chunker, _ = _resolve_chunker(chunker, params)
        est = mm.estimate(docs, [chunker(d) for d in docs])
        print(json.dumps(est, indent=2))
        return 0
    if (store / MANIFEST).exists() and not args.overwrite:
        ix = Index.open(store, writable=True, chunker=_chunker(args, llm) if args.llm_chunking else None)
        added = mm.add(ix, args.paths)
    else:
        chunker = _chunker(args, llm)
        size = args.size if isinstance(chunker, str) else None
        ix = mm.build(args.paths, store=store, chunker=chunker, size=size,
                      embedder=None if args.no_dense else "default",
                      vector_dtype="float16" if args.float16 else "float32", overwrite=args.overwrite)
        added = ix.doc_ids
    n_chunks = sum(len(ix.store.documents[d].chunk_ids) for d in added)
    st = mm.stats
    print(f"indexed {len(added)} document(s), {n_chunks} chunk(s) with Momoka-Map paths into {store} "
          f"in {time.monotonic() - t0:.1f}s; referee {mm.referee_name}: {st.referee_requests} answers"
          + (f", {st.native_documents} document(s) searched natively ({st.native_matrix_entries} nonzero "
             "similarity entries)" if st.native_documents else "")
          + "; titles: "
          + ", ".join(f"{k} {v}" for k, v in mm.title_stats.items() if isinstance(v, int) and v))
    if llm is not None:
        from .llm import print_usage

        print_usage(llm)
        llm.close()
    ix.close()
    return 0
