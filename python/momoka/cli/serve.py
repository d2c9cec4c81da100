"""``momoka serve``: answer searches over HTTP from a store that keeps growing."""

from __future__ import annotations

import argparse
import signal

from .common import add_option_argument, names_epilog, parse_options, say


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``serve`` command."""
    p = sub.add_parser(
        "serve", help="answer searches over HTTP (JSON), following the store's new commits",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Serve searches over HTTP with JSON, on 127.0.0.1 unless --host says otherwise:\n"
                    "  POST /search  {\"query\", \"k\", \"budget\", \"retriever\", \"options\", \"doc_ids\"} (only query is\n"
                    "                required) -> {\"generation\", \"hits\": [{doc_id, start, end, text, score, ...}]}\n"
                    "  GET /health   -> {store, generation, documents, chunks, ...}\n"
                    "Each answer comes from one commit of the store; new commits are served without a restart.\n"
                    "Errors are JSON {\"error\": ...} with status 400 (bad input), 404, 405, 503 (busy) or 500.",
        epilog=names_epilog("retriever"))
    p.add_argument("store", help="store directory")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8765, help="port to listen on (default 8765; 0: any free port)")
    p.add_argument("--retriever", default="hybrid", help="retriever of requests that name none (default hybrid)")
    p.add_argument("-k", type=int, default=None, help="items per answer for requests that give neither k nor budget "
                   "(default 5)")
    p.add_argument("--budget", type=int, default=None, metavar="CHARS",
                   help="context budget in characters for requests that give neither k nor budget (default none)")
    add_option_argument(p)
    p.add_argument("--workers", type=int, default=4, metavar="N",
                   help="searches run at once, on a thread pool off the event loop (default 4)")
    p.add_argument("--queue", type=int, default=64, metavar="N",
                   help="requests that may wait for a worker; more get 503 (default 64)")
    p.add_argument("--poll", type=float, default=0.5, metavar="S",
                   help="seconds between checks for a new commit of the store (default 0.5)")
    p.set_defaults(func=_serve)


def _serve(args: argparse.Namespace) -> int:
    from ..serve import QueryServer  # start-up: momoka.serve

    server = QueryServer(args.store, host=args.host, port=args.port, retriever=args.retriever, k=args.k,
                         budget=args.budget, options=parse_options(args.option), workers=args.workers,
                         queue=args.queue, poll=args.poll)

    def _term(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _term)
    try:
        server.start()
        h = server.health()
        say(f"serving {h['store']} (generation {h['generation']}, {h['documents']} documents, {h['chunks']} chunks) "
            f"on {server.url}")
        server.serve_forever()
    except KeyboardInterrupt:  # serve_forever stopped the server on its way out
        say("stopped")
    return 0
